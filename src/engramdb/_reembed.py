"""The store's embedding model: checked at open against the one its vectors came from, and re-embedding.

The facade's :meth:`~engramdb.Engram.reembed` and its open call these; they take the open parts and know
nothing of the facade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engramdb._progress import Progress, terminal_progress
from engramdb.errors import ModelMismatchError
from engramdb.storage import MODEL_META_KEY

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.embeddings.base import Embedder
    from engramdb.storage.base import Store
    from engramdb.vectorqueue import VectorQueue

__all__ = ["check_model", "reembed"]


def reembed(store: Store, embedder: Embedder, settings: Settings, *, progress: Progress | None = None) -> int:
    """Re-embed every memory whose vector is missing or from ``embedder``'s model; returns how many (see
    :meth:`~engramdb.Engram.reembed`)."""
    current = embedder.model_id
    total = store.vectors.count_stale(current)
    report = progress if progress is not None else terminal_progress(total)
    done = 0
    for rows in store.vectors.iter_stale(current, batch=settings.embed_batch_size * 4):
        ids = [i for i, _ in rows]
        vectors = embedder.embed([text for _, text in rows])
        store.vectors.set(ids, vectors, model_id=current)
        done += len(ids)
        report(done, total)
    store.meta.set(MODEL_META_KEY, current)
    return done


def check_model(
    store: Store,
    embedder: Embedder,
    settings: Settings,
    *,
    plain: Store,
    queue: VectorQueue | None,
    location: str,
    progress: Progress | None,
) -> None:
    """At open: record the model of a new store, catch up on vectors missing for it, or meet another model's
    vectors as the ``on_model_mismatch`` setting says (re-embed them all, else ModelMismatchError). ``plain`` is
    the store without the queue's waiting view."""
    stored = store.meta.get(MODEL_META_KEY)
    current = embedder.model_id
    if stored is None:
        store.meta.set(MODEL_META_KEY, current)
        return
    if stored == current:
        # Same model: memories without a vector were written in background mode and their process
        # ended first (or is still running). Queue them (background) or embed them now (sync).
        # In background mode the worker looks for them: counting them here is a scan of every
        # memory (seconds at a million), which would make every open that slow.
        if queue is not None:
            queue.rebuild()
        elif plain.vectors.count_stale(current):
            reembed(store, embedder, settings, progress=progress)
        return
    if settings.on_model_mismatch == "reembed":
        reembed(store, embedder, settings, progress=progress)
        return
    pending = store.vectors.count_stale(current)
    raise ModelMismatchError(
        f"the store at {location} holds vectors from model {stored!r} but this engram embeds with "
        f"{current!r}: open it with on_model_mismatch='reembed' (CLI: engram reembed) to re-embed "
        f"{pending} memories, or use the original model"
    )

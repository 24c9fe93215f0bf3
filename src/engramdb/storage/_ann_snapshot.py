"""The rows an HNSW build indexes (see :mod:`engramdb.storage._vector_index`): captured, then filled from the store.

A build reads every current row's vector. The delta's vectors are in memory and are written into the
snapshot file while the caller holds the index's lock (:func:`take_snapshot`); the index's own rows have
no float32 copy beside the graph (sidecar format 5), so they are read from the store's ``vectors`` table
by seq afterwards, without the lock (:func:`fill_snapshot`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64 as _I64

from engramdb.errors import CorruptStoreError
from engramdb.storage._ann import AnnMeta, Snapshot
from engramdb.storage._ann_base import AnnBase
from engramdb.storage._ann_exact import Columns, IndexRow
from engramdb.storage._ann_rows import VectorSource

__all__ = ["fill_snapshot", "overlay_rows", "take_snapshot"]

#: Vector rows copied per step (bounded temporary memory while writing a snapshot).
_COPY_CHUNK: Final = 65_536


def take_snapshot(path: Path, meta: AnnMeta, base: AnnBase | None, delta: Columns) -> tuple[Snapshot, _I64]:
    """The build's rows (the index's live rows, then the delta's) with the delta's vectors written to ``path``.

    Returns the snapshot (its rows' seqs: the index's, then -1 for the delta's) and the index's live rows'
    seqs, whose vectors :func:`fill_snapshot` reads into the file's first rows.
    """
    live = np.flatnonzero(base.alive) if base is not None else np.empty(0, dtype=np.int64)
    total = live.size + delta.rids.size
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(total, meta.dim))
    out[live.size :] = delta.matrix
    out.flush()
    del out
    meta = dataclasses.replace(meta, rows=total)
    unknown = np.full(delta.rids.size, -1, dtype=np.int64)
    if base is None:
        snap = Snapshot(
            meta, path, delta.ids, delta.rids.copy(), delta.agents.copy(), delta.kinds.copy(), delta.public.copy(),
            unknown,
        )  # fmt: skip
        return snap, np.empty(0, dtype=np.int64)
    base_seqs = np.asarray(base.seqs[live], dtype=np.int64)
    snap = Snapshot(
        meta,
        path,
        np.concatenate([base.ids[live], delta.ids]),  # promotes to the longer id width
        np.concatenate([base.rids[live], delta.rids]),
        np.concatenate([base.agents[live], delta.agents]),
        np.concatenate([base.kinds[live], delta.kinds]),
        np.concatenate([base.public[live], delta.public]),
        np.concatenate([base_seqs, unknown]),
    )
    return snap, base_seqs


def fill_snapshot(source: VectorSource, snap: Snapshot, base_seqs: _I64, cancel: threading.Event) -> Snapshot | None:
    """Write the index's live rows into the snapshot file from ``source`` and look up the delta's seqs.

    Safe without the index's lock: a seq's row never changes (a new vector is a new seq), and a memory
    forgotten or re-embedded meanwhile is among the build's changed rows, dropped when it is adopted
    (its row here is zeros, or its seq -1). None when ``cancel`` is set (the store is closing).
    """
    out = np.load(snap.vectors, mmap_mode="r+")
    for start in range(0, base_seqs.size, _COPY_CHUNK):
        if cancel.is_set():
            del out
            with contextlib.suppress(OSError):
                snap.vectors.unlink()
            return None
        vectors, _found = source.vectors(base_seqs[start : start + _COPY_CHUNK], snap.meta.dim)
        out[start : start + vectors.shape[0]] = vectors
    out.flush()
    del out
    seqs = snap.seqs.copy()
    seqs[base_seqs.size :] = source.seqs_of(snap.meta.model_id, snap.ids[base_seqs.size :])
    return dataclasses.replace(snap, seqs=seqs)


def overlay_rows(base: AnnBase, meta: AnnMeta, source: VectorSource) -> list[IndexRow]:
    """The overlay's rows newer than ``base``'s build, with their vectors (the store's, by memory id; overlays
    written before format 5 carry them). The overlay reflects ``meta``'s state, which the store still has
    (else it is not adopted): every one of its rows has its vector there."""
    d = base.delta
    if d is None or not len(d["ids"]):
        return []
    vectors = d.get("vectors")
    found = np.ones(len(d["ids"]), dtype=np.bool_)
    if vectors is None:
        vectors, found = source.vectors(source.seqs_of(meta.model_id, np.asarray(d["ids"])), meta.dim)
    if not found.all():
        raise CorruptStoreError("the vector index overlay names vectors the store no longer holds")
    return [
        (
            bytes(d["ids"][i]).decode(),
            int(d["rids"][i]),
            meta.agents[int(d["agents"][i])],
            meta.kinds[int(d["kinds"][i])],
            "public" if d["public"][i] else "private",
            np.asarray(vectors[i], dtype=np.float32).tobytes(),
        )
        for i in range(len(d["ids"]))
    ]

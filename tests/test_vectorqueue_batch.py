"""The vector worker's batch: a memory written to an idle queue is embedded alone and at once, a deep queue
is taken ``batch_size`` at a time, and a search in the same process sees every write made before it.

The worker is observed through :class:`Recorder`, the real model recording the size of each batch the worker
thread embeds, optionally held at a gate before its first batch (so the test controls what is queued behind it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engramdb import Engram
from engramdb._util import new_id, utcnow
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.models import Memory
from engramdb.storage import open_store
from engramdb.storage.base import Store
from engramdb.vectorqueue import VectorQueue

WORKER = "engramdb-vectors"
#: A generous bound for "promptly" (a loaded CI machine).
PROMPT = 30.0


class Recorder:
    """The real embedder; records the worker's batch sizes; its first worker call waits for :meth:`open`."""

    def __init__(self, inner: Embedder, *, gated: bool) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.batches: list[int] = []
        self.opened = threading.Event()
        if not gated:
            self.opened.set()
        self.first_call = threading.Event()
        self.embedded = threading.Event()

    def open(self) -> None:
        self.opened.set()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if threading.current_thread().name != WORKER:
            return self.inner.embed(texts)
        self.first_call.set()
        self.opened.wait()
        out = self.inner.embed(texts)
        self.batches.append(len(texts))
        self.embedded.set()
        return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(str(tmp_path / "store"), settings=load_settings({}))
    try:
        yield s
    finally:
        s.close()


def committed(store: Store, embedder: Embedder, n: int) -> list[tuple[str, str]]:
    """``n`` memories committed without a vector, as ``(id, text)`` for the queue."""
    now = utcnow()
    texts = [f"turn {i} about boats" for i in range(n)]
    rows = [
        Memory(id=new_id(), agent="q", kind="conversation", content=t, created_at=now, updated_at=now) for t in texts
    ]
    store.memories.add(rows, None, model_id=embedder.model_id, actor="q")
    return [(m.id, m.content) for m in rows]


def stale(store: Store, embedder: Embedder) -> int:
    return store.vectors.count_stale(embedder.model_id)


def test_a_memory_written_to_an_idle_queue_is_embedded_alone_without_waiting(store: Store, embedder: Embedder) -> None:
    rec = Recorder(embedder, gated=False)
    items = committed(store, embedder, 2)
    queue = VectorQueue(store, rec, batch_size=64)
    try:
        queue.put(items[:1])  # the first write to a new queue
        assert rec.embedded.wait(PROMPT)  # no flush: nobody waits, the worker took it on its own
        assert rec.batches == [1]
        rec.embedded.clear()
        queue.put(items[1:])
        assert rec.embedded.wait(PROMPT)
        assert rec.batches == [1, 1]
        assert queue.flush() is True
        assert stale(store, embedder) == 0
    finally:
        queue.close()


def test_a_deep_queue_is_taken_a_full_batch_at_a_time(store: Store, embedder: Embedder) -> None:
    rec = Recorder(embedder, gated=True)
    items = committed(store, embedder, 41)
    queue = VectorQueue(store, rec, batch_size=16)
    try:
        queue.put(items[:1])
        assert rec.first_call.wait(PROMPT)
        queue.put(items[1:])  # one large write: forty behind the batch at the gate
        rec.open()
        assert queue.flush() is True
        assert rec.batches == [1, 16, 16, 8]
        assert stale(store, embedder) == 0
    finally:
        queue.close()


def test_remember_then_search_in_one_process_sees_every_streamed_write(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "e", embedder=embedder) as mem:
        for i in range(20):
            mem.remember(f"note {i}: the harbour master keeps a ledger of boats", kind="conversation")
        last = mem.remember("the lighthouse keeper paints the tower red every spring", kind="conversation")
        hits = mem.search("who repaints the beacon tower each year", limit=1)
        assert hits
        assert hits[0].memory.id == last.id
        assert mem.store.vectors.count_stale(mem.embedder.model_id) == 0

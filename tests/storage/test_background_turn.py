"""Background vector writes take turns on PostgreSQL (``Store.background_turn``): one at a time per store, across
processes, while foreground writes and searches go on; nothing is lost when several instances write at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pg_server import SERVER
from storage_helpers import MODEL, memory, unit_vectors

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.errors import StorageError
from engramdb.storage import open_store
from engramdb.storage._pg_schema import LOCK_BACKGROUND
from engramdb.vectorqueue import VectorQueue

#: Seconds a test waits at most for another thread to reach a point.
LIMIT = 30.0


def _turn_waiters(location: str) -> int:
    """Sessions of the server waiting for the background turn's advisory lock."""
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND ((classid::bigint << 32) | objid::bigint) = %s",
            (LOCK_BACKGROUND,),
        ).fetchone()
    return int(row[0]) if row is not None else 0


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_background_write_waits_for_another_stores_turn_and_foreground_writes_do_not() -> None:
    location = SERVER.get().new_database()
    first = open_store(location, settings=load_settings({}))
    second = open_store(location, settings=load_settings({}))  # another process's pool
    holding, release = threading.Event(), threading.Event()
    order: list[str] = []
    try:
        ms = [memory(f"note {i}") for i in range(4)]
        # One vector written first: the model's HNSW index exists before the turns (its creation is locked too).
        first.memories.add(ms, unit_vectors(4), model_id=MODEL, actor="t", unvectored=frozenset({0, 1, 2}))

        def hold() -> None:
            with first.atomic():
                first.background_turn()
                first.vectors.set([ms[0].id], unit_vectors(1, seed=1), model_id=MODEL)
                holding.set()
                release.wait(LIMIT)
                order.append("first")

        def wait_turn() -> None:
            holding.wait(LIMIT)
            with second.atomic():
                second.background_turn()
                order.append("second")
                second.vectors.set([ms[1].id], unit_vectors(1, seed=2), model_id=MODEL)

        threads = [threading.Thread(target=hold), threading.Thread(target=wait_turn)]
        for t in threads:
            t.start()
        holding.wait(LIMIT)
        _until(lambda: _turn_waiters(location) == 1, "the second store to wait for its turn")
        # Foreground writes (a memory and its vector in the writer's own transaction) do not take turns.
        later = [memory("written meanwhile")]
        second.memories.add(later, unit_vectors(1, seed=3), model_id=MODEL, actor="t")
        second.vectors.set([ms[2].id], unit_vectors(1, seed=4), model_id=MODEL)
        assert order == []
        release.set()
        for t in threads:
            t.join(LIMIT)
        assert order == ["first", "second"]
        assert _turn_waiters(location) == 0
        assert second.vectors.count_stale(MODEL) == 0
    finally:
        release.set()
        first.close()
        second.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_background_turn_needs_a_write_on_postgres_and_is_a_no_op_on_sqlite(backend: str, tmp_path: Path) -> None:
    location = SERVER.get().new_database() if backend == "postgres" else str(tmp_path / "store")
    store = open_store(location, settings=load_settings({}))
    try:
        if backend == "postgres":
            with pytest.raises(StorageError, match="needs an open atomic"):
                store.background_turn()
        with store.atomic():
            store.background_turn()
            store.background_turn()  # re-entrant: the lock is the transaction's
            store.memories.add([memory("x")], unit_vectors(1), model_id=MODEL, actor="t")
        assert store.vectors.count_stale(MODEL) == 0
    finally:
        store.close()


def test_several_instances_writing_at_once_lose_no_vector(embedder: Embedder) -> None:
    """Two instances (each its own pool and vector worker, as two processes) write batches at once: every memory
    gets its vector, searches by meaning find them, and the audit chain verifies."""
    location = SERVER.get().new_database()
    topics = ["sailing boats", "baking bread", "tax returns", "mountain hiking", "jazz records", "garden roses"]
    errors: list[BaseException] = []
    written: dict[int, list[str]] = {0: [], 1: []}
    mems = [Engram(location, embedder=embedder) for _ in range(2)]
    try:

        def write(n: int) -> None:
            try:
                for b in range(4):
                    items = [
                        {"content": f"writer {n} batch {b}: a note about {topic} number {i}", "kind": "conversation"}
                        for i, topic in enumerate(topics)
                    ]
                    written[n].extend(m.id for m in mems[n].remember_many(items))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(LIMIT * 4)
        assert errors == []
        for mem in mems:
            mem.close()  # drains each worker's queue
        plain = open_store(location, settings=load_settings({}))
        try:
            ids = written[0] + written[1]
            assert len(set(ids)) == 48
            assert plain.vectors.count_stale(embedder.model_id) == 0
            assert set(plain.vectors.get(ids, model_id=embedder.model_id)) == set(ids)
        finally:
            plain.close()
        with Engram(location, embedder=embedder) as mem:
            hits = mem.search("kneading dough in the oven", limit=8)
            assert len(hits) >= 4
            assert all("baking bread" in h.memory.content for h in hits[:4])
            assert mem.audit.verify()
    finally:
        for mem in mems:
            mem.close()


def test_a_worker_half_a_queue_behind_writes_without_waiting_for_its_turn(embedder: Embedder) -> None:
    """Taking turns must not let a queue fill (its writers would block): with half its capacity still queued behind
    a batch, the worker writes that batch at once; once it has caught up, it waits for its turn again."""
    location = SERVER.get().new_database()
    holder = open_store(location, settings=load_settings({}))
    store = open_store(location, settings=load_settings({}))
    release = threading.Event()
    holding = threading.Event()
    queue = VectorQueue(store, embedder, batch_size=2, capacity=8)
    try:
        ms = [memory(f"queued note {i}") for i in range(9)]
        store.memories.add(ms, embedder.embed([m.content for m in ms]), model_id=embedder.model_id, actor="t",
                           unvectored=frozenset(range(1, 9)))  # fmt: skip

        def hold() -> None:
            with holder.atomic():
                holder.background_turn()
                holding.set()
                release.wait(LIMIT)

        thread = threading.Thread(target=hold)
        thread.start()
        holding.wait(LIMIT)
        queue.put([(m.id, m.content) for m in ms[1:]])
        # Batches of 2 from 8 queued: 6 and 4 left behind them (>= half of 8), written at once; 2 left behind the
        # third: it waits for the turn the other store holds.
        _until(lambda: _turn_waiters(location) == 1, "the worker to wait for its turn")
        assert store.vectors.count_stale(embedder.model_id) == 4
        release.set()
        thread.join(LIMIT)
        assert queue.flush(LIMIT) is True
        assert store.vectors.count_stale(embedder.model_id) == 0
    finally:
        release.set()
        queue.close(LIMIT)
        holder.close()
        store.close()

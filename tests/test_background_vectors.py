"""Background vectors (setting ``vectors``): writes return once committed and keyword-searchable, a worker
thread adds the vectors, ``flush`` waits for them, and nothing is lost, resurrected or overwritten.

The worker is held back in some tests by :class:`Gate`, the real model behind a gate that only the
worker thread waits at: that is how a test sees the state between "acknowledged" and "vector written".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from pg_server import SERVER

from engramdb import Engram
from engramdb._util import new_id, utcnow
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.errors import ConfigError, EmbeddingError, NotFound
from engramdb.models import Memory
from engramdb.storage import open_store
from engramdb.storage.base import Filter, Store
from engramdb.vectorqueue import VectorQueue

WORKER = "engramdb-vectors"


#: Seconds a closed gate holds the worker at most.
GATE_LIMIT = 60.0


class Gate:
    """The real embedder; calls from the vector worker wait until :meth:`open` (or fail while ``broken``)."""

    def __init__(self, inner: Embedder, *, closed: bool = True) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.opened = threading.Event()
        if not closed:
            self.opened.set()
        self.broken = False
        self.worker_calls = 0

    def open(self) -> None:
        self.opened.set()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if threading.current_thread().name == WORKER:
            self.worker_calls += 1
            # Bounded: a test that fails with the gate closed must not leave close() waiting for ever.
            self.opened.wait(GATE_LIMIT)
            if self.broken:
                raise RuntimeError("the model server went away")
        return self.inner.embed(texts)


def location_on(backend: str, tmp_path: Path) -> str:
    return SERVER.get().new_database() if backend == "postgres" else str(tmp_path / "store")


@pytest.fixture(params=("sqlite", "postgres"))
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return location_on(request.param, tmp_path)


@pytest.fixture
def plain(location: str) -> Iterator[Store]:
    """A second, plain view of the store (another "process": it never waits for anyone's queue)."""
    store = open_store(location, settings=load_settings({}))
    try:
        yield store
    finally:
        store.close()


def stale(store: Store, embedder: Embedder) -> int:
    return store.vectors.count_stale(embedder.model_id)


# -- the setting --------------------------------------------------------------------------------------------
def test_vectors_setting_defaults_to_background_and_follows_file_env_and_arguments(tmp_path: Path) -> None:
    assert load_settings({"ENGRAM_HOME": str(tmp_path)}).vectors == "background"
    (tmp_path / "config.toml").write_text('vectors = "sync"\n')
    env = {"ENGRAM_HOME": str(tmp_path)}
    assert load_settings(env).vectors == "sync"
    assert load_settings({**env, "ENGRAM_VECTORS": "background"}).vectors == "background"
    assert load_settings({**env, "ENGRAM_VECTORS": "background"}, vectors="sync").vectors == "sync"
    with pytest.raises(ConfigError, match="vectors must be 'background' or 'sync'"):
        load_settings(env, vectors="later")
    with pytest.raises(ConfigError, match="vectors"):
        load_settings({**env, "ENGRAM_VECTORS": "eventually"})
    assert load_settings(env).vector_batch_size == 1024
    assert load_settings({**env, "ENGRAM_VECTOR_BATCH_SIZE": "32"}).vector_batch_size == 32
    with pytest.raises(ConfigError, match="vector_batch_size"):
        load_settings(env, vector_batch_size=0)


# -- writes return before the vector ------------------------------------------------------------------------
def test_remember_returns_committed_and_keyword_searchable_before_its_vector(
    location: str, plain: Store, embedder: Embedder
) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        m = mem.remember("Caroline adopted a greyhound called Biscuit", agent="a", kind="conversation")
        # Another process's view: the row and its keywords are committed, the vector is not written yet.
        assert plain.memories.get(m.id) is not None
        assert [c.id for c in plain.search.keyword_candidates(["greyhound"], Filter(agent="a"), limit=5)] == [m.id]
        assert stale(plain, embedder) == 1
        assert mem.history(m.id, agent="a")[0].action == "create"
        assert [e.action for e in mem.audit.log(memory_id=m.id)] == ["create"]
        gate.open()
        assert mem.flush() is True
        assert stale(plain, embedder) == 0
        vector = plain.vectors.get([m.id], model_id=embedder.model_id)[m.id]
        assert float(vector @ embedder.embed([m.content])[0]) == pytest.approx(1.0, abs=1e-5)


def test_remember_then_search_by_meaning_in_one_process_needs_no_flush(location: str, embedder: Embedder) -> None:
    with Engram(location, embedder=embedder) as mem:
        assert mem.settings.vectors == "background"
        mem.remember_many(
            [
                {"content": "we booked flights to Lisbon for the spring holiday", "kind": "conversation"},
                {"content": "the quarterly tax return is due on Friday", "kind": "conversation"},
                {"content": "my sister plays the cello in an orchestra", "kind": "conversation"},
            ]
        )
        hits = mem.search("travel to Portugal", limit=1)
        assert hits[0].memory.content.startswith("we booked flights to Lisbon")


def test_sync_mode_writes_the_vector_with_the_memory(location: str, plain: Store, embedder: Embedder) -> None:
    with Engram(location, embedder=embedder, vectors="sync") as mem:
        mem.remember("a conversation turn about gardening", kind="conversation")
        mem.remember_many([{"content": f"turn {i} about tomatoes", "kind": "conversation"} for i in range(5)])
        assert stale(plain, embedder) == 0
        assert mem.flush() is True


def test_writes_checked_for_duplicates_embed_before_returning_and_still_merge(
    location: str, plain: Store, embedder: Embedder
) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        forced = mem.remember("Deploys go out on Tuesdays after the standup.", force=True)
        assert stale(plain, embedder) == 1  # forced: not checked, so queued
        gate.open()
        # Checked (default kind, dedupe on): finds the forced one once the queue is through, merges into it.
        again = mem.remember("Deploys go out on Tuesdays after the standup")
        assert again.id == forced.id
        assert again.metadata["merge_count"] == 1
        assert [e.action for e in mem.audit.log(memory_id=forced.id)] == ["merge", "create"]
        # A new checked memory has its vector as soon as remember returns.
        gate.opened.clear()
        fresh = mem.remember("The staging database is restored from backup every night")
        assert plain.vectors.get([fresh.id], model_id=embedder.model_id)
        gate.open()


def test_mixed_batch_defers_only_the_unchecked_rows(location: str, plain: Store, embedder: Embedder) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        out = mem.remember_many(
            [
                {"content": "hi, how was the weekend?", "kind": "conversation"},
                {"content": "The build cache lives in /var/cache/build", "kind": "knowledge"},
                {"content": "great, we went hiking", "kind": "conversation"},
            ]
        )
        have = plain.vectors.get([m.id for m in out], model_id=embedder.model_id)
        assert set(have) == {out[1].id}
        # Insertion order is kept (list is newest first, ties by insertion).
        assert [m.id for m in mem.list(limit=3)] == [m.id for m in plain.memories.list(Filter(agent="default"))]
        gate.open()
        mem.flush()
        assert stale(plain, embedder) == 0


def test_keyed_memories_stay_correct_in_background(location: str, plain: Store, embedder: Embedder) -> None:
    with Engram(location, embedder=embedder) as mem:
        first = mem.remember("uses vim", key="editor")
        second = mem.remember("uses emacs", key="editor")
        assert second.id == first.id
        assert mem.recall_key("editor").content == "uses emacs"
        mem.flush()
        vector = plain.vectors.get([first.id], model_id=embedder.model_id)[first.id]
        assert float(vector @ embedder.embed(["uses emacs"])[0]) == pytest.approx(1.0, abs=1e-5)
        assert [c.action for c in mem.history(first.id)] == ["create", "supersede"]


def test_a_keyed_write_does_not_wait_for_the_model(location: str, plain: Store, embedder: Embedder) -> None:
    gate = Gate(embedder)  # closed: the keyed write must return with its vector still to come
    with Engram(location, embedder=gate) as mem:
        try:
            first = mem.remember("deploys on Fridays are frozen", key="deploy-policy")
            second = mem.remember("deploys on Fridays need two approvals", key="deploy-policy")
            assert second.id == first.id
            # Committed, vectors pending: the current value's and the superseded value's (kept for as_of).
            assert stale(plain, embedder) == 2
            stored = plain.memories.get(first.id)
            assert stored is not None
            assert stored.content == second.content
        finally:
            gate.open()  # else a failed assertion would leave close() waiting on the closed gate for ever
        mem.flush()
        vector = plain.vectors.get([first.id], model_id=embedder.model_id)[first.id]
        assert float(vector @ embedder.embed([second.content])[0]) == pytest.approx(1.0, abs=1e-5)


def test_a_rolled_back_transaction_queues_nothing(location: str, plain: Store, embedder: Embedder) -> None:
    with Engram(location, embedder=embedder) as mem:

        def write_then_fail() -> None:
            with mem.store.atomic():
                mem.remember("never committed", key="draft")
                raise RuntimeError("the caller changed its mind")

        with pytest.raises(RuntimeError):
            write_then_fail()
        mem.flush()
        with pytest.raises(NotFound):
            mem.recall_key("draft")
        assert plain.memories.count(Filter(agent=None)) == 0


# -- what the worker writes ---------------------------------------------------------------------------------
def test_a_vector_never_resurrects_a_memory_forgotten_meanwhile(
    location: str, plain: Store, embedder: Embedder
) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        m = mem.remember("a turn that will be forgotten at once", kind="conversation")
        mem.forget(m.id)
        gate.open()
        mem.flush()
        assert plain.memories.get(m.id) is None
        assert plain.vectors.get([m.id], model_id=embedder.model_id) == {}
        with pytest.raises(NotFound):
            mem.get(m.id)
        assert mem.doctor().ok


def test_a_vector_of_old_content_never_overwrites_newer_content(
    location: str, plain: Store, embedder: Embedder
) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        m = mem.remember("the meeting moved to room 4", kind="conversation")
        mem.update(m.id, content="the meeting is cancelled")
        gate.open()
        mem.flush()
        vector = plain.vectors.get([m.id], model_id=embedder.model_id)[m.id]
        assert float(vector @ embedder.embed(["the meeting is cancelled"])[0]) == pytest.approx(1.0, abs=1e-5)
        assert mem.search("cancelled", limit=1)[0].memory.id == m.id


def test_writes_inside_an_open_transaction_embed_before_the_commit(
    location: str, plain: Store, embedder: Embedder
) -> None:
    gate = Gate(embedder)  # closed: nothing may depend on the worker here
    with Engram(location, embedder=gate, vectors="background") as mem:
        with mem.store.atomic():
            mem.remember("written inside a caller's transaction", kind="conversation")
        assert stale(plain, embedder) == 0
        gate.open()


def test_an_embedder_failure_keeps_the_memories_pending_and_is_raised_by_flush(
    location: str, plain: Store, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate(embedder, closed=False)
    gate.broken = True
    with caplog.at_level(logging.DEBUG, logger="engramdb.vectors"), Engram(location, embedder=gate) as mem:
        m = mem.remember("a turn whose vector fails", kind="conversation")
        with pytest.raises(EmbeddingError, match="model server went away"):
            mem.flush()
        assert any("stay pending" in r.getMessage() for r in caplog.records)
        assert stale(plain, embedder) == 1
        report = mem.doctor()
        assert [c.name for c in report.failed] == ["vectors"]
        # Keyword search still works; the worker thread is alive and retries on the next flush.
        assert [h.memory.id for h in mem.search("fails", limit=1)] == [m.id]
        gate.broken = False
        assert mem.flush() is True
        assert stale(plain, embedder) == 0
        assert mem.doctor().ok


# -- pending rebuilt on open --------------------------------------------------------------------------------
def unvectored(agent: str, texts: Sequence[str]) -> list[Memory]:
    now = utcnow()
    return [
        Memory(id=new_id(), agent=agent, kind="conversation", content=t, created_at=now, updated_at=now) for t in texts
    ]


@pytest.mark.parametrize("mode", ["background", "sync"])
def test_memories_left_without_a_vector_are_embedded_after_the_next_open(
    location: str, plain: Store, embedder: Embedder, mode: str
) -> None:
    with Engram(location, embedder=embedder) as mem:
        mem.remember("opened once so the store knows its model", kind="conversation")
    orphans = unvectored("default", [f"left without a vector, number {i}, about sailing boats" for i in range(7)])
    plain.memories.add(orphans, None, model_id=embedder.model_id, actor="default")
    assert stale(plain, embedder) == 7
    with Engram(location, embedder=embedder, vectors=mode) as mem:
        assert mem.flush() is True
        assert stale(plain, embedder) == 0
        assert mem.search("yachts at sea", limit=1)[0].memory.content.startswith("left without")
        # (The orphans were added past the pipeline, without audit entries: only the vectors are checked.)
        assert "vectors" not in [c.name for c in mem.doctor().failed]


# -- the queue itself ---------------------------------------------------------------------------------------
def test_a_full_queue_blocks_the_writer_and_drops_nothing(location: str, plain: Store, embedder: Embedder) -> None:
    gate = Gate(embedder)
    items = unvectored("q", [f"queued turn {i}" for i in range(6)])
    plain.memories.add(items, None, model_id=embedder.model_id, actor="q")
    queue = VectorQueue(plain, gate, batch_size=2, capacity=3)
    try:
        queue.put([(m.id, m.content) for m in items[:3]])
        done = threading.Event()

        def more() -> None:
            queue.put([(m.id, m.content) for m in items[3:]])
            done.set()

        writer = threading.Thread(target=more)
        writer.start()
        # The worker holds one batch at the gate, so the queue has room for one more, not three.
        assert not done.wait(0.5)
        gate.open()
        writer.join()
        assert queue.flush() is True
        assert queue.pending == 0
        assert stale(plain, embedder) == 0
    finally:
        queue.close()

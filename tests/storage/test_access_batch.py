"""Searches' access counts written in batches (``access_flush_seconds``): exact counts, when they land, bounded loss.

A second store handle stands for another process: it sees only what was committed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pg_server import SERVER

from engramdb import Engram
from engramdb._access import FLUSH_CHUNK
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.errors import ConfigError, StorageError
from engramdb.storage import open_store

QUESTION = "how do I fix rate limit errors"


def _location(backend: str, tmp_path: Path) -> str:
    """A fresh store on ``backend`` (PostgreSQL: a new database of the session's test server)."""
    return SERVER.get().new_database() if backend == "postgres" else str(tmp_path / "store")


def _seed(mem: Engram) -> str:
    mem.remember("Retry with exponential backoff after rate limit errors", agent="alice")
    mem.remember("The staging database lives in eu-west-1", agent="alice")
    mem.flush()
    return mem.search(QUESTION, agent="alice", limit=1)[0].memory.id


@contextmanager
def _other(location: str, tmp_path: Path) -> Iterator[object]:
    """Another connection to the store (as another process would have)."""
    store = open_store(location, settings=load_settings({}, home=tmp_path / "home2"))
    try:
        yield store
    finally:
        store.close()


def _count(location: str, tmp_path: Path, memory_id: str) -> int:
    with _other(location, tmp_path) as store:
        found = store.memories.get(memory_id)  # type: ignore[attr-defined]
        assert found is not None
        return int(found.access_count)


def _searches(location: str, tmp_path: Path) -> int:
    """Search audit entries another process sees."""
    with _other(location, tmp_path) as store:
        return len(store.audit.events(action="search", limit=None))  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_counts_wait_for_the_flush_and_audit_entries_as_the_backend_says(
    backend: str, tmp_path: Path, embedder: Embedder
):
    location = _location(backend, tmp_path)
    mem = Engram(location, embedder=embedder, access_flush_seconds=3600)
    try:
        top = _seed(mem)
        mem.search(QUESTION, agent="alice", limit=1)
        # Not yet written: another process sees the counts only after the flush ...
        assert _count(location, tmp_path, top) == 0
        # ... and, on PostgreSQL, the searches' audit entries too (SQLite writes each before the search returns).
        assert _searches(location, tmp_path) == (0 if backend == "postgres" else 2)
        # The instance's own audit reads write them first.
        assert len(mem.store.audit.events(action="search", limit=None)) == 2
        assert _searches(location, tmp_path) == 2
        mem.flush()
        assert _count(location, tmp_path, top) == 2
        mem.search(QUESTION, agent="alice", limit=1)
        # This instance's own reads write the pending counts first.
        assert mem.get(top).access_count == 3
        assert _count(location, tmp_path, top) == 3
        mem.search(QUESTION, agent="alice", limit=1)
    finally:
        mem.close()
    # close() writes what is pending.
    assert _count(location, tmp_path, top) == 4
    assert _searches(location, tmp_path) == 4


def test_batched_search_entries_land_in_order_and_the_chain_verifies(tmp_path: Path, embedder: Embedder):
    location = _location("postgres", tmp_path)
    questions = [f"{QUESTION} {i}" for i in range(FLUSH_CHUNK + 5)]
    with Engram(location, embedder=embedder, access_flush_seconds=3600) as mem:
        _seed(mem)
        for i, question in enumerate(questions):
            mem.search(question, agent="alice" if i % 2 else "bob", limit=2)
            if i == 3:
                # A write between searches: its entry is appended at once, the searches' ones after it.
                mem.remember("The deploy freeze starts on Friday", agent="bob")
        # A full chunk was written by the background thread already; the rest waits for close().
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a timing assertion
        while _searches(location, tmp_path) < FLUSH_CHUNK:
            assert time.monotonic() < deadline, "the full chunk was never written"
            time.sleep(0.05)
    with Engram(location, embedder=embedder) as again:
        found = again.store.audit.events(action="search", limit=None)
        # _seed's search, then every one of these, in the order they ran.
        assert [e.agent for e in found] == ["alice"] + ["alice" if i % 2 else "bob" for i in range(len(questions))]
        assert [e.at for e in found] == sorted(e.at for e in found)
        assert again.audit.verify()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("engram")), "--store", location, "audit", "verify"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_background_flush_lands_within_the_delay(tmp_path: Path, embedder: Embedder):
    location = str(tmp_path / "s")
    with Engram(location, embedder=embedder, access_flush_seconds=0.05) as mem:
        top = _seed(mem)
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a timing assertion
        while _count(location, tmp_path, top) < 1:
            assert time.monotonic() < deadline, "the access counts were never written"
            time.sleep(0.02)


def test_many_searches_counted_exactly_in_chunks(tmp_path: Path, embedder: Embedder):
    location = str(tmp_path / "s")
    n = 2 * FLUSH_CHUNK + 7
    with Engram(location, embedder=embedder, access_flush_seconds=3600) as mem:
        top = _seed(mem)
        last = None
        for _ in range(n - 1):
            last = mem.search(QUESTION, agent="alice", limit=1)[0].memory.last_accessed
    with _other(location, tmp_path) as store:
        found = store.memories.get(top)  # type: ignore[attr-defined]
        assert found is not None
        # The same counts and times as a write per search (the pending queue's full chunks are written early).
        assert (found.access_count, found.last_accessed) == (n, last)


def test_zero_writes_before_the_search_returns(tmp_path: Path, embedder: Embedder):
    location = str(tmp_path / "s")
    with Engram(location, embedder=embedder, access_flush_seconds=0) as mem:
        top = _seed(mem)
        assert _count(location, tmp_path, top) == 1


def test_a_crash_loses_only_the_counts_not_yet_flushed(tmp_path: Path):
    location = tmp_path / "s"
    script = textwrap.dedent(
        f"""
        import os
        from engramdb import Engram
        mem = Engram({str(location)!r}, access_flush_seconds=3600, embedder="static")
        mem.remember("Retry with exponential backoff after rate limit errors", agent="alice")
        mem.flush()
        top = mem.search({QUESTION!r}, agent="alice", limit=1)[0].memory.id
        mem.flush()
        mem.search({QUESTION!r}, agent="alice", limit=1)
        print(top, flush=True)
        os._exit(0)  # no close(): the second search's counts are lost, nothing else
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    top = done.stdout.split()[-1]
    assert _count(str(location), tmp_path, top) == 1
    with _other(str(location), tmp_path) as store:
        # Both searches' audit entries were written before they returned.
        assert len(store.audit.events(action="search", limit=None)) == 2  # type: ignore[attr-defined]


def test_the_setting_is_resolved_and_checked(tmp_path: Path):
    assert load_settings({}, home=tmp_path).access_flush_seconds == 1.0
    env = {"ENGRAM_ACCESS_FLUSH_SECONDS": "0.25"}
    assert load_settings(env, home=tmp_path).access_flush_seconds == 0.25
    assert load_settings(env, home=tmp_path, access_flush_seconds=0).access_flush_seconds == 0.0
    (tmp_path / "config.toml").write_text("access_flush_seconds = 5\n")
    assert load_settings({}, home=tmp_path).access_flush_seconds == 5.0
    for bad in (-1, 3601, float("nan")):
        with pytest.raises(ConfigError, match="access_flush_seconds"):
            load_settings({}, home=tmp_path, access_flush_seconds=bad)


def test_returned_hits_count_the_pending_searches(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "s", embedder=embedder, access_flush_seconds=3600) as mem:
        top = _seed(mem)
        shown = [mem.search(QUESTION, agent="alice", limit=1)[0].memory for _ in range(3)]
        assert [(m.id, m.access_count) for m in shown] == [(top, 2), (top, 3), (top, 4)]
        mem.flush()
        # Written now: the row holds them, nothing is counted twice.
        assert mem.search(QUESTION, agent="alice", limit=1)[0].memory.access_count == 5


def test_counts_that_cannot_be_written_wait_for_the_next_flush(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
):
    location = str(tmp_path / "s")
    with Engram(location, embedder=embedder, access_flush_seconds=3600) as mem:
        top = _seed(mem)

        def locked(*_args: object, **_kwargs: object) -> None:
            raise StorageError("the store is locked by another process")

        with monkeypatch.context() as patch:
            patch.setattr(mem.store.memories, "touch", locked)
            mem.flush()
        assert _count(location, tmp_path, top) == 0
        assert mem.search(QUESTION, agent="alice", limit=1)[0].memory.access_count == 2  # still counted as pending
        mem.flush()
        assert _count(location, tmp_path, top) == 2  # each written once


def test_feedback_without_ids_finds_the_search_whose_entry_still_waits(tmp_path: Path, embedder: Embedder):
    # Feedback without ids is about the agent's last search, found in the audit trail: a batched entry counts.
    with Engram(_location("postgres", tmp_path), embedder=embedder, access_flush_seconds=3600) as mem:
        top = _seed(mem)
        assert [m.id for m in mem.learning.feedback(outcome="success", agent="alice")] == [top]
        assert mem.get(top).attempts == 1

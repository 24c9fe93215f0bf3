"""HybridSearcher.start_workers: both keyword threads run when it returns, and a close meanwhile never waits on it."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import pytest

from engramdb import Engram
from engramdb.retrieval import hybrid
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.storage.base import Filter

#: The workers' meeting guard while these tests run: longer than any wait below, so a start that returns within
#: one was let go by the event the test means (both met, or the close), never by the guard running out (a
#: loaded machine made "at once" a wall-clock race: the guard was 5 s, the check 2.5 s).
_GUARD = 600.0
_WAIT = 120.0


@pytest.fixture(autouse=True)
def _long_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hybrid, "_WORKER_START_GUARD_SECONDS", _GUARD)


def _keyword_threads() -> set[int | None]:
    """The keyword worker threads alive now, once the store's own warm-up has started its searcher's."""
    for thread in threading.enumerate():
        if thread.name == "engramdb-warm-retrieval":
            thread.join(timeout=30)
    return {t.ident for t in threading.enumerate() if t.name.startswith("engram-keyword_")}


def test_both_workers_run_when_it_returns_and_the_first_search_starts_none(mem: Engram) -> None:
    mem.remember("The staging deploy needs the VPN", agent="ops")
    before = _keyword_threads()
    searcher = HybridSearcher(mem.store, mem.embedder)
    try:
        searcher.start_workers()
        started = _keyword_threads() - before
        assert len(started) == 2
        searcher.start_workers()  # again: the same two threads meet
        hits = searcher.search("staging deploy VPN", Filter(agent="ops"), limit=5, now=datetime.now(UTC), touch=False)
        assert [h.memory.content for h in hits] == ["The staging deploy needs the VPN"]
        assert _keyword_threads() - before == started
    finally:
        searcher.close()
    assert not _keyword_threads() - before


def test_a_search_while_the_workers_start_is_answered(mem: Engram) -> None:
    mem.remember("Pottery class was fun, I made a blue bowl", agent="a")
    searcher = HybridSearcher(mem.store, mem.embedder)
    warm = threading.Thread(target=searcher.start_workers)
    try:
        warm.start()
        hits = searcher.search("pottery class", Filter(agent="a"), limit=5, now=datetime.now(UTC), touch=False)
        warm.join(timeout=_WAIT)
        assert not warm.is_alive()
        assert [h.memory.content for h in hits] == ["Pottery class was fun, I made a blue bowl"]
    finally:
        searcher.close()


def test_a_close_between_the_two_starts_releases_the_first(mem: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool shuts down after the first task is queued: the second submit fails, and the first task, which
    waits for the second, is let go at once rather than at the guard (a close would wait for it)."""
    searcher = HybridSearcher(mem.store, mem.embedder)
    pool = searcher._pool
    submitted: list[Future[Any]] = []
    submit = pool.submit

    def submit_then_close(fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = submit(fn, *args, **kwargs)
        submitted.append(future)
        pool.shutdown(wait=False)
        return future

    monkeypatch.setattr(pool, "submit", submit_then_close)
    with pytest.raises(RuntimeError):
        searcher.start_workers()
    submitted[0].result(timeout=_WAIT)  # released by the abort: the guard is far longer
    searcher.close()

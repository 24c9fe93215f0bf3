"""No thread a store starts outlives its close: SQLite and PostgreSQL stores, ``Engram`` close and context exit,
also when the close comes while the warm-up is in the middle of a read (see engramdb._threads).

A thread that outlived its store made tests fail once in CI three times (git log: "failed once in CI"): each
assertion here is made right after ``close()`` returns, without waiting, because the close itself must join them.
"""

from __future__ import annotations

import ast
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgServer
from storage_helpers import add, memory

import engramdb
from engramdb import Engram
from engramdb._threads import JOIN_SECONDS, THREAD_PREFIX, Background
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.storage import _kw_index, _sqlite_search, open_store
from engramdb.storage._kw_persist import postings_path
from engramdb.storage._sqlite_search import SQLiteSearch
from engramdb.storage._tenant_rows import TenantRows
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite

#: A read that takes far longer than any close may wait (SQLite counts to 10^12): only an interrupt ends it.
_ENDLESS_READ = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000000000) SELECT max(i) FROM n"
)
SETTINGS = load_settings({})
#: The embedder's pool belongs to the embedder, shared by stores, not to a store (docs/architecture.md).
_NOT_THE_STORES = ("engramdb-embed",)


def _new_threads(before: set[threading.Thread]) -> list[str]:
    """The threads alive now that were not before (the process's other threads left out)."""
    return sorted(t.name for t in threading.enumerate() if t not in before and not t.name.startswith(_NOT_THE_STORES))


@pytest.fixture
def before() -> set[threading.Thread]:
    return set(threading.enumerate())


def _filled(path: Path, embedder: Embedder, count: int = 30) -> Path:
    with Engram(path, embedder=embedder) as mem:
        for i in range(count):
            mem.remember(f"deploy note {i}: the staging cluster needs the VPN", agent="ops", user=f"u{i % 3}")
    return path


def test_a_sqlite_store_closed_at_once_leaves_no_thread(tmp_path: Path, embedder: Embedder) -> None:
    path = _filled(tmp_path / "s", embedder)
    for _ in range(5):  # closed at every stage of its warm-up
        before = set(threading.enumerate())
        store = open_store(str(path), settings=SETTINGS)
        store.close()
        assert _new_threads(before) == []


def test_a_sqlite_store_closed_after_its_warm_up_leaves_no_thread(tmp_path: Path, embedder: Embedder) -> None:
    path = _filled(tmp_path / "s", embedder)
    before = set(threading.enumerate())
    store = open_store(str(path), settings=SETTINGS)
    warm = [t for t in threading.enumerate() if t.name == "engramdb-warm"]
    for thread in warm:
        thread.join(timeout=60)
    store.close()
    assert _new_threads(before) == []


def _use_and_close(mem: Engram, exit_by: str) -> None:
    """A write and searches (starting the search workers and the access writer), then ``close()`` or a ``with`` exit."""
    mem.remember("the staging cluster needs the VPN", agent="ops")
    assert mem.search("staging VPN", agent="ops")
    if exit_by == "close":
        mem.close()
    else:
        with mem:
            mem.search("cluster", agent="ops")


@pytest.mark.parametrize("exit_by", ["close", "context"])
def test_an_engram_leaves_no_thread_after_close_or_context_exit(
    tmp_path: Path, embedder: Embedder, before: set[threading.Thread], exit_by: str
) -> None:
    path = tmp_path / "s"
    _use_and_close(Engram(path, embedder=embedder, access_flush_seconds=1.0), exit_by)
    assert _new_threads(before) == []
    for _ in range(3):  # reopened and closed at once: its warm-ups are mid-way
        with Engram(path, embedder=embedder):
            pass
        assert _new_threads(before) == []


def _read_forever(conn: sqlite3.Connection, started: threading.Event) -> None:
    started.set()
    conn.execute(_ENDLESS_READ).fetchone()


@pytest.mark.parametrize("where", ["store connection", "prefill connection"])
def test_a_close_during_a_warm_up_read_interrupts_it_and_joins(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The warm-up is in a read that would not end for hours, on the store's own connection (holding the store's
    lock, which the close needs) or on the tenants' prefill's connection: the close interrupts it, joins the
    thread and closes the store."""
    path = _filled(tmp_path / "s", embedder)
    started = threading.Event()
    if where == "store connection":

        def rehearse(self: SQLiteSearch) -> None:
            with self._reading() as conn:
                _read_forever(conn, started)

        monkeypatch.setattr(SQLiteSearch, "_rehearse", rehearse)
    else:
        prefill = TenantRows.prefill

        def slow_prefill(self: TenantRows, conn: sqlite3.Connection, **kw: Any) -> Any:
            _read_forever(conn, started)
            return prefill(self, conn, **kw)

        monkeypatch.setattr(_sqlite_search, "KW_INDEX_MIN_MEMORIES", 1)  # a small store prefills too
        monkeypatch.setattr(TenantRows, "prefill", slow_prefill)
    before = set(threading.enumerate())
    store = open_store(str(path), settings=SETTINGS)
    assert started.wait(60), "the warm-up never reached its read"
    store.close()
    assert _new_threads(before) == []
    with pytest.raises(engramdb.StorageError):
        store.memories.count(Filter(agent="ops"))


def test_the_background_refuses_to_start_after_stop_and_stops_from_its_own_thread() -> None:
    background = Background()
    inner: list[list[threading.Thread]] = []
    thread = background.start("engram-test", lambda: inner.append(background.stop(timeout=1)))
    assert thread is not None
    assert background.stop() == []
    assert not thread.is_alive()
    assert inner == [[]]  # its own thread is not waited for
    assert background.start("engram-test", lambda: None) is None
    with pytest.raises(ValueError, match="engram"):
        Background().start("worker", lambda: None)


def test_wait_joins_the_threads_without_stopping_them() -> None:
    background = Background()
    go = threading.Event()
    done: list[bool] = []
    thread = background.start("engram-test", lambda: done.append(go.wait(60)))
    assert thread is not None
    assert background.wait(timeout=0) is False  # still waiting for go
    go.set()
    assert background.wait(timeout=60) is True
    assert done == [True]
    assert not background.stopping
    assert background.start("engram-test", lambda: None) is not None


def test_an_interrupt_registered_after_the_stop_runs_at_once(tmp_path: Path) -> None:
    background = Background()
    background.stop()
    conn = sqlite3.connect(tmp_path / "x.db", check_same_thread=False)
    try:
        calls: list[int] = []
        with background.interruptible(lambda: calls.append(1)):
            pass
        assert calls == [1]
    finally:
        conn.close()


def test_a_thread_that_cannot_be_interrupted_is_reported_after_the_bounded_wait() -> None:
    background = Background()
    release = threading.Event()
    thread = background.start("engram-stuck", lambda: release.wait(60))
    assert thread is not None
    try:
        assert background.stop(timeout=0.1) == [thread]
    finally:
        release.set()
        thread.join(60)
    assert JOIN_SECONDS > 0.1


def _keyword_store(path: Path) -> Any:
    """A store of a few memories whose keyword index is used (no saved postings: the first search builds them)."""
    with open_sqlite(path, warm=False) as store:
        add(store, [memory(f"deploy note {i} staging cluster") for i in range(30)])
    store = open_sqlite(path, warm=False)
    store.search.keyword_index.min_memories = 0
    return store


def _keyword_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "engram-keyword-index"]


def test_a_close_during_a_keyword_build_interrupts_its_read_and_joins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    monkeypatch.setattr(_kw_index, "build", lambda conn: _read_forever(conn, started))
    store = _keyword_store(tmp_path / "s")
    assert store.search.keyword_candidates(["staging"], Filter(agent="alice"), limit=5)  # FTS5 while it builds
    assert started.wait(60), "the build never began its read"
    began = time.monotonic()
    store.close()
    assert time.monotonic() - began < JOIN_SECONDS
    assert _keyword_threads() == []


def test_a_keyword_build_that_outlives_the_bounded_close_keeps_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A step no interrupt reaches (numpy's, after the reads): the close waits its bound, then returns; the build,
    ending later, leaves no postings beside the database a caller may already have removed."""
    started, release = threading.Event(), threading.Event()
    real = _kw_index.build

    def uninterruptible(conn: sqlite3.Connection) -> Any:
        started.set()
        release.wait(60)
        return real(conn)

    monkeypatch.setattr(_kw_index, "build", uninterruptible)
    monkeypatch.setattr(_kw_index, "JOIN_SECONDS", 0.3)
    path = tmp_path / "s"
    store = _keyword_store(path)
    index = store.search.keyword_index
    store.search.keyword_candidates(["staging"], Filter(agent="alice"), limit=5)
    assert started.wait(60), "the build never began"
    [builder] = _keyword_threads()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="engramdb"):
        store.close()
    assert time.monotonic() - began < 5.0  # the bound (0.3 s), not the build's minute
    assert "engram-keyword-index still running after the close" in caplog.text
    release.set()
    builder.join(60)
    assert not builder.is_alive()
    assert not postings_path(str(path / "engram.db")).exists()
    assert not index.ready()
    index.warm(str(path / "engram.db"))  # a warm-up left running past the close starts nothing
    assert _keyword_threads() == []


@pytest.mark.parametrize("exit_by", ["close", "context"])
def test_a_postgres_store_and_engram_leave_no_thread(
    postgres_server: PgServer, embedder: Embedder, exit_by: str
) -> None:
    url = postgres_server.new_database()
    before = set(threading.enumerate())
    store = open_store(url, settings=SETTINGS)
    store.close()
    assert _new_threads(before) == []
    _use_and_close(Engram(url, embedder=embedder, access_flush_seconds=1.0), exit_by)
    assert _new_threads(before) == []


def _thread_names(call: ast.Call) -> list[ast.expr]:
    """The ``name=`` / ``thread_name_prefix=`` arguments of a Thread or ThreadPoolExecutor call."""
    return [k.value for k in call.keywords if k.arg in {"name", "thread_name_prefix"}]


def test_every_thread_the_library_starts_is_named_engram() -> None:
    """Thread(...) and ThreadPoolExecutor(...) calls in the source name their threads engram* (tests and
    ``Background`` find them by it); a thread named later (``.name = ...``) is checked the same way."""
    src = Path(engramdb.__file__).parent
    bad: list[str] = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "_threads.py":
            continue  # Background.start checks the name it is given
        text = path.read_text(encoding="utf-8")
        if "Thread" not in text:
            continue
        tree = ast.parse(text)
        named_later = {
            node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Attribute) and t.attr == "name" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called not in {"Thread", "ThreadPoolExecutor"}:
                continue
            names = _thread_names(node)
            ok = all(isinstance(n, ast.Constant) and str(n.value).startswith(THREAD_PREFIX) for n in names)
            if (names and not ok) or (
                not names and not (named_later and all(n.startswith(THREAD_PREFIX) for n in named_later))
            ):
                bad.append(f"{path.relative_to(src)}:{node.lineno}")
    assert bad == []

"""The first searches after opening: the warm-up's rehearsal of both channels changes no answer and no row.

At open a file store's warm-up runs each channel once for the newest memory's agent (and user), so that what a
search does only the first time is done before the caller's first search (issue 27). On real SQLite files: a
store searched at once answers exactly as the same store searched once its warm-up ended, and as one opened
without warming; the rehearsal writes nothing; a damaged store reports the same error (or answer) with or without
it, and the warm-up thread never raises.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from storage_helpers import add, memory, unit_vectors
from test_keyword_speedpath import _QUERIES, _texts

from engramdb.errors import EngramError
from engramdb.storage import _sqlite_search
from engramdb.storage._sqlite_files import begin_log
from engramdb.storage.base import Candidate, Filter, Store
from engramdb.storage.sqlite import open_sqlite

Answers = list[list[tuple[str, float]]]


def _join_warm() -> None:
    for thread in threading.enumerate():
        if thread.name == "engramdb-warm":
            thread.join(timeout=60)


def _build(location: Path, *, rows: int, agents: int, users: int, seed: int) -> None:
    with open_sqlite(location, warm=False) as store:
        texts = _texts(rows, seed=seed)
        add(
            store,
            [
                memory(t, agent=f"t{i % agents}", user=None if not users or i % 3 == 0 else f"u{i % users}")
                for i, t in enumerate(texts)
            ],
            seed=seed,
        )


def _filters(agents: int, users: int) -> list[Filter]:
    out = [Filter(agent=f"t{a}") for a in range(min(agents, 3))]
    out += [Filter(agent="t0", users=(None, f"u{u}")) for u in range(min(users, 2))]
    return out


def _ask(store: Store, filters: list[Filter], *, seed: int) -> Answers:
    vectors = unit_vectors(len(_QUERIES), seed=seed + 100)
    out: Answers = []
    for flt in filters:
        for terms, vector in zip(_QUERIES, vectors, strict=True):
            found: list[Candidate] = store.search.keyword_candidates(terms, flt, limit=20)
            found += store.search.vector_candidates(vector, flt, limit=20)
            out.append([(c.id, round(c.score, 9)) for c in found])
    return out


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Small stores warmed as large ones: the keyword postings, the tenants' prefill and the rehearsal all run."""
    monkeypatch.setattr(_sqlite_search, "KW_INDEX_MIN_MEMORIES", 0)
    yield
    _join_warm()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(min_value=1, max_value=300),
    agents=st.integers(min_value=1, max_value=8),
    users=st.integers(min_value=0, max_value=4),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_a_store_searched_at_once_answers_as_a_warm_one_and_as_an_unwarmed_one(
    large: None, rows: int, agents: int, users: int, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        location = Path(tmp) / "s"
        _build(location, rows=rows, agents=agents, users=users, seed=seed)
        filters = _filters(agents, users)
        with open_sqlite(location) as store:
            at_once = _ask(store, filters, seed=seed)  # beside the warm-up
        _join_warm()
        with open_sqlite(location) as store:
            _join_warm()
            warmed = store.search.warmed  # type: ignore[attr-defined]
            assert "rehearsed" in warmed
            assert "tenants" in warmed
            warm = _ask(store, filters, seed=seed)
        with open_sqlite(location, warm=False) as store:
            cold = _ask(store, filters, seed=seed)
        assert at_once == warm == cold


def test_the_rehearsal_writes_nothing(tmp_path: Path, large: None) -> None:
    location = tmp_path / "s"
    _build(location, rows=200, agents=5, users=2, seed=1)
    with open_sqlite(location, warm=False) as store:
        before = (store.audit.head(), len(store.memories.history_all(limit=10_000)))
        counts = {m.id: m.access_count for m in store.memories.list(Filter(agent=None), limit=1000)}
    with open_sqlite(location) as store:
        _join_warm()
        assert "rehearsed" in store.search.warmed  # type: ignore[attr-defined]
        assert (store.audit.head(), len(store.memories.history_all(limit=10_000))) == before
        assert {m.id: m.access_count for m in store.memories.list(Filter(agent=None), limit=1000)} == counts


def _damage(location: Path, how: str) -> None:
    conn = sqlite3.connect(location)
    try:
        newest = conn.execute("SELECT id FROM memories ORDER BY rid DESC LIMIT 1").fetchone()[0]
        if how == "vector":
            conn.execute("UPDATE vectors SET vec = x'000102' WHERE memory_id = ?", (newest,))
        else:
            conn.execute("UPDATE vectors SET model_id = 'gone' WHERE memory_id = ?", (newest,))
        conn.commit()
    finally:
        conn.close()


def _outcome(location: Path, *, warm: bool) -> object:
    try:
        with open_sqlite(location, warm=warm) as store:
            _join_warm()
            return ("answer", _ask(store, _filters(3, 2), seed=3))
    except EngramError as exc:
        return ("error", type(exc).__name__)


@pytest.mark.parametrize("how", ["vector", "model"])
def test_a_damaged_store_answers_or_fails_alike_with_or_without_the_warm_up(
    tmp_path: Path, large: None, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    location = tmp_path / "s"
    _build(location, rows=120, agents=3, users=2, seed=3)
    database = next(p for p in location.rglob("*.db")) if location.is_dir() else location
    _damage(database, how)
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    assert _outcome(location, warm=True) == _outcome(location, warm=False)
    assert raised == []


def _state(location: Path) -> tuple[object, ...]:
    conn = sqlite3.connect(location / "engram.db")
    try:
        return (
            conn.execute("PRAGMA user_version").fetchone(),
            conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
            conn.execute("SELECT count(*), max(rid), sum(access_count) FROM memories").fetchone(),
        )
    finally:
        conn.close()


def test_the_warm_up_begins_the_write_ahead_log_and_changes_nothing(tmp_path: Path, large: None) -> None:
    """A search's first write (its audit entry) used to make the log anew after each clean close: a header and two
    syncs on the first search's path. The warm-up makes it with a write that changes nothing."""
    location = tmp_path / "s"
    _build(location, rows=50, agents=2, users=1, seed=2)  # closed: its log removed
    wal = location / "engram.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    before = _state(location)
    with open_sqlite(location):
        _join_warm()
        assert wal.exists()
        assert wal.stat().st_size > 0  # begun before any search
        assert _state(location) == before


def test_beginning_the_log_never_waits_for_another_writer_nor_fails(tmp_path: Path) -> None:
    location = tmp_path / "s"
    _build(location, rows=5, agents=1, users=0, seed=1)
    before = _state(location)
    other = sqlite3.connect(location / "engram.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another writer holds the store
        assert begin_log(location / "engram.db") is False
        other.execute("COMMIT")
    finally:
        other.close()
    assert begin_log(location / "engram.db") is True
    assert begin_log(tmp_path / "missing" / "engram.db") is False
    (tmp_path / "gone").mkdir()
    assert begin_log(tmp_path / "gone" / "engram.db") is False
    assert list((tmp_path / "gone").iterdir()) == []  # nothing made where the database is gone
    assert _state(location) == before


def test_beginning_the_log_leaves_an_emptied_database_empty(tmp_path: Path) -> None:
    # A warm-up still running when the file is emptied (a truncated copy, a full disk during a restore) must not
    # write a fresh header into it: the next open has to see 0 bytes and refuse (CorruptStoreError).
    location = tmp_path / "s"
    _build(location, rows=5, agents=1, users=0, seed=1)
    os.truncate(location / "engram.db", 0)
    assert begin_log(location / "engram.db") is False
    assert (location / "engram.db").stat().st_size == 0


def test_a_callers_search_before_the_rehearsal_ends_it_and_changes_no_answer(
    tmp_path: Path, large: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = tmp_path / "s"
    _build(location, rows=120, agents=3, users=2, seed=4)
    filters = _filters(3, 2)
    asked: list[str] = []
    real = _sqlite_search.SQLiteSearch.keyword_candidates

    def counting(self: _sqlite_search.SQLiteSearch, terms: list[str], flt: Filter, *, limit: int) -> list[Candidate]:
        asked.append(threading.current_thread().name)
        return real(self, terms, flt, limit=limit)

    monkeypatch.setattr(_sqlite_search.SQLiteSearch, "keyword_candidates", counting)
    with open_sqlite(location, warm=False) as store:
        store.search.warm(location / "engram.db")  # type: ignore[attr-defined]
        assert asked  # nobody searched first: the rehearsal ran the channels
        plain = _ask(store, filters, seed=4)
    asked.clear()
    with open_sqlite(location, warm=False) as store:
        first = _ask(store, filters, seed=4)  # a caller's search came first
        before = len(asked)
        store.search.warm(location / "engram.db")  # type: ignore[attr-defined]
        assert len(asked) == before  # the rehearsal stopped before its first step
        assert "rehearsed" in store.search.warmed  # type: ignore[attr-defined]
        assert _ask(store, filters, seed=4) == first == plain

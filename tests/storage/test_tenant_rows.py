"""The keyword plan's cached tenant keys: gathered once, reused while nothing joined the agent's readable rows.

On a real SQLite file with memories over many agents, the cached plan answers exactly as plain FTS5 after each
way a row can join an agent's readable set (a new memory, another agent's made public, one shared with it) and
after rows leave it (forgotten); and it reads the agent's keys from SQL once, not per search.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from storage_helpers import NOW, add, memory
from test_keyword_speedpath import _QUERIES, _assert_same, _both, _texts

from engramdb.storage import _sqlite_search
from engramdb.storage._tenant_rows import Scope, TenantRows, gather_rids
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite

_AGENTS = 20


def _store(location: Path) -> Store:
    store = open_sqlite(location)
    add(store, [memory(t, agent=f"t{i % _AGENTS}") for i, t in enumerate(_texts(800))])
    store.search.keyword_index.min_memories = 0
    return store


def _gathers(store: Store, flt: Filter, terms: list[str]) -> int:
    """How many times one keyword search gathers the agent's whole key set from SQL."""
    seen: list[str] = []
    search = store.search
    assert isinstance(search, _sqlite_search.SQLiteSearch)
    with search._reading() as conn:
        conn.set_trace_callback(lambda sql: seen.append(sql) if "group_concat(rid) FROM (" in sql else None)
        try:
            search.keyword_candidates(terms, flt, limit=20)
        finally:
            conn.set_trace_callback(None)
    return len(seen)


def test_an_agent_s_keys_are_gathered_once_while_nothing_joins_them(tmp_path: Path) -> None:
    with _store(tmp_path / "s") as store:
        flt = Filter(agent="t3")
        _both(store, ["caroline"], flt)  # the index built
        counts = [_gathers(store, flt, terms) for terms in _QUERIES[:6]]
        assert counts[0] <= 1
        assert sum(counts[1:]) == 0
        add(store, [memory("quokka caroline", agent="t3")], seed=1)
        add(store, [memory("quokka lake", agent="t4")], seed=2)
        # New memories only: the agent's new rows are added by key range, its whole set is not gathered again.
        assert _gathers(store, flt, ["quokka"]) == 0
        found = store.search.keyword_candidates(["quokka"], flt, limit=5)
        assert [c.id for c in found] == [c.id for c in _both(store, ["quokka"], flt)[0]]
        assert len(found) == 1
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, flt))
        public = store.search.keyword_candidates(["lake"], Filter(agent="t4"), limit=1)[0].id
        store.memories.update(public, {"visibility": "public"}, vector=None, model_id="m", actor="t", at=NOW)
        assert _gathers(store, flt, ["quokka"]) == 1  # an epoch moved: gathered again


@pytest.mark.parametrize("change", ["new", "public", "shared", "forgotten", "other_agent_new"])
def test_the_cached_plan_answers_as_fts5_after_rows_join_or_leave(tmp_path: Path, change: str) -> None:
    with _store(tmp_path / "s") as store:
        flt = Filter(agent="t3")
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, flt))  # every query's plan cached
        others = [c.id for c in store.search.keyword_candidates(["zebra", "caroline"], Filter(agent="t4"), limit=30)]
        mine = [c.id for c in store.search.keyword_candidates(["caroline"], flt, limit=30)]
        if change == "new":
            add(store, [memory("caroline caroline caroline lake", agent="t3")], seed=2)
        elif change == "other_agent_new":
            add(store, [memory("caroline caroline caroline lake", agent="t4")], seed=2)
        elif change == "public":
            for memory_id in others[:5]:
                store.memories.update(memory_id, {"visibility": "public"}, vector=None, model_id="m", actor="t", at=NOW)
        elif change == "shared":
            assert store.shares.share(others[:5], from_agent="t4", to_agent="t3", at=NOW) == 5
        else:
            for memory_id in mine[:5]:
                store.memories.delete(memory_id, actor="t", at=NOW)
        for terms in (*_QUERIES, ["caroline", "lake"]):
            plain, fast = _both(store, terms, flt)
            _assert_same(plain, fast)
        found = {c.id for c in store.search.keyword_candidates(["caroline"], flt, limit=60)}
        if change in ("public", "shared"):
            assert set(others[:5]) <= found
        if change == "forgotten":
            assert not set(mine[:5]) & found


def _counters() -> sqlite3.Connection:
    """A real connection holding just what the token reads (memories' keys, the three epochs)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE memories (rid INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT, visibility TEXT)")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('vec_epoch', '0'), ('share_epoch', '0'), ('scope_epoch', '0')")
    return conn


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["", "insert", "vec", "share"]), st.integers(0, 40))))
def test_kept_keys_stay_within_the_bound_new_rows_are_added_and_a_changed_epoch_gathers(
    ops: list[tuple[int, str, int]],
) -> None:
    rows = TenantRows(max_keys=100)
    conn = _counters()
    for agent, change, size in ops:
        if change == "insert":
            conn.execute("INSERT INTO memories (agent, visibility) VALUES (?, 'private')", (f"a{agent % 3}",))
        elif change:
            key = "vec_epoch" if change == "vec" else "share_epoch"
            conn.execute("UPDATE meta SET value = CAST(value + 1 AS TEXT) WHERE key = ?", (key,))
        gathered: list[int] = []

        def gather(size: int = size, gathered: list[int] = gathered) -> np.ndarray:
            gathered.append(size)
            return np.arange(size, dtype=np.int64)

        token = conn.execute(_token_sql()).fetchone()[:3]  # an agent's set ignores the scope epoch
        before = rows._sets.get(Scope(f"a{agent}", shared=False))
        got, _ = rows.get(conn, Scope(f"a{agent}", shared=False), gather=gather)
        assert rows._keys == sum(v[1].size for v in rows._sets.values()) <= 100
        if before is not None and before[0] == token:
            assert not gathered
            assert got is before[1]
        elif before is not None and before[0][1:] == token[1:]:  # only new memories: the agent's added by key
            new = conn.execute("SELECT rid FROM memories WHERE rid > ? AND agent = ?", (before[0][0] or 0, f"a{agent}"))
            assert not gathered
            assert got.tolist() == [*before[1].tolist(), *(r for (r,) in new)]
        else:
            assert gathered == [size]
            assert got.size == size


def test_the_token_reads_the_store_s_counters(tmp_path: Path) -> None:
    with _store(tmp_path / "s") as store:
        search = store.search
        assert isinstance(search, _sqlite_search.SQLiteSearch)
        with search._reading() as conn:
            before = conn.execute(_token_sql()).fetchone()
        add(store, [memory("x", agent="t1")], seed=3)
        with search._reading() as conn:
            after = conn.execute(_token_sql()).fetchone()
        assert before != after


def _token_sql() -> str:
    from engramdb.storage._tenant_rows import _COUNTERS_SQL

    return _COUNTERS_SQL


def _join_warm() -> None:
    """Wait for the stores' warm-up threads (the keyword postings, the vector cache, the agents' keys)."""
    for thread in threading.enumerate():
        if thread.name == "engramdb-warm":
            thread.join(timeout=60)


def test_opening_gathers_every_minority_agent_s_keys_before_its_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = tmp_path / "a store #1?"  # read by a URI of its own: the path's characters escaped
    with _store(location) as store:
        others = [c.id for c in store.search.keyword_candidates(["caroline"], Filter(agent="t4"), limit=6)]
        for memory_id in others[:3]:
            store.memories.update(memory_id, {"visibility": "public"}, vector=None, model_id="m", actor="t", at=NOW)
        assert store.shares.share(others[3:5], from_agent="t4", to_agent="t3", at=NOW) == 2
        assert store.shares.share(others[5:], from_agent="t4", to_agent="*", at=NOW) == 1
    monkeypatch.setattr(_sqlite_search, "KW_INDEX_MIN_MEMORIES", 0)  # the store is small: warm it as a large one
    with open_sqlite(location) as store:
        _join_warm()
        store.search.keyword_index.min_memories = 0
        search = store.search
        assert isinstance(search, _sqlite_search.SQLiteSearch)
        with search._reading() as conn:
            for agent in ("t3", "t4", "t7"):
                kept = search._tenant_rows._sets[Scope(agent, shared=True)][1]
                assert kept.tolist() == gather_rids(conn, Scope(agent, shared=True)).tolist()
        search.keyword_candidates(["caroline"], Filter(agent=None), limit=1)  # the postings built
        assert search.keyword_index.wait(timeout=30)
        for agent in ("t3", "t4", "t7"):
            flt = Filter(agent=agent)
            assert _gathers(store, flt, ["caroline", "lake"]) == 0  # its first search: nothing gathered
            for terms in _QUERIES:
                _assert_same(*_both(store, terms, flt))
        # A write after opening: the prefilled set is not trusted for the new row, which is found.
        add(store, [memory("caroline caroline caroline quokka", agent="t3")], seed=4)
        found = store.search.keyword_candidates(["quokka"], Filter(agent="t3"), limit=5)
        assert len(found) == 1

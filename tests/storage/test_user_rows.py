"""A user scope's kept key set (storage._tenant_rows) is exactly its rows, and every change is seen at once.

The vector channel trusts a user scope's kept set as its filter (no row checked in SQL), so the set must hold
exactly the rows the filter admits (but for kinds, tags, dates and metadata) after any change: a memory moved to
another user (users are not updatable through the library: by plain SQL) or superseded (through the library or
plain SQL, in this process or another), a new memory, one forgotten, made public or shared. Checked on real
SQLite files, against the filter applied row by row in SQL and against an exact numpy ranking of the visible
rows, on a store answering from its HNSW index, with the keyword index built.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.models import Memory
from engramdb.storage import _sqlite_search
from engramdb.storage._ann_exact import distinct
from engramdb.storage._sqlite_schema import MIGRATIONS, migrate
from engramdb.storage._sqlite_sql import filter_sql
from engramdb.storage._tenant_rows import Scope, TenantRows, gather_rids, user_read_scope
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite

row = st.tuples(
    st.sampled_from(("alice", "bob")),
    st.sampled_from((None, "u1", "u2")),
    st.sampled_from(("private", "public")),
    st.booleans(),  # superseded
    st.sampled_from((None, "alice", "bob", "*")),  # shared with
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(row, min_size=1, max_size=40),
    users=st.sampled_from(((None, "u1"), ("u2",), (None,), ("u1", "u2"))),
    shared=st.booleans(),
    current=st.booleans(),
)
def test_a_user_scope_s_rows_are_exactly_the_filter_s(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, str | None, str, bool, str | None]],
    users: tuple[str | None, ...],
    shared: bool,
    current: bool,
) -> None:
    with open_sqlite(tmp_path_factory.mktemp("s") / "store") as store:
        items = [
            dataclasses.replace(
                memory(f"m {n}", agent=agent),
                user=user,
                visibility=visibility,
                valid_until=NOW + timedelta(days=1) if past else None,
            )
            for n, (agent, user, visibility, past, _) in enumerate(rows)
        ]
        store.memories.add(items, unit_vectors(len(items)), model_id=MODEL, actor="t")
        for m, (_, _, _, _, to) in zip(items, rows, strict=True):
            if to is not None and to != m.agent:
                store.shares.share([m.id], from_agent=m.agent, to_agent=to, at=NOW)
        flt = Filter(agent="alice", users=users, include_shared=shared, superseded=not current)
        f = filter_sql(flt)
        with store.search._reading() as conn:  # type: ignore[attr-defined]
            expected = sorted(r[0] for r in conn.execute(f"SELECT m.rid FROM memories m WHERE {f.where}", f.params))
            found = gather_rids(conn, Scope("alice", shared, users, current=current))
        assert found.tolist() == expected


_USERS = 10


def _ann_store(path: Path) -> tuple[Store, list[Memory], np.ndarray]:
    """Alice's 1,200 rows over ten users and none, Bob's 200; the HNSW index built and answering."""
    vecs = unit_vectors(1_400, seed=5)
    mems = [
        dataclasses.replace(memory(f"lake note {i}"), user=None if i % 11 == 0 else f"u{i % _USERS}")
        for i in range(1_200)
    ]
    mems += [dataclasses.replace(memory(f"lake bob {i}", agent="bob"), user=f"u{i % _USERS}") for i in range(200)]
    store = open_sqlite(path, ann_threshold=1_000)
    try:
        store.memories.add(mems, vecs, model_id=MODEL, actor="t")
        index = store.search._index  # type: ignore[attr-defined]
        store.search.vector_candidates(vecs[0], Filter(agent=None), limit=10)  # starts the build
        assert index.wait_for_index(timeout=120)
        store.search.vector_candidates(vecs[0], Filter(agent=None), limit=10)  # adopts it
        assert index.uses_ann
        store.search.keyword_index.min_memories = 0
        store.search.keyword_candidates(["lake"], Filter(agent="alice"), limit=1)  # starts the keyword index
        assert store.search.keyword_index.wait(timeout=60)
    except BaseException:
        store.close()
        raise
    return store, mems, vecs


def _exact(store: Store, flt: Filter, vectors: dict[str, np.ndarray], query: np.ndarray, limit: int) -> list[str]:
    """The visible rows' ids ranked by exact cosine (the answer of record)."""
    visible = [m.id for m in store.memories.list(flt, limit=10_000) if m.id in vectors]
    return sorted(visible, key=lambda i: -float(vectors[i] @ query))[:limit]


@pytest.mark.parametrize(
    "change",
    [
        "user_joins",
        "user_leaves",
        "supersede",
        "supersede_other_store",
        "supersede_sql",
        "new",
        "forget",
        "public",
        "share",
    ],
)
def test_a_user_scope_sees_every_change_at_once(tmp_path: Path, change: str) -> None:
    store, mems, vecs = _ann_store(tmp_path / "s")
    with store:
        vectors = {m.id: vecs[i] for i, m in enumerate(mems)}
        flt = Filter(agent="alice", users=(None, "u3"))
        query = vecs[3] + 0.1 * unit_vectors(1, seed=9)[0]  # near alice's row of user u3, equal to none
        query /= np.linalg.norm(query)
        for _ in range(2):  # the set kept, then used again, by both channels
            store.search.keyword_candidates(["lake"], flt, limit=10)
            assert [c.id for c in store.search.vector_candidates(query, flt, limit=50)] == _exact(
                store, flt, vectors, query, 50
            )
        mine = [c.id for c in store.search.vector_candidates(query, flt, limit=50)]
        other = next(m for m in mems if m.agent == "alice" and m.user == "u4")  # not u3's: outside the scope
        bobs = next(m for m in mems if m.agent == "bob" and m.user == "u3")
        joins: str | None = None
        leaves: str | None = None
        db = tmp_path / "s" / "engram.db"
        if change == "user_joins":  # users are not updatable through the library: another program's plain SQL
            with sqlite3.connect(db) as raw:
                raw.execute("UPDATE memories SET user_id = 'u3' WHERE id = ?", (other.id,))
            joins = other.id
        elif change == "user_leaves":
            with sqlite3.connect(db) as raw:
                raw.execute("UPDATE memories SET user_id = 'u7' WHERE id = ?", (mine[0],))
            leaves = mine[0]
        elif change == "supersede_other_store":  # another process's write through the library
            until = {"valid_until": NOW + timedelta(days=1)}
            with open_sqlite(tmp_path / "s", ann_threshold=1_000) as second:
                second.memories.update(mine[2], until, vector=None, model_id=MODEL, actor="t", at=NOW)
            leaves = mine[2]
        elif change == "supersede":
            until = {"valid_until": NOW + timedelta(days=1)}
            store.memories.update(mine[0], until, vector=None, model_id=MODEL, actor="t", at=NOW)
            leaves = mine[0]
        elif change == "supersede_sql":
            with sqlite3.connect(db) as raw:
                raw.execute("UPDATE memories SET valid_until = '2030-01-01T00:00:00.000000Z' WHERE id = ?", (mine[1],))
            leaves = mine[1]
        elif change == "new":
            new = dataclasses.replace(memory("lake new"), user="u3")
            store.memories.add([new], query.reshape(1, -1), model_id=MODEL, actor="t")
            vectors[new.id] = query
            joins = new.id
        elif change == "forget":
            store.memories.delete(mine[0], actor="t", at=NOW)
            leaves = mine[0]
        elif change == "public":
            store.memories.update(bobs.id, {"visibility": "public"}, vector=None, model_id=MODEL, actor="t", at=NOW)
            joins = bobs.id
        else:
            assert store.shares.share([bobs.id], from_agent="bob", to_agent="alice", at=NOW) == 1
            joins = bobs.id
        found = [c.id for c in store.search.vector_candidates(query, flt, limit=50)]
        assert found == _exact(store, flt, vectors, query, 50)
        words = [c.id for c in store.search.keyword_candidates(["lake"], flt, limit=2_000)]
        assert set(words) == {m.id for m in store.memories.list(flt, limit=10_000)}
        if leaves is not None:
            assert leaves not in found
            assert leaves not in words
        if joins is not None:
            assert joins in words
        if change == "new":
            assert found[0] == joins  # its vector is the query's


def test_the_scope_epoch_moves_with_a_row_s_user_thread_or_validity_only(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    migrate(raw, location="old", migrations=MIGRATIONS[:3])  # a store of the release before
    raw.execute("INSERT INTO memories (id, agent, kind, content, created_at, updated_at) VALUES ('m', 'a', 'k', 'x', "
                "'2024', '2024')")  # fmt: skip
    migrate(raw, location="old")

    def epoch() -> int:
        return int(raw.execute("SELECT value FROM meta WHERE key = 'scope_epoch'").fetchone()[0])

    assert epoch() == 0
    raw.execute("UPDATE memories SET access_count = 3, content = 'y'")
    assert epoch() == 0
    for column, value in (("user_id", "'u1'"), ("session_id", "'s1'"), ("valid_until", "'2025'"), ("user_id", "NULL")):
        before = epoch()
        raw.execute(f"UPDATE memories SET {column} = {value}")
        assert epoch() == before + 1
        raw.execute(f"UPDATE memories SET {column} = {value}")  # the same value again: nothing moved
        assert epoch() == before + 1
    raw.close()


@given(st.lists(st.integers(-5, 2**40), max_size=300))
def test_distinct_keys_are_numpy_s_unique(values: list[int]) -> None:
    keys = np.array(values, dtype=np.int64)
    assert distinct(keys).tolist() == np.unique(keys).tolist()


def _gathered(store: Store, ask: Callable[[], object]) -> int:
    """How many key sets ``ask`` (a search) gathers from SQL (gather_rids' one statement each)."""
    seen: list[str] = []
    gathering = "SELECT group_concat(rid) FROM (SELECT rid FROM memories WHERE agent = 'alice' AND user_id "
    with store.search._reading() as conn:  # type: ignore[attr-defined]
        conn.set_trace_callback(lambda sql: seen.append(sql) if sql.startswith(gathering) else None)
        try:
            ask()
        finally:
            conn.set_trace_callback(None)
    return len(seen)


@pytest.mark.parametrize("change", ["none", "new", "supersede", "public"])
def test_opening_gathers_each_user_s_keys_before_its_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    store, mems, vecs = _ann_store(tmp_path / "s")
    with store:  # others' rows the users' reads admit: public, shared, and a superseded value of alice's
        bobs = [m for m in mems if m.agent == "bob"]
        store.memories.update(bobs[0].id, {"visibility": "public"}, vector=None, model_id=MODEL, actor="t", at=NOW)
        assert store.shares.share([bobs[1].id, bobs[2].id], from_agent="bob", to_agent="alice", at=NOW) == 2
        until = {"valid_until": NOW + timedelta(days=1)}
        store.memories.update(mems[5].id, until, vector=None, model_id=MODEL, actor="t", at=NOW)
    monkeypatch.setattr(_sqlite_search, "KW_INDEX_MIN_MEMORIES", 0)  # the store is small: warm it as a large one
    with open_sqlite(tmp_path / "s", ann_threshold=1_000) as store:
        for thread in threading.enumerate():
            if thread.name == "engramdb-warm":
                thread.join(timeout=60)
        search = store.search
        assert isinstance(search, _sqlite_search.SQLiteSearch)
        kept = search._tenant_rows._sets
        with search._reading() as conn:  # each user's set is the one a search would gather
            for agent, user in [("alice", f"u{i}") for i in range(_USERS)] + [("bob", "u3")]:
                scope = user_read_scope(agent, user)
                assert kept[scope][1].tolist() == gather_rids(conn, scope).tolist()
            for user in ("u3", "u4"):  # and its plan, as the first search would count it
                plan = search._scope_rows.pop(("alice", (None, user)))
                assert plan[0] is search._broad_scope(conn, Filter(agent="alice", users=(None, user)))
        vectors = {m.id: vecs[i] for i, m in enumerate(mems)}
        flt = Filter(agent="alice", users=(None, "u3"))
        query = vecs[3] + 0.1 * unit_vectors(1, seed=9)[0]
        query /= np.linalg.norm(query)
        joins = leaves = None
        u3 = [m for m in mems if m.agent == "alice" and m.user == "u3" and m is not mems[5]]
        if change == "new":  # a write between open and search: the set kept at open is extended, not trusted
            new = dataclasses.replace(memory("lake new"), user="u3")
            store.memories.add([new], query.reshape(1, -1), model_id=MODEL, actor="t")
            vectors[new.id] = query
            joins = new.id
        elif change == "supersede":  # the scope epoch moved: gathered again
            store.memories.update(u3[0].id, until, vector=None, model_id=MODEL, actor="t", at=NOW)
            leaves = u3[0].id
        elif change == "public":
            bob3 = next(m for m in bobs if m.user == "u3" and m.id not in (bobs[0].id, bobs[1].id, bobs[2].id))
            store.memories.update(bob3.id, {"visibility": "public"}, vector=None, model_id=MODEL, actor="t", at=NOW)
            joins = bob3.id
        found: list[str] = []
        words: list[str] = []

        def first_search() -> None:
            words.extend(c.id for c in search.keyword_candidates(["lake"], flt, limit=2_000))
            found.extend(c.id for c in search.vector_candidates(query, flt, limit=50))

        assert _gathered(store, first_search) == (0 if change in ("none", "new") else 1)
        assert found == _exact(store, flt, vectors, query, 50)
        assert set(words) == {m.id for m in store.memories.list(flt, limit=10_000)}
        search._tenant_rows.clear()  # a fresh gathering answers the same
        assert [c.id for c in search.vector_candidates(query, flt, limit=50)] == found
        assert [c.id for c in search.keyword_candidates(["lake"], flt, limit=2_000)] == words
        if joins is not None:
            assert joins in words
        if leaves is not None:
            assert leaves not in words
            assert leaves not in found


def test_prefill_keeps_the_smallest_users_sets_within_the_bound_and_never_replaces_a_search_s(tmp_path: Path) -> None:
    with open_sqlite(tmp_path / "s") as store:
        sizes = {"big": 40, "mid": 20, "small": 10, "tiny": 5}
        items = [dataclasses.replace(memory(f"m {u} {i}"), user=u) for u, n in sizes.items() for i in range(n)]
        items += [memory(f"none {i}") for i in range(3)]  # of no user: in every user's read
        store.memories.add(items, unit_vectors(len(items)), model_id=MODEL, actor="t")
        db = str(tmp_path / "s" / "engram.db")
        rows = TenantRows(max_keys=3 + 5 + 3 + 10 + 3 + 20)  # room for tiny, small and mid, not big
        with sqlite3.connect(db, isolation_level=None) as conn:
            mine = np.array([1, 2], dtype=np.int64)
            rows._sets[user_read_scope("alice", "small")] = ((), mine)  # kept by a search meanwhile
            rows._keys = 2
            found = rows.prefill(conn, bound=0, user_bound=1_000)
            assert found.agents == {"alice": 78}
            assert found.user_scope_rows("alice", "mid") == 23
            kept = {scope.users: keys for scope, (_, keys) in rows._sets.items()}
            assert set(kept) == {(None, "tiny"), (None, "small"), (None, "mid")}
            assert kept[(None, "small")] is mine
            for user in ("tiny", "mid"):
                assert kept[(None, user)].tolist() == gather_rids(conn, user_read_scope("alice", user)).tolist()
            assert TenantRows().prefill(conn, bound=0, user_bound=20).users[("alice", "big")] == 40

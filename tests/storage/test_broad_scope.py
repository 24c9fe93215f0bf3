"""A user scope holding most of an agent's rows (``_broad_scope``) answers exactly as the gathered-keys path.

One user owning nearly all of an agent's memories made a scoped read gather every key of the scope from SQL
(~100k at 100k memories); such a scope now filters the head of the agent's rows instead. On a real SQLite
file both plans are run on the same store and must agree (same ids, same order, same scores), including
when the head holds too few of the user's rows and the read falls back to gathering the keys.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from storage_helpers import DIM, MODEL, memory, unit_vectors

from engramdb.recall import read_filter
from engramdb.storage import _sqlite_search
from engramdb.storage.base import Candidate, Filter, Store
from engramdb.storage.sqlite import open_sqlite

WORDS = ("lake", "guitar", "pottery", "camping", "school", "garden", "parade", "recipe")


def _store(location: Path) -> tuple[Store, np.ndarray]:
    """Alice's 400 rows: 300 of user u1, 60 of u2 (their vectors near the returned query), 40 of no user."""
    rng = np.random.default_rng(3)
    query = unit_vectors(1, seed=42)[0]
    users = ["u1"] * 300 + ["u2"] * 60 + [None] * 40
    vecs = unit_vectors(len(users), seed=7)
    near = query + 0.05 * rng.normal(size=(60, DIM)).astype(np.float32)
    vecs[300:360] = near / np.linalg.norm(near, axis=1, keepdims=True)
    items = [
        dataclasses.replace(
            memory(" ".join(rng.choice(WORDS, size=4)), agent="alice", kind="episode" if i % 4 else "knowledge"),
            user=user,
            session=f"s{i % 3}",
        )
        for i, user in enumerate(users)
    ]
    store = open_sqlite(location)
    store.memories.add(items, vecs, model_id=MODEL, actor="test")
    store.memories.add([memory("lake guitar", agent="bob", visibility="public")], vecs[:1], model_id=MODEL, actor="t")
    store.search.keyword_index.min_memories = 0
    return store, query


def _both(store: Store, monkeypatch: pytest.MonkeyPatch, run: object) -> tuple[list[Candidate], list[Candidate], bool]:
    """``run`` under the broad plan, then the user-superset plan, and under the gathered-keys plan (the reference);
    the first two must agree with the last (checked here); returns the broad answer, the reference, and whether
    the first was broad."""
    search = store.search
    monkeypatch.setattr(_sqlite_search, "_BROAD_SCOPE_ROWS", 100)  # u1's 300 of alice's 400 rows: a broad scope
    search._scope_rows.clear()  # type: ignore[attr-defined]
    broad = run()  # type: ignore[operator]
    was_broad = any(known for known, _ in search._scope_rows.values())  # type: ignore[attr-defined]
    monkeypatch.setattr(_sqlite_search, "_BROAD_SCOPE_ROWS", 1_000_000)
    search._scope_rows.clear()  # type: ignore[attr-defined]
    superset = run()  # type: ignore[operator]
    monkeypatch.setattr(_sqlite_search.SQLiteSearch, "_user_scope", staticmethod(lambda flt: False))
    gathered = run()  # type: ignore[operator]
    monkeypatch.undo()
    _same(superset, gathered)
    return broad, gathered, was_broad


def _same(a: list[Candidate], b: list[Candidate]) -> None:
    assert [c.id for c in a] == [c.id for c in b]
    np.testing.assert_allclose([c.score for c in a], [c.score for c in b], rtol=1e-6)


@pytest.mark.parametrize("limit", [1, 5, 20, 100, 500])
@pytest.mark.parametrize(
    "flt",
    [
        read_filter("alice", None, None, user="u1"),
        read_filter("alice", "episode", None, user="u1"),
        Filter(agent="alice", users=("u1",)),
        Filter(agent="alice", users=("u1",), include_shared=False),
    ],
    ids=["user", "user-kind", "user-only", "not-shared"],
)
@pytest.mark.parametrize("huge", [False, True], ids=["kept-keys", "head-filtered"])
def test_a_broad_scope_gives_the_vector_answer_of_the_gathered_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flt: Filter, limit: int, huge: bool
) -> None:
    store, query = _store(tmp_path / "s")
    with store:
        # Below _KEPT_SCOPE_ROWS a broad scope's keys are kept and trusted; at it or past it (u1's 300 rows here,
        # with the bound at 100) the head of alice's rows is filtered in SQL instead.
        kept = 100 if huge else _sqlite_search._KEPT_SCOPE_ROWS
        monkeypatch.setattr(_sqlite_search, "_KEPT_SCOPE_ROWS", kept)
        # The query sits among u2's rows: the head of alice's rows holds few of u1's, so small limits
        # are answered from the head and larger ones fall back to the keys.
        broad, narrow, was_broad = _both(
            store, monkeypatch, lambda: store.search.vector_candidates(query, flt, limit=limit)
        )
        assert was_broad
        _same(broad, narrow)
        assert narrow  # the scope is not empty
        users = {m.id: m.user for m in store.memories.get_many([c.id for c in broad]).values()}
        assert set(users.values()) <= {"u1", None}


@pytest.mark.parametrize("terms", [["lake"], ["guitar", "pottery"], ["parade", "recipe", "school"]])
def test_a_broad_scope_gives_the_keyword_answer_of_the_gathered_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, terms: list[str]
) -> None:
    store, _ = _store(tmp_path / "s")
    with store:
        flt = read_filter("alice", None, None, user="u1")
        store.search.keyword_candidates(terms, flt, limit=5)
        assert store.search.keyword_index.wait(timeout=30)
        for limit in (3, 10, 50):
            broad, narrow, was_broad = _both(
                store, monkeypatch, lambda k=limit: store.search.keyword_candidates(terms, flt, limit=k)
            )
            assert was_broad
            _same(broad, narrow)


def test_a_small_share_of_the_agents_rows_is_not_broad(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = _store(tmp_path / "s")
    with store, store.search._reading() as conn:  # type: ignore[attr-defined]
        monkeypatch.setattr(_sqlite_search, "_BROAD_SCOPE_ROWS", 50)
        search = store.search
        assert search._broad_scope(conn, Filter(agent="alice", users=("u1",)))  # type: ignore[attr-defined]
        # u2 holds 60 of alice's 400 rows: a head of alice's rows would seldom hold enough of them.
        assert not search._broad_scope(conn, Filter(agent="alice", users=("u2",)))  # type: ignore[attr-defined]
        assert not search._broad_scope(conn, Filter(agent="alice", users=("u1",), sessions=("s1",)))  # type: ignore[attr-defined]


def test_a_small_share_is_not_broad_however_many_rows_it_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One user of 50 at 1M holds 20,000 of the agent's 1M rows: many rows, a small share. A head of the agent's rows
    # would seldom hold enough of them, so its keys are kept instead; only past _KEPT_SCOPE_ROWS is any scope broad.
    store, _ = _store(tmp_path / "s")
    with store, store.search._reading() as conn:  # type: ignore[attr-defined]
        monkeypatch.setattr(_sqlite_search, "_BROAD_SCOPE_ROWS", 10)
        monkeypatch.setattr(_sqlite_search, "_SELECTIVE_ROWS", 50)  # u2's 60 rows are "many" for a tenant
        search = store.search
        assert not search._broad_scope(conn, Filter(agent="alice", users=("u2",)))  # type: ignore[attr-defined]
        monkeypatch.setattr(_sqlite_search, "_KEPT_SCOPE_ROWS", 50)
        search._scope_rows.clear()  # type: ignore[attr-defined]
        assert search._broad_scope(conn, Filter(agent="alice", users=("u2",)))  # type: ignore[attr-defined]

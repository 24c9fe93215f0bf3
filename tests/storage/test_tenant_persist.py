"""The tenants' key sets saved beside the database: a reopened store has them at once and answers as before.

Real SQLite files throughout. The file written after the open's prefill (``engram.db.tenants``) is read back at the
next open instead of gathering the keys again; it is only a head start: a store reopened answers exactly as one
opened without it, also when writes happened between (a stale file is left for a prefill, which writes it anew;
new memories alone are added to the saved sets); a damaged, truncated, foreign or missing file is gathered again.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from storage_helpers import NOW, add, memory
from test_first_search import _ask, _join_warm
from test_keyword_speedpath import _texts

from engramdb.storage import _sqlite_search
from engramdb.storage._kw_index import KeywordIndex
from engramdb.storage._sqlite_files import connect_read_only
from engramdb.storage._tenant_persist import load_tenants, save_tenants, tenants_path
from engramdb.storage._tenant_rows import Prefilled, Scope, TenantRows, gather_rids, user_read_scope
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite

Answers = list[list[tuple[str, float]]]


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Small stores warmed as large ones: the tenants' prefill (or its saved file) runs at open."""
    monkeypatch.setattr(_sqlite_search, "KW_INDEX_MIN_MEMORIES", 0)
    yield
    _join_warm()


def _build(location: Path, *, rows: int, agents: int, users: int, seed: int) -> None:
    with open_sqlite(location, warm=False) as store:
        mems = [
            memory(t, agent=f"t{i % agents}", user=None if not users or i % 3 == 0 else f"u{i % users}")
            for i, t in enumerate(_texts(rows, seed=seed))
        ]
        add(store, mems, seed=seed)


def _filters(agents: int, users: int) -> list[Filter]:
    out = [Filter(agent=f"t{a}") for a in range(min(agents, 3))]
    out += [Filter(agent=f"t{a}", users=(None, f"u{u}")) for a in range(min(agents, 2)) for u in range(users)]
    return out


def _warm_open(location: Path) -> tuple[Store, dict[str, float]]:
    store = open_sqlite(location)
    _join_warm()
    return store, store.search.warmed  # type: ignore[attr-defined]


def _sets(store: Store) -> TenantRows:
    search = store.search
    assert isinstance(search, _sqlite_search.SQLiteSearch)
    return search._tenant_rows


def _assert_sets_exact(store: Store, location: Path) -> None:
    """Every kept set, as a search would read it now, holds exactly the rows a fresh gathering finds."""
    rows = _sets(store)
    conn = connect_read_only(str(location / "engram.db"))
    try:
        for scope in list(rows._sets):
            kept, _ = rows.get(conn, scope)
            assert np.array_equal(np.unique(kept), np.unique(gather_rids(conn, scope))), scope
    finally:
        conn.close()


def _write(location: Path, change: str, seed: int) -> None:
    """One way the store changes between two opens (by a store that does not warm: no file is written)."""
    with open_sqlite(location, warm=False) as store:
        some = [m.id for m in store.memories.list(Filter(agent="t0"), limit=5)]
        if change == "add":
            add(store, [memory("quokka caroline lake", agent="t0", user="u0"), memory("quokka", agent="t1")], seed=seed)
        elif change == "public" and some:
            store.memories.update(some[0], {"visibility": "public"}, vector=None, model_id="m", actor="t", at=NOW)
        elif change == "share" and some:
            store.shares.share(some[:2], from_agent="t0", to_agent="t1", at=NOW)
        elif change == "forget" and some:
            store.memories.delete(some[-1], actor="t", at=NOW)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(min_value=1, max_value=250),
    agents=st.integers(min_value=1, max_value=6),
    users=st.integers(min_value=0, max_value=3),
    change=st.sampled_from(["", "add", "public", "share", "forget"]),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_a_reopened_store_answers_exactly_as_before_closing_also_after_writes_between(
    large: None, rows: int, agents: int, users: int, change: str, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        location = Path(tmp) / "s"
        _build(location, rows=rows, agents=agents, users=users, seed=seed)
        filters = _filters(agents, users)
        store, warmed = _warm_open(location)  # the first open prefills and saves
        with store:
            assert "restored" not in warmed
            before = _ask(store, filters, seed=seed)
        assert tenants_path(str(location / "engram.db")).exists()
        _write(location, change, seed)
        store, warmed = _warm_open(location)
        with store:
            # Unchanged, or new memories only: the saved sets are used (and the new rows added to them).
            assert ("restored" in warmed) == (change in ("", "add"))
            _assert_sets_exact(store, location)
            again = _ask(store, filters, seed=seed)
        with open_sqlite(location, warm=False) as store:
            cold = _ask(store, filters, seed=seed)
        assert again == cold
        if not change:
            assert again == before


def _damage(path: Path, how: str, other: Path) -> None:
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "flipped":
        data = bytearray(path.read_bytes())
        (size,) = struct.unpack_from("<I", data, 12)  # after the magic and the format: the header's length
        layout = json.loads(data[20 : 20 + size])["sections"]
        offset, count, _ = max(layout.values(), key=lambda place: place[1])  # the largest key section
        assert count
        data[20 + size + (-(20 + size) % 64) + offset] ^= 0x5A  # a key: the checksum catches it
        path.write_bytes(bytes(data))
    elif how == "foreign":
        shutil.copyfile(tenants_path(str(other / "engram.db")), path)
    else:  # stale: a memory moved to public since the file was written
        _write(path.parent, "public", 1)


@pytest.mark.parametrize("how", ["missing", "truncated", "flipped", "foreign", "stale"])
def test_a_missing_damaged_foreign_or_stale_file_is_gathered_again_and_written_anew(
    tmp_path: Path, large: None, how: str
) -> None:
    location, other = tmp_path / "s", tmp_path / "other"
    _build(location, rows=120, agents=4, users=2, seed=3)
    _build(other, rows=120, agents=4, users=2, seed=4)  # the same shape and counters, other memories
    for where in (location, other):
        store, _ = _warm_open(where)
        store.close()
    path = tenants_path(str(location / "engram.db"))
    _damage(path, how, other)
    store, warmed = _warm_open(location)
    with store:
        assert "restored" not in warmed
        assert "tenants" in warmed
        _assert_sets_exact(store, location)
        answers = _ask(store, _filters(4, 2), seed=3)
    with open_sqlite(location, warm=False) as store:
        assert _ask(store, _filters(4, 2), seed=3) == answers
    saved = load_tenants(path)
    assert saved is not None  # written anew by the prefill
    conn = connect_read_only(str(location / "engram.db"))
    try:
        assert TenantRows().restore(conn, saved) is not None
    finally:
        conn.close()
    store, warmed = _warm_open(location)
    store.close()
    assert "restored" in warmed


_keys = st.lists(st.integers(min_value=0, max_value=(1 << 32) - 1), max_size=40).map(
    lambda v: np.array(v, dtype=np.int64)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sets=st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, "u0", "u1", "ü 2"]), _keys), max_size=8),
    token=st.tuples(st.integers(0, 1 << 40), st.one_of(st.none(), st.integers(), st.text(max_size=5)), st.integers()),
)
def test_saved_sets_and_counts_come_back_exactly(
    tmp_path_factory: pytest.TempPathFactory,
    sets: list[tuple[int, str | None, np.ndarray]],
    token: tuple[int, object, int],
) -> None:
    kept: dict[Scope, np.ndarray] = {}
    for agent, user, rids in sets:
        # An agent's set need not be ascending (its own rows, then others' public and shared ones); a user's is.
        scope = Scope(f"a{agent}", shared=True) if user is None else user_read_scope(f"a{agent}", user)
        kept[scope] = rids if user is None else np.unique(rids)
    users = {(f"a{a}", u): 7 * a + len(u or "") for a, u, _ in sets}
    agents: dict[str, int] = {}
    for (agent, _), count in users.items():
        agents[agent] = agents.get(agent, 0) + count
    found = Prefilled(agents=agents, users=users, token=(*token, "4"), anchor="m-1", sets=tuple(kept.items()))
    path = tmp_path_factory.mktemp("rt") / "engram.db.tenants"
    save_tenants(path, found)
    back = load_tenants(path)
    assert back is not None
    assert (back.token, back.anchor, back.agents, back.users) == (found.token, found.anchor, agents, users)
    assert [s for s, _ in back.sets] == list(kept)
    for (_, a), (_, b) in zip(back.sets, kept.items(), strict=True):
        assert a.dtype == np.int64
        assert a.tolist() == b.tolist()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_loading_any_bytes_gives_sets_or_none(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "engram.db.tenants"
        sets = ((Scope("a", shared=True), np.array([5, 3, 9])), (user_read_scope("a", "u"), np.array([1, 2, 300])))
        save_tenants(
            path, Prefilled(agents={"a": 6}, users={("a", "u"): 2, ("a", None): 4}, token=(9, 0, 0, 0), sets=sets)
        )
        raw = bytearray(path.read_bytes())
        how = data.draw(st.sampled_from(["flip", "cut", "random"]))
        if how == "flip":
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
        else:
            raw = bytearray(data.draw(st.binary(max_size=400)))
        path.write_bytes(bytes(raw))
        back = load_tenants(path)  # never raises
        if back is not None:
            assert len(back.sets) == 2


def test_a_saved_term_is_counted_as_its_decoded_keys_also_after_writes(tmp_path: Path) -> None:
    """A query's term counts (the postings budget's input) come from the saved table without decoding; they equal
    the decoded keys' count whatever changed since the file was written."""
    location = tmp_path / "s"
    with open_sqlite(location) as store:
        store.search.keyword_index.min_memories = 0
        add(store, [memory(t, agent="t0") for t in _texts(300, seed=2)], seed=2)
        store.search.keyword_candidates(["caroline"], Filter(agent="t0"), limit=5)
        assert store.search.keyword_index.wait(30)
    for step in ("loaded", "added", "changed"):
        with open_sqlite(location) as store:
            index = store.search.keyword_index
            index.min_memories = 0
            if step == "added":
                add(store, [memory("caroline quokka lake lake", agent="t0")], seed=9)
            elif step == "changed":
                some = store.search.keyword_candidates(["caroline"], Filter(agent="t0"), limit=1)[0].id
                store.memories.update(some, {"content": "wombat lake"}, vector=None, model_id="m", actor="t", at=NOW)
            assert store.search.keyword_candidates(["lake"], Filter(agent="t0"), limit=5) is not None
            postings = _postings(index, location)
            names = {*postings.terms, *postings.delta_terms}
            assert names
            for term in names:
                count = KeywordIndex._term_count(postings, term)
                assert count == KeywordIndex._term_postings(postings, term)[0].size, term


def _postings(index: KeywordIndex, location: Path) -> object:
    conn = sqlite3.connect(location / "engram.db", isolation_level=None)
    try:
        found = index._current(conn)
    finally:
        conn.close()
    assert found is not None
    return found


def test_forgetting_deletes_the_saved_sets_at_once(tmp_path: Path, large: None) -> None:
    """The file names agents and users: a forget removes it (as the saved postings), the next open writes it anew."""
    location = tmp_path / "s"
    _build(location, rows=60, agents=3, users=2, seed=5)
    path = tenants_path(str(location / "engram.db"))
    store, _ = _warm_open(location)
    with store:
        assert path.exists()
        some = store.memories.list(Filter(agent="t1"), limit=1)[0].id
        store.memories.delete(some, actor="t", at=NOW)
        assert not path.exists()
    store, warmed = _warm_open(location)
    store.close()
    assert "restored" not in warmed
    assert path.exists()

"""The keyword channel's cached-postings index: the same ranking as FTS5's bm25(), kept in step with the store.

Every check compares the index path with the plain FTS5 path on the same real SQLite file:
same memories, same order, same scores, after this process's writes, another process's
writes, and a change made behind the store's back.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from storage_helpers import MODEL, NOW, add, memory

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage import _sqlite_search
from engramdb.storage.base import Candidate, Filter, Store
from engramdb.storage.sqlite import open_sqlite

_WORDS = (  # noqa: SIM905 - a word list reads best as words
    "caroline melanie support group painting camping lake running runs ran runner friends family "
    "adoption counselor career music guitar pottery beach sunrise hiking mountains parade pride "
    "book reading library volunteer school teacher children dog cat garden flowers recipe baking "
    "concert festival travel museum art class workshop photography birthday wedding trip road"
).split()

_QUERIES = (
    ["caroline", "support", "group"],
    ["running", "lake", "sunrise"],
    ["melanie", "pottery", "class", "children"],
    ["adoption", "counselor", "career"],
    ["guitar"],
    ["runs", "ran", "dog", "garden", "recipe"],
    ["nothingmatches", "pride", "parade"],
    ["nothingmatches"],
)


def _texts(n: int, seed: int = 0) -> list[str]:
    """Sentences of Zipf-distributed words: common and rare terms, repeats within a memory."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.3, size=(n, 12)) - 1, len(_WORDS) - 1)
    return [" ".join(_WORDS[r] for r in row[: 4 + i % 8]) for i, row in enumerate(ranks)]


def _store(location: Path, n: int = 600) -> Store:
    store = open_sqlite(location)
    items = [
        memory(t, agent="alice" if i % 5 else "bob", tags=("trip",) if i % 7 == 0 else ())
        for i, t in enumerate(_texts(n))
    ]
    add(store, items)
    store.search.keyword_index.min_memories = 0  # this small store uses the index too
    return store


def _both(store: Store, terms: Sequence[str], flt: Filter, limit: int = 20) -> tuple[list[Candidate], list[Candidate]]:
    """The FTS5 path's candidates and the index path's (waiting for the index to be built)."""
    index = store.search.keyword_index
    minimum = index.min_memories
    index.min_memories = None
    try:
        plain = store.search.keyword_candidates(terms, flt, limit=limit)
    finally:
        index.min_memories = minimum
    store.search.keyword_candidates(terms, flt, limit=limit)
    assert index.wait(timeout=30)
    return plain, store.search.keyword_candidates(terms, flt, limit=limit)


def _assert_same(plain: list[Candidate], fast: list[Candidate]) -> None:
    assert [c.id for c in fast] == [c.id for c in plain]
    np.testing.assert_allclose([c.score for c in fast], [c.score for c in plain], rtol=1e-12)


@pytest.mark.parametrize(("few_rows", "share"), [(20_000, 0.1), (1, 0.0)], ids=["tenant-plan", "global-head"])
@pytest.mark.parametrize("flt", [Filter(agent=None), Filter(agent="alice"), Filter(agent="bob", tags=("trip",))])
def test_the_index_ranks_exactly_as_fts5(
    tmp_path: Path, flt: Filter, few_rows: int, share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both keyword plans: among the agent's own rows (it owns few) and the global head then the filter.
    monkeypatch.setattr(_sqlite_search, "_SELECTIVE_ROWS", few_rows)
    monkeypatch.setattr(_sqlite_search, "_SELECTIVE_SHARE", share)
    with _store(tmp_path / "s") as store:
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, flt))
        assert store.search.keyword_index.ready()


def test_a_minority_tenant_is_ranked_among_its_own_rows_at_any_store_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither agent owns "few" rows by count; bob (a fifth of the store) is few by share, alice (the rest) is not.
    monkeypatch.setattr(_sqlite_search, "_SELECTIVE_ROWS", 50)
    monkeypatch.setattr(_sqlite_search, "_SELECTIVE_SHARE", 0.25)
    with _store(tmp_path / "s") as store:
        search = store.search
        assert isinstance(search, _sqlite_search.SQLiteSearch)
        with search._reading() as conn:
            assert search._few_rows(conn, "bob")
            assert not search._few_rows(conn, "alice")
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, Filter(agent="bob")))


def test_the_index_follows_this_process_writes_without_a_rebuild(tmp_path: Path) -> None:
    with _store(tmp_path / "s") as store:
        flt = Filter(agent="alice")
        _both(store, ["caroline"], flt)
        built = store.search.keyword_index._postings  # the same build, caught up
        fresh = [memory("quokka caroline painting at the lake", agent="alice") for _ in range(3)]
        add(store, fresh, seed=1)
        victim = store.search.keyword_candidates(["caroline"], flt, limit=5)[0].id
        store.memories.update(
            victim, {"content": "nothing about her now"}, vector=None, model_id=MODEL, actor="t", at=NOW
        )
        gone = store.search.keyword_candidates(["guitar"], flt, limit=5)[0].id
        store.memories.delete(gone, actor="t", at=NOW)
        for terms in _QUERIES:
            plain, fast = _both(store, terms, flt)
            _assert_same(plain, fast)
            assert victim not in {c.id for c in fast} or "caroline" not in terms
            assert gone not in {c.id for c in fast}
        assert {c.id for c in _both(store, ["quokka"], flt)[1]} == {m.id for m in fresh}
        assert store.search.keyword_index._postings is built


def test_the_index_follows_another_process_writes(tmp_path: Path) -> None:
    location = tmp_path / "s"
    with _store(location) as store:
        flt = Filter(agent=None)
        _both(store, ["caroline"], flt)
        target = store.search.keyword_candidates(["guitar"], flt, limit=1)[0].id
        script = textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from storage_helpers import MODEL, NOW, add, memory
            from engramdb.storage.sqlite import open_sqlite
            with open_sqlite({str(location)!r}) as other:
                add(other, [memory("volcano guitar volcano", agent="carol") for _ in range(4)], seed=7)
                other.memories.update({target!r}, {{"content": "volcano only"}}, vector=None, model_id=MODEL,
                                      actor="other", at=NOW)
            """
        )
        subprocess.run([sys.executable, "-c", script], check=True)
        for terms in (["guitar"], ["volcano", "guitar"], *_QUERIES):
            _assert_same(*_both(store, terms, flt))
        volcano = store.search.keyword_candidates(["volcano"], flt, limit=10)
        assert len(volcano) == 5
        assert target in {c.id for c in volcano}


def test_a_change_behind_the_store_s_back_forces_a_rebuild(tmp_path: Path) -> None:
    with _store(tmp_path / "s") as store:
        flt = Filter(agent=None)
        _both(store, ["caroline"], flt)
        # Another program's raw SQL: no history row, only FTS5's own totals tell.
        raw = sqlite3.connect(tmp_path / "s" / "engram.db")
        with raw:
            raw.execute("UPDATE memories SET content = 'zebra zebra zebra' WHERE rid = 1")
        raw.close()
        for terms in (["zebra"], *_QUERIES):
            _assert_same(*_both(store, terms, flt))
        assert len(store.search.keyword_candidates(["zebra"], flt, limit=5)) == 1


def test_inside_a_write_the_keyword_channel_uses_fts5(tmp_path: Path) -> None:
    with _store(tmp_path / "s") as store:
        flt = Filter(agent=None)
        _both(store, ["caroline"], flt)
        with store.atomic():
            add(store, [memory("quokka", agent="alice")], seed=3)
            inside = store.search.keyword_candidates(["quokka"], flt, limit=5)
        assert len(inside) == 1  # the open write's own row, which the index must not follow
        assert len(store.search.keyword_candidates(["quokka"], flt, limit=5)) == 1


def test_an_in_memory_store_builds_in_place(tmp_path: Path) -> None:
    del tmp_path
    store = open_sqlite(":memory:")
    with store:
        add(store, [memory(t) for t in _texts(200)])
        store.search.keyword_index.min_memories = 0
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, Filter(agent="alice")))


def test_closing_during_a_build_stops_it(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", n=3000)
    store.search.keyword_candidates(["caroline"], Filter(agent=None), limit=5)
    store.close()  # interrupts and joins the builder thread
    assert not store.search.keyword_index.ready()


def test_a_grown_delta_is_replaced_by_a_fresh_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engramdb.storage._kw_index._MAX_CATCH_UP", 5)
    with _store(tmp_path / "s") as store:
        flt = Filter(agent="alice")
        _both(store, ["caroline"], flt)
        first = store.search.keyword_index._postings  # replaced once the delta outgrows it
        for batch in range(16):
            add(store, [memory(t, agent="alice") for t in _texts(10, seed=batch + 1)], seed=batch + 1)
            _assert_same(*_both(store, ["melanie", "lake"], flt))
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, flt))
        assert store.search.keyword_index._postings is not first


def test_engram_search_through_the_index_counts_and_audits_once(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engramdb.storage._kw_index.KW_INDEX_MIN_MEMORIES", 0)
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        mem.remember_many([{"content": t, "agent": "alice"} for t in _texts(80)])
        mem.flush()
        search = getattr(mem.store.search, "_inner", mem.store.search)
        search.keyword_candidates(["caroline"], Filter(agent="alice"), limit=5)
        assert search.keyword_index.wait(timeout=30)
        first = mem.search("caroline at the lake", agent="alice", limit=5)
        again = mem.search("caroline at the lake", agent="alice", limit=5)
        assert [h.memory.id for h in again] == [h.memory.id for h in first]
        assert [h.memory.access_count for h in first] == [1] * len(first)
        assert [h.memory.access_count for h in again] == [2] * len(again)
        assert mem.get(first[0].memory.id, agent="alice").access_count == 2
        searches = mem.audit.log(agent="alice", action="search")
        assert len(searches) == 2
        assert searches[0].detail["ids"] == [h.memory.id for h in again]


@pytest.mark.parametrize("budget", [1, 40, 150, None])
def test_the_postings_budget_keeps_the_same_terms_on_both_paths(tmp_path: Path, budget: int | None) -> None:
    flt = Filter(agent=None)
    with _store(tmp_path / "s") as store:
        store.search.postings_budget = budget
        # Two terms of one stem ("running", "runs") count twice on both paths.
        for terms in (*_QUERIES, ["running", "runs", "lake", "caroline"]):
            _assert_same(*_both(store, terms, flt))


@pytest.mark.parametrize(
    "flt",
    [
        Filter(agent="t3"),
        Filter(agent="t3", include_shared=False),
        Filter(agent="t3", kinds=("episode",)),
        Filter(agent="t5", tags=("trip",)),
    ],
)
def test_one_tenant_among_many_ranks_among_its_rows_as_fts5_would(tmp_path: Path, flt: Filter) -> None:
    """Memories over 40 agents (some public, some shared): the global head rarely holds enough of the asking
    agent's rows, so the index ranks among the rows it may read; the same answer as FTS5, and FTS5 never ranks."""
    with open_sqlite(tmp_path / "s") as store:
        items = [
            memory(
                t,
                agent=f"t{i % 40}",
                kind="episode" if i % 3 else "knowledge",
                tags=("trip",) if i % 7 == 0 else (),
                visibility="public" if i % 50 == 1 else "private",
            )
            for i, t in enumerate(_texts(1200))
        ]
        add(store, items)
        shared = [m.id for m in items if m.agent == "t9"][:15]
        assert store.shares.share(shared, from_agent="t9", to_agent="t3", at=NOW) == 15
        store.search.keyword_index.min_memories = 0
        ranked_by_fts5: list[str] = []
        answered = 0
        for terms in _QUERIES:
            plain, fast = _both(store, terms, flt)
            with store.search._reading() as conn:  # the fast path's own SQL, watched
                conn.set_trace_callback(lambda sql: ranked_by_fts5.append(sql) if "bm25(" in sql else None)
                try:
                    again = store.search.keyword_candidates(terms, flt, limit=20)
                finally:
                    conn.set_trace_callback(None)
            _assert_same(plain, fast)
            _assert_same(plain, again)
            answered += bool(plain)
        assert answered >= 5
        assert ranked_by_fts5 == []

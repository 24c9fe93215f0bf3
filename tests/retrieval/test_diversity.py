"""Session diversity (pure) and inside a real search: one conversation cannot take every place of a list."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fused_strategies import fused_lists, session_maps
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.retrieval.diversity import diversify_sessions
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.sessions import asks_across_sessions
from engramdb.storage.base import Filter

repeats = st.floats(min_value=0, max_value=1)
frees = st.integers(min_value=1, max_value=4)


@given(fused_lists, session_maps, repeats, frees)
def test_keeps_candidates_never_raises_and_stays_ordered(fused, sessions, repeat, free):
    out = diversify_sessions(fused, sessions, repeat=repeat, free=free)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    before = {f.id: f.relevance for f in fused}
    assert all(0.0 <= f.relevance <= before[f.id] for f in out)
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)


@given(fused_lists, session_maps, repeats, frees)
def test_each_sessions_first_turns_keep_their_relevance_and_their_order(fused, sessions, repeat, free):
    # The order of sessions (by their best turn) is unchanged: only a session's later turns give way.
    out = diversify_sessions(fused, sessions, repeat=repeat, free=free)
    relevance = {f.id: f.relevance for f in out}
    seen: dict[str, int] = {}
    firsts = []
    for f in fused:
        key = sessions.get(f.id)
        n = seen.get(key, 0) if key is not None else 0
        if key is not None:
            seen[key] = n + 1
        if n < free:
            assert relevance[f.id] == f.relevance
        if n == 0:
            firsts.append(f.id)
    assert [f.id for f in out if f.id in firsts] == firsts


@given(fused_lists, session_maps, frees)
def test_repeat_one_and_notes_without_sessions_are_the_identity(fused, sessions, free):
    assert diversify_sessions(fused, sessions, repeat=1.0, free=free) == list(fused)
    assert diversify_sessions(fused, {}, repeat=0.5, free=free) == list(fused)


def test_a_long_matching_session_gives_way_to_another_sessions_turn():
    fused = [Fused(f"long-{i}", 0.9 - 0.02 * i, None, None) for i in range(5)] + [Fused("other", 0.8, None, None)]
    sessions = {**{f"long-{i}": "long" for i in range(5)}, "other": "s2"}
    before = [f.id for f in fused][:3]
    after = [f.id for f in diversify_sessions(fused, sessions, repeat=0.8, free=2)][:3]
    assert "other" not in before
    assert after == ["long-0", "long-1", "other"]


@pytest.mark.parametrize(("repeat", "free"), [(-0.1, 2), (1.5, 2), (0.8, 0)])
def test_out_of_range_settings_are_refused(repeat, free):
    with pytest.raises(ValueError, match=r"repeat|free"):
        diversify_sessions([Fused("a", 1.0, None, None)], {}, repeat=repeat, free=free)


@pytest.mark.parametrize(
    ("query", "across"),
    [
        ("How many hours have I spent playing games in total?", True),
        ("How many different doctors did I visit?", True),
        ("What is the total number of siblings I have?", True),
        ("How much did I spend on all the concert tickets?", True),
        ("Which book did I finish a week ago?", False),
        ("Where do I currently keep my old sneakers?", False),
        ("When did Caroline go to the LGBTQ support group?", False),
    ],
)
def test_questions_that_gather_facts_across_sessions(query, across):
    assert asks_across_sessions(query) is across


GAMES = [
    "user: I keep a spreadsheet of every game session, can you add a totals row?",
    "user: Now add a column with the total hours per game for the spreadsheet.",
    "user: Make the totals row bold and sum the hours in the spreadsheet.",
    "user: Sort the spreadsheet by total hours played.",
    "user: How many hours in total does the spreadsheet show now?",
]
OTHERS = {
    "celeste": "user: I finished Celeste on my Switch, it took me about 10 hours.",
    "sister": "user: My sister plays games too.",
}


def _hits(mem: Engram, query: str, *, repeat: float, gated: bool = True) -> list[tuple[str | None, float]]:
    searcher = HybridSearcher(mem.store, mem.embedder)
    searcher.session_repeat = repeat
    # Two free turns, so that a list of three shows the step.
    searcher.session_free = 2
    searcher.session_gated = gated
    try:
        hits = searcher.search(query, Filter(agent="a"), limit=3, now=datetime.now(UTC), touch=False)
    finally:
        searcher.close()
    # Rounded: the recency boost moves with the clock between two searches.
    return [(h.memory.session, round(h.score, 4)) for h in hits]


def _sessions(mem: Engram, query: str, *, repeat: float) -> list[str | None]:
    return [s for s, _ in _hits(mem, query, repeat=repeat)]


def test_in_a_real_search_a_question_across_sessions_sees_more_than_one_session(mem: Engram) -> None:
    mem.remember_many(
        [{"content": t, "agent": "a", "kind": "conversation", "session": "sheet"} for t in GAMES]
        + [{"content": t, "agent": "a", "kind": "conversation", "session": k} for k, t in OTHERS.items()]
    )
    # The spreadsheet chat matches "hours" and "total" in every turn: alone, it takes the first three places.
    query = "How many hours have I spent playing games in total?"
    assert set(_sessions(mem, query, repeat=1.0)) == {"sheet"}
    assert len(set(_sessions(mem, query, repeat=0.5))) == 2
    # A question about one thing is left alone: the step is for questions that gather facts. Ungated, the
    # spreadsheet's third turn would count at half.
    one = "Which spreadsheet row did I make bold?"
    assert _hits(mem, one, repeat=0.5) == _hits(mem, one, repeat=1.0)
    assert _hits(mem, one, repeat=0.5, gated=False) != _hits(mem, one, repeat=1.0)

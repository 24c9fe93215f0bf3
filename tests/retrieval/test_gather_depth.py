"""A question that gathers facts across conversations asks the keyword channel for more candidates (75, not 50).

The searcher runs on a real store; the store's candidate source is wrapped to record what it is asked for and
passes every call through, so the hits are the real ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.sessions import asks_across_sessions
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Candidate, Filter


class _Recorded:
    """The store's candidate source, recording the ``limit`` of each keyword query."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.keyword_limits: list[int] = []

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> list[Candidate]:
        self.keyword_limits.append(limit)
        return list(self._inner.keyword_candidates(terms, flt, limit=limit))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _searcher(mem: Engram) -> tuple[HybridSearcher, _Recorded]:
    recorded = _Recorded(mem.store.search)
    store = dataclasses.replace(mem.store, search=recorded)
    searcher = HybridSearcher(store, mem.embedder)
    # Related words add a keyword query of their own (10 deep); this test is about the question's own.
    searcher.related_credit = 0.0
    return searcher, recorded


TURNS = [
    ("sheet", "user: I logged 12 hours of Celeste this week, can you add it to my spreadsheet total?"),
    ("sheet", "assistant: Done, the total column now sums every game's hours."),
    ("zelda", "user: I finally beat Zelda, it took me around 70 hours."),
    ("sister", "user: My sister and I played Hades together for 5 hours on Sunday."),
]


@pytest.fixture
def turns(mem: Engram) -> Engram:
    mem.remember_many([{"content": t, "agent": "a", "kind": "conversation", "session": s} for s, t in TURNS])
    return mem


def _search(searcher: HybridSearcher, query: str, *, limit: int = 10) -> list[str]:
    hits = searcher.search(query, Filter(agent="a"), limit=limit, now=datetime.now(UTC), touch=False)
    return [h.memory.content for h in hits]


def test_a_question_that_gathers_asks_for_75_keyword_candidates_another_for_50(turns: Engram) -> None:
    searcher, recorded = _searcher(turns)
    try:
        gathering = _search(searcher, "How many hours have I spent playing games in total?")
        assert recorded.keyword_limits == [75]
        recorded.keyword_limits.clear()
        _search(searcher, "Which game did I beat with my sister?")
        assert recorded.keyword_limits == [50]
        # A larger ``limit`` still wins over either depth.
        recorded.keyword_limits.clear()
        _search(searcher, "How many hours have I spent playing games in total?", limit=90)
        assert recorded.keyword_limits == [90]
        # Off (at most the usual depth): a gathering question is asked like any other, and its hits here are the same.
        searcher.gather_keyword_depth = 0
        recorded.keyword_limits.clear()
        assert _search(searcher, "How many hours have I spent playing games in total?") == gathering
        assert recorded.keyword_limits == [50]
    finally:
        searcher.close()
    # Every turn of the four holds a question word, so each is found either way.
    assert len(gathering) == len(TURNS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60), st.booleans())
def test_the_keyword_depth_follows_the_gathering_test_for_any_question(turns: Engram, text: str, gather: bool) -> None:
    query = f"how many {text} in total" if gather else text
    searcher, recorded = _searcher(turns)
    try:
        # The vector is given: the question's words and the gate are what is under test, not the model.
        searcher.search(query, Filter(agent="a"), limit=10, now=datetime.now(UTC), touch=False, vector=[0.05] * 384)
    finally:
        searcher.close()
    if not query_terms(query):
        assert recorded.keyword_limits == []
    else:
        assert recorded.keyword_limits == [75 if asks_across_sessions(query) else 50]

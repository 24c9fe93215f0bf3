"""Session evidence (pure functions) and inside a real search: a turn counts the conversation it belongs to."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fused_strategies import fused_lists, session_maps
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.sessions import session_evidence, session_key, weigh_by_session
from engramdb.storage.base import Filter

weights = st.floats(min_value=0, max_value=10)
shares = st.floats(min_value=0, max_value=1)


@given(fused_lists, session_maps, weights, shares, st.booleans())
def test_weighing_keeps_candidates_bounds_and_order(fused, sessions, weight, share, best_only):
    out = weigh_by_session(fused, sessions, weight=weight, share=share, best_only=best_only)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    assert all(-1e-9 <= f.relevance <= 1 + 1e-9 for f in out)
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)


@given(fused_lists, session_maps, shares)
def test_session_evidence_is_a_share_and_equal_within_a_session(fused, sessions, share):
    evidence = session_evidence(fused, sessions, share=share)
    assert set(evidence) == {f.id for f in fused}
    assert all(0.0 <= e <= 1.0 + 1e-9 for e in evidence.values())
    for a in fused:
        for b in fused:
            if sessions.get(a.id) is not None and sessions.get(a.id) == sessions.get(b.id):
                assert evidence[a.id] == evidence[b.id]


@given(fused_lists, weights, shares)
def test_without_shared_sessions_the_order_is_unchanged(fused, weight, share):
    # Notes with no session, or each in its own: a store of notes ranks as without this step.
    own = {f.id: f"own-{f.id}" for f in fused}
    assert weigh_by_session(fused, {}, weight=weight, share=share) == list(fused)
    assert weigh_by_session(fused, own, weight=weight, share=share) == list(fused)


@given(fused_lists, session_maps)
def test_zero_weight_is_the_identity(fused, sessions):
    assert weigh_by_session(fused, sessions, weight=0.0) == list(fused)


def test_a_session_with_several_matches_lifts_its_best_turn_over_a_lone_match():
    fused = [
        Fused("lone", 0.80, None, None),
        Fused("trip-1", 0.75, None, None),
        Fused("trip-2", 0.60, None, None),
        Fused("trip-3", 0.55, None, None),
    ]
    sessions = {"lone": "s1", "trip-1": "s2", "trip-2": "s2", "trip-3": "s2"}
    out = weigh_by_session(fused, sessions, weight=0.3, share=0.3, best_only=True)
    assert [f.id for f in out][:2] == ["trip-1", "lone"]
    # Only the session's best turn gains: the others keep their order below the lone match.
    assert [f.id for f in out][2:] == ["trip-2", "trip-3"]


@pytest.mark.parametrize(("weight", "share"), [(-0.1, 0.3), (11.0, 0.3), (0.3, -0.1), (0.3, 1.5)])
def test_out_of_range_settings_are_refused(weight, share):
    with pytest.raises(ValueError, match="within"):
        weigh_by_session([Fused("a", 1.0, None, None)], {}, weight=weight, share=share)


def test_session_key_reads_the_scope_then_metadata(mem: Engram) -> None:
    scoped = mem.remember("we talked about the trip", agent="a", kind="conversation", session="t1")
    tagged = mem.remember("and the hotel", agent="a", kind="conversation", metadata={"session": 7})
    flagged = mem.remember("a flag is no session", agent="a", kind="conversation", metadata={"session": True})
    plain = mem.remember("a note", agent="a")
    assert [session_key(m) for m in (scoped, tagged, flagged, plain)] == ["t1", "7", None, None]


def _searcher(mem: Engram, weight: float) -> HybridSearcher:
    searcher = HybridSearcher(mem.store, mem.embedder)
    searcher.session_weight = weight
    # Every question, not only those gathering facts across sessions ("trip" does not).
    searcher.session_gated = False
    return searcher


TRIP = [
    "I: We are planning the trip to Lisbon in May.",
    "You: Lisbon in May is lovely, book the hotel early.",
    "I: The hotel near the river was fully booked for the trip.",
]
OTHER = ["I: My sister's wedding is in June.", "You: A June wedding, congratulations!", "I: The trip budget is tight."]


def test_in_a_real_search_session_evidence_lifts_the_matching_sessions_best_turn(mem: Engram) -> None:
    mem.remember_many(
        [{"content": t, "agent": "a", "kind": "conversation", "metadata": {"session": "trip"}} for t in TRIP]
        + [{"content": t, "agent": "a", "kind": "conversation", "metadata": {"session": "other"}} for t in OTHER]
    )
    now = datetime.now(UTC)
    plain, grouped = _searcher(mem, 0.0), _searcher(mem, 1.0)
    try:
        # One turn of the other session matches "trip" best; the trip session holds three turns on it.
        query = "trip"
        before = plain.search(query, Filter(agent="a"), limit=6, now=now, touch=False)
        after = grouped.search(query, Filter(agent="a"), limit=6, now=now, touch=False)
    finally:
        plain.close()
        grouped.close()
    assert {h.memory.id for h in after} == {h.memory.id for h in before}
    trip_first = next(h for h in before if h.memory.metadata["session"] == "trip")
    assert before[0].memory.metadata["session"] == "other"
    assert after[0].memory.id == trip_first.memory.id


def test_in_a_real_search_notes_without_sessions_rank_as_without_the_step(mem: Engram) -> None:
    for text in [*TRIP, *OTHER]:
        mem.remember(text.split(": ", 1)[1], agent="a")
    now = datetime.now(UTC)
    plain, grouped = _searcher(mem, 0.0), _searcher(mem, 1.0)
    try:
        for query in ("trip to Lisbon", "wedding in June", "hotel"):
            a = plain.search(query, Filter(agent="a"), limit=5, now=now, touch=False)
            b = grouped.search(query, Filter(agent="a"), limit=5, now=now, touch=False)
            assert [(h.memory.id, h.score) for h in a] == [(h.memory.id, h.score) for h in b]
    finally:
        plain.close()
        grouped.close()

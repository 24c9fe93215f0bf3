"""Invariants of fusion and ranking (pure functions)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb.models import Memory
from engramdb.retrieval.ranking import RankingWeights, boost, fuse, rank
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Candidate

NOW = datetime(2026, 11, 21, tzinfo=UTC)

scores = st.floats(min_value=-50, max_value=50, allow_nan=False)
cand_lists = st.lists(st.tuples(st.sampled_from("abcdefghij"), scores), max_size=10, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Candidate(i, s) for i, s in xs), key=lambda c: -c.score)
)


def memory(
    mid: str = "m", *, age_days: float = 0.0, confidence: float = 0.5, access: int = 0, succ: float = 0, att: float = 0
) -> Memory:
    at = NOW - timedelta(days=age_days)
    return Memory(
        id=mid,
        agent="a",
        kind="knowledge",
        content="x",
        created_at=at,
        updated_at=at,
        confidence=confidence,
        access_count=access,
        successes=succ,
        attempts=att,
    )


@given(cand_lists, cand_lists, st.floats(min_value=0, max_value=1))
def test_fusion_scores_are_bounded_and_cover_both_channels(kw, vec, w):
    fused = fuse(kw, vec, keyword_weight=w)
    assert {f.id for f in fused} == {c.id for c in kw} | {c.id for c in vec}
    assert all(-1e-9 <= f.relevance <= 1 + 1e-9 for f in fused)
    assert [f.relevance for f in fused] == sorted((f.relevance for f in fused), reverse=True)


@given(cand_lists)
def test_single_channel_fusion_keeps_that_channels_order(kw):
    fused = fuse(kw, [], keyword_weight=0.5)
    relevance = {f.id: f.relevance for f in fused}
    for higher, lower in itertools.pairwise(kw):
        assert relevance[higher.id] >= relevance[lower.id]


def test_candidate_found_by_both_channels_beats_one_found_by_a_single_channel():
    kw = [Candidate("both", 10.0), Candidate("kw", 9.99), Candidate("low", 1.0)]
    vec = [Candidate("both", 0.9), Candidate("vec", 0.89), Candidate("low2", 0.1)]
    fused = fuse(kw, vec, keyword_weight=0.5)
    assert fused[0].id == "both"


def test_keyword_weight_out_of_range_is_rejected():
    with pytest.raises(ValueError, match="keyword_weight"):
        fuse([], [], keyword_weight=1.5)


@given(
    st.floats(min_value=0, max_value=3650),
    st.floats(min_value=0, max_value=1),
    st.integers(min_value=0, max_value=10**6),
    st.floats(min_value=0, max_value=1000),
    st.floats(min_value=0, max_value=1),
)
def test_boost_stays_within_its_weights(age, conf, access, att, frac):
    w = RankingWeights()
    b = boost(memory(age_days=age, confidence=conf, access=access, succ=att * frac, att=att), now=NOW, weights=w)
    total = w.recency + w.confidence + w.access + w.success
    assert 1 - total - 1e-9 <= b <= 1 + total + 1e-9


def test_boosts_are_gentle_relevance_comes_first():
    w = RankingWeights()
    strong_old = memory("old", age_days=3000, confidence=0.0, access=0, succ=0, att=50)
    weak_new = memory("new", age_days=0, confidence=1.0, access=1000, succ=50, att=50)
    # A clearly more relevant memory stays ahead despite every signal against it.
    assert 1.0 * boost(strong_old, now=NOW, weights=w) > 0.5 * boost(weak_new, now=NOW, weights=w)


def test_boosts_break_near_ties_in_favour_of_new_confident_successful_memories():
    w = RankingWeights()
    assert boost(memory(age_days=0), now=NOW, weights=w) > boost(memory(age_days=365), now=NOW, weights=w)
    assert boost(memory(confidence=0.9), now=NOW, weights=w) > boost(memory(confidence=0.1), now=NOW, weights=w)
    good, bad = memory(succ=9, att=10), memory(succ=1, att=10)
    assert boost(good, now=NOW, weights=w) > boost(memory(), now=NOW, weights=w) > boost(bad, now=NOW, weights=w)


def test_rank_drops_vanished_memories_and_orders_by_final_score():
    fused = fuse([Candidate("a", 2.0), Candidate("b", 1.0), Candidate("gone", 3.0)], [])
    ranked = rank(fused, {"a": memory("a"), "b": memory("b")}, now=NOW, weights=RankingWeights())
    assert [m.id for _, m, _ in ranked] == ["a", "b"]


def test_query_terms_drop_stopwords_and_duplicates():
    assert query_terms("What did Caroline do after the support group? Caroline!") == ["caroline", "support", "group"]
    assert query_terms("the of and") == []
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == 48

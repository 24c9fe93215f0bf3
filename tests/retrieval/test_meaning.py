"""Words as far as meaning allows: a candidate's word evidence gated by its own cosine (pure, and in a real search)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.embeddings.profile import DEFAULT_PROFILE, FusionProfile
from engramdb.errors import ValidationError
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights, fuse_evidence, weights_for
from engramdb.storage.base import Candidate, Filter

TEXTS = {
    "meant": "After my volleyball league game on Thursday I walked along the waterfront path",
    "words": "Our kernel driver takes an interrupt event and copies part of the DMA buffer",
    "noise": "Lunch is at noon in the big room",
}
TERMS = ["sports", "event", "take", "part"]


def _order(*, own: float, low: float = 0.1, high: float = 0.15, cosines: dict[str, float] | None = None) -> list[str]:
    # "words" is a keyword-only candidate holding three of the four words; its own cosine is ``own``.
    vector = [Candidate("meant", 0.38), Candidate("noise", 0.20)]
    keyword = [Candidate("words", 5.0)]
    fused = fuse_evidence(
        keyword,
        vector,
        TEXTS,
        TERMS,
        cosines={"words": own} if cosines is None else cosines,
        meaning_low=low,
        meaning_high=high,
    )
    return [f.id for f in fused]


def test_words_without_meaning_count_for_nothing() -> None:
    # Ungated, three shared words outweigh the model's clear choice; at a cosine of 0.07 they count for nothing.
    assert _order(own=0.07, high=0.0)[0] == "words"
    assert _order(own=0.07)[0] == "meant"


def test_words_count_in_full_from_the_upper_cosine_and_in_part_between() -> None:
    assert _order(own=0.15) == _order(own=0.07, high=0.0)
    assert _order(own=0.60) == _order(own=0.07, high=0.0)
    # A candidate whose own cosine is unknown (no stored vector) keeps its words' full weight.
    assert _order(own=0.0, cosines={}) == _order(own=0.07, high=0.0)


def test_the_vector_channels_cosine_is_the_one_gated() -> None:
    # The same text returned by the vector channel at 0.05: gated by that, whatever ``cosines`` says.
    vector = [Candidate("meant", 0.38), Candidate("noise", 0.20), Candidate("words", 0.05)]
    args = {"cosines": {"words": 0.9}, "meaning_low": 0.1, "meaning_high": 0.15}
    assert fuse_evidence([Candidate("words", 5.0)], vector, TEXTS, TERMS, **args)[0].id == "meant"  # type: ignore[arg-type]
    assert fuse_evidence([Candidate("words", 5.0)], vector, TEXTS, TERMS)[0].id == "words"


ids = st.sampled_from("abcdefgh")
cands = st.lists(st.tuples(ids, st.floats(min_value=-1, max_value=1)), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Candidate(i, s) for i, s in xs), key=lambda c: -c.score)
)
words = st.lists(st.sampled_from(["event", "sports", "part", "driver"]), max_size=4)
own = st.dictionaries(ids, st.floats(min_value=-1, max_value=1), max_size=8)


@given(cands, cands, words, own, st.floats(-1, 0.5), st.floats(0.01, 0.5))
def test_the_gate_keeps_every_candidate_once_and_bounded(vector, keyword, terms, cosines, low, width):
    texts = {c.id: f"{c.id} event part of the sports" for c in [*vector, *keyword]}
    fused = fuse_evidence(
        keyword, vector, texts, terms, cosines=cosines, meaning_low=low, meaning_high=min(1.0, low + width)
    )
    assert sorted(f.id for f in fused) == sorted({c.id for c in [*vector, *keyword]})
    assert all(0.0 <= f.relevance <= 1.0 for f in fused)


@given(cands, cands, words, st.floats(-0.9, 0.0))
def test_candidates_the_gate_passes_in_full_rank_as_ungated(vector, keyword, terms, high):
    # Every cosine at or above the upper bound: the gate changes nothing.
    texts = {c.id: f"{c.id} event part of the sports" for c in [*vector, *keyword]}
    cosines = {c.id: 1.0 for c in keyword}
    gated = [c for c in vector if c.score >= high]
    plain = fuse_evidence(keyword, gated, texts, terms)
    assert fuse_evidence(keyword, gated, texts, terms, cosines=cosines, meaning_low=-1.0, meaning_high=high) == plain


@pytest.mark.parametrize(("low", "high"), [(0.2, 0.1), (0.1, 0.1), (-1.5, 0.1), (0.1, 1.5)])
def test_out_of_range_settings_are_refused(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="meaning_low"):
        fuse_evidence([], [Candidate("a", 0.5)], {"a": "x"}, ["x"], meaning_low=low, meaning_high=high)
    with pytest.raises(ValidationError, match="meaning_low"):
        RankingWeights(meaning_low=low, meaning_high=high)
    with pytest.raises(ValidationError, match="meaning_low"):
        dataclasses.replace(DEFAULT_PROFILE, meaning_low=low, meaning_high=high)


def test_the_bundled_models_profile_gates_and_other_profiles_do_not() -> None:
    weights = weights_for(DEFAULT_PROFILE)
    assert 0.0 < weights.meaning_low < weights.meaning_high
    assert weights == RankingWeights()
    other = FusionProfile(
        coverage=0.5, sure_lead=0.0, sure_weak=0.5, sure_coverage=1.0, calibration=DEFAULT_PROFILE.calibration
    )
    assert weights_for(other).meaning_high == 0.0


@pytest.mark.parametrize("depth", [50, 2])
def test_in_a_real_search_the_turn_meant_beats_a_turn_of_the_same_words(
    tmp_path: Path, embedder: Embedder, depth: int
) -> None:
    # Conversation turns (the paraphrase rule is for notes). The kernel-driver turn holds "takes", "event" and
    # "part" at a cosine of ~0.07 to the question; the volleyball turn holds none of its words at ~0.38. With depth
    # 2 the decoy comes from the keyword channel alone, so its own cosine is read from its stored vector.
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        meant = mem.remember(TEXTS["meant"], agent="t", kind="conversation")
        decoy = mem.remember(TEXTS["words"], agent="t", kind="conversation")
        for noise in ("Lunch is at noon in the big room", "The printer on three is jammed again"):
            mem.remember(noise, agent="t", kind="conversation")
        question = "Which sports event did I take part in?"
        firsts = []
        for weights in (RankingWeights(), dataclasses.replace(RankingWeights(), meaning_high=0.0)):
            searcher = HybridSearcher(mem.store, embedder, weights=weights)
            searcher.depth = depth
            try:
                hits = searcher.search(question, Filter(agent="t"), limit=3, now=datetime.now(UTC), touch=False)
            finally:
                searcher.close()
            firsts.append(hits[0].memory.id)
        assert mem.search(question, agent="t", limit=1)[0].memory.id == meant.id
    assert firsts == [meant.id, decoy.id]

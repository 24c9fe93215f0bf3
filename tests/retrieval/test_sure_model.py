"""Evidence fusion when the model is sure and the words are weak (pure), and in a real search."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights, fuse_evidence
from engramdb.storage.base import Candidate, Filter

TEXTS = {
    "right": "Adding a Redis cache in front of it cut p95 latency from 800 ms to 90 ms",
    "decoy": "The product catalog has 120k SKUs",
    "noise": "Can someone water the plants while I'm away?",
}
TERMS = ["catalog", "fast"]


def _fuse(right: float, *, lead: float) -> list[str]:
    vector = [Candidate("right", right), Candidate("decoy", 0.55), Candidate("noise", 0.10)]
    keyword = [Candidate("decoy", 3.0)]
    fused = fuse_evidence(keyword, vector, TEXTS, TERMS, sure_lead=lead, sure_weak=0.4, sure_coverage=0.5)
    return [f.id for f in fused]


def test_a_sure_model_outweighs_one_shared_word_of_a_decoy() -> None:
    # The decoy holds one of the two words (the commoner one: ~0.32 of the query's weight). The model
    # prefers the memory meant by 0.15: sure, so the word counts half and the model's choice stands.
    assert _fuse(0.70, lead=0.0)[0] == "decoy"
    assert _fuse(0.70, lead=0.03)[0] == "right"


def test_an_unsure_model_leaves_the_words_their_full_weight() -> None:
    # A lead under sure_lead: the rule does not apply, and the result is the plain fusion's.
    assert _fuse(0.56, lead=0.03) == _fuse(0.56, lead=0.0)


def test_a_candidate_holding_most_of_the_words_keeps_their_full_weight() -> None:
    texts = {**TEXTS, "decoy": "The catalog got fast after the cache"}
    vector = [Candidate("right", 0.65), Candidate("decoy", 0.55)]
    plain = fuse_evidence([], vector, texts, TERMS)
    sure = fuse_evidence([], vector, texts, TERMS, sure_lead=0.03, sure_weak=0.3)
    assert sure == plain
    assert plain[0].id == "decoy"


ids = st.sampled_from("abcdefgh")
cands = st.lists(st.tuples(ids, st.floats(min_value=-1, max_value=1)), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Candidate(i, s) for i, s in xs), key=lambda c: -c.score)
)
words = st.lists(st.sampled_from(["cache", "catalog", "fast", "deploy", "friday"]), max_size=4)


@given(cands, cands, words, st.floats(min_value=0, max_value=2), st.floats(0, 1), st.floats(0, 1))
def test_the_rule_keeps_every_candidate_once_and_bounded(vector, keyword, terms, lead, weak, share):
    texts = {c.id: f"{c.id} cache catalog" for c in [*vector, *keyword]}
    fused = fuse_evidence(keyword, vector, texts, terms, sure_lead=lead, sure_weak=weak, sure_coverage=share)
    assert sorted(f.id for f in fused) == sorted({c.id for c in [*vector, *keyword]})
    assert all(0.0 <= f.relevance <= 1.0 for f in fused)


@pytest.mark.parametrize(
    ("lead", "weak", "share"), [(-0.1, 0.3, 0.5), (2.5, 0.3, 0.5), (0.03, 1.5, 0.5), (0.03, 0.3, -1)]
)
def test_out_of_range_settings_are_refused(lead: float, weak: float, share: float) -> None:
    with pytest.raises(ValueError, match="sure_lead"):
        fuse_evidence([], [Candidate("a", 0.5)], {"a": "x"}, ["x"], sure_lead=lead, sure_weak=weak, sure_coverage=share)


def test_the_default_weights_use_the_rule() -> None:
    weights = RankingWeights()
    assert weights.sure_lead > 0
    assert 0 < weights.sure_coverage < 1


def test_in_a_real_search_the_memory_the_model_is_sure_of_comes_first(tmp_path: Path, embedder: Embedder) -> None:
    # "logins" is a word of a decoy about something else; the memory meant shares no word with the question,
    # but the model puts it first by a clear lead (cosine ~0.41 against ~0.34).
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        right = mem.remember(
            "OAuth access tokens expire after 60 minutes and the client never refreshed them", agent="t"
        )
        mem.remember("Login page redesign ships next sprint", agent="t")
        for noise in ("Lunch is at noon in the big room", "The printer on three is jammed again"):
            mem.remember(noise, agent="t")
        question = "why do logins fail after an hour?"
        hits = mem.search(question, agent="t", limit=3)
        plain = HybridSearcher(mem.store, embedder, weights=RankingWeights(sure_lead=0.0, bare_lead=0.0))
        try:
            before = plain.search(question, Filter(agent="t"), limit=3, now=datetime.now(UTC), touch=False)
        finally:
            plain.close()
    assert hits[0].memory.id == right.id
    assert before[0].memory.id != right.id  # without the rule, the shared word wins


def _bare(right: float, *, bare_lead: float, right_text: str = TEXTS["right"]) -> list[str]:
    # "catalog" is in the decoy and the keyword channel; the memory the model puts first holds no word of the question.
    texts = {**TEXTS, "right": right_text, "other": "The catalog export runs nightly and the catalog is fast"}
    vector = [Candidate("right", right), Candidate("decoy", 0.55), Candidate("noise", 0.10)]
    keyword = [Candidate("other", 4.0), Candidate("decoy", 3.0)]
    return [f.id for f in fuse_evidence(keyword, vector, texts, TERMS, bare_lead=bare_lead, bare_coverage=0.0)]


def test_a_sure_model_on_a_paraphrase_outweighs_the_words_others_share() -> None:
    # A candidate holds both words (0.5 or more of them), so the weak-words rule does not apply; the model's first
    # holds none and leads by 0.03: with the paraphrase rule the words count for nothing in this search.
    assert _bare(0.58, bare_lead=0.0)[0] == "decoy"
    assert _bare(0.58, bare_lead=0.02)[0] == "right"
    # Below the lead, or when the model's first holds a word of the question, the words keep their weight.
    assert _bare(0.56, bare_lead=0.02) == _bare(0.56, bare_lead=0.0)
    held = TEXTS["right"] + " for the catalog"
    assert _bare(0.58, bare_lead=0.02, right_text=held) == _bare(0.58, bare_lead=0.0, right_text=held)


@pytest.mark.parametrize(("lead", "share"), [(-0.1, 0.0), (2.5, 0.0), (0.02, 1.5)])
def test_out_of_range_paraphrase_settings_are_refused(lead: float, share: float) -> None:
    with pytest.raises(ValueError, match="bare_lead"):
        fuse_evidence([], [Candidate("a", 0.5)], {"a": "x"}, ["x"], bare_lead=lead, bare_coverage=share)


@pytest.mark.parametrize(("kind", "right_first"), [("knowledge", True), ("conversation", False)])
def test_in_a_real_search_the_paraphrase_rule_holds_for_notes_only(
    tmp_path: Path, embedder: Embedder, kind: str, right_first: bool
) -> None:
    # The weak-words rule off: the paraphrase rule alone lets the model's clear first (no word of the question in
    # it) stand over "logins" in a decoy, for notes; conversation turns keep the words' full weight.
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        right = mem.remember(
            "OAuth access tokens expire after 60 minutes and the client never refreshed them", agent="t", kind=kind
        )
        mem.remember("Login page redesign ships next sprint", agent="t", kind=kind)
        for noise in ("Lunch is at noon in the big room", "The printer on three is jammed again"):
            mem.remember(noise, agent="t", kind=kind)
        searchers = [
            HybridSearcher(mem.store, embedder, weights=RankingWeights(sure_lead=0.0, bare_lead=b)) for b in (0.02, 0.0)
        ]
        try:
            firsts = [
                s.search(
                    "why do logins fail after an hour?", Filter(agent="t"), limit=2, now=datetime.now(UTC), touch=False
                )[0]
                for s in searchers
            ]
        finally:
            for s in searchers:
                s.close()
    assert (firsts[0].memory.id == right.id) is right_first
    assert firsts[1].memory.id != right.id  # without the rule, the shared word wins either way

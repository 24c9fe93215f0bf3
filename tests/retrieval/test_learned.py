"""Learned fusion: its features (pure), its scorer, the `fusion` setting, and real searches under it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.errors import ConfigError, ValidationError
from engramdb.retrieval.learned import FEATURES, LEARNED, LearnedScorer, candidate_features, fuse_learned
from engramdb.retrieval.ranking import RankingWeights, fuse_by
from engramdb.storage.base import Candidate

ids = st.sampled_from("abcdefgh")
cands = st.lists(st.tuples(ids, st.floats(min_value=-1, max_value=1)), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Candidate(i, s) for i, s in xs), key=lambda c: -c.score)
)
kw_cands = st.lists(st.tuples(ids, st.floats(min_value=0, max_value=40)), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Candidate(i, s) for i, s in xs), key=lambda c: -c.score)
)
words = st.lists(st.sampled_from(["cache", "catalog", "fast", "deploy", "friday", "oauth"]), max_size=5)
texts = st.dictionaries(
    ids, st.lists(st.sampled_from(["cache", "catalog", "deploys", "the", "oauth", "x"]), max_size=6)
)


@given(cands, kw_cands, words, texts)
def test_every_candidate_gets_one_bounded_finite_feature_row(vector, keyword, terms, words_of) -> None:
    text = {i: " ".join(ws) for i, ws in words_of.items()}
    feats = candidate_features(keyword, vector, text, terms)
    assert list(feats) == list(dict.fromkeys([c.id for c in vector] + [c.id for c in keyword]))
    for row in feats.values():
        assert len(row) == len(FEATURES)
        assert all(math.isfinite(x) for x in row)
        named = dict(zip(FEATURES, row, strict=True))
        for share in ("cosine", "vector_rank", "keyword_rank", "keyword_share", "coverage", "rarest", "weak_coverage"):
            assert 0.0 <= named[share] <= 1.0, share
        for share in ("english_coverage", "matched_share", "coverage_x_best"):
            assert 0.0 <= named[share] <= 1.0 + 1e-9, share
        assert named["both"] == named["in_vector"] * named["in_keyword"]


@given(cands, kw_cands, words, texts)
def test_learned_fusion_keeps_every_candidate_once_in_unit_scores(vector, keyword, terms, words_of) -> None:
    text = {i: " ".join(ws) for i, ws in words_of.items()}
    fused = fuse_learned(keyword, vector, text, terms)
    assert sorted(f.id for f in fused) == sorted({c.id for c in [*vector, *keyword]})
    assert all(0.0 <= f.relevance <= 1.0 for f in fused)
    assert [f.relevance for f in fused] == sorted((f.relevance for f in fused), reverse=True)
    channel = {c.id: c.score for c in vector}
    assert all(f.vector_score == channel.get(f.id) for f in fused)


def test_the_features_say_what_they_name() -> None:
    vector = [Candidate("a", 0.8), Candidate("b", 0.6)]
    keyword = [Candidate("b", 10.0), Candidate("c", 5.0)]
    text = {"a": "we cached it", "b": "the catalog cache got fast", "c": "a catalog"}
    f = {
        i: dict(zip(FEATURES, row, strict=True))
        for i, row in candidate_features(keyword, vector, text, ["catalog", "fast"]).items()
    }
    assert f["a"]["vector_rank"] == 0.0
    assert f["c"]["vector_rank"] == 1.0
    assert f["c"]["cosine"] == pytest.approx(0.6)  # not returned by the vector channel: its lowest
    assert (f["a"]["in_keyword"], f["b"]["both"], f["c"]["in_vector"]) == (0.0, 1.0, 0.0)
    assert f["b"]["keyword_share"] == 1.0
    assert f["c"]["keyword_share"] == 0.5
    assert f["b"]["matched_share"] == 1.0
    assert f["c"]["matched_share"] == 0.5
    assert f["a"]["coverage"] == 0.0
    # "fast" is held by one candidate, "catalog" by two: the rarest stem "c" holds is not the query's rarest.
    assert f["b"]["rarest"] == 1.0
    assert 0.0 < f["c"]["rarest"] < 1.0
    assert f["b"]["coverage_x_best"] == pytest.approx(f["b"]["coverage"] ** 2)
    # "b" holds most of the query's words: the model's lead does not make them weak.
    assert all(row["weak_coverage"] == 0.0 for row in f.values())


def test_weak_coverage_is_coverage_when_the_model_is_sure_and_no_candidate_holds_the_words() -> None:
    vector = [Candidate("a", 0.8), Candidate("b", 0.6)]
    text = {"a": "we cached it", "b": "the catalog", "c": "nothing"}
    terms = ["catalog", "fast", "latency", "p95"]
    f = {i: dict(zip(FEATURES, row, strict=True)) for i, row in candidate_features([], vector, text, terms).items()}
    assert 0.0 < f["b"]["coverage"] < 0.3
    assert f["b"]["weak_coverage"] == f["b"]["coverage"]
    close = [Candidate("a", 0.8), Candidate("b", 0.78)]
    g = {i: dict(zip(FEATURES, row, strict=True)) for i, row in candidate_features([], close, text, terms).items()}
    assert g["b"]["weak_coverage"] == 0.0


#: Evidence fusion's default rule written in this family's terms: cosine + 0.6 coverage, 0.3 of it when weak.
RULE = LearnedScorer(
    weights=tuple({"cosine": 1.0, "coverage": 0.6, "weak_coverage": -0.3}.get(n, 0.0) for n in FEATURES)
)


@given(cands, kw_cands, words, texts)
def test_the_hand_rule_is_one_of_the_learned_scorers(vector, keyword, terms, words_of) -> None:
    text = {i: " ".join(ws) for i, ws in words_of.items()}
    rule = fuse_by(RankingWeights(), keyword, vector, text, terms)
    learned = {f.id: f.relevance for f in fuse_learned(keyword, vector, text, terms, scorer=RULE)}
    assert {f.id: pytest.approx(f.relevance, abs=1e-9) for f in rule} == learned


def test_a_scorer_of_cosine_alone_is_the_vector_order() -> None:
    only_cosine = LearnedScorer(weights=tuple(float(n == "cosine") for n in FEATURES))
    vector = [Candidate("a", 0.9), Candidate("b", 0.5), Candidate("c", 0.4)]
    keyword = [Candidate("c", 30.0)]
    fused = fuse_learned(keyword, vector, {"a": "x", "b": "y", "c": "catalog"}, ["catalog"], scorer=only_cosine)
    assert [f.id for f in fused] == ["a", "b", "c"]


@pytest.mark.parametrize("weights", [(1.0,), (float("nan"),) * len(FEATURES), (float("inf"),) * len(FEATURES)])
def test_a_scorer_needs_one_finite_weight_per_feature(weights: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="weight"):
        LearnedScorer(weights=weights)


def test_the_shipped_weights_fit_the_features() -> None:
    assert len(LEARNED.weights) == len(FEATURES)
    assert LEARNED.source


def test_ranking_weights_refuse_an_unknown_fusion() -> None:
    with pytest.raises(ValidationError, match="fusion"):
        RankingWeights(fusion="neural")  # type: ignore[arg-type]


def test_the_fusion_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().fusion == "evidence"
    monkeypatch.setenv("ENGRAM_FUSION", "learned")
    assert load_settings().fusion == "learned"
    monkeypatch.setenv("ENGRAM_FUSION", "neural")
    with pytest.raises(ConfigError, match="fusion"):
        load_settings()


def test_the_setting_reaches_the_search_and_finds_the_memory_meant(tmp_path: Path, embedder: Embedder) -> None:
    """Seed 004's 0.7 rule and ``min_score`` under learned fusion: tests/retrieval/test_relevance.py (FUSIONS)."""
    with Engram(tmp_path / "store", embedder=embedder, fusion="learned") as mem:
        assert mem._recall.weights.fusion == "learned"
        for task in ("Login to Facebook", "Post on timeline", "Search flights to Rome", "Export the sales report"):
            mem.remember(task, agent="surfer", kind="success")
        hits = mem.search("flights to Rome", agent="surfer")
        assert hits[0].memory.content == "Search flights to Rome"
        assert all(0.0 <= h.relevance <= 1.0 for h in hits)
    # Weights given in code win over the setting.
    with Engram(tmp_path / "other", embedder=embedder, fusion="learned", weights=RankingWeights()) as mem:
        assert mem._recall.weights.fusion == "evidence"

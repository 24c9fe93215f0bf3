"""Fusion constants and relevance calibration belong to the embedder (retrieval/profile.py): the bundled model keeps
the values it was tuned with, another model's profile reaches its searches, given weights win."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram, toolkit
from engramdb.embeddings import CachedEmbedder
from engramdb.embeddings.base import Embedder
from engramdb.embeddings.profile import DEFAULT_PROFILE, FusionProfile, profile_of
from engramdb.errors import ValidationError
from engramdb.retrieval.evidence import CALIBRATION, Calibration, coverage, relevance
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights, weights_for
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter

#: A profile far from the default's, so a search that ignored it would show.
SHARP = FusionProfile(
    coverage=0.2,
    sure_lead=0.02,
    sure_weak=0.4,
    sure_coverage=0.25,
    calibration=Calibration(bias=-6.0, cosine_weight=8.0, coverage_weight=1.0),
)


class _Profiled:
    """The real bundled model under another profile (what a second model's embedder provides)."""

    def __init__(self, inner: Embedder, profile: FusionProfile) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.profile = profile

    def embed(self, texts: Sequence[str]) -> npt.NDArray[object]:  # type: ignore[type-var]
        return self.inner.embed(texts)


def test_the_bundled_model_keeps_the_constants_it_was_tuned_with(embedder: Embedder) -> None:
    # Nothing moves for MiniLM: its profile is RankingWeights' defaults and the calibration fitted on it.
    assert profile_of(embedder) is DEFAULT_PROFILE
    assert DEFAULT_PROFILE.calibration == CALIBRATION
    assert Calibration(bias=-2.92, cosine_weight=9.18, coverage_weight=1.78) == CALIBRATION
    assert weights_for(DEFAULT_PROFILE) == RankingWeights()
    assert (DEFAULT_PROFILE.coverage, DEFAULT_PROFILE.sure_lead, DEFAULT_PROFILE.sure_weak) == (0.6, 0.05, 0.3)
    assert (DEFAULT_PROFILE.bare_lead, DEFAULT_PROFILE.bare_coverage) == (0.02, 0.0)
    # An embedder without a profile (a user's own, openai:) gets the same.
    assert profile_of(object()) is DEFAULT_PROFILE
    assert profile_of(CachedEmbedder(_Profiled(embedder, SHARP))) is SHARP  # the cache passes it on


@given(
    base=st.builds(
        RankingWeights,
        fusion=st.sampled_from(["evidence", "minmax", "learned"]),
        recency=st.floats(0, 0.2),
        coverage=st.floats(0, 2),
        sure_lead=st.floats(0, 0.2),
    )
)
def test_weights_for_takes_the_fusion_fields_and_keeps_the_rest(base: RankingWeights) -> None:
    got = weights_for(SHARP, base)
    assert (got.coverage, got.sure_lead, got.sure_weak, got.sure_coverage) == (0.2, 0.02, 0.4, 0.25)
    assert (got.note_sure_lead, got.note_sure_weak, got.note_sure_coverage) == (None, None, None)
    fusion = {"coverage", "sure_lead", "sure_weak", "sure_coverage", "note_sure_lead", "note_sure_weak"}
    fusion |= {"note_sure_coverage", "bare_lead", "bare_coverage"}
    assert (got.bare_lead, got.bare_coverage) == (0.0, 1.0)
    rest = {f.name for f in dataclasses.fields(RankingWeights)} - fusion
    assert all(getattr(got, name) == getattr(base, name) for name in rest)


@pytest.mark.parametrize(
    "bad",
    [
        {"coverage": -0.1},
        {"coverage": 11.0},
        {"sure_lead": 3.0},
        {"sure_weak": 1.5},
        {"sure_coverage": -1.0},
        {"note_sure_lead": -0.1},
        {"note_sure_coverage": 2.0},
        {"bare_lead": -0.01},
        {"bare_coverage": 1.5},
    ],
)
def test_a_profile_out_of_range_is_refused(bad: dict[str, float]) -> None:
    fields = {"coverage": 0.6, "sure_lead": 0.05, "sure_weak": 0.3, "sure_coverage": 0.5, **bad}
    with pytest.raises(ValidationError):
        FusionProfile(**fields, calibration=CALIBRATION)


def test_a_search_uses_its_embedders_profile_and_given_weights_win(tmp_path: Path, embedder: Embedder) -> None:
    sharp = _Profiled(embedder, SHARP)
    with Engram(tmp_path / "store", embedder=sharp) as mem:
        mem.remember("Login to Facebook", agent="a")
        mem.remember("Deploys are frozen after 2pm on Fridays", agent="a")
        assert mem._recall.weights == weights_for(SHARP)
        hit = mem.search("Sign into FB", agent="a", limit=1)[0]
        q, t = embedder.embed(["Sign into FB", "Login to Facebook"])
        cover = coverage(query_terms("Sign into FB"), "Login to Facebook")
        # The relevance is the profile's calibration of the same evidence, not the default's.
        assert hit.relevance == pytest.approx(relevance(float(q @ t), cover, calibration=SHARP.calibration), abs=1e-4)
        assert hit.relevance < relevance(float(q @ t), cover) - 0.2
        # text_relevance agrees with the search when told the embedder, and with the default when not.
        assert toolkit.text_relevance(
            "Sign into FB", "Login to Facebook", cosine=float(q @ t), embedder=mem.embedder
        ) == pytest.approx(hit.relevance, abs=1e-4)
        searcher = HybridSearcher(mem.store, sharp, weights=RankingWeights())
        try:
            assert searcher.weights == RankingWeights()
            assert searcher.profile is SHARP  # relevance stays the model's whatever the ranking weights
            hits = searcher.search("Sign into FB", Filter(agent="a"), limit=1, now=datetime.now(UTC), touch=False)
            assert hits[0].relevance == pytest.approx(hit.relevance, abs=1e-4)
        finally:
            searcher.close()
    with Engram(tmp_path / "default", embedder=embedder) as mem:
        assert mem._recall.weights == RankingWeights()


#: The sure-model rule off for conversation turns and on for notes (the vector channel's first's kind decides).
NOTES_ONLY = FusionProfile(
    coverage=0.6,
    sure_lead=0.0,
    sure_weak=0.3,
    sure_coverage=0.5,
    calibration=CALIBRATION,
    note_sure_lead=0.03,
    note_sure_weak=0.3,
    note_sure_coverage=0.5,
)


@pytest.mark.parametrize(("kind", "right_first"), [("knowledge", True), ("conversation", False)])
def test_the_note_values_apply_when_a_note_comes_first(
    tmp_path: Path, embedder: Embedder, kind: str, right_first: bool
) -> None:
    # The question shares "logins" with a decoy; the memory meant shares no word, but the model puts it first by a
    # clear lead. Stored as notes the sure rule lets the model's choice stand; as conversation turns it is off.
    assert weights_for(NOTES_ONLY).note_sure_lead == 0.03
    with Engram(tmp_path / "store", embedder=_Profiled(embedder, NOTES_ONLY)) as mem:
        right = mem.remember(
            "OAuth access tokens expire after 60 minutes and the client never refreshed them", agent="t", kind=kind
        )
        mem.remember("Login page redesign ships next sprint", agent="t", kind=kind)
        for noise in ("Lunch is at noon in the big room", "The printer on three is jammed again"):
            mem.remember(noise, agent="t", kind=kind)
        hits = mem.search("why do logins fail after an hour?", agent="t", limit=2)
    assert (hits[0].memory.id == right.id) is right_first

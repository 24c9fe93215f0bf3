"""Evidence fusion with the credit of words common among the head cut (``common_cut``; measured, off by default)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb.retrieval.evidence import stem
from engramdb.retrieval.ranking import RankingWeights, fuse_by, fuse_evidence
from engramdb.storage.base import Candidate

TEXTS = {
    "right": "Autoscaling never kicked in because the HPA targeted CPU",
    "decoy1": "Traffic to the cluster is mirrored to staging",
    "decoy2": "The cluster dashboard shows pods per node",
    "decoy3": "The cluster is upgraded each quarter",
    "noise": "Lunch is at noon",
}
TERMS = ["cluster", "spiked"]


def _ids(cut: float) -> list[str]:
    vector = [Candidate("right", 0.50), Candidate("decoy1", 0.45), Candidate("decoy2", 0.40), Candidate("noise", 0.1)]
    keyword = [Candidate("decoy1", 2.0), Candidate("decoy2", 2.0), Candidate("decoy3", 2.0)]
    return [f.id for f in fuse_evidence(keyword, vector, TEXTS, TERMS, common_cut=cut, common_head=4)]


def test_a_word_most_of_the_head_holds_counts_less() -> None:
    # "cluster" is held by three of the four best candidates and the right memory holds no word of the question:
    # the decoy's one shared word lifts it over the model's choice, unless that word's credit is cut.
    assert _ids(0.0)[0] == "decoy1"
    assert _ids(0.5)[0] == "decoy1"
    assert _ids(1.0)[0] == "right"


def test_off_by_default_and_through_weights() -> None:
    vector = [Candidate("right", 0.5), Candidate("decoy1", 0.45)]
    assert fuse_evidence([], vector, TEXTS, TERMS) == fuse_evidence([], vector, TEXTS, TERMS, common_cut=0.0)
    assert RankingWeights().common_cut == 0.0
    cut = fuse_by(RankingWeights(common_cut=1.0, common_head=4), [], vector, TEXTS, TERMS)
    assert cut == fuse_evidence([], vector, TEXTS, TERMS, common_cut=1.0, common_head=4)


ids = st.sampled_from(sorted(TEXTS))
cands = st.lists(st.tuples(ids, st.floats(min_value=-1, max_value=1)), max_size=5, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Candidate(i, s) for i, s in xs), key=lambda c: -c.score)
)
words = st.lists(st.sampled_from(["cluster", "autoscaling", "pods", "lunch", "quarter"]), max_size=4)


@given(cands, cands, words, st.floats(min_value=0, max_value=1), st.integers(min_value=1, max_value=6))
def test_the_cut_keeps_every_candidate_once_within_bounds_and_never_raises_one(
    vector: list[Candidate], keyword: list[Candidate], terms: list[str], cut: float, head: int
) -> None:
    plain = fuse_evidence(keyword, vector, TEXTS, terms)
    fused = fuse_evidence(keyword, vector, TEXTS, terms, common_cut=cut, common_head=head)
    assert sorted(f.id for f in fused) == sorted(f.id for f in plain)
    assert all(0.0 <= f.relevance <= 1.0 for f in fused)
    # The cut only takes coverage away: a candidate holding no query word never falls below one it was above.
    bare = [f.id for f in plain if not any(stem(t) in TEXTS[f.id].lower() for t in terms)]
    assert [i for i in (f.id for f in fused) if i in bare] == bare


@pytest.mark.parametrize(("cut", "head"), [(-0.1, 10), (1.5, 10), (0.5, 0)])
def test_out_of_range_is_refused(cut: float, head: int) -> None:
    with pytest.raises(ValueError, match="common_cut"):
        fuse_evidence([], [Candidate("right", 0.5)], TEXTS, TERMS, common_cut=cut, common_head=head)

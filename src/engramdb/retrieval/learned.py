"""Learned fusion: a linear scorer over what the two channels already say about each candidate. Pure functions.

Instead of a hand-written rule (:func:`~engramdb.retrieval.ranking.fuse_evidence`'s cosine plus coverage, halved
when the model is sure and the words are weak), each candidate gets a vector of :data:`FEATURES` and the score
``weights . features``. The weights are fitted by ``bench/fit_ranker.py`` (pairwise logistic loss, RankNet style:
a right candidate should outscore each wrong one of its question) on the train parts of three sets at once, the
recall dev set, LoCoMo dev and LongMemEval_S dev, and shipped here as constants; bench/RESULTS.md ("Issue 21,
learned fusion") has the figures on the held parts and why it is or is not the default.

Every feature is relative to the search (ranks, the gap to the vector channel's best, IDF over the candidates,
a keyword score as a share of the best one), so one set of weights serves a store of ten memories or of a
million, on either backend. Signals a benchmark cannot teach are left to the gentle boosts after fusion
(:func:`~engramdb.retrieval.ranking.boost`: recency, confidence, access, success) and to the conversation steps
(time named in a question, speakers, neighbours): the sets' memories are all written at once and never used,
and a memory's kind would only teach the model which set it is looking at.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from engramdb.retrieval.evidence import pool_terms, stem, term_weight
from engramdb.retrieval.ranking import Fused, RankingWeights, scaled
from engramdb.storage.base import Candidate

__all__ = ["FEATURES", "LEARNED", "LearnedScorer", "candidate_features", "fuse_learned"]

#: The features of a candidate, in order (each in [0, 1]):
#: ``cosine`` (vector score; a candidate the vector channel did not return gets the lowest it returned, as in
#: evidence fusion), ``vector_rank`` and ``keyword_rank`` (log position, 1 when the channel did not return it),
#: ``in_vector``, ``in_keyword``, ``both``, ``keyword_share`` (keyword score / the channel's best), ``coverage``
#: (share of the query's stems, IDF over the candidates), ``english_coverage`` (the same, words weighted by their
#: rarity in English), ``matched_share`` (share of the query's stems, unweighted), ``rarest`` (IDF of the rarest
#: stem it holds / of the query's rarest), ``weak_coverage`` (coverage when the vector channel's best leads its
#: runner-up by 0.05 or more and no candidate holds 0.3 of the query's words, else 0: the hand rule's "sure model
#: against weak words", so that rule is one of the scorers this family holds: cosine + 0.6 coverage - 0.3
#: weak_coverage) and ``coverage_x_best`` (coverage x the best coverage among the candidates).
#: Not features, on purpose: a text's length (fitted on the recall set alone it took the largest weight, as its
#: right memories are longer than its chat noise, and cost LongMemEval's long assistant replies half their turn
#: recall) and the gap to the vector channel's best (the same as cosine between two candidates of one search).
FEATURES: Final = (
    "cosine",
    "vector_rank",
    "keyword_rank",
    "in_vector",
    "in_keyword",
    "both",
    "keyword_share",
    "coverage",
    "english_coverage",
    "matched_share",
    "rarest",
    "weak_coverage",
    "coverage_x_best",
)

#: Evidence fusion's "sure model" gate, at its defaults: the weights were fitted with it.
_SURE_LEAD: Final = RankingWeights().sure_lead
_SURE_WEAK: Final = RankingWeights().sure_weak
#: Ranks past this count as "not returned" (the channels' depth; deeper ranks are clipped to it).
_DEPTH: Final = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnedScorer:
    """``score = sum(weights[i] * feature[i])`` over :data:`FEATURES`; ``source`` says where the weights came from."""

    weights: tuple[float, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES):
            raise ValueError(
                f"a learned scorer needs {len(FEATURES)} weights, one per feature, got {len(self.weights)}"
            )
        if not all(math.isfinite(w) for w in self.weights):
            raise ValueError("learned scorer weights must be finite numbers")

    def score(self, features: Sequence[float]) -> float:
        return sum(w * x for w, x in zip(self.weights, features, strict=True))


#: Fitted by ``python bench/fit_ranker.py`` (its defaults: softmax loss over each question's candidates, pulled
#: towards evidence fusion's rule with l2 1e-3, train parts only; scaled so the largest weight is 1). Not the
#: default fusion: it does not beat that rule on every held part (bench/RESULTS.md, "Issue 21, learned fusion").
LEARNED: Final = LearnedScorer(
    weights=(1.0, 0.0772, -0.0488, 0.0262, -0.0075, 0.0187, -0.0277, 0.4531, 0.0395, -0.0849, 0.0143, -0.2868, -0.2105),
    source="bench/fit_ranker.py: listwise, prior 20 x rule, l2 1e-3; train parts of recall set, LoCoMo, LongMemEval",
)


def _log_rank(position: int | None) -> float:
    if position is None:
        return 1.0
    return math.log1p(min(position, _DEPTH)) / math.log1p(_DEPTH)


def candidate_features(
    keyword: Sequence[Candidate], vector: Sequence[Candidate], texts: Mapping[str, str], terms: Sequence[str]
) -> dict[str, tuple[float, ...]]:
    """Each candidate of either channel (vector's first, then keyword's, in their order) with its :data:`FEATURES`.

    ``texts``: the candidates' contents (a candidate without one holds no words); ``terms``: the query's content
    words, as the keyword channel got them.
    """
    vec_raw = {c.id: c.score for c in vector}
    kw_raw = {c.id: c.score for c in keyword}
    vec_pos = {c.id: i for i, c in enumerate(vector)}
    kw_pos = {c.id: i for i, c in enumerate(keyword)}
    ids = list(dict.fromkeys([*vec_raw, *kw_raw]))
    floor = max(0.0, min(vec_raw.values(), default=0.0))
    lead = vector[0].score - vector[1].score if len(vector) > 1 else 0.0
    kw_top = max((s for s in kw_raw.values() if s > 0), default=0.0)
    pool = pool_terms(terms, {i: texts[i] for i in ids if i in texts})
    idf_total = sum(pool.idf)
    idf = dict(zip(pool.stems, pool.idf, strict=True))
    rarest_query = max(pool.idf, default=0.0)
    english = {s: term_weight(t) for t, s in zip(terms, [stem(t) for t in terms], strict=True) if s}
    english_total = sum(english.values())
    n_stems = len(pool.stems)
    held = {i: pool.present.get(i, set()) for i in ids}
    cover = {i: sum(idf[s] for s in held[i]) / idf_total if idf_total > 0 else 0.0 for i in ids}
    best = max(cover.values(), default=0.0)
    weak = lead >= _SURE_LEAD and best < _SURE_WEAK
    out: dict[str, tuple[float, ...]] = {}
    for i in ids:
        in_v, in_k = float(i in vec_raw), float(i in kw_raw)
        kw = kw_raw.get(i)
        c = cover[i]
        out[i] = (
            max(0.0, vec_raw.get(i, floor)),
            _log_rank(vec_pos.get(i)),
            _log_rank(kw_pos.get(i)),
            in_v,
            in_k,
            in_v * in_k,
            max(0.0, kw / kw_top) if kw is not None and kw_top > 0 else 0.0,
            c,
            sum(english.get(s, 0.0) for s in held[i]) / english_total if english_total > 0 else 0.0,
            len(held[i]) / n_stems if n_stems else 0.0,
            max((idf[s] for s in held[i]), default=0.0) / rarest_query if rarest_query > 0 else 0.0,
            c if weak else 0.0,
            c * best,
        )
    return out


def fuse_learned(
    keyword: Sequence[Candidate],
    vector: Sequence[Candidate],
    texts: Mapping[str, str],
    terms: Sequence[str],
    *,
    scorer: LearnedScorer = LEARNED,
) -> list[Fused]:
    """Every candidate of either channel, its score scaled to [0, 1] within the search (as evidence fusion's, so the
    conversation steps and boosts after it see the same contrast), best first, ties broken by id."""
    feats = candidate_features(keyword, vector, texts, terms)
    return scaled({i: scorer.score(f) for i, f in feats.items()}, keyword, vector)

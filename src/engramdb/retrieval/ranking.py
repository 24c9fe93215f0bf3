"""Fusion of retrieval channels and the final ranking. Pure functions: values in, values out.

Fusion weighs each channel by its evidence (:func:`fuse_evidence`, the default): a candidate's raw cosine to
the query plus how much of the query's distinctive vocabulary it contains. Unlike per-query min-max
scaling (:func:`fuse`, kept as ``RankingWeights(fusion="minmax")``), a keyword channel whose best match
shares one common word with the query no longer counts as much as a decisive match; nor does a vector
channel that is merely ranking near-ties (bench/RESULTS.md, issue 21).

Relevance comes first. Recency, confidence, access and past success are *gentle*
multiplicative boosts: together they can reorder memories of similar relevance
but never lift an irrelevant memory over a relevant one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engramdb.embeddings.profile import DEFAULT_PROFILE, FusionProfile
from engramdb.errors import ValidationError
from engramdb.models import Memory
from engramdb.retrieval.evidence import pool_coverage
from engramdb.storage.base import Candidate

__all__ = ["Fused", "RankingWeights", "boost", "fuse", "fuse_by", "fuse_evidence", "rank", "scaled", "weights_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RankingWeights:
    """How much each signal may move a memory. Each boost term lies in [-w, +w]."""

    #: ``"evidence"``: :func:`fuse_evidence`; ``"minmax"``: :func:`fuse` (the rule before issue 21); ``"learned"``:
    #: :func:`engramdb.retrieval.learned.fuse_learned` (weights fitted by bench/fit_ranker.py).
    fusion: Literal["evidence", "minmax", "learned"] = "evidence"
    #: Evidence fusion: what a candidate holding all of the query's words gains, in cosine units.
    #: These four fields default to the bundled model's; a search takes its embedder's own
    #: (:mod:`engramdb.embeddings.profile`, :func:`weights_for`) unless it is given weights.
    coverage: float = DEFAULT_PROFILE.coverage
    #: Evidence fusion, a sure model against weak words: when the vector channel's best candidate leads its
    #: runner-up by ``sure_lead`` cosine or more (0: never) and no candidate holds ``sure_weak`` or more of
    #: the query's words, coverage counts ``sure_coverage`` x ``coverage`` (:func:`fuse_evidence`).
    sure_lead: float = DEFAULT_PROFILE.sure_lead
    sure_weak: float = DEFAULT_PROFILE.sure_weak
    sure_coverage: float = DEFAULT_PROFILE.sure_coverage
    #: Evidence fusion, a sure model on a paraphrase: when the vector channel's best candidate is a note (not a
    #: conversation turn), holds none of the query's words and leads by ``bare_lead`` or more (0: never), coverage
    #: counts ``bare_coverage`` x. From the embedder's profile.
    bare_lead: float = DEFAULT_PROFILE.bare_lead
    bare_coverage: float = DEFAULT_PROFILE.bare_coverage
    #: The sure-model rule's three values when the vector channel's best candidate is a note (any kind but a
    #: conversation turn); None: the same as for turns. From the embedder's profile like the four above (the bundled
    #: model: None; bench/RESULTS.md "Issue 21, models, third round").
    note_sure_lead: float | None = None
    note_sure_weak: float | None = None
    note_sure_coverage: float | None = None
    #: Min-max fusion: weight of the keyword channel; the vector channel gets ``1 - keyword``.
    keyword: float = 0.5
    recency: float = 0.05
    recency_half_life_days: float = 30.0
    confidence: float = 0.05
    access: float = 0.02
    success: float = 0.10

    def __post_init__(self) -> None:
        if self.fusion not in ("evidence", "minmax", "learned"):
            raise ValidationError(f"fusion must be 'evidence', 'learned' or 'minmax', not {self.fusion!r}")


def weights_for(profile: FusionProfile, base: RankingWeights | None = None) -> RankingWeights:
    """``base`` (the default weights if None) with ``profile``'s fusion constants: one embedder's ranking."""
    return dataclasses.replace(
        base if base is not None else RankingWeights(),
        coverage=profile.coverage,
        sure_lead=profile.sure_lead,
        sure_weak=profile.sure_weak,
        sure_coverage=profile.sure_coverage,
        note_sure_lead=profile.note_sure_lead,
        note_sure_weak=profile.note_sure_weak,
        note_sure_coverage=profile.note_sure_coverage,
        bare_lead=profile.bare_lead,
        bare_coverage=profile.bare_coverage,
    )


@dataclass(frozen=True, slots=True)
class Fused:
    """A candidate after fusion: its relevance in [0, 1] and the raw channel scores."""

    id: str
    relevance: float
    keyword_score: float | None
    vector_score: float | None


def _minmax(cands: Sequence[Candidate]) -> dict[str, float]:
    """Scale channel scores to [0, 1] within this query's candidates (1 = the channel's best)."""
    if not cands:
        return {}
    scores = [c.score for c in cands]
    hi, lo = max(scores), min(scores)
    span = hi - lo
    if span <= 1e-12:
        return {c.id: 1.0 for c in cands}
    return {c.id: (c.score - lo) / span for c in cands}


def fuse(keyword: Sequence[Candidate], vector: Sequence[Candidate], *, keyword_weight: float = 0.5) -> list[Fused]:
    """Relative-score fusion: min-max normalise each channel, then a convex combination.

    Unlike reciprocal-rank fusion, this keeps the *margin* by which a channel
    prefers a candidate, so a decisive keyword match is not diluted by a vector
    channel that is merely ranking near-ties. A candidate missing from a channel
    gets 0 from it. Ties are broken by id for determinism.
    """
    if not 0.0 <= keyword_weight <= 1.0:
        raise ValueError("keyword_weight must be within [0, 1]")
    kw_norm, vec_norm = _minmax(keyword), _minmax(vector)
    if not keyword:
        keyword_weight = 0.0
    elif not vector:
        keyword_weight = 1.0
    kw_raw = {c.id: c.score for c in keyword}
    vec_raw = {c.id: c.score for c in vector}
    out = [
        Fused(
            cid,
            keyword_weight * kw_norm.get(cid, 0.0) + (1.0 - keyword_weight) * vec_norm.get(cid, 0.0),
            kw_raw.get(cid),
            vec_raw.get(cid),
        )
        for cid in kw_raw.keys() | vec_raw.keys()
    ]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out


def fuse_evidence(
    keyword: Sequence[Candidate],
    vector: Sequence[Candidate],
    texts: Mapping[str, str],
    terms: Sequence[str],
    *,
    coverage_weight: float = 0.6,
    sure_lead: float = 0.0,
    sure_weak: float = 0.5,
    sure_coverage: float = 0.5,
    related: Mapping[str, Sequence[str]] | None = None,
    related_credit: float = 0.0,
    scale: Mapping[str, float] | None = None,
    bare_lead: float = 0.0,
    bare_coverage: float = 1.0,
) -> list[Fused]:
    """Evidence fusion: ``cosine + coverage_weight * coverage`` for every candidate of either channel.

    ``coverage`` (:func:`~engramdb.retrieval.evidence.pool_coverage`) is the IDF-weighted share of the query's
    ``terms`` in the candidate's text (``texts``; a candidate without one gets 0), the IDF taken over these
    candidates. A candidate the vector channel did not return gets the lowest cosine it returned: its own is
    no higher (and fetching it measured worse on LoCoMo, bench/RESULTS.md). A negative cosine counts as 0,
    so the evidence is never negative. Ties are broken by id.

    A sure model against weak words: when ``vector``'s best candidate (the list is best first) leads the next
    by ``sure_lead`` or more (0: never) and no candidate holds ``sure_weak`` or more of the query's words,
    coverage counts ``sure_coverage`` x ``coverage_weight``. A clear vector winner is then usually the memory
    meant, while a word or two the question shares with other memories is as often a decoy's; a candidate
    holding most of the question's words (a name and a rare word) still counts in full (bench/RESULTS.md,
    issue 21 third round).

    A sure model on a paraphrase (otherwise): when ``vector``'s best candidate holds none of the query's words and
    leads the next by ``bare_lead`` or more (0: never), coverage counts ``bare_coverage`` x ``coverage_weight``. The
    model found the memory meant in other words; the words the question shares with others are a decoy's
    (bench/RESULTS.md, "Issue 21, models, third round").

    ``related`` and ``related_credit``: a candidate holding a term's related word covers a share of it
    (:func:`~engramdb.retrieval.evidence.pool_coverage`).

    ``scale``: a term -> a factor in [0, 1] on its weight in coverage (the question's form words: "how many",
    "in total", "how long"; :func:`~engramdb.retrieval.text.form_words`).
    """
    if not 0.0 <= coverage_weight <= 10.0:
        raise ValueError("coverage_weight must be within [0, 10]")
    if not (0.0 <= sure_lead <= 2.0 and 0.0 <= sure_coverage <= 1.0 and 0.0 <= sure_weak <= 1.0):
        raise ValueError("sure_lead must be within [0, 2], sure_coverage and sure_weak within [0, 1]")
    if not 0.0 <= related_credit <= 1.0:
        raise ValueError("related_credit must be within [0, 1]")
    if not (0.0 <= bare_lead <= 2.0 and 0.0 <= bare_coverage <= 1.0):
        raise ValueError("bare_lead must be within [0, 2] and bare_coverage within [0, 1]")
    if scale and not all(0.0 <= f <= 1.0 for f in scale.values()):
        raise ValueError("scale factors must be within [0, 1]")
    vec_raw = {c.id: c.score for c in vector}
    kw_raw = {c.id: c.score for c in keyword}
    floor = min(vec_raw.values(), default=0.0)
    ids = list(dict.fromkeys([*vec_raw, *kw_raw]))
    cover = pool_coverage(
        terms, {i: texts[i] for i in ids if i in texts}, related=related, credit=related_credit, scale=scale
    )
    lead = vector[0].score - vector[1].score if len(vector) > 1 else 0.0
    if sure_lead > 0 and lead >= sure_lead and max(cover.values(), default=0.0) < sure_weak:
        coverage_weight *= sure_coverage
    elif bare_lead > 0 and lead >= bare_lead and cover.get(vector[0].id, 0.0) == 0.0:
        coverage_weight *= bare_coverage
    evidence = {i: max(0.0, vec_raw.get(i, floor)) + coverage_weight * cover.get(i, 0.0) for i in ids}
    return scaled(evidence, keyword, vector)


def scaled(evidence: Mapping[str, float], keyword: Sequence[Candidate], vector: Sequence[Candidate]) -> list[Fused]:
    """Each candidate's evidence scaled to [0, 1] within the search, as min-max fusion's were, best first (ties by id):
    the order is the evidence's, and the conversation context and boosts after it (tuned on that scale) see the
    same contrast."""
    kw_raw = {c.id: c.score for c in keyword}
    vec_raw = {c.id: c.score for c in vector}
    hi, lo = max(evidence.values(), default=1.0), min(evidence.values(), default=0.0)
    span = hi - lo
    out = [
        Fused(i, (e - lo) / span if span > 1e-12 else 1.0, kw_raw.get(i), vec_raw.get(i)) for i, e in evidence.items()
    ]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out


def fuse_by(
    weights: RankingWeights,
    keyword: Sequence[Candidate],
    vector: Sequence[Candidate],
    texts: Mapping[str, str],
    terms: Sequence[str],
    *,
    related: Mapping[str, Sequence[str]] | None = None,
    related_credit: float = 0.0,
    scale: Mapping[str, float] | None = None,
    note_first: bool = False,
) -> list[Fused]:
    """:func:`fuse_evidence` with ``weights``' coverage and sure-model fields; ``note_first``: the vector channel's
    best candidate is a note, not a conversation turn (the ``note_sure_*`` fields and the paraphrase rule,
    ``bare_lead``, then apply)."""

    def sure(value: float, note: float | None) -> float:
        return note if note_first and note is not None else value

    return fuse_evidence(
        keyword,
        vector,
        texts,
        terms,
        coverage_weight=weights.coverage,
        sure_lead=sure(weights.sure_lead, weights.note_sure_lead),
        sure_weak=sure(weights.sure_weak, weights.note_sure_weak),
        sure_coverage=sure(weights.sure_coverage, weights.note_sure_coverage),
        related=related,
        related_credit=related_credit,
        scale=scale,
        # On conversations a model's clear first is no evidence (bench/RESULTS.md, "Issue 21, models, third round").
        bare_lead=weights.bare_lead if note_first else 0.0,
        bare_coverage=weights.bare_coverage,
    )


def boost(memory: Memory, *, now: datetime, weights: RankingWeights) -> float:
    """The multiplicative factor applied to a memory's relevance, within [1 - W, 1 + W].

    W is the sum of the weights. Confidence and success are centred, so a memory
    with average confidence and no outcomes is neither helped nor hurt by them;
    recency and access only ever help (new and often-recalled memories rise).
    """
    age_days = max(0.0, (now - memory.created_at).total_seconds() / 86400.0)
    recency = math.exp(-math.log(2.0) * age_days / weights.recency_half_life_days)  # 1 new .. 0 old
    factor = 1.0 + weights.recency * recency
    factor += weights.confidence * (min(max(memory.confidence, 0.0), 1.0) - 0.5) * 2.0
    # log-saturating: the 100th access matters less than the 2nd.
    factor += weights.access * min(1.0, math.log1p(memory.access_count) / math.log1p(100.0))
    rate = memory.success_rate
    if rate is not None:
        # Shrunk towards neutral while evidence is thin.
        evidence = memory.attempts / (memory.attempts + 3.0)
        factor += weights.success * (rate - 0.5) * 2.0 * evidence
    return factor


def rank(
    fused: Sequence[Fused],
    memories: Mapping[str, Memory],
    *,
    now: datetime,
    weights: RankingWeights,
) -> list[tuple[Fused, Memory, float]]:
    """Apply boosts and order best first; candidates whose memory vanished are dropped."""
    scored = [
        (f, memories[f.id], f.relevance * boost(memories[f.id], now=now, weights=weights))
        for f in fused
        if f.id in memories
    ]
    scored.sort(key=lambda t: (-t[2], t[0].id))
    return scored

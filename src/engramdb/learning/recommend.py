"""Recommendations and explore/exploit choices from outcome records. Pure: values in, values out.

The learning service finds the decision records similar to a context (with their cosine
similarity) and hands them here. This module turns them into relevance-weighted,
recency-discounted Beta posteriors per action (:mod:`engramdb.learning.stats`) and

* :func:`suggest` ranks the options by posterior mean with credible intervals, and
  recommends the top one when a recommendation made on such evidence is usually right:
  ``confidence`` is the posterior probability that the top option beats the best other
  option, on its whole record and in the *recent view* (the same evidence with a short horizon,
  ``RecommendConfig.recent_horizon``: the last few similar outcomes), whichever is smaller, *calibrated* by a
  table measured on simulated streams (:data:`CALIBRATION`); the top option is
  recommended when that reaches ``min_confidence`` (0.5) with at least ``min_evidence``
  weighted outcomes *and* its record puts it ahead of the runner-up (its lead on the record above
  ``0.5 + ahead_margin``, 0.02: identical or indistinguishable records never give a recommendation, and such a top
  option is stated at no more than that lead less the margin, under one half).
  The recommendation is marked ``tentative`` below ``firm_evidence`` outcomes or ``firm_confidence``, and the
  reason says which. ``raw_confidence`` is the uncalibrated value.
  Why the recent view: a long record is what a favourite has right after the world changed
  too, so judged on its long record alone a well-evidenced favourite had to be distrusted
  everywhere; its last few outcomes tell a stale favourite from a sound one.
  When the close neighbourhood gives the top option under ``min_evidence`` weighted outcomes, the
  *wider* one (``pool_floor``, 0.15) answers: many weakly similar outcomes that agree are evidence
  too. Its confidence has its own table (:data:`CALIBRATION_POOLED`) and threshold
  (``pooled_min_confidence``), and such a recommendation is always tentative. :func:`choose` uses
  the close neighbourhood only.
* :func:`choose` draws a Thompson sample per option and takes the highest. The
  ``exploration`` setting (0..1) scales how far each draw may stray from its
  posterior mean: 1 is plain Thompson sampling, 0 is greedy. The setting's default is
  0.25: drawing from a narrower posterior than the exact one loses less to
  exploration over the short runs agents face (Chapelle and Li, "An Empirical
  Evaluation of Thompson Sampling", 2011, found the same for ad clicks), and
  ``bench/learning.py`` measures it against plain Thompson sampling. With the change rule cutting a stale
  record, a quarter-width draw also recovered faster after a change than a half-width one (0.5 until issue 12's
  seventh session; bench/RESULTS.md).

An outcome's relevance is its context's similarity to the question, times the overlap of its decision's choice set
(action and alternatives) with the options asked about (``RecommendConfig.option_exponent``, neutral when either is
unknown): two decisions made among different choices are likely different decisions, however alike their words.

The defaults of :class:`RecommendConfig` (similarity floor 0.3 and exponent 0.4 for MiniLM cosines,
a horizon of 25 similar outcomes, the change rule of :class:`~engramdb.learning.stats.ChangeRule`)
are the ones ``bench/learning.py`` measures; with
another embedding model the floor may need moving (cosines of unrelated texts differ
between models).

Randomness is seeded from the caller's seed *and* the inputs (context, options,
the evidence used), so the same question over the same data always gets the same
answer, while every new outcome gives fresh, independent draws.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

import numpy as np

from engramdb.learning._calibration import (
    CALIBRATION,
    CALIBRATION_LEARNED,
    CALIBRATION_LEARNED_POOLED,
    CALIBRATION_POOLED,
)
from engramdb.learning.exploring import draw_widths, fresh_attempts, optimistic_floors
from engramdb.learning.forgetting import best_horizon
from engramdb.learning.matching import contrast_factors, relative_agreements
from engramdb.learning.records import normalise_context
from engramdb.learning.stats import (
    ChangePoints,
    ChangeRule,
    Evidence,
    Posterior,
    Prior,
    RunLengths,
    credible_intervals,
    posteriors,
    prob_best,
    similarity_weight,
    thompson_choice,
)
from engramdb.models import DecisionRecord, OptionStats, Suggestion

__all__ = [
    "CALIBRATION",
    "CALIBRATION_LEARNED",
    "CALIBRATION_LEARNED_POOLED",
    "CALIBRATION_POOLED",
    "Assessment",
    "Neighbour",
    "RecommendConfig",
    "assess",
    "calibrated",
    "choose",
    "evidence",
    "option_posteriors",
    "rng_for",
    "suggest",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecommendConfig:
    """Tunables of outcome learning. The defaults are what ``bench/learning.py`` measures."""

    #: Cosine similarity at or below which another context's outcomes do not count (a ramp to 1 above it).
    similarity_floor: float = 0.3
    #: The ramp's shape: relevance is ``((cosine - floor) / (1 - floor)) ** similarity_exponent``.
    #: 0.4 (1, a straight ramp, before issue 12's seventh session): MiniLM puts rewordings of one situation at
    #: cosines of about 0.5, which the straight ramp counted a third of an outcome each, so a change took many
    #: outcomes to show; with 0.4 they count about two thirds (bench/RESULTS.md). The wider neighbourhood
    #: (``pool_floor``) keeps the straight ramp: there each weakly similar outcome should count little.
    similarity_exponent: float = 0.4
    #: Age at which an outcome counts half (None: age does not matter).
    half_life_days: float | None = 90.0
    #: Each later outcome in the neighbourhood discounts older ones by ``1 - 1/horizon`` (None: off).
    horizon: float | None = 25.0
    #: The horizon of the *recent view* (None: none). The ranking uses ``horizon``; the confidence is the top
    #: option's lead on that record or in the recent view (each newer similar outcome discounts older ones by
    #: ``1 - 1/recent_horizon``), whichever is smaller. A favourite that has just started failing keeps its long
    #: record but loses its recent lead at once, so the calibrated confidence drops where the world may have
    #: changed and stays high where recent outcomes agree (bench/RESULTS.md, issue 12).
    recent_horizon: float | None = 4.0
    #: Change detection: an action whose recent outcomes contradict its record loses the older record (None: off).
    #: :class:`~engramdb.learning.stats.ChangePoints` (Bayesian online change points) is the alternative; measured
    #: on the same streams it was not better (bench/RESULTS.md), so the simpler rule stays the default. The test on
    #: relevance with effective counts (``ChangeRule(undiscounted=True, effective_n=True)``) was measured too: it
    #: recovered faster (dev 59.2 -> 65.0%, test 58.5 -> 60.9%) but lost 4.2 points of settled success before the
    #: change on the test streams and 12.6 on multi-step episodes (false alarms: a test that never forgets sees long,
    #: mixed records, and episode credit that changes as later steps are learnt), so it is an option, not the default.
    #: So is the fifth session's ``ChangeRule(horizon=150, effective_n=True)`` (the test's own longer memory): store
    #: run recovery 56.7 -> 64.2%, but multi-step episodes 78.5 -> 65.8% and top-1 before the change 99.7 -> 90.3%.
    #: :class:`~engramdb.learning.runlength.RunLengths` (a change model that is a posterior, not a test) replaces the
    #: rule and the recency horizon: an option (bench/RESULTS.md, issue 25, item 11, seventh round).
    change: ChangeRule | ChangePoints | RunLengths | None = field(default_factory=ChangeRule)
    prior: Prior = field(default_factory=Prior)
    #: Credible level of the intervals.
    level: float = 0.95
    #: Recommend when the calibrated confidence is at least ``min_confidence``, the top option has at least
    #: ``min_evidence`` weighted outcomes nearby and its record puts it ahead (``ahead_margin``); the
    #: recommendation is *tentative* below ``firm_evidence`` weighted outcomes or below ``firm_confidence``.
    #: 0.5, not 0.7: measured on the simulated streams (bench/RESULTS.md, issue 12), 0.7 left the right top option
    #: unrecommended for 15% of held-out descriptions; at 0.5 with the ahead rule, recommendations stated at
    #: 50-70% are right about as often as stated, and they are marked tentative.
    min_evidence: float = 0.5
    min_confidence: float = 0.5
    #: The top option is *ahead* when its lead on the whole record (the posterior probability that it beats the
    #: runner-up) exceeds ``0.5 + ahead_margin``; otherwise it is never recommended (None: no such check). Identical
    #: records give 0.5 up to Monte Carlo error (standard error 0.008 at 4,000 draws; 0.02 is 2.5 of them) and
    #: records that differ only in how recency weighs the same outcomes give about 0.51; such top options were the
    #: right action 25% (dev) and 29% (test) of the time on the simulated streams. A top option that is not ahead
    #: is stated at no more than its lead less the margin (under one half): it is the best option only if it beats
    #: the runner-up, and the lead-based table, fitted mostly on top options that are ahead, states level ones at
    #: up to 65%. 0.02 (0.025 before issue 12's fifth session): chosen on the dev streams, leave-one-seed-out, as the
    #: largest margin that recommends the right top options leading by 0.52-0.525 (94.3 -> 95.3% of held-out
    #: descriptions right, precision 100% both); 0.015 gave the same, 0 lost precision (99.5%).
    ahead_margin: float | None = 0.02
    firm_evidence: float = 3.0
    firm_confidence: float = 0.9
    #: Calibration table of the confidence (see :data:`CALIBRATION`); None reports the raw probability.
    calibration: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] | None = CALIBRATION
    #: The wider neighbourhood's similarity floor, asked when the close one gives the top option fewer than
    #: ``min_evidence`` weighted outcomes (None: never): many weakly similar, agreeing outcomes are evidence too.
    pool_floor: float | None = 0.15
    #: Calibration of a confidence from the wider neighbourhood (see :data:`CALIBRATION_POOLED`), and the confidence
    #: it needs: the table's top knot (0.67), so a pooled recommendation is made only where the table is most sure
    #: and is stated at about two in three (0.8 before the exponent, when the table rose higher; on the test
    #: streams 11 pooled recommendations stated 0.66 were right 8 times, bench/RESULTS.md).
    pooled_min_confidence: float = 0.6
    pooled_calibration: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] | None = CALIBRATION_POOLED
    #: Relevance of an outcome is multiplied by the Jaccard overlap of its decision's choice set (action and
    #: alternatives) with the asked options, to this power (None: off; :mod:`engramdb.learning.matching`). Neutral
    #: for records without alternatives and questions without options. 1 since issue 25 (item 11): on the drift
    #: streams most wrong settled recommendations were another situation's best action borrowed through shared
    #: words (bench/RESULTS.md, issue 25, item 11, second round: 2 cut too much evidence).
    option_exponent: float | None = 1.0
    #: While the change rule holds an action's older record contradicted (a change detected nearby), :func:`choose`
    #: draws at least this wide (None: the caller's exploration throughout): the runner-up is tried sooner.
    explore_after_change: float | None = None
    #: An option with fewer weighted outcomes than this draws wider in :func:`choose`, up to plain Thompson sampling
    #: with none (None: the caller's exploration for all; :mod:`engramdb.learning.exploring`). Off by default: on the
    #: drift streams it made recommendations right more often and cost 2-5 points of success (bench/RESULTS.md,
    #: issue 25, item 11, third round).
    thin_evidence: float | None = None
    #: After a change the change rule detected nearby, while fewer than ``optimism_budget`` weighted outcomes follow
    #: it, :func:`choose` values every option with under ``optimism_thin`` weighted outcomes since the change at least
    #: at its posterior mean plus this many standard deviations (None: off; :mod:`engramdb.learning.exploring`).
    optimism: float | None = None
    optimism_thin: float = 2.0
    optimism_budget: float = 10.0
    #: In :func:`suggest`, an outcome's relevance is also multiplied by a soft contrast of its cosine with the mean of
    #: the question's five best (``exp(contrast * (cosine - mean))``, capped at 1; None: off;
    #: :func:`engramdb.learning.matching.contrast_factors`). :func:`choose` ignores it. Off: measured worse (unseen
    #: descriptions sit well below their best training match; bench/RESULTS.md, issue 25, item 11, third round).
    contrast: float | None = None
    #: Candidate horizons, one picked per question by how well it predicted the neighbourhood's outcomes (None: always
    #: ``horizon``; :mod:`engramdb.learning.forgetting`), and the horizon of that score. The first candidate is kept
    #: unless another predicted better by more than ``learned_margin`` nats. They serve :func:`suggest`; :func:`choose`
    #: uses them only with ``learned_in_choose``: there a short horizon picked on a few recent failures dropped a
    #: sound favourite's record and recovery fell (bench/RESULTS.md, issue 25, item 11, fifth round).
    learned_horizons: tuple[float, ...] | None = None
    learned_score_horizon: float = 50.0
    learned_margin: float = 0.0
    learned_in_choose: bool = False
    #: Most-similar decision records considered per question.
    candidates: int = 500
    #: Monte Carlo draws for the confidence.
    draws: int = 4000

    def __post_init__(self) -> None:
        if not 0.0 <= self.similarity_floor < 1.0:
            raise ValueError("similarity_floor must be within [0, 1)")
        if not (self.similarity_exponent > 0.0 and math.isfinite(self.similarity_exponent)):
            raise ValueError("similarity_exponent must be a positive number")
        if not 0.0 < self.level < 1.0:
            raise ValueError("level must be within (0, 1)")
        if not 0.0 <= self.pooled_min_confidence <= 1.0:
            raise ValueError("pooled_min_confidence must be within [0, 1]")
        if self.min_evidence < 0 or not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError("min_evidence must be >= 0 and min_confidence within [0, 1]")
        if self.ahead_margin is not None and not 0.0 <= self.ahead_margin < 0.5:
            raise ValueError("ahead_margin must be within [0, 0.5) (or None)")
        if self.firm_evidence < 0 or not 0.0 <= self.firm_confidence <= 1.0:
            raise ValueError("firm_evidence must be >= 0 and firm_confidence within [0, 1]")
        if self.pool_floor is not None and not 0.0 <= self.pool_floor <= self.similarity_floor:
            raise ValueError("pool_floor must be within [0, similarity_floor] (or None)")
        if self.recent_horizon is not None and not self.recent_horizon >= 1.0:
            raise ValueError("recent_horizon must be at least 1 (or None)")
        if self.option_exponent is not None and not (
            self.option_exponent >= 0.0 and math.isfinite(self.option_exponent)
        ):
            raise ValueError("option_exponent must be a non-negative number (or None)")
        if not (self.learned_margin >= 0.0 and math.isfinite(self.learned_margin)):
            raise ValueError("learned_margin must be a non-negative number")
        if self.explore_after_change is not None and not 0.0 <= self.explore_after_change <= 1.0:
            raise ValueError("explore_after_change must be within [0, 1] (or None)")
        if self.thin_evidence is not None and not (self.thin_evidence > 0.0 and math.isfinite(self.thin_evidence)):
            raise ValueError("thin_evidence must be a positive number (or None)")
        if self.optimism is not None and not (self.optimism >= 0.0 and math.isfinite(self.optimism)):
            raise ValueError("optimism must be a non-negative number (or None)")
        if not (self.optimism_thin > 0.0 and math.isfinite(self.optimism_thin)) or not self.optimism_budget >= 0.0:
            raise ValueError("optimism_thin must be positive and optimism_budget non-negative")
        if self.contrast is not None and not (self.contrast >= 0.0 and math.isfinite(self.contrast)):
            raise ValueError("contrast must be a non-negative number (or None)")
        if self.learned_horizons is not None and (
            not self.learned_horizons or any(not h >= 1.0 for h in self.learned_horizons)
        ):
            raise ValueError("learned_horizons must be horizons of at least 1 (or None)")
        if not self.learned_score_horizon >= 1.0:
            raise ValueError("learned_score_horizon must be at least 1")
        if self.candidates < 1 or self.draws < 1:
            raise ValueError("candidates and draws must be positive")


def calibrated(
    raw: float, evidence: float, table: Sequence[tuple[float, Sequence[tuple[float, float]]]] | None
) -> float:
    """The calibrated confidence of a top option with probability ``raw`` of beating the runner-up and ``evidence``
    weighted outcomes: the last band of ``table`` whose lower bound ``evidence`` reaches, interpolated."""
    if table is None or not table:
        return raw
    knots = table[0][1]
    for lower, band in table:
        if evidence >= lower:
            knots = band
    xs = [x for x, _ in knots]
    ys = [y for _, y in knots]
    return float(min(1.0, max(0.0, np.interp(raw, xs, ys))))


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A decision record found near the asked context, with its cosine similarity to it."""

    record: DecisionRecord
    cosine: float


#: Evidence thresholds are compared with this slack: the age discount makes one outcome recorded a moment ago
#: worth 0.99999...
_SLACK: Final = 1e-3


@functools.lru_cache(maxsize=8192)
def _normalised(text: str) -> str:
    # Cached: the same neighbours' contexts are normalised again for every view of every question.
    return normalise_context(text)


def evidence(
    context: str,
    neighbours: Iterable[Neighbour],
    *,
    config: RecommendConfig,
    options: Sequence[str] | None = None,
) -> list[Evidence]:
    """Relevance-weighted evidence: an identical context (ignoring case and spacing) weighs 1; with
    ``config.option_exponent``, a decision made among other choices than ``options`` weighs less."""
    key = _normalised(context)
    asked = None if options is None or config.option_exponent is None else frozenset(options)
    weighed: list[tuple[DecisionRecord, float]] = []
    kept_cos: list[float] = []
    for n in neighbours:
        same = _normalised(n.record.context) == key
        relevance = (
            1.0
            if same
            else similarity_weight(n.cosine, floor=config.similarity_floor, exponent=config.similarity_exponent)
        )
        if relevance > 0.0:
            weighed.append((n.record, relevance))
            kept_cos.append(1.0 if same else n.cosine)
    if config.contrast is not None and weighed:
        sharp = contrast_factors(kept_cos, sharpness=config.contrast)
        weighed = [(r, w * f) for (r, w), f in zip(weighed, sharp, strict=True)]
    if asked is not None and config.option_exponent is not None:
        factors = relative_agreements(
            [(r.action, r.alternatives) for r, _ in weighed], asked, exponent=config.option_exponent
        )
        weighed = [(r, w * f) for (r, w), f in zip(weighed, factors, strict=True)]
    out = []
    for r, w in weighed:
        if w > 0.0:
            out.append(Evidence(action=r.action, success=r.success, relevance=w, at=r.at))
    return out


def option_posteriors(
    context: str,
    neighbours: Sequence[Neighbour],
    *,
    now: datetime,
    config: RecommendConfig,
    options: Sequence[str] | None = None,
) -> list[Posterior]:
    """The posterior of every option; without ``options``, of every action seen nearby (and its alternatives)."""
    ev = evidence(context, neighbours, config=config, options=options)
    relevant = {e.action for e in ev}
    if options is None:
        # Alternatives that were available in relevant situations are options too, even if never tried.
        seen: dict[str, None] = {}
        for n in neighbours:
            if n.record.action in relevant:
                seen.update(dict.fromkeys(n.record.alternatives))
        universe: list[str] = [*dict.fromkeys(e.action for e in ev), *seen]
    else:
        universe = list(options)
    horizon = config.horizon
    if config.learned_horizons is not None and ev:
        horizon = best_horizon(
            [e.action for e in ev],
            [e.success for e in ev],
            [e.relevance for e in ev],
            [e.at.timestamp() for e in ev],
            candidates=config.learned_horizons,
            prior=config.prior,
            score_horizon=config.learned_score_horizon,
            margin=config.learned_margin,
        )
    post = posteriors(
        ev,
        now=now,
        prior=config.prior,
        half_life_days=config.half_life_days,
        horizon=horizon,
        actions=universe,
        change=config.change,
    )
    return [post[a] for a in dict.fromkeys(universe)]


def rng_for(seed: int, *parts: object) -> np.random.Generator:
    """A generator seeded by ``seed`` and a stable digest of ``parts`` (same inputs, same stream)."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=16).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF, *words]))


def _fingerprint(neighbours: Sequence[Neighbour]) -> str:
    """A digest of the evidence's content (not its ids): two stores with the same history agree."""
    digest = hashlib.blake2b(digest_size=16)
    for item in sorted((_normalised(n.record.context), n.record.action, n.record.success) for n in neighbours):
        digest.update(repr(item).encode("utf-8"))
    return digest.hexdigest()


def _ordered(options: Sequence[Posterior]) -> list[Posterior]:
    # Best first: posterior mean, then more evidence, then name (for a stable order).
    return sorted(options, key=lambda p: (-p.mean, -p.attempts, p.action))


def _lead(view: Sequence[Posterior], action: str, prior: Prior, *, rng: np.random.Generator, draws: int) -> float:
    """The posterior probability that ``action`` beats the best other option of ``view`` (an untried one, the
    prior, when it is alone): unlike the probability of being best of all, it means the same whatever the number
    of options. If another option leads, it falls under one half."""
    mine = next(p for p in view if p.action == action)
    others = sorted((p for p in view if p.action != action), key=lambda p: (-p.mean, -p.attempts, p.action))
    untried = Posterior(action="", alpha=prior.alpha, beta=prior.beta, successes=0.0, attempts=0.0)
    return float(prob_best([mine, others[0] if others else untried], rng=rng, draws=draws)[0])


@dataclass(frozen=True, slots=True)
class Assessment:
    """What :func:`suggest` judges a question on: the ranking and the raw (uncalibrated) leads of its top option."""

    #: The options, best first (of the pooled view when ``pooled``).
    ranked: tuple[Posterior, ...]
    #: The top option's lead on its whole record, and in the recent view (equal to ``long`` without one).
    long: float
    recent: float
    #: Weighted outcomes of the top option (in the view the ranking comes from).
    evidence: float
    #: True when the close neighbourhood held too little evidence and the wider one (``pool_floor``) answered.
    pooled: bool = False

    @property
    def raw(self) -> float:
        """The raw confidence: the smaller lead (the recent view only ever lowers it)."""
        return min(self.long, self.recent)

    def ahead(self, margin: float | None) -> bool:
        """Whether the record puts the top option ahead of the runner-up: its lead on the whole record exceeds
        ``0.5 + margin`` (always, with no margin). The recent view does not count here: a right favourite's last
        few outcomes often have another option level or ahead, and its calibration already weighs that."""
        return margin is None or self.long > 0.5 + margin


def _leads(
    context: str,
    neighbours: Sequence[Neighbour],
    ranked: Sequence[Posterior],
    *,
    now: datetime,
    config: RecommendConfig,
    options: Sequence[str] | None,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """How clearly the top option leads: on the whole (discounted) record, and in the recent view. A streak of
    recent successes does not make a record that does not separate the options separate them, while recent
    failures of a favourite are what a change of the world looks like; the caller takes the smaller."""
    top = ranked[0].action
    lead = _lead(ranked, top, config.prior, rng=rng, draws=config.draws)
    runs = config.change if isinstance(config.change, RunLengths) else None
    if config.recent_horizon is None or (runs is None and config.recent_horizon == config.horizon):
        return lead, lead
    if runs is not None and not runs.recent:
        return lead, lead
    # The recent view: the last few similar outcomes under the recency discount and the change rule (with run
    # lengths too: it is what tells a favourite that has just started failing, and what the tables were fitted on).
    recent = option_posteriors(
        context,
        neighbours,
        now=now,
        config=replace(
            config,
            horizon=config.recent_horizon,
            learned_horizons=None,
            change=ChangeRule() if runs is not None else config.change,
        ),
        options=options,
    )
    return lead, _lead(recent, top, config.prior, rng=rng, draws=config.draws)


def assess(
    context: str,
    neighbours: Sequence[Neighbour],
    *,
    now: datetime,
    config: RecommendConfig,
    seed: int,
    options: Sequence[str] | None = None,
) -> Assessment:
    """Rank the options for ``context`` and measure the top option's lead (see :class:`Assessment`).

    When the close neighbourhood (``similarity_floor``) gives the top option fewer than ``min_evidence`` weighted
    outcomes and ``pool_floor`` is set, the wider neighbourhood answers instead: many weakly similar outcomes that
    agree are evidence too, each counted by its own (small) similarity above ``pool_floor``. Its confidence has a
    calibration of its own (``pooled_calibration``), measured where such pooling happens in the simulated streams
    (early, before much close evidence exists), where wide neighbourhoods mix situations."""
    ranked = _ordered(option_posteriors(context, neighbours, now=now, config=config, options=options))
    pooled = False
    if config.pool_floor is not None and (not ranked or ranked[0].attempts < config.min_evidence - _SLACK):
        wide = replace(config, similarity_floor=config.pool_floor, similarity_exponent=1.0)
        wide_ranked = _ordered(option_posteriors(context, neighbours, now=now, config=wide, options=options))
        if wide_ranked and wide_ranked[0].attempts > (ranked[0].attempts if ranked else 0.0):
            ranked, config, pooled = wide_ranked, wide, True
    if not ranked:
        return Assessment(ranked=(), long=0.0, recent=0.0, evidence=0.0)
    rng = rng_for(seed, "suggest", normalise_context(context), tuple(sorted(p.action for p in ranked)))
    long, recent = _leads(context, neighbours, ranked, now=now, config=config, options=options, rng=rng)
    return Assessment(ranked=tuple(ranked), long=long, recent=recent, evidence=ranked[0].attempts, pooled=pooled)


def suggest(
    context: str,
    neighbours: Sequence[Neighbour],
    *,
    now: datetime,
    config: RecommendConfig,
    seed: int,
    options: Sequence[str] | None = None,
    limit: int = 5,
) -> Suggestion:
    """What to do in ``context``: options best first with intervals, and a recommendation if warranted."""
    judged = assess(context, neighbours, now=now, config=config, seed=seed, options=options)
    ranked = list(judged.ranked)
    if not ranked:
        return Suggestion(context=context, recommended=None, confidence=0.0, options=[], reason="no similar outcomes")
    low, high = credible_intervals([p.alpha for p in ranked], [p.beta for p in ranked], level=config.level)
    stats = [
        OptionStats(
            action=p.action,
            successes=round(p.successes, 6),
            attempts=round(p.attempts, 6),
            success_rate=p.mean,
            low=float(lo),
            high=float(hi),
        )
        for p, lo, hi in zip(ranked, low, high, strict=True)
    ]
    top = ranked[0]
    raw = judged.raw
    table = config.pooled_calibration if judged.pooled else config.calibration
    confidence = calibrated(raw, top.attempts, table)
    ahead = judged.ahead(config.ahead_margin)
    if not ahead:
        # Options the record does not separate: the top one is the best only if it beats the runner-up, whose
        # probability (the lead, less its Monte Carlo margin) is at most one half here, while the lead-based table
        # would state it at up to 65%. Measured, such top options were right 25-29% of the time (bench/RESULTS.md).
        confidence = min(confidence, judged.long - (config.ahead_margin or 0.0))
    tentative = False
    runner = f"{ranked[1].action!r}" if len(ranked) > 1 else "an untried alternative"
    if top.attempts < config.min_evidence - _SLACK or top.attempts <= 0.0:
        recommended = None
        reason = (
            f"too little evidence: {top.action!r} has {top.attempts:.1f} weighted outcomes in similar contexts "
            f"(at least {config.min_evidence:g} needed)"
        )
    elif not ahead:
        recommended = None
        reason = (
            f"evidence does not separate the options: {top.action!r} is not ahead of {runner} on its record "
            f"(probability {judged.long:.0%} that it is better; over {0.5 + (config.ahead_margin or 0.0):.1%} "
            f"needed); right with probability {confidence:.0%}"
        )
    elif confidence < (needed := config.pooled_min_confidence if judged.pooled else config.min_confidence):
        recommended = None
        reason = (
            f"evidence does not separate the options: {top.action!r} is right with probability {confidence:.0%}"
            f" over {runner} (at least {needed:.0%} needed)"
        )
    else:
        recommended = top.action
        why = []
        if judged.pooled:
            why.append("pooled from less similar contexts")
        if top.attempts < config.firm_evidence - _SLACK:
            why.append(f"little evidence so far ({top.attempts:.1f} weighted outcomes, {config.firm_evidence:g} firm)")
        if confidence < config.firm_confidence:
            why.append(f"calibrated confidence {confidence:.2f} ({config.firm_confidence:g} firm)")
        tentative = bool(why)
        reason = (
            f"{top.action!r} succeeded in {top.successes:.1f} of {top.attempts:.1f} weighted outcomes in similar "
            f"contexts (estimated rate {top.mean:.0%}); right with probability {confidence:.0%}"
            + (f"; tentative: {', '.join(why)}" if tentative else "")
        )
    return Suggestion(
        context=context,
        recommended=recommended,
        confidence=confidence,
        options=stats[:limit],
        reason=reason,
        tentative=tentative,
        evidence=round(top.attempts, 6),
        raw_confidence=raw,
    )


def choose(
    context: str,
    options: Sequence[str],
    neighbours: Sequence[Neighbour],
    *,
    now: datetime,
    config: RecommendConfig,
    seed: int,
    exploration: float,
) -> str:
    """One option by Thompson sampling over the options' posteriors (unseen options get the prior)."""
    # The close neighbourhood only: choosing learns fast enough from it, and the draws stay those of the same
    # evidence however wide the caller's search was (the wider one serves suggest's thin questions).
    neighbours = [n for n in neighbours if n.cosine > config.similarity_floor]
    config = replace(
        config, contrast=None, learned_horizons=config.learned_horizons if config.learned_in_choose else None
    )
    post = option_posteriors(context, neighbours, now=now, config=config, options=options)
    rng = rng_for(seed, "choose", normalise_context(context), tuple(options), _fingerprint(neighbours))
    if not math.isfinite(exploration):
        raise ValueError("exploration must be a finite number")
    if config.explore_after_change is not None and config.change is not None:
        kept = option_posteriors(context, neighbours, now=now, config=replace(config, change=None), options=options)
        # The change rule cut some older record: draw wider until the new order is known.
        if sum(p.attempts for p in kept) - sum(p.attempts for p in post) > _SLACK:
            exploration = max(exploration, config.explore_after_change)
    widths = draw_widths([p.attempts for p in post], exploration=exploration, thin=config.thin_evidence)
    return post[
        thompson_choice(
            post,
            rng=rng,
            exploration=widths,
            floors=_optimism(context, neighbours, post, now=now, config=config, options=options),
        )
    ].action


def _optimism(
    context: str,
    neighbours: Sequence[Neighbour],
    post: Sequence[Posterior],
    *,
    now: datetime,
    config: RecommendConfig,
    options: Sequence[str],
) -> list[float] | None:
    """The optimistic floors of :func:`choose` (``RecommendConfig.optimism``), or None where none apply: no option,
    no change detected nearby (the change rule cut nothing), or the budget of outcomes since the change is spent."""
    rule = config.change
    if config.optimism is None or not isinstance(rule, ChangeRule) or rule.keep >= 1.0:
        return None
    kept = option_posteriors(context, neighbours, now=now, config=replace(config, change=None), options=options)
    cut = [p.attempts for p in post]
    if sum(p.attempts for p in kept) - sum(cut) <= _SLACK:
        return None
    fresh = fresh_attempts([p.attempts for p in kept], cut, keep=rule.keep)
    if sum(fresh) >= config.optimism_budget:
        return None
    return optimistic_floors(
        [p.mean for p in post],
        [math.sqrt(p.variance) for p in post],
        fresh,
        bonus=config.optimism,
        thin=config.optimism_thin,
    )

"""Outcome statistics. Pure functions: values in, values out (``now`` and randomness are passed in).

The model, in one paragraph: every recorded outcome is a piece of evidence
``(action, success, relevance, time)`` where ``success`` is a weight in [0, 1]
(1 = success, 0 = failure, 0.5 = partial; a reward r in [-1, 1] maps to
(r + 1) / 2) and ``relevance`` in [0, 1] says how much the context it was
recorded in resembles the one asked about. Evidence is discounted twice: by age
(a half-life in days) and by *later relevant evidence* (each newer outcome in
the neighbourhood multiplies the weight of older ones by ``1 - 1/horizon``, the
discount of discounted Thompson sampling), so a world that changes is noticed
after a few dozen outcomes whether the agent acts every second or every week.
The discounted, relevance-weighted counts update a Beta prior into a Beta
posterior per action; intervals are equal-tailed Beta credible intervals,
choices are Thompson samples, and the confidence of a recommendation is the
posterior probability that it is the best option, estimated by sampling.

Trends use the Cochran-Armitage test for trend in proportions (the score test of
a logistic-regression slope), two-sided, on the time order of the outcomes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import numpy as np
import numpy.typing as npt

from engramdb._validate import shown
from engramdb.errors import ValidationError
from engramdb.learning._prior import Prior
from engramdb.learning.change import (
    ChangePoints,
    ChangeRule,
    change_cut,
    change_discounts,
    changepoint_weights,
    earlier_regime,
)
from engramdb.learning.runlength import RunLengths, beta_of, run_length_estimates
from engramdb.models import TrendTest

__all__ = [
    "OUTCOME_WORDS",
    "ChangePoints",
    "ChangeRule",
    "Evidence",
    "Posterior",
    "Prior",
    "RunLengths",
    "change_discounts",
    "change_test_weights",
    "changepoint_weights",
    "credible_interval",
    "credible_intervals",
    "discount_weights",
    "exact_intervals",
    "posteriors",
    "prob_best",
    "prob_greater",
    "similarity_weight",
    "success_weight",
    "thompson_choice",
    "trend_test",
]

#: Outcome words and the success weight each one stands for.
OUTCOME_WORDS: Final[Mapping[str, float]] = {"success": 1.0, "failure": 0.0, "partial": 0.5}

_SECONDS_PER_DAY: Final = 86400.0


# -- outcomes --------------------------------------------------------------------------------------------------


def success_weight(outcome: object) -> float:
    """An outcome as a success weight in [0, 1].

    ``"success"``/``"failure"``/``"partial"`` (any case) give 1, 0 and 0.5; ``True``/``False``
    give 1 and 0; a number is a reward in [-1, 1] mapped linearly ((r + 1) / 2), so a
    reward of 0 is as good as a partial success. Anything else raises ValidationError.
    """
    if isinstance(outcome, bool):
        return 1.0 if outcome else 0.0
    if isinstance(outcome, str):
        word = outcome.strip().lower()
        if word in OUTCOME_WORDS:
            return OUTCOME_WORDS[word]
        raise ValidationError(
            f"unknown outcome {shown(outcome)}: use success, failure, partial, a boolean or a reward in [-1, 1]"
        )
    if isinstance(outcome, int | float) and not isinstance(outcome, bool):
        try:
            reward = float(outcome)
        except OverflowError:
            reward = math.inf  # a huge integer: refused below like any reward out of range
        if not math.isfinite(reward) or not -1.0 <= reward <= 1.0:
            raise ValidationError(f"a reward must be a number within [-1, 1], not {shown(outcome)}")
        return (reward + 1.0) / 2.0
    raise ValidationError(
        f"an outcome must be success, failure, partial, a boolean or a reward in [-1, 1], not {type(outcome).__name__}"
    )


def similarity_weight(cosine: float, *, floor: float, exponent: float = 1.0) -> float:
    """How much evidence from a context with this cosine similarity counts, in [0, 1].

    ``((cosine - floor) / (1 - floor)) ** exponent``: 0 at ``floor``, 1 at an identical context, rising
    linearly with ``exponent`` 1 and steeply near the floor below 1. Contexts no more similar than the floor
    contribute nothing, so unrelated experience cannot drown a specific one however much of it there is.
    """
    if not 0.0 <= floor < 1.0:
        raise ValueError("floor must be within [0, 1)")
    if not (exponent > 0.0 and math.isfinite(exponent)):
        raise ValueError("exponent must be a positive number")
    if not math.isfinite(cosine):
        return 0.0
    return float(min(1.0, max(0.0, (cosine - floor) / (1.0 - floor))) ** exponent)


# -- evidence and posteriors -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """One recorded outcome as evidence about ``action`` in the context asked about."""

    action: str
    #: Success weight in [0, 1] (see :func:`success_weight`).
    success: float
    #: How relevant the recorded context is to the one asked about, in [0, 1].
    relevance: float
    #: When the outcome was recorded (timezone-aware).
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Posterior:
    """The Beta posterior of one action's success probability, and the weighted evidence behind it."""

    action: str
    alpha: float
    beta: float
    #: Discounted, relevance-weighted successes and attempts (the evidence, without the prior).
    successes: float
    attempts: float

    @property
    def mean(self) -> float:
        """Posterior mean success probability."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def variance(self) -> float:
        """Posterior variance."""
        n = self.alpha + self.beta
        return self.alpha * self.beta / (n * n * (n + 1.0))


def discount_weights(
    times: Sequence[datetime],
    relevance: Sequence[float],
    *,
    now: datetime,
    half_life_days: float | None,
    horizon: float | None,
) -> list[float]:
    """The recency discount of each piece of evidence, in (0, 1].

    Two factors: ``0.5 ** (age / half_life_days)`` for age, and
    ``(1 - 1/horizon) ** (relevance of strictly newer evidence)`` for later
    experience in the same neighbourhood. Evidence recorded at the same instant is
    discounted alike. ``None`` turns a factor off. Evidence from the future (clock
    skew) counts as new.
    """
    if len(times) != len(relevance):
        raise ValueError("times and relevance must have the same length")
    n = len(times)
    if n == 0:
        return []
    out = np.ones(n, dtype=np.float64)
    if half_life_days is not None:
        if not half_life_days > 0:
            raise ValueError("half_life_days must be positive")
        ages = np.array([max(0.0, (now - t).total_seconds()) / _SECONDS_PER_DAY for t in times])
        out *= np.exp2(-ages / half_life_days)
    if horizon is not None:
        if not horizon >= 1.0:
            raise ValueError("horizon must be at least 1")
        rel = np.clip(np.asarray(relevance, dtype=np.float64), 0.0, 1.0)
        stamps = np.array([t.timestamp() for t in times])
        order = np.argsort(-stamps, kind="stable")  # newest first
        sorted_stamps = stamps[order]
        cumulative = np.concatenate(([0.0], np.cumsum(rel[order])))
        # For each item: the relevance of items strictly newer than it (ties share the same discount).
        first_same = np.searchsorted(-sorted_stamps, -sorted_stamps, side="left")
        newer = np.empty(n)
        newer[order] = cumulative[first_same]
        if horizon > 1.0:
            out *= np.exp(newer * math.log1p(-1.0 / horizon))
        else:  # horizon 1: only the newest evidence counts
            out *= np.where(newer > 0, 0.0, 1.0)
    return [float(x) for x in out]


def change_test_weights(
    items: Sequence[Evidence], *, now: datetime, half_life_days: float | None, horizon: float | None, clock: str
) -> list[float]:
    """The recency discount of each piece of evidence in the change test: :func:`discount_weights` over all
    ``items`` (``clock="neighbourhood"``), or over each action's own items (``clock="action"``: only the action's own
    later outcomes age it; see ``ChangeRule.clock``)."""
    if clock == "neighbourhood":
        return discount_weights(
            [e.at for e in items], [e.relevance for e in items], now=now, half_life_days=half_life_days, horizon=horizon
        )
    out = [1.0] * len(items)
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(items):
        groups.setdefault(e.action, []).append(i)
    for idx in groups.values():
        own = discount_weights(
            [items[i].at for i in idx],
            [items[i].relevance for i in idx],
            now=now,
            half_life_days=half_life_days,
            horizon=horizon,
        )
        for i, w in zip(idx, own, strict=True):
            out[i] = w
    return out


def posteriors(
    evidence: Iterable[Evidence],
    *,
    now: datetime,
    prior: Prior | None = None,
    half_life_days: float | None = None,
    horizon: float | None = None,
    actions: Iterable[str] = (),
    change: ChangeRule | ChangePoints | RunLengths | None = None,
) -> dict[str, Posterior]:
    """Beta posteriors per action from relevance-weighted, recency-discounted evidence.

    Each piece adds ``w * success`` to alpha and ``w * (1 - success)`` to beta, where
    ``w = relevance * discount`` (see :func:`discount_weights`), times the multiplier of
    :func:`change_discounts` (a :class:`ChangeRule`) or :func:`changepoint_weights` (:class:`ChangePoints`)
    when a ``change`` rule is given. With :class:`RunLengths` each action's posterior is instead the moment-matched
    run-length mixture of :mod:`engramdb.learning.runlength` (``horizon`` is not used, the age half-life is).
    ``actions`` are included even without evidence (they get the prior). Keys keep first-seen order.
    """
    prior = prior or Prior()
    items = [e for e in evidence if e.relevance > 0.0]
    for e in items:
        if not 0.0 <= e.success <= 1.0 or not math.isfinite(e.success):
            raise ValueError(f"success weight must be within [0, 1], not {e.success!r}")
    if isinstance(change, RunLengths):
        return _run_length_posteriors(
            items, now=now, prior=prior, half_life_days=half_life_days, actions=actions, model=change
        )
    discounts = discount_weights(
        [e.at for e in items],
        [e.relevance for e in items],
        now=now,
        half_life_days=half_life_days,
        horizon=horizon,
    )
    if change is not None and items:
        undiscounted = isinstance(change, ChangeRule) and change.undiscounted
        tested = discounts
        if (
            isinstance(change, ChangeRule)
            and not undiscounted
            and (change.horizon is not None or change.clock != "neighbourhood")
        ):
            # The test's own memory (ChangeRule.horizon, ChangeRule.clock); the posterior keeps its discount.
            tested = change_test_weights(
                items, now=now, half_life_days=half_life_days, horizon=change.horizon or horizon, clock=change.clock
            )
        weights = [min(1.0, e.relevance) * (1.0 if undiscounted else d) for e, d in zip(items, tested, strict=True)]
        args = ([e.action for e in items], [e.success for e in items], weights, [e.at.timestamp() for e in items])
        if isinstance(change, ChangePoints):
            factors = changepoint_weights(*args, rule=change, prior=prior)
        else:
            factors, cut = change_cut(*args, rule=change)
            if change.restore and cut is not None:
                discounts, factors = _restored(
                    items,
                    discounts,
                    factors,
                    cut=cut,
                    rule=change,
                    now=now,
                    half_life_days=half_life_days,
                    horizon=horizon,
                )
        discounts = [d * f for d, f in zip(discounts, factors, strict=True)]
    succ: dict[str, float] = {}
    att: dict[str, float] = {}
    for action in actions:
        succ.setdefault(action, 0.0)
        att.setdefault(action, 0.0)
    for e, d in zip(items, discounts, strict=True):
        w = min(1.0, e.relevance) * d
        succ[e.action] = succ.get(e.action, 0.0) + w * e.success
        att[e.action] = att.get(e.action, 0.0) + w
    return {
        a: Posterior(
            action=a,
            alpha=prior.alpha + succ[a],
            beta=prior.beta + max(0.0, att[a] - succ[a]),
            successes=succ[a],
            attempts=att[a],
        )
        for a in att
    }


def _run_length_posteriors(
    items: Sequence[Evidence],
    *,
    now: datetime,
    prior: Prior,
    half_life_days: float | None,
    actions: Iterable[str],
    model: RunLengths,
) -> dict[str, Posterior]:
    """:func:`posteriors` under :class:`RunLengths`: the mixture as one Beta, its counts the evidence it amounts to."""
    ages = discount_weights(
        [e.at for e in items], [e.relevance for e in items], now=now, half_life_days=half_life_days, horizon=None
    )
    est = run_length_estimates(
        [e.action for e in items],
        [e.success for e in items],
        [min(1.0, e.relevance) * d for e, d in zip(items, ages, strict=True)],
        [e.at.timestamp() for e in items],
        model=model,
        prior=prior,
        universe=actions,
    )
    out = {}
    for a, (mean, var) in est.items():
        alpha, beta = beta_of(mean, var)
        attempts = max(0.0, alpha + beta - prior.alpha - prior.beta)
        succ = min(attempts, max(0.0, alpha - prior.alpha))
        out[a] = Posterior(action=a, alpha=alpha, beta=beta, successes=succ, attempts=attempts)
    return out


def _restored(
    items: Sequence[Evidence],
    discounts: Sequence[float],
    factors: Sequence[float],
    *,
    cut: float,
    rule: ChangeRule,
    now: datetime,
    half_life_days: float | None,
    horizon: float | None,
) -> tuple[list[float], list[float]]:
    """``ChangeRule.restore``: where the outcomes since the change at ``cut`` match an earlier regime, that regime's
    record counts again (factor 1) with the recency discount it had when it ended (the stretch in between, still cut,
    no longer discounts it); otherwise the discounts and factors as they were."""
    found = earlier_regime(
        [e.action for e in items],
        [e.success for e in items],
        [e.relevance for e in items],
        [e.at.timestamp() for e in items],
        cut=cut,
        rule=rule,
    )
    if found is None:
        return list(discounts), list(factors)
    restored, between = found
    skipped = discount_weights(
        [e.at for e in items],
        [0.0 if b else e.relevance for e, b in zip(items, between, strict=True)],
        now=now,
        half_life_days=half_life_days,
        horizon=horizon,
    )
    return (
        [s if r else d for d, s, r in zip(discounts, skipped, restored, strict=True)],
        [1.0 if r else f for f, r in zip(factors, restored, strict=True)],
    )


# -- intervals, sampling -------------------------------------------------------------------------------------


def credible_intervals(
    alpha: npt.ArrayLike, beta: npt.ArrayLike, *, level: float = 0.95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Equal-tailed Beta credible intervals (vectorised): the (1-level)/2 and (1+level)/2 quantiles."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be within (0, 1)")
    from scipy.special import betaincinv  # lazy: scipy costs ~0.2 s to import

    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    low = np.clip(np.asarray(betaincinv(a, b, tail), dtype=np.float64), 0.0, 1.0)
    high = np.clip(np.asarray(betaincinv(a, b, 1.0 - tail), dtype=np.float64), 0.0, 1.0)
    return low, high


def exact_intervals(
    successes: npt.ArrayLike, trials: npt.ArrayLike, *, level: float = 0.95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Clopper-Pearson ("exact") confidence intervals of observed shares ``successes / trials`` (vectorised).

    Unlike a credible interval around a posterior mean, it always contains the observed
    share (it reaches 0 or 1 when every trial failed or succeeded): what a chart of
    observed success rates should show. Successes may be fractional (partial outcomes).
    """
    if not 0.0 < level < 1.0:
        raise ValueError("level must be within (0, 1)")
    from scipy.special import betaincinv

    x = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n <= 0) or np.any(x < 0) or np.any(x > n):
        raise ValueError("need 0 <= successes <= trials and trials > 0")
    tail = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x > 0, betaincinv(np.maximum(x, 1e-12), n - x + 1.0, tail), 0.0)
        high = np.where(x < n, betaincinv(x + 1.0, np.maximum(n - x, 1e-12), 1.0 - tail), 1.0)
    return np.clip(np.asarray(low, dtype=np.float64), 0.0, 1.0), np.clip(np.asarray(high, dtype=np.float64), 0.0, 1.0)


def credible_interval(alpha: float, beta: float, *, level: float = 0.95) -> tuple[float, float]:
    """The equal-tailed Beta(alpha, beta) credible interval at ``level``."""
    low, high = credible_intervals([alpha], [beta], level=level)
    return float(low[0]), float(high[0])


def _params(options: Sequence[Posterior]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    return (
        np.array([p.alpha for p in options], dtype=np.float64),
        np.array([p.beta for p in options], dtype=np.float64),
    )


def thompson_choice(
    options: Sequence[Posterior],
    *,
    rng: np.random.Generator,
    exploration: float | Sequence[float] = 1.0,
    floors: Sequence[float] | None = None,
) -> int:
    """The index of the option a Thompson sample picks.

    Each option draws ``theta ~ Beta(alpha, beta)`` and the value it competes with
    is ``mean + exploration * (theta - mean)``: 1 is plain Thompson sampling, smaller
    values shrink every draw towards its posterior mean (its spread scales by
    ``exploration``), and 0 is greedy: the highest posterior mean wins, ties broken
    by the draws. ``floors`` (one per option) raise an option's value to at least its floor (an optimistic
    bonus). The generator is advanced the same way whatever ``exploration`` and ``floors`` are.
    """
    if not options:
        raise ValueError("no options to choose from")
    widths = np.asarray(exploration, dtype=np.float64)
    if widths.ndim > 1 or (widths.ndim == 1 and len(widths) != len(options)):
        raise ValueError("exploration must be one number or one per option")
    if not bool(np.all((widths >= 0.0) & (widths <= 1.0))):
        raise ValueError("exploration must be within [0, 1]")
    a, b = _params(options)
    theta = rng.beta(a, b)
    mean = a / (a + b)
    value = mean + widths * (theta - mean)
    if floors is not None:
        lows = np.asarray(floors, dtype=np.float64)
        if lows.shape != (len(options),) or bool(np.any(np.isnan(lows))):
            raise ValueError("floors must be one number per option")
        value = np.maximum(value, lows)
    # lexsort: last key is primary. Highest value first; exact ties go to the higher raw draw.
    return int(np.lexsort((-theta, -value))[0])


def prob_best(options: Sequence[Posterior], *, rng: np.random.Generator, draws: int = 4000) -> npt.NDArray[np.float64]:
    """For each option, the posterior probability that it is the best, by Monte Carlo."""
    if not options:
        return np.zeros(0)
    if len(options) == 1:
        return np.ones(1)
    a, b = _params(options)
    samples = rng.beta(a, b, size=(draws, len(options)))
    wins = np.bincount(np.argmax(samples, axis=1), minlength=len(options))
    return np.asarray(wins / draws, dtype=np.float64)


def prob_greater(alpha1: float, beta1: float, alpha2: float, beta2: float, *, grid: int = 4001) -> float:
    """P(X > Y) for independent X ~ Beta(alpha1, beta1) and Y ~ Beta(alpha2, beta2), by quadrature.

    ``integral of pdf_X(x) * cdf_Y(x) dx`` on an even grid (exact to about 1e-4 for the
    parameters of outcome counts); deterministic, unlike :func:`prob_best`.
    """
    from scipy.special import betainc
    from scipy.stats import beta as beta_dist

    for v in (alpha1, beta1, alpha2, beta2):
        if not v > 0 or not math.isfinite(v):
            raise ValueError("Beta parameters must be positive and finite")
    x = np.linspace(0.0, 1.0, grid)
    pdf = np.asarray(beta_dist.pdf(x, alpha1, beta1), dtype=np.float64)
    pdf[~np.isfinite(pdf)] = 0.0  # an infinite density at an end point carries no mass on the grid
    cdf = np.asarray(betainc(alpha2, beta2, x), dtype=np.float64)
    mass = pdf.sum()
    if mass <= 0.0:
        return 0.5
    return float(min(1.0, max(0.0, float((pdf * cdf).sum()) / mass)))


# -- trends --------------------------------------------------------------------------------------------------


def _rank(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Ranks 1..n with ties averaged."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_vals = values[order]
    i = 0
    n = len(values)
    while i < n:
        j = i
        while j + 1 < n and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def trend_test(
    successes: Sequence[float],
    times: Sequence[float] | None = None,
    *,
    alpha: float = 0.05,
    min_n: int = 10,
) -> TrendTest:
    """Is success getting better or worse over time? A Cochran-Armitage test for trend.

    ``successes`` are success weights in [0, 1] in time order (or with ``times``, any
    order, e.g. POSIX timestamps). The scores are the ranks of the times (robust to
    bursts of activity). The statistic is ``Z = sum((t - t_mean) * y) / sqrt(s2(y) *
    sum((t - t_mean)**2))``, the score test of the slope of a logistic regression of
    success on time, with ``s2`` the sample variance (``n/(n-1) * p(1-p)`` for 0/1
    outcomes: the exact variance of the statistic under random order, which also
    covers partial outcomes). Two-sided normal p-value; "improving"/"declining" when
    ``p < alpha``, else "stable"; fewer than ``min_n`` outcomes give "insufficient data".
    """
    y = np.asarray(successes, dtype=np.float64)
    n = len(y)
    if times is not None and len(times) != n:
        raise ValueError("successes and times must have the same length")
    if n and (np.any(y < 0.0) or np.any(y > 1.0) or not np.all(np.isfinite(y))):
        raise ValueError("success weights must be within [0, 1]")
    if n < max(min_n, 3):
        mean = float(y.mean()) if n else None
        return TrendTest(direction="insufficient data", z=0.0, p_value=1.0, n=n, early_rate=mean, late_rate=mean)
    t_raw = np.arange(n, dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
    order = np.argsort(t_raw, kind="stable")
    y_sorted = y[order]
    half = n // 2
    early, late = float(y_sorted[:half].mean()), float(y_sorted[half:].mean())
    t = _rank(t_raw)
    tc = t - t.mean()
    # The exact permutation variance of sum(tc * y) uses the n - 1 denominator.
    var_y = float(np.sum((y - y.mean()) ** 2) / (n - 1))
    sxx = float(np.sum(tc * tc))
    if var_y <= 1e-15 or sxx <= 0.0:  # all outcomes alike, or all at one instant: nothing can trend
        return TrendTest(direction="stable", z=0.0, p_value=1.0, n=n, early_rate=early, late_rate=late)
    z = float(np.sum(tc * y) / math.sqrt(var_y * sxx))
    p = math.erfc(abs(z) / math.sqrt(2.0))
    direction = "stable" if p >= alpha else ("improving" if z > 0 else "declining")
    return TrendTest(direction=direction, z=z, p_value=p, n=n, early_rate=early, late_rate=late)

"""Change as a posterior, not a test: each option's success probability under Bayesian online change-point detection
(Adams and MacKay, 2007). Pure: values in, values out.

The shipped change rule (:class:`~engramdb.learning.change.ChangeRule`) tests an option's newest outcomes against its
older record on recency-discounted weights; once a stale favourite stops being chosen, later outcomes of the other
options discount its recent failures, the test loses significance and the old record counts again (issue 12's
flicker: two thirds of the recovery gap on the drift streams, bench/RESULTS.md, issue 25, item 11, sixth round).
Here nothing is tested, cut or discounted by recency. Per option (``scope="action"``), its outcomes come in runs
within which its success probability is fixed (a Beta prior), and before each outcome the world has changed with
probability ``1 - (1 - hazard) ** g``, where ``g`` is the neighbourhood's relevance-weighted outcomes since the
option's previous one: the clock is the neighbourhood's, so an option left alone for long may have changed meanwhile,
and one tried at every visit is watched as closely as the visits come. The exact posterior over where the current
run starts, for each candidate hazard, with the hazards weighed by how well they predicted the neighbourhood's
outcomes (a posterior over a small grid, uniform prior), makes the option's success probability a mixture of Betas,
which also counts the chance of a change since its newest outcome. An old record fades as fast as the outcomes say,
and stays faded: the run-length posterior moves with the option's own outcomes and the time since them, not with how
other options' outcomes happen to weigh recent ones. ``scope="all"`` (the default) has one run for the whole
neighbourhood instead: a change resets every option, and the clock is each outcome's own weight.

The mixture is returned moment-matched to one Beta (its mean and variance), so Thompson draws and the confidence read
it like any posterior: right after a change its spread is wide, and narrows as the new run's outcomes come.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engramdb.learning._prior import Prior

__all__ = ["RunLengths", "beta_of", "run_length_estimates", "run_length_posterior"]

#: The weight below which an outcome is not evidence (as ``posteriors`` skips relevance 0).
_TINY = 1e-12


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLengths:
    """Bayesian online change points per option, the success estimate the run-length posterior's mixture.

    ``hazards``: candidate probabilities of a change per relevance-weighted outcome of the neighbourhood, weighed by
    the neighbourhood's outcomes (``1 / hazard`` is the expected number of outcomes between changes); one hazard is
    a fixed rate. ``scope``: ``"all"`` (one run for the neighbourhood, the default) or ``"action"`` (one per option).
    Replaces the recency horizon (``RecommendConfig.horizon``) and, unless ``recent``, the recent view; the age
    half-life still applies.
    """

    #: One rate, 0.03 (a change about every 33 outcomes): the grid (0.003, 0.01, 0.03, 0.1) weighed by the evidence
    #: learnt the neighbourhood's low rate and believed changes late; the fixed rate was better on dev and held-out
    #: streams (bench/RESULTS.md, issue 25, item 11, seventh round).
    hazards: tuple[float, ...] = (0.03,)
    #: "all" (one run for the neighbourhood: a change resets every option) measured better than "action" on the
    #: drift streams (bench/RESULTS.md, issue 25, item 11, seventh round).
    scope: str = "all"
    #: In ``suggest``, the confidence is still the smaller of the top option's lead on these posteriors and in the
    #: recent view (``RecommendConfig.recent_horizon``, with the default change rule); False: the lead alone (which
    #: states stale favourites of a gradual drift too high: at 95% precision 75.8 against 83.0 on dev streams).
    recent: bool = True

    def __post_init__(self) -> None:
        if (
            not isinstance(self.hazards, tuple)
            or not self.hazards
            or any(not (isinstance(h, int | float) and 0.0 < h < 1.0) for h in self.hazards)
        ):
            raise ValueError("run lengths: hazards must be a non-empty tuple of numbers within (0, 1)")
        if self.scope not in ("action", "all"):
            raise ValueError("run lengths: scope must be action or all")


def _predictive(p: npt.NDArray[np.float64], x: float, w: float) -> npt.NDArray[np.float64]:
    """The probability of outcome ``x`` under success probabilities ``p``, tempered by its weight ``w``."""
    q: npt.NDArray[np.float64]
    if x == 1.0:
        q = p
    elif x == 0.0:
        q = 1.0 - p
    else:
        q = np.exp(x * np.log(p) + (1.0 - x) * np.log1p(-p))
    return q if w == 1.0 else np.asarray(q**w, dtype=np.float64)


def _run_starts(
    codes: npt.NDArray[np.int64],
    x: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    change: npt.NDArray[np.float64],
    *,
    prior: Prior,
    n_codes: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The exact run-length recursion over items in time order, for each row of ``change`` (one per hazard: the
    probability of a change just before each item; the first item always starts a run).

    Returns P(the current run starts at item s) per row, each row's log evidence (the sum of its log one-step
    predictive probabilities), and the cumulative weighted successes and attempts per code (for the run counts)."""
    m = len(codes)
    succ_cum = np.zeros((n_codes, m + 1))
    att_cum = np.zeros((n_codes, m + 1))
    for c in range(n_codes):
        mask = codes == c
        succ_cum[c, 1:] = np.cumsum(np.where(mask, w * x, 0.0))
        att_cum[c, 1:] = np.cumsum(np.where(mask, w, 0.0))
    a, ab = prior.alpha, prior.alpha + prior.beta
    k = change.shape[0]
    stay = 1.0 - change
    xs, ws, cs = x.tolist(), w.tolist(), codes.tolist()
    # One buffer, its first t + 1 columns the run-start distribution after item t (fewer numpy calls per item: this
    # loop is the model's whole cost).
    buf = np.zeros((k, m))
    buf[:, 0] = 1.0
    first = _predictive(np.array([a / ab]), xs[0], ws[0])
    log_ev = np.full(k, math.log(max(float(first[0]), _TINY)))
    for t in range(1, m):
        # The predictive of item t for each run start s <= t: the counts of its code over items s..t-1.
        sc, ac = succ_cum[cs[t]], att_cum[cs[t]]
        p = (a + (sc[t] - sc[: t + 1])) / (ab + (ac[t] - ac[: t + 1]))
        head = buf[:, : t + 1]
        head[:, :t] *= stay[:, t : t + 1]
        head[:, t] = change[:, t]
        head *= _predictive(np.clip(p, 1e-12, 1.0 - 1e-12), xs[t], ws[t])
        total = head.sum(axis=1)
        if float(total.min()) <= 0.0:  # every start's predictive underflowed: no opinion on where the run starts
            head[:, :] = 1.0
            total = head.sum(axis=1)
        log_ev += np.log(total)
        head /= total[:, None]
    probs = buf
    return probs, log_ev, succ_cum, att_cum


def _mixture_moments(
    starts: npt.NDArray[np.float64],
    succ: npt.NDArray[np.float64],
    att: npt.NDArray[np.float64],
    fresh: npt.NDArray[np.float64],
    prior: Prior,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per row: the mean and second moment of the success probability under the mixture of run Betas (run from item
    s: ``succ[s]`` successes of ``att[s]`` attempts, weighted by ``starts[row, s]``), with ``fresh[row]`` the chance of
    a change since the newest outcome (the prior)."""
    a = prior.alpha + succ
    b = prior.beta + np.maximum(att - succ, 0.0)
    n = a + b
    mean_s = a / n
    e2_s = a * (a + 1.0) / (n * (n + 1.0))
    p0 = prior.alpha / (prior.alpha + prior.beta)
    e20 = prior.alpha * (prior.alpha + 1.0) / ((prior.alpha + prior.beta) * (prior.alpha + prior.beta + 1.0))
    mean = (1.0 - fresh) * (starts @ mean_s) + fresh * p0
    e2 = (1.0 - fresh) * (starts @ e2_s) + fresh * e20
    return mean, e2


def _hazard_weights(log_ev: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The posterior over the candidate hazards (uniform prior) from their log evidence."""
    z = log_ev - log_ev.max()
    p = np.exp(z)
    out: npt.NDArray[np.float64] = p / p.sum()
    return out


def run_length_posterior(
    successes: Sequence[float], weights: Sequence[float], *, hazard: float, prior: Prior
) -> list[float]:
    """For one option's outcomes in time order (one per tick of the clock, each tempered by its weight): the
    posterior probability that the current run starts at each of them, at a fixed ``hazard``."""
    if not 0.0 < hazard < 1.0:
        raise ValueError("hazard must be within (0, 1)")
    if len(successes) != len(weights):
        raise ValueError("successes and weights must have the same length")
    if not successes:
        return []
    x = np.clip(np.asarray(successes, dtype=np.float64), 0.0, 1.0)
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, 1.0)
    change = -np.expm1(math.log1p(-hazard) * w)[None, :]
    starts = _run_starts(np.zeros(len(x), dtype=np.int64), x, w, change, prior=prior, n_codes=1)[0]
    return [float(p) for p in starts[0]]


def run_length_estimates(
    actions: Sequence[str],
    successes: Sequence[float],
    weights: Sequence[float],
    times: Sequence[float],
    *,
    model: RunLengths,
    prior: Prior,
    universe: Iterable[str] = (),
) -> dict[str, tuple[float, float]]:
    """Each action's posterior mean and variance of its success probability under ``model`` (see the module).

    ``weights`` (relevance, times any age discount; clipped to [0, 1]) temper each outcome's likelihood and are the
    clock of the hazard; ``times`` order the outcomes (POSIX seconds; ties keep input order). Actions of ``universe``
    without evidence, like every action before its first outcome, get the prior. Keys: first-seen order."""
    n = len(actions)
    if not (len(successes) == len(weights) == len(times) == n):
        raise ValueError("actions, successes, weights and times must have the same length")
    p0 = prior.alpha / (prior.alpha + prior.beta)
    v0 = p0 * (1.0 - p0) / (prior.alpha + prior.beta + 1.0)
    out: dict[str, tuple[float, float]] = {}
    for a in universe:
        out.setdefault(a, (p0, v0))
    keep = [i for i in range(n) if min(1.0, max(0.0, weights[i])) > _TINY]
    order = sorted(keep, key=lambda i: times[i])
    if not order:
        for a in actions:
            out.setdefault(a, (p0, v0))
        return out
    names = {a: c for c, a in enumerate(dict.fromkeys(actions[i] for i in order))}
    for a in dict.fromkeys(actions):
        out.setdefault(a, (p0, v0))
    codes = np.array([names[actions[i]] for i in order], dtype=np.int64)
    x = np.clip(np.array([successes[i] for i in order], dtype=np.float64), 0.0, 1.0)
    w = np.clip(np.array([weights[i] for i in order], dtype=np.float64), 0.0, 1.0)
    log_keep = np.log1p(-np.asarray(model.hazards, dtype=np.float64))[:, None]  # one row per hazard
    clock = np.concatenate(([0.0], np.cumsum(w)))  # clock[i]: the weighted outcomes before item i
    if model.scope == "all":
        change = -np.expm1(log_keep * w[None, :])
        starts, log_ev, succ_cum, att_cum = _run_starts(codes, x, w, change, prior=prior, n_codes=len(names))
        hz = _hazard_weights(log_ev)
        fresh = np.zeros(len(hz))
        for a, c in names.items():
            s = succ_cum[c, -1] - succ_cum[c, :-1]
            t = att_cum[c, -1] - att_cum[c, :-1]
            mean, e2 = _mixture_moments(starts, s, t, fresh, prior)
            out[a] = _mean_var(float(hz @ mean), float(hz @ e2))
        return out
    moments: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
    total_ev = np.zeros(len(model.hazards))
    for a, c in names.items():
        pos = np.flatnonzero(codes == c)
        # The time since the option's previous outcome, up to and with this one, on the neighbourhood's clock.
        gaps = clock[pos + 1] - np.concatenate(([0.0], clock[pos[:-1] + 1]))
        change = -np.expm1(log_keep * gaps[None, :])
        zeros = np.zeros(len(pos), dtype=np.int64)
        starts, log_ev, succ_cum, att_cum = _run_starts(zeros, x[pos], w[pos], change, prior=prior, n_codes=1)
        total_ev += log_ev
        fresh = -np.expm1(log_keep[:, 0] * (clock[-1] - clock[pos[-1] + 1]))
        s = succ_cum[0, -1] - succ_cum[0, :-1]
        t = att_cum[0, -1] - att_cum[0, :-1]
        moments[a] = _mixture_moments(starts, s, t, fresh, prior)
    hz = _hazard_weights(total_ev)
    for a, (mean, e2) in moments.items():
        out[a] = _mean_var(float(hz @ mean), float(hz @ e2))
    return out


def _mean_var(mean: float, e2: float) -> tuple[float, float]:
    mean = min(1.0 - 1e-9, max(1e-9, mean))
    return mean, min(mean * (1.0 - mean) * (1.0 - 1e-9), max(1e-12, e2 - mean * mean))


def beta_of(mean: float, variance: float) -> tuple[float, float]:
    """The Beta(alpha, beta) with this mean and variance (the moment match of a mixture); its total is kept positive."""
    total = max(1e-3, mean * (1.0 - mean) / variance - 1.0)
    return mean * total, (1.0 - mean) * total

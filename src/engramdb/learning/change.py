"""Change detection over outcome evidence: has the world changed for an action (or the whole situation)?

Split from :mod:`engramdb.learning.stats` (which re-exports these names): two rules that give each piece of evidence
a multiplier in [0, 1], applied by :func:`engramdb.learning.stats.posteriors` on top of the recency discount.

* :class:`ChangeRule`: a two-sample test of an action's newest outcomes against its older record (the default);
* :class:`ChangePoints`: Bayesian online change-point detection (Adams and MacKay, 2007), measured and not adopted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engramdb.learning._prior import Prior
from engramdb.learning.runlength import _run_starts

__all__ = [
    "ChangePoints",
    "ChangeRule",
    "change_cut",
    "change_discounts",
    "changepoint_weights",
    "cusum_split",
    "earlier_regime",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeRule:
    """When an action's recent outcomes contradict its older record, the older record stops counting.

    For each action, its newest evidence worth ``window`` weighted outcomes (with ``scan``, the default:
    every newest stretch of at least that much, the most significant one) is compared with
    everything older (at least as much again): when the recent success share lies more than
    ``z`` standard errors from the older posterior mean (a two-sample test of proportions,
    the older side smoothed by a Beta(1, 1) prior), the world is taken to have changed for
    that action, and its older evidence is multiplied by ``keep``. ``scope="all"`` also
    discounts every other action's evidence older than the change, since a change in one
    option's outcome usually means the situation itself changed.
    """

    window: float = 2.0
    #: 2.0 (2.5 before): chosen on the dev streams of bench/learning.py as the bound with the best recovery that
    #: keeps success before the change (1.5 and 1.75 recovered faster but lost 0.8-1.2 points before it).
    z: float = 2.0
    keep: float = 0.1
    scope: str = "all"
    #: Also test every older split point (recent side of at least ``window``, older side too) and cut at the most
    #: significant one: a change stays detected after the stale favourite's next lucky success, which the newest
    #: window alone forgets.
    scan: bool = True
    #: Test on relevance alone, not recency-discounted weights, so a change stays detected once the stale favourite
    #: is no longer chosen. Faster recovery, less stability: off by default (see ``RecommendConfig.change``).
    undiscounted: bool = False
    #: Count each side as its Kish effective number of outcomes (``(sum w)^2 / sum w^2``), not its summed weight.
    effective_n: bool = False
    #: The recency horizon of the test's own weights (None: the posterior's ``horizon``). Longer than the posterior's,
    #: a detected change stays detected for longer after the stale favourite stops being chosen, while records still
    #: fade (unlike ``undiscounted``, whose ever-longer records raise false alarms). Ignored with ``undiscounted``.
    horizon: float | None = None
    #: Instead of the two-sample test: a Page-Hinkley (CUSUM) test per action, in time order, of each outcome against
    #: the action's running Beta(1, 1) mean since the last detected change (at least ``window`` weighted outcomes),
    #: two-sided, for a shift of ``shift``; it fires when the weighted log-likelihood ratio exceeds ``cusum``, and the
    #: change is placed where that sum last stood at zero (None: the two-sample test). Measured, not adopted
    #: (bench/RESULTS.md, issue 25, item 11, third round).
    cusum: float | None = None
    shift: float = 0.3
    #: With ``scope="all"``: when the outcomes since the detected change agree with the record from before the change
    #: preceding it (no action's share differs by more than ``z`` standard errors, at least one compared), the world
    #: is taken to have gone back to that earlier regime, and its record counts again, as it stood then: the stretch
    #: in between is cut and no longer discounts it (:func:`earlier_regime`; False: every older record is cut).
    restore: bool = False
    #: Instead of cutting an older record to ``keep`` at once, fade it by ``1 - 1/fade`` per weighted outcome since the
    #: change (of the action, or of any action for the cut of ``scope="all"``), down to ``keep`` (None: cut at once).
    #: A false alarm then costs little, a true change is forgotten as the outcomes since it accumulate.
    fade: float | None = None
    #: Whose outcomes age the test's weights: ``"neighbourhood"`` (every later similar outcome, as the posterior's
    #: horizon) or ``"action"`` (only the action's own later outcomes). With the neighbourhood's clock a stale
    #: favourite that is no longer chosen keeps fading, its test loses the weight it needs, and its old record counts
    #: again (the flicker: bench/RESULTS.md, issue 25, item 11, sixth round); on its own clock its record stands
    #: still while it is not chosen, so a detected change stays detected for that action only, while an action that
    #: is chosen ages nearly as before. The posterior keeps the neighbourhood's clock. Ignored with ``undiscounted``.
    clock: str = "neighbourhood"

    def __post_init__(self) -> None:
        if not self.window > 0 or not self.z > 0 or not 0.0 <= self.keep <= 1.0 or self.scope not in ("action", "all"):
            raise ValueError("change rule: window and z must be positive, keep within [0, 1], scope action or all")
        if (self.cusum is not None and not (self.cusum > 0 and math.isfinite(self.cusum))) or not 0 < self.shift < 1:
            raise ValueError("change rule: cusum must be a positive number (or None), shift within (0, 1)")
        if self.fade is not None and not (self.fade >= 1.0 and math.isfinite(self.fade)):
            raise ValueError("change rule: fade must be at least 1 (or None)")
        if self.horizon is not None and not self.horizon >= 1.0:
            raise ValueError("change rule: horizon must be at least 1 (or None)")
        if self.clock not in ("neighbourhood", "action"):
            raise ValueError("change rule: clock must be neighbourhood or action")


def change_discounts(
    actions: Sequence[str],
    successes: Sequence[float],
    weights: Sequence[float],
    times: Sequence[float],
    *,
    rule: ChangeRule,
) -> list[float]:
    """Multipliers in [0, 1] for each piece of evidence after change detection (see :class:`ChangeRule`).

    ``weights`` are the evidence's weights in the test (relevance times recency discount, or relevance alone with
    ``rule.undiscounted``), ``times`` its POSIX timestamps. Evidence with no detected change keeps 1.
    """
    return change_cut(actions, successes, weights, times, rule=rule)[0]


def change_cut(
    actions: Sequence[str],
    successes: Sequence[float],
    weights: Sequence[float],
    times: Sequence[float],
    *,
    rule: ChangeRule,
) -> tuple[list[float], float | None]:
    """:func:`change_discounts`, and with ``scope="all"`` the time of the change everything older is cut at (None
    without one)."""
    n = len(actions)
    out = [1.0] * n
    by_action: dict[str, list[int]] = {}
    for i in sorted(range(n), key=lambda i: -times[i]):
        by_action.setdefault(actions[i], []).append(i)
    cutoffs: list[float] = []
    for idx in by_action.values():
        if rule.scan or rule.cusum is not None:
            w_a, s_a = [weights[i] for i in idx], [successes[i] for i in idx]
            split = (
                _most_significant_split(w_a, s_a, window=rule.window, z=rule.z, effective_n=rule.effective_n)
                if rule.cusum is None
                else cusum_split(w_a, s_a, window=rule.window, threshold=rule.cusum, shift=rule.shift)
            )
            if split is not None:
                for i in idx[split:]:
                    out[i] = _cut_to(rule, since=sum(w_a[:split]))
                cutoffs.append(times[idx[split - 1]])
            continue
        cum = 0.0
        split = len(idx)
        for j, i in enumerate(idx):
            cum += weights[i]
            if cum >= rule.window:
                split = j + 1
                break
        recent, older = idx[:split], idx[split:]
        n_old = sum(weights[i] for i in older)
        if cum < rule.window or n_old < rule.window:
            continue
        n_new = sum(weights[i] for i in recent)
        p_new = sum(weights[i] * successes[i] for i in recent) / n_new
        p_old = (sum(weights[i] * successes[i] for i in older) + 1.0) / (n_old + 2.0)
        se = math.sqrt(p_old * (1.0 - p_old) * (1.0 / n_new + 1.0 / (n_old + 2.0)))
        if abs(p_new - p_old) > rule.z * se:
            for i in older:
                out[i] = rule.keep
            cutoffs.append(times[recent[-1]])
    if cutoffs and rule.scope == "all":
        cut = max(cutoffs)
        to = _cut_to(rule, since=sum(weights[i] for i in range(n) if times[i] >= cut))
        for i in range(n):
            if times[i] < cut:
                out[i] = min(out[i], to)
        return out, cut
    return out, None


def _cut_to(rule: ChangeRule, *, since: float) -> float:
    """What a record older than a detected change is multiplied by, with ``since`` weighted outcomes after the change:
    ``keep``, or with ``fade`` a share that falls from 1 by ``1 - 1/fade`` per outcome since, down to ``keep``."""
    if rule.fade is None:
        return rule.keep
    return max(rule.keep, (1.0 - 1.0 / rule.fade) ** max(0.0, since)) if rule.fade > 1.0 else rule.keep


def _last_cut(
    idx: Sequence[int],
    actions: Sequence[str],
    successes: Sequence[float],
    weights: Sequence[float],
    times: Sequence[float],
    *,
    rule: ChangeRule,
) -> float | None:
    """The time of the newest change the scan detects among the items ``idx`` (any action), or None."""
    by_action: dict[str, list[int]] = {}
    for i in sorted(idx, key=lambda i: -times[i]):
        by_action.setdefault(actions[i], []).append(i)
    cuts = []
    for ids in by_action.values():
        split = _most_significant_split(
            [weights[i] for i in ids], [successes[i] for i in ids], window=rule.window, z=rule.z
        )
        if split is not None:
            cuts.append(times[ids[split - 1]])
    return max(cuts) if cuts else None


def _agree(
    a: Sequence[int],
    b: Sequence[int],
    actions: Sequence[str],
    successes: Sequence[float],
    weights: Sequence[float],
    *,
    rule: ChangeRule,
) -> bool:
    """Whether two stretches of evidence look like one world: every action with ``window`` weight in both has shares
    within ``z`` standard errors of each other (the two-sample test of :class:`ChangeRule`), and one such action
    at least exists."""
    compared = False
    for action in dict.fromkeys(actions[i] for i in b):
        n_new = sum(weights[i] for i in b if actions[i] == action)
        n_old = sum(weights[i] for i in a if actions[i] == action)
        if n_new < rule.window or n_old < rule.window:
            continue
        compared = True
        p_new = sum(weights[i] * successes[i] for i in b if actions[i] == action) / n_new
        p_old = (sum(weights[i] * successes[i] for i in a if actions[i] == action) + 1.0) / (n_old + 2.0)
        se = math.sqrt(p_old * (1.0 - p_old) * (1.0 / n_new + 1.0 / (n_old + 2.0)))
        if abs(p_new - p_old) > rule.z * se:
            return False
    return compared


def earlier_regime(
    actions: Sequence[str],
    successes: Sequence[float],
    relevance: Sequence[float],
    times: Sequence[float],
    *,
    cut: float,
    rule: ChangeRule,
) -> tuple[list[bool], list[bool]] | None:
    """After a change detected at time ``cut`` (see ``ChangeRule.restore``): if the evidence before it holds an
    earlier change, and the outcomes since ``cut`` agree with the record before that earlier change, which items
    belong to that earlier regime (to count again; it ends at the change before it, if any) and which to the
    stretch in between or before (to stay cut); else None.

    Tested on relevance alone (``relevance`` in [0, 1]): the earlier regime's record has faded by recency, and
    whether it matches is a question of its outcomes, not of their age. Pure and stateless."""
    n = len(actions)
    rel = [min(1.0, max(0.0, r)) for r in relevance]
    older = [i for i in range(n) if times[i] < cut]
    newer = [i for i in range(n) if times[i] >= cut]
    before = _last_cut(older, actions, successes, rel, times, rule=rule)
    if before is None:
        return None
    # The earlier regime is bounded by the change before it too: a world that alternates has several behind it.
    oldest = [i for i in older if times[i] < before]
    start = _last_cut(oldest, actions, successes, rel, times, rule=rule)
    regime = [i for i in oldest if start is None or times[i] >= start]
    if not _agree(regime, newer, actions, successes, rel, rule=rule):
        return None
    restored = [False] * n
    between = [False] * n
    for i in regime:
        restored[i] = True
    for i in older:
        between[i] = not restored[i]
    return restored, between


def cusum_split(
    weights: Sequence[float], successes: Sequence[float], *, window: float, threshold: float, shift: float
) -> int | None:
    """For one action's evidence, newest first: the number of newest items since the last change a two-sided
    Page-Hinkley (CUSUM) test detects (see ``ChangeRule.cusum``), or None. Pure and stateless: the same record
    always gives the same split."""
    n = len(weights)
    start = 0  # oldest-first position where the current segment begins
    succ = att = 0.0
    sums = [0.0, 0.0]  # a drop, a rise
    zero_at = [0, 0]  # oldest-first position after which each sum last stood at zero
    for j in range(n):
        w = min(1.0, max(0.0, weights[n - 1 - j]))
        x = min(1.0, max(0.0, successes[n - 1 - j]))
        if att >= window and w > 0.0:
            p0 = (1.0 + succ) / (2.0 + att)
            for k, p1 in enumerate((max(0.01, p0 - shift), min(0.99, p0 + shift))):
                step = w * (x * math.log(p1 / p0) + (1.0 - x) * math.log((1.0 - p1) / (1.0 - p0)))
                sums[k] = max(0.0, sums[k] + step)
                if sums[k] == 0.0:
                    zero_at[k] = j + 1
            fired = [k for k in (0, 1) if sums[k] > threshold]
            if fired:
                start = max(start, min(zero_at[k] for k in fired))
                succ = sum(
                    min(1.0, max(0.0, weights[n - 1 - i])) * min(1.0, max(0.0, successes[n - 1 - i]))
                    for i in range(start, j + 1)
                )
                att = sum(min(1.0, max(0.0, weights[n - 1 - i])) for i in range(start, j + 1))
                sums, zero_at = [0.0, 0.0], [j + 1, j + 1]
                continue
        succ += w * x
        att += w
    return n - start if start > 0 else None


def _most_significant_split(
    weights: Sequence[float], successes: Sequence[float], *, window: float, z: float, effective_n: bool = False
) -> int | None:
    """For one action's evidence, newest first: the number of newest items after which the older record is most
    significantly contradicted (two-sample test as in :class:`ChangeRule`, older side Beta(1, 1)-smoothed), if any
    split's statistic exceeds ``z``; both sides need ``window`` weighted outcomes. With ``effective_n`` each side's
    sample size is its Kish effective number of outcomes instead of its summed weight."""
    w = np.asarray(weights, dtype=np.float64)
    x = np.asarray(successes, dtype=np.float64)
    n_new = np.cumsum(w)[:-1]  # split after item j: items 0..j are recent
    s_new = np.cumsum(w * x)[:-1]
    n_old = w.sum() - n_new
    s_old = (w * x).sum() - s_new
    ok = (n_new >= window) & (n_old >= window)
    if not ok.any():
        return None
    p_new = s_new / np.maximum(n_new, 1e-12)
    e_new, e_old, p_old = n_new, n_old, (s_old + 1.0) / (n_old + 2.0)
    if effective_n:  # the older side's share is then smoothed by Beta(1, 1) on its effective count
        q_new = np.cumsum(w * w)[:-1]
        e_new = n_new * n_new / np.maximum(q_new, 1e-12)
        e_old = n_old * n_old / np.maximum((w * w).sum() - q_new, 1e-12)
        p_old = (s_old / np.maximum(n_old, 1e-12) * e_old + 1.0) / (e_old + 2.0)
    se = np.sqrt(p_old * (1.0 - p_old) * (1.0 / np.maximum(e_new, 1e-12) + 1.0 / (e_old + 2.0)))
    stat = np.where(ok, np.abs(p_new - p_old) / se, 0.0)
    best = int(np.argmax(stat))
    return best + 1 if stat[best] > z else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangePoints:
    """Bayesian online change-point detection (Adams and MacKay, 2007) over the neighbourhood's outcomes.

    The outcomes, in time order, are taken to come in segments: within a segment every
    action has a fixed success probability (Beta prior), and before each outcome the
    world changes with probability ``hazard`` (for an outcome of relevance w:
    ``1 - (1 - hazard) ** w``, so barely related outcomes hardly bring a change). A change
    resets every action at once (``scope="all"``: the situation changed) or only the
    action observed (``scope="action"``: one run per action). The exact posterior over
    where the current segment starts gives each piece of evidence the probability that
    it belongs to the current segment, and that probability multiplies its weight: a
    stale favourite loses its record as soon as the outcomes since the change make a
    change more likely than not, and evidence keeps its full weight while nothing
    suggests a change. ``1 / hazard`` is the expected number of outcomes between changes.
    """

    hazard: float = 0.01
    scope: str = "all"

    def __post_init__(self) -> None:
        if not 0.0 < self.hazard < 1.0 or self.scope not in ("action", "all"):
            raise ValueError("change points: hazard must be within (0, 1), scope action or all")


def _segment_start_posterior(
    codes: npt.NDArray[np.int64],
    successes: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    *,
    hazard: float,
    prior: Prior,
    n_actions: int,
) -> npt.NDArray[np.float64]:
    """P(the current segment starts at item s), for items in time order (exact recursion, O(n^2); the run-length
    recursion of :mod:`engramdb.learning.runlength` at one hazard, the change before each item by its weight)."""
    change = -np.expm1(weights * math.log1p(-hazard))[None, :]
    starts = _run_starts(codes, successes, weights, change, prior=prior, n_codes=n_actions)[0]
    out: npt.NDArray[np.float64] = starts[0]
    return out


def changepoint_weights(
    actions: Sequence[str],
    successes: Sequence[float],
    weights: Sequence[float],
    times: Sequence[float],
    *,
    rule: ChangePoints,
    prior: Prior | None = None,
) -> list[float]:
    """For each piece of evidence, the posterior probability that it belongs to the current segment (see
    :class:`ChangePoints`). ``weights`` are relevance times recency discount, ``times`` POSIX timestamps."""
    n = len(actions)
    if n == 0:
        return []
    if prior is None:
        prior = Prior()
    order = sorted(range(n), key=lambda i: times[i])
    out = np.ones(n)
    groups = [order] if rule.scope == "all" else [[i for i in order if actions[i] == a] for a in dict.fromkeys(actions)]
    for group in groups:
        names = {a: k for k, a in enumerate(dict.fromkeys(actions[i] for i in group))}
        codes = np.array([names[actions[i]] for i in group], dtype=np.int64)
        succ = np.array([successes[i] for i in group], dtype=np.float64)
        wts = np.clip(np.array([weights[i] for i in group], dtype=np.float64), 0.0, 1.0)
        start = _segment_start_posterior(codes, succ, wts, hazard=rule.hazard, prior=prior, n_actions=len(names))
        # Item j is in the current segment iff the segment started at or before it.
        out[group] = np.minimum(1.0, np.cumsum(start))
    return [float(x) for x in out]

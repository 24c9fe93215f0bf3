"""How fast to forget, learned from the neighbourhood's own outcomes. Pure: values in, values out.

The recency horizon (``RecommendConfig.horizon``) trades stability against speed after a change, and one value serves
every neighbourhood. :func:`best_horizon` picks, per question, the candidate horizon under which the neighbourhood's
outcomes were best predicted one step ahead (prequential log-likelihood of discounted Beta posteriors, each outcome
counted by its relevance, the score itself discounted so that recent predictions count most): where the world
changed, the short horizon predicts the outcomes since the change better and wins; where it held, the long one does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from engramdb.learning._prior import Prior

__all__ = ["best_horizon"]


def best_horizon(
    actions: Sequence[str],
    successes: Sequence[float],
    relevance: Sequence[float],
    times: Sequence[float],
    *,
    candidates: Sequence[float],
    prior: Prior,
    score_horizon: float,
    margin: float = 0.0,
) -> float:
    """The candidate horizon with the best discounted one-step-ahead log-likelihood of the evidence.

    Evidence is replayed in time order (``times``, POSIX seconds); before each item, every action's counts are
    discounted by ``(1 - 1/h) ** relevance`` as :func:`engramdb.learning.stats.discount_weights` does, the item's
    outcome is scored under its action's posterior mean, then counted. The scores of older items fade by
    ``(1 - 1/score_horizon)`` per relevance of newer ones. Ties (and no evidence) go to the first candidate, and
    another candidate replaces it only when its score is higher by more than ``margin`` (nats): with the shipped
    horizon first, a horizon is learned only where the neighbourhood's own outcomes clearly favour it.
    """
    if not candidates:
        raise ValueError("candidates must not be empty")
    if any(not h >= 1.0 for h in candidates) or not score_horizon >= 1.0:
        raise ValueError("horizons must be at least 1")
    if not (margin >= 0.0 and math.isfinite(margin)):
        raise ValueError("margin must be a non-negative number")
    n = len(actions)
    if n == 0 or len(candidates) == 1:
        return float(candidates[0])
    order = sorted(range(n), key=lambda i: times[i])
    names = {a: k for k, a in enumerate(dict.fromkeys(actions))}
    codes = np.array([names[actions[i]] for i in order])
    x = np.clip(np.array([successes[i] for i in order], dtype=np.float64), 0.0, 1.0)
    w = np.clip(np.array([relevance[i] for i in order], dtype=np.float64), 0.0, 1.0)
    hs = np.asarray(candidates, dtype=np.float64)
    log_keep = np.where(hs > 1.0, np.log1p(-1.0 / np.maximum(hs, 1.0 + 1e-12)), -np.inf)
    succ = np.zeros((len(hs), len(names)))
    att = np.zeros((len(hs), len(names)))
    score = np.zeros(len(hs))
    fade = math.log1p(-1.0 / score_horizon) if score_horizon > 1.0 else -math.inf
    for a, xi, wi in zip(codes, x, w, strict=True):
        if wi <= 0.0:
            continue
        keep = np.exp(log_keep * wi)
        succ *= keep[:, None]
        att *= keep[:, None]
        p = (prior.alpha + succ[:, a]) / (prior.alpha + prior.beta + att[:, a])
        score = score * math.exp(fade * wi) + wi * (xi * np.log(p) + (1.0 - xi) * np.log1p(-p))
        succ[:, a] += wi * xi
        att[:, a] += wi
    best = int(np.argmax(score))
    return float(hs[best] if score[best] - score[0] > margin else hs[0])

"""Ceilings for bench/learning_drift.py (issue 25, item 11, ninth round): what learners that know more than any
real one could reach on the same streams.

Both oracles know each record's true situation (perfect matching) and which of its outcomes still tell about
today's world; they do not know the success rates. They differ in what they may keep:

* ``since``: the situation's outcomes since its best action last changed (a perfect change detector that resets
  the whole situation);
* ``rate``: every outcome of an action drawn at (nearly, within :data:`RATE_TOLERANCE`) its rate of today (a
  perfect change detector per action that also knows when a world has come back: unchanged options keep their
  whole record, a recurring regime its earlier runs).

Each states the probability that its top option (highest posterior mean, uniform Beta priors) is the best, by
Monte Carlo over the Beta posteriors: on the evidence it holds, the best calibrated confidence there is. Scored like
the shipped rule (the lowest threshold with 95% precision), it bounds what any rule on that evidence can give.
As a policy (``--policy oracle-since`` / ``oracle-rate``) the oracle chooses by Thompson sampling on the same
evidence, which bounds recovery for a learner whose only fault is the change detection it lacks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The ceilings, weakest first, then two diagnostic learners that forget as the shipped rule does (each outcome
#: discounted by every later outcome of its situation, ``1 - 1/HORIZON`` each): ``since_h25`` with the perfect change
#: detector, ``all_h25`` with none. Between them and the ceilings: what the forgetting costs, and the change detection.
ORACLES = ("since", "rate", "since_h25", "all_h25")
RATE_TOLERANCE = 0.05
HORIZON = 25.0
#: Monte Carlo draws per P(best) (the confidence's standard error stays under 0.011).
DRAWS = 2000


def evidence(
    actions: Sequence[str],
    history: Sequence[tuple[int, str, bool, dict[str, float]]],
    *,
    kind: str,
    now_probs: dict[str, float],
    since: int,
) -> dict[str, tuple[float, float]]:
    """(successes, failures) per action from ``history`` (step, action, success, that step's rates; oldest first)
    of one situation, as the ``kind`` oracle keeps them; ``since``: the step its best action last changed."""
    if kind not in ORACLES:
        raise ValueError(f"unknown oracle {kind!r}")
    counts = {a: [0.0, 0.0] for a in actions}
    for k, (step, action, ok, probs) in enumerate(history):
        if kind == "rate":
            weight = float(abs(probs[action] - now_probs[action]) <= RATE_TOLERANCE)
        else:
            weight = float(kind == "all_h25" or step >= since)
            if kind.endswith("_h25"):
                weight *= (1.0 - 1.0 / HORIZON) ** (len(history) - 1 - k)
        if weight > 0.0 and action in counts:
            counts[action][0 if ok else 1] += weight
    return {a: (s, f) for a, (s, f) in counts.items()}


def answer(counts: dict[str, tuple[float, float]], rng: np.random.Generator) -> tuple[str, float]:
    """The top option (highest posterior mean) and the posterior probability that it is the best."""
    names = list(counts)
    alpha = np.array([1.0 + counts[a][0] for a in names])
    beta = np.array([1.0 + counts[a][1] for a in names])
    top = int(np.argmax(alpha / (alpha + beta)))
    draws = rng.beta(alpha, beta, size=(DRAWS, len(names)))
    return names[top], float(np.mean(np.argmax(draws, axis=1) == top))


def thompson(counts: dict[str, tuple[float, float]], rng: np.random.Generator) -> str:
    """One Thompson-sampling choice on the posteriors of ``counts``."""
    names = list(counts)
    draws = [rng.beta(1.0 + counts[a][0], 1.0 + counts[a][1]) for a in names]
    return names[int(np.argmax(draws))]

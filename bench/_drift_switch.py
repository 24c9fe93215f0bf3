"""How bench/learning_drift.py's learner switches after a change of a best action (issue 25, item 11, sixth round).

The oracle picks the new best action from the first visit after a change; recovery is what the learner loses
against it in the window after. Per change (per situation whose best action changed), over the situation's visits
in the recovery window, in visit order:

* ``first``: visits before the learner first picks the new best (the oracle: 0; the window's length if never);
* ``switched``: visits before the first of five in a row of which at least four pick the new best (of fewer, near
  the window's end: four in five of them);
* ``picks``: the shares of the visits that picked the old best, the new best, or another option;
* the loss against the oracle, ``p(best) - p(chosen)`` summed per visit (expected, so free of outcome noise), split
  by what was chosen: the **old** best (a stale favourite), or **another** option (a search among the rest), and by
  visit bands (1-5, 6-10, 11-20, 21 and later), in points of the window's visits.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

#: Visit bands of the loss table (first visit, last visit; inclusive).
BANDS = ((1, 5), (6, 10), (11, 20), (21, 10**9))
RUN, RUN_HITS = 5, 4


def one_change(
    chosen: Sequence[str], probs: Sequence[dict[str, float]], *, old: str | None, new: str
) -> dict[str, Any]:
    """The switch of one change: ``chosen[k]`` and ``probs[k]`` are the situation's action and true success rates at
    its ``k``-th visit after the change (see the module's docstring)."""
    if len(chosen) != len(probs):
        raise ValueError("chosen and probs must be as long")
    n = len(chosen)
    first = next((k for k, a in enumerate(chosen) if a == new), n)
    # Near the window's end the run is shorter: four in five of what is left.
    switched = next(
        (
            k
            for k in range(n)
            if RUN * sum(a == new for a in chosen[k : k + RUN]) >= RUN_HITS * len(chosen[k : k + RUN])
        ),
        n,
    )
    loss: dict[str, float] = {}
    picks = {"old": 0, "new": 0, "other": 0}
    for k, (a, p) in enumerate(zip(chosen, probs, strict=True), 1):
        gap = max(p.values()) - p[a]
        picks["old" if a == old else "new" if a == new else "other"] += 1
        if gap <= 0.0:
            continue
        kind = "old" if a == old else "other"
        band = next(f"{lo}-{hi}" if hi < 10**9 else f"{lo}+" for lo, hi in BANDS if lo <= k <= hi)
        loss[f"{kind} {band}"] = loss.get(f"{kind} {band}", 0.0) + gap
    return {"visits": n, "first": first, "switched": switched, "loss": loss, "picks": picks}


def switch_table(changes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The changes pooled: medians and means of ``first`` and ``switched`` (visits), and the loss against the oracle
    in points of all the windows' visits, by chosen kind and visit band."""
    if not changes:
        return {}
    visits = sum(c["visits"] for c in changes)
    keys = sorted({k for c in changes for k in c["loss"]})
    return {
        "changes": len(changes),
        "visits": visits,
        "first_median": statistics.median(c["first"] for c in changes),
        "first_mean": round(statistics.fmean(c["first"] for c in changes), 1),
        "switched_median": statistics.median(c["switched"] for c in changes),
        "switched_mean": round(statistics.fmean(c["switched"] for c in changes), 1),
        "never": sum(c["first"] == c["visits"] for c in changes),
        # Shares of the windows' visits (%) that picked the old best, the new best, another option.
        "picks": {
            k: round(100 * sum(c.get("picks", {}).get(k, 0) for c in changes) / max(1, visits), 1)
            for k in ("old", "new", "other")
        },
        "loss": {k: round(100 * sum(c["loss"].get(k, 0.0) for c in changes) / max(1, visits), 2) for k in keys},
    }

"""Where bench/learning_drift.py's settled questions are lost (issue 25, item 11, fifth round).

Every settled question that is not *right and given* is put in one bucket, in this order:

* ``close``: the oracle's own margin is small: the best and second-best true success rates differ by less than two
  standard errors of a difference of two rates estimated from the situation's outcomes since its best action last
  changed, shared by the two (``n / 2`` each). No learner could tell them apart on that evidence; such a question
  may be unwinnable. ``close at 25`` counts the lost questions that are close with 25 outcomes, the shipped
  horizon's memory (reported beside);
* ``abstained``: the top option was the right one, but no recommendation was given (or, at a threshold, it was
  stated under it): confidence, not knowledge, was missing;
* otherwise the top option was wrong (recommended or not):
  * ``matching``: with only the question's own situation's records (oracle matching, same cosines, same rule) the
    top option is the right one: the record was right, the neighbours were not;
  * ``stale``: the top option is the best action of the world before the situation's last change (drift);
  * ``other``: neither (the own situation's record is wrong too, but not stale: thin or unlucky evidence).

Each bucket is split by what was answered: a wrong recommendation, or none (``wrong / none``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

BUCKETS = ("close", "abstained", "matching", "stale", "other")
ANSWERS = ("wrong", "none")


def oracle_close(p1: float, p2: float, n: float) -> bool:
    """Whether rates ``p1`` and ``p2`` differ by less than two standard errors of their difference, each estimated
    from ``n / 2`` outcomes (``n`` at least 2)."""
    half = max(2.0, n) / 2.0
    se = math.sqrt((p1 * (1.0 - p1) + p2 * (1.0 - p2)) / half)
    return abs(p1 - p2) < 2.0 * se


def bucket(a: dict[str, Any]) -> str:
    """The bucket of a lost question (see the module's docstring)."""
    if oracle_close(a["p1"], a["p2"], a["n_since"]):
        return "close"
    if a["top"] == a["right"]:
        return "abstained"
    if a.get("own_top") == a["right"]:
        return "matching"
    if a["old_best"] is not None and a["top"] == a["old_best"]:
        return "stale"
    return "other"


def losses(settled: Sequence[dict[str, Any]], threshold: float | None = None) -> dict[str, Any]:
    """The loss table of ``settled`` answers (with the decomposition's fields), in % of settled."""
    table = {b: dict.fromkeys(ANSWERS, 0) for b in BUCKETS}
    close_25 = 0
    for a in settled:
        given = a["given"] if threshold is None or a["confidence"] >= threshold else None
        if given is not None and given == a["right"]:
            continue
        table[bucket(a)]["wrong" if given is not None else "none"] += 1
        close_25 += oracle_close(a["p1"], a["p2"], 25.0)
    n = max(1, len(settled))
    lost = sum(sum(row.values()) for row in table.values())
    # The honest figure beside the bench's: right and given among the questions an oracle could tell apart.
    winnable = [a for a in settled if not oracle_close(a["p1"], a["p2"], a["n_since"])]
    won = sum(a["given"] == a["right"] and (threshold is None or a["confidence"] >= threshold) for a in winnable)
    return {
        "threshold": threshold,
        "settled": len(settled),
        "lost_pct": round(100 * lost / n, 1),
        "winnable": len(winnable),
        "right_and_given_winnable": round(100 * won / max(1, len(winnable)), 1),
        "close_25_pct": round(100 * close_25 / n, 1),
        "pct": {b: {k: round(100 * v / n, 1) for k, v in row.items()} for b, row in table.items()},
    }


def diagnose(
    *,
    probs: dict[str, float],
    top: str | None,
    n_since: int,
    old_best: str | None,
) -> dict[str, Any]:
    """The decomposition's fields of one settled question (``own_top`` is added by the caller)."""
    ranked = sorted(probs.values(), reverse=True)
    return {"p1": ranked[0], "p2": ranked[1], "n_since": n_since, "old_best": old_best, "top": top}


def markdown(rows: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """One line per (label, losses): lost (% of settled), then bucket: wrong / abstained right / abstained wrong."""
    lines = [
        "| row | lost | "
        + " | ".join(f"{b} (wrong / none)" for b in BUCKETS)
        + " | close at 25 | right and given, winnable (n) |",
        "|---|---:|" + "---:|" * len(BUCKETS) + "---:|---:|",
    ]
    for label, loss in rows:
        cells = [" / ".join(f"{loss['pct'][b][k]:.1f}" for k in ANSWERS) for b in BUCKETS]
        lines.append(
            f"| {label} | {loss['lost_pct']:.1f} | "
            + " | ".join(cells)
            + f" | {loss['close_25_pct']:.1f} | {loss['right_and_given_winnable']:.1f} ({loss['winnable']}) |"
        )
    return "\n".join(lines)

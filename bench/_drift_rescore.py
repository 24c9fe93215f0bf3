"""bench/learning_drift.py's settled answers scored again with other calibration tables (issue 25, item 11, sixth
round): each dumped answer keeps what ``suggest`` judged on (top option, leads on the record and in the recent view,
evidence, pooled or not), so :func:`rescore` re-applies ``suggest``'s rule (engramdb.learning.recommend) with the
given tables, and the stated confidence and the recommendation follow them. A refit needs no second stream run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engramdb.learning.recommend import RecommendConfig, calibrated

Table = tuple[tuple[float, tuple[tuple[float, float], ...]], ...]
_SLACK = 1e-3  # recommend.py's


def as_table(rows: Any) -> Table:
    """A table read back from JSON (lists) as the tuples ``calibrated`` takes."""
    return tuple((float(lo), tuple((float(x), float(y)) for x, y in knots)) for lo, knots in rows)


def rescore(
    answers: Sequence[dict[str, Any]], *, close: Table, pooled: Table, config: RecommendConfig
) -> list[dict[str, Any]]:
    """The answers with ``confidence`` and ``given`` as ``suggest`` states them with these tables."""
    out = []
    for a in answers:
        if a.get("a_top") is None:
            out.append({**a, "given": None, "confidence": 0.0})
            continue
        ev, long = a["a_evidence"], a["a_long"]
        conf = calibrated(min(long, a["a_recent"]), ev, pooled if a["a_pooled"] else close)
        ahead = config.ahead_margin is None or long > 0.5 + config.ahead_margin
        if not ahead:
            conf = min(conf, long - (config.ahead_margin or 0.0))
        needed = config.pooled_min_confidence if a["a_pooled"] else config.min_confidence
        ok = ev >= config.min_evidence - _SLACK and ev > 0.0 and ahead and conf >= needed
        out.append({**a, "given": a["a_top"] if ok else None, "confidence": conf})
    return out

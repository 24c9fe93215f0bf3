"""Output helpers shared by the bench scripts: results as strict JSON files."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["jsonable", "pct", "spread", "write_json"]


def pct(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0-1) of ``values``: the figure the bench tables call p95, p99."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: Sequence[float]) -> dict[str, float]:
    """The p50, p95 (upper nearest rank) and mean of ``values``, to 2 decimals: the A/B benches' rows."""
    v = sorted(values)
    return {
        "p50": round(v[len(v) // 2], 2),
        "p95": round(v[int(len(v) * 0.95)], 2),
        "mean": round(statistics.mean(v), 2),
    }


def jsonable(value: Any) -> Any:
    """``value`` with every NaN (an empty group's mean) as None, in nested dicts, lists and tuples:
    strict JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` (NaN as null) as indented JSON to ``path``, creating its folder; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable(data), indent=2) + "\n", encoding="utf-8")
    return path

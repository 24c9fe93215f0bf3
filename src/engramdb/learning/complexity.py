"""Task complexity, assessed when the caller does not give it (pure: values in, values out).

The rule (``mem.learning.record_execution(..., complexity=None)`` applies it and stores the
result with ``complexity_assessed: true``) adds points for what the task's text says and
for what similar past runs showed:

========================================================  ======
from the text                                             points
========================================================  ======
longer than 200 characters (longer than 100)              2 (1)
four or more listed parts (two or more): commas,          2 (1)
semicolons, "and", "then", line breaks
words for demanding work (migrate, integrate, auth,       1 each,
security, database, schema, distributed, concurrency,     at most 2
parallel, refactor, performance, scale, deploy,
infrastructure, encryption)
========================================================  ======

========================================================  ======
from history (at least 3 similar past runs)               points
========================================================  ======
more than half of them failed                             1
their median duration is over twice the agent's median   1
(over 300 s when the agent has no other runs)
========================================================  ======

0-2 points: ``low``; 3-4: ``medium``; 5 or more: ``high``. The seed this follows scored
length, dependencies, effort and category the same way; the demanding words stand in for
its "complex categories" (backend, database, integration, auth), and history replaces its
effort estimate, which an agent rarely knows before the run.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Final

__all__ = ["MIN_HISTORY", "assess_complexity", "complexity_points"]

_PARTS = re.compile(r"(?i)[,;\n]|\band\b|\bthen\b")
_DEMANDING = re.compile(
    r"(?i)\b(migrat\w*|integrat\w*|auth\w*|security|secur\w*|database\w*|schema\w*|distributed|concurren\w*"
    r"|parallel\w*|refactor\w*|performance|scal(?:e|ing|able)|deploy\w*|infrastructure|encrypt\w*)"
)
#: Similar past runs needed before history counts.
MIN_HISTORY: Final = 3
_SLOW_SECONDS: Final = 300.0


def complexity_points(
    task: str,
    *,
    similar_success: Sequence[float] = (),
    similar_durations: Sequence[float] = (),
    typical_duration: float | None = None,
) -> int:
    """The points of the rule in the module docstring."""
    points = 0
    n = len(task.strip())
    points += 2 if n > 200 else 1 if n > 100 else 0
    parts = len(_PARTS.findall(task))
    points += 2 if parts >= 4 else 1 if parts >= 2 else 0
    points += min(2, len({m.lower()[:6] for m in _DEMANDING.findall(task)}))
    if len(similar_success) >= MIN_HISTORY and statistics.fmean(similar_success) < 0.5:
        points += 1
    if len(similar_durations) >= MIN_HISTORY:
        limit = 2.0 * typical_duration if typical_duration else _SLOW_SECONDS
        if statistics.median(similar_durations) > limit:
            points += 1
    return points


def assess_complexity(
    task: str,
    *,
    similar_success: Sequence[float] = (),
    similar_durations: Sequence[float] = (),
    typical_duration: float | None = None,
) -> str:
    """``low``, ``medium`` or ``high`` by the rule in the module docstring."""
    points = complexity_points(
        task, similar_success=similar_success, similar_durations=similar_durations, typical_duration=typical_duration
    )
    return "high" if points >= 5 else "medium" if points >= 3 else "low"

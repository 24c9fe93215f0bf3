"""Seed 000's success factors and tools: inferred from an execution's result, and counted for a recommendation.

``_identify_success_factors(task, result)`` in the seed names what a successful run did from
its result: files created ("file_creation"), API calls made ("api_integration"), dependencies
resolved ("dependency_resolution"), a component in a frontend task's output
("component_creation"); a recovered run adds "error_recovery". :func:`infer_success_factors`
does the same with the result given as ``record_execution(metadata=...)``, plus tests that
passed ("tests_passing"). :func:`common_factors` counts the factors and tools of the
successful runs of the recommended approach, most common first, as
``get_execution_recommendations`` did ("Key success factors", "Recommended tools"). Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from engramdb.models import DecisionRecord, Factor

__all__ = ["MAX_FACTORS", "MAX_TOOLS", "common_factors", "infer_success_factors", "result_tools"]

#: How many success factors and tools a suggestion lists (the seed: 5 and 3).
MAX_FACTORS: Final = 5
MAX_TOOLS: Final = 3


def _count(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple | set | dict):
        return float(len(value))
    return 0.0


def infer_success_factors(
    result: Mapping[str, Any], *, category: str | None = None, calls: int | None = None
) -> list[str]:
    """The seed's success factors that ``result`` (an execution's result facts) shows."""
    factors = []
    if _count(result.get("files_created")) > 0:
        factors.append("file_creation")
    if _count(result.get("api_calls_made")) > 0 or (calls or 0) > 0:
        factors.append("api_integration")
    if _count(result.get("dependencies_resolved")) > 0:
        factors.append("dependency_resolution")
    if _count(result.get("tests_passed")) > 0 and not _count(result.get("tests_failed")):
        factors.append("tests_passing")
    output = result.get("output")
    if (category or "").lower() == "frontend" and isinstance(output, str) and "component" in output.lower():
        factors.append("component_creation")
    if result.get("recovery_used") is True:
        factors.append("error_recovery")
    return factors


def result_tools(result: Mapping[str, Any]) -> list[str]:
    """The tools a result names (seed 000's ``tools_used``), as strings."""
    raw = result.get("tools_used")
    items: Iterable[Any] = raw if isinstance(raw, list | tuple) else []
    return [t.strip() for t in items if isinstance(t, str) and t.strip()]


def common_factors(records: Sequence[DecisionRecord], action: str | None) -> tuple[list[Factor], list[Factor]]:
    """Success factors and tools of the successful executions of ``action`` among ``records``, most common first."""
    factors: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    for r in records:
        if action is None or r.action != action or r.execution is None or r.success < 0.5:
            continue
        factors.update(dict.fromkeys(r.execution.success_factors, 1))
        tools.update(dict.fromkeys(r.execution.tools, 1))
    return (
        [Factor(name=n, count=c) for n, c in sorted(factors.items(), key=lambda x: (-x[1], x[0]))[:MAX_FACTORS]],
        [Factor(name=n, count=c) for n, c in sorted(tools.items(), key=lambda x: (-x[1], x[0]))[:MAX_TOOLS]],
    )

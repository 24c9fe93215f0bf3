"""Values whose JSON renames or reshapes their fields come back whole through the remote client.

``to_dict`` spells some fields differently from the dataclass (an execution's ``task_type`` is ``type``; success
factors, tools, last steps and errors are ``{"name"|"kind"|"signature", "count"}`` objects; an execution match is
its record's keys plus ``similarity``). The remote client rebuilds each with ``from_dict``: these are the calls
that return them, against a running ``engram serve`` and the same calls on an embedded store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder


def _fill(mem: Any, agent: str) -> None:
    runs = (("success", ["tests first"]), ("success", ["tests first", "small steps"]), ("failure", []))
    for outcome, factors in runs:
        mem.learning.record_execution(
            "deploy the billing service",
            approach="blue-green",
            outcome=outcome,
            agent=agent,
            category="deploy",
            task_type="deployment",
            success_factors=factors,
            tools=["kubectl"],
            duration=12.0,
        )
    for step in ("build", "migrate"):
        episode = mem.episodes.start("ship release", agent=agent)
        mem.episodes.event(episode, "step", {"name": step}, agent=agent)
        mem.episodes.event(episode, step, agent=agent)
        mem.episodes.end(episode, "failure", agent=agent, error=f"{step} failed: exit code 2")


def _shapes(mem: Any, agent: str) -> dict[str, Any]:
    trend = mem.learning.trends(agent=agent)[0]
    matches = mem.learning.executions("deploy the billing service", agent=agent)
    analysis = mem.episodes.analyze(agent=agent)
    return {
        "factors": trend.success_factors,
        "tools": trend.tools,
        "report": mem.learning.report(agent=agent).categories[0].success_factors,
        "task_types": sorted({m.record.execution.task_type for m in matches if m.record.execution is not None}),
        "matched": len(matches),
        "outcome_types": sorted({r.execution.task_type for r in mem.learning.outcomes(agent=agent) if r.execution}),
        "last_steps": analysis.last_steps,
        "errors": analysis.errors,
    }


def test_reshaped_values_come_back_whole(remote: Any, agent: str, tmp_path: Path, embedder: Embedder) -> None:
    _fill(remote, agent)
    through_server = _shapes(remote, agent)
    with Engram(str(tmp_path / "store"), embedder=embedder) as mem:
        _fill(mem, agent)
        embedded = _shapes(mem, agent)
    assert through_server == embedded
    assert embedded["factors"]
    assert embedded["tools"] == [("kubectl", 2)]
    assert embedded["task_types"] == ["deployment"]
    assert embedded["matched"] >= 1
    assert embedded["last_steps"]
    assert embedded["errors"]


@pytest.mark.parametrize(
    "data",
    [
        {"category": "c", "success_factors": [{"name": "x"}]},  # an object without its count
        {"category": "c", "success_factors": "tests"},
    ],
)
def test_a_bad_reshaped_field_is_one_validation_error(data: dict[str, Any]) -> None:
    from engramdb.errors import ValidationError
    from engramdb.models import CategoryTrend
    from engramdb.models._decode import from_dict

    with pytest.raises(ValidationError) as refused:
        from_dict(CategoryTrend, data)
    assert "\n" not in str(refused.value)

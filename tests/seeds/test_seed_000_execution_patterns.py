"""Seed 000: the execution-pattern learner of long-running agents: execution patterns, error solutions,
recommendations, performance trends, reports and adaptive execution."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.models import Recovery, SolutionStats

PROJECT = "ecommerce-platform"

TASKS = [
    "build the product listing page with filters",
    "build the shopping cart page component",
    "build the checkout form page with validation",
    "build the order history page",
    "build the product detail page with image gallery",
    "build the wishlist page component",
]


def _run_tasks(mem: Engram, *, n: int = 12) -> None:
    """12 similar frontend runs: 'incremental' succeeds, 'standard' mostly fails."""
    for i in range(n):
        task = TASKS[i % len(TASKS)]
        approach = "incremental" if i % 3 else "standard"
        mem.learning.record_execution(
            task,
            approach=approach,
            outcome="success" if approach == "incremental" else ("success" if i == 3 else "failure"),
            agent=PROJECT,
            category="frontend",
            task_type="page",
            success_factors=["component_creation"] if approach == "incremental" else [],
            tools=["react", "jest"],
            duration=40.0 + i,
        )


def test_save_and_find_similar_execution_patterns(mem: Engram) -> None:
    """``save_execution_pattern(task, execution_result)`` then ``get_similar_patterns(task)``: "Filter successful
    patterns only", most similar first."""
    _run_tasks(mem)
    found = mem.learning.executions("build the customer profile page", agent=PROJECT)
    assert found
    assert all(m.record.success is not None and m.record.success >= 0.5 for m in found)
    assert {m.record.action for m in found} == {"incremental"}
    similarities = [m.similarity for m in found]
    assert similarities == sorted(similarities, reverse=True)


def test_save_and_get_error_solutions(mem: Engram) -> None:
    """``save_error_solution(error_info, solution)`` then ``get_error_solutions(error_type, error_message)``."""
    mem.failures.record(
        "ConnectionError: payment gateway at 10.0.0.7:443 unreachable",
        agent=PROJECT,
        context="checkout",
        solution="switch to the backup gateway",
    )
    solutions = mem.failures.solutions("ConnectionError: payment gateway at 10.0.0.9:443 unreachable", agent=PROJECT)
    assert isinstance(solutions[0], SolutionStats)
    assert solutions[0].solution == "switch to the backup gateway"


def test_error_solutions_by_error_type_alone(mem: Engram) -> None:
    """``get_error_solutions(error_type=type(e).__name__, ...)``: "Exact error type match" finds the solution."""
    mem.failures.record("TimeoutError: read timed out after 30s", agent=PROJECT, solution="raise the read timeout")
    assert mem.failures.solutions("TimeoutError", agent=PROJECT)


def test_execution_recommendations_for_a_new_task(mem: Engram) -> None:
    """``get_execution_recommendations(task)`` -> ``"approach": recommended_approach`` from the similar runs.

    The new task is only weakly similar to each recorded one (MiniLM cosines 0.21-0.36, under the 0.3 floor but
    one), so the recommendation comes from the wider neighbourhood: 12 weak, agreeing runs pooled, with that
    view's own calibration, and is marked tentative (bench/RESULTS.md, issue 12)."""
    _run_tasks(mem)
    suggestion = mem.learning.suggest("build the customer profile page", agent=PROJECT)
    assert suggestion.recommended == "incremental"
    assert suggestion.tentative


def test_execution_recommendations_rank_the_better_approach(mem: Engram) -> None:
    """``Use '{recommended_approach}' approach (used in N similar tasks)``: the better approach ranks first."""
    _run_tasks(mem)
    suggestion = mem.learning.suggest("build the customer profile page", agent=PROJECT)
    assert suggestion.options[0].action == "incremental"


def test_no_similar_patterns_means_no_recommendation(mem: Engram) -> None:
    """``"No similar patterns found, using standard approach"`` with ``"confidence": 0.0``."""
    suggestion = mem.learning.suggest("migrate the warehouse database", agent=PROJECT)
    assert suggestion.recommended is None
    assert suggestion.options == []


def test_performance_trends(mem: Engram) -> None:
    """``analyze_performance_trends()``: per category success rate, average execution time, best approaches and
    ``improvement_trend`` ("improving" when the second half beats the first)."""
    for i in range(24):
        mem.learning.record_execution(
            f"implement backend endpoint number {i}",
            approach="tdd",
            outcome="success" if i >= 12 or i % 4 == 0 else "failure",
            agent=PROJECT,
            category="backend",
            duration=100.0,
        )
    (trend,) = mem.learning.trends(agent=PROJECT, category="backend")
    assert trend.executions == 24
    assert trend.average_duration == pytest.approx(100.0)
    assert trend.best_approaches[0].action == "tdd"
    assert trend.trend.direction == "improving"


def test_complexity_assessed_automatically(mem: Engram) -> None:
    """``"task_complexity": self._assess_complexity(task)``: recorded without a complexity, one is assessed."""
    long_task = "integrate the payment provider's webhooks with retries, idempotency keys and reconciliation " * 3
    memory = mem.learning.record_execution(long_task, approach="incremental", outcome="success", agent=PROJECT)
    assert memory.metadata["execution"]["complexity"] in {"low", "medium", "high"}
    assert memory.metadata["execution"]["complexity_assessed"] is True
    (record,) = mem.learning.outcomes(agent=PROJECT)
    assert record.execution is not None
    assert record.execution.complexity == memory.metadata["execution"]["complexity"]


def test_learning_report(mem: Engram) -> None:
    """``generate_learning_report(project_name)``: overall metrics, category performance and learning insights
    (``Most successful approach: ...``)."""
    _run_tasks(mem)
    report = mem.learning.report(agent=PROJECT)
    assert report.decisions == 12
    assert report.success_rate is not None
    assert [c.category for c in report.categories] == ["frontend"]
    assert report.categories[0].best_approaches[0].action == "incremental"
    assert report.to_dict()["agent"] == PROJECT


def test_learning_report_insights(mem: Engram) -> None:
    """``_extract_learning_insights``: with 10 or more patterns, ``Most successful approach: incremental (...)``."""
    _run_tasks(mem)
    report = mem.learning.report(agent=PROJECT)
    assert "incremental" in " ".join([*report.insights, *report.recommendations])


def test_report_recommends_improvements(mem: Engram) -> None:
    """``Focus on improving {category} tasks (current success rate: ...)`` when a category is under 70%."""
    for i in range(10):
        mem.learning.record_execution(
            f"database migration {i}", approach="big-bang", outcome=i < 3, agent=PROJECT, category="database"
        )
    report = mem.learning.report(agent=PROJECT)
    assert any("database" in line and "improv" in line.lower() for line in report.recommendations)


def test_adaptive_execution_recovers_with_a_known_solution(mem: Engram) -> None:
    """``execute_task_adaptively``: on an error, ``get_error_solutions`` then ``_apply_error_solution``, and the
    recovery is recorded (``"recovery_used": True``)."""
    mem.failures.record("ConnectionResetError: upstream reset the connection", agent=PROJECT, solution="reconnect")
    tried: list[list[str]] = []

    def recover(error: BaseException, solutions: list[SolutionStats]) -> Recovery | None:
        tried.append([s.solution for s in solutions])
        return Recovery(solution="reconnect", result="synced") if solutions else None

    @mem.learning.adaptive(
        "sync the product catalog", options=["incremental", "standard"], agent=PROJECT, recover=recover
    )
    def sync(approach: str) -> str:
        raise ConnectionResetError("upstream reset the connection")

    assert sync() == "synced"
    assert tried == [["reconnect"]]
    outcomes = mem.learning.outcomes(agent=PROJECT)
    assert outcomes[-1].outcome == "partial"


def test_patterns_persist_across_restarts(tmp_path: Path, embedder: Embedder) -> None:
    """``memories/{project_name}/patterns.json``: what was learned is there the next time the agent starts."""
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        _run_tasks(mem)
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        assert len(mem.learning.outcomes(agent=PROJECT)) == 12
        assert mem.learning.suggest("build the customer profile page", agent=PROJECT).options[0].action == "incremental"

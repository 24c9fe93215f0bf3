"""Execution records, trends, patterns and the report: pure functions, then through Engram."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram, ValidationError
from engramdb.learning.analytics import (
    action_stats,
    approaches,
    category_trends,
    choose_bucket,
    parse_rate_filter,
    timeline,
)
from engramdb.learning.report import build_report, write_chart
from engramdb.models import DecisionRecord, ExecutionInfo, FailurePattern, SolutionStats

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday


def rec(
    action: str,
    success: float,
    *,
    at: datetime = T0,
    category: str | None = None,
    context: str = "deploy the web app",
    duration: float | None = None,
    factors: tuple[str, ...] = (),
    tools: tuple[str, ...] = (),
    rid: str = "",
) -> DecisionRecord:
    return DecisionRecord(
        id=rid or f"{action}{at.isoformat()}{success}",
        agent="a",
        context=context,
        action=action,
        success=success,
        at=at,
        duration=duration,
        category=category,
        execution=ExecutionInfo(success_factors=factors, tools=tools) if factors or tools else None,
    )


def series(
    category: str, outcomes: list[float], *, action: str = "standard", step: timedelta = timedelta(hours=1)
) -> list[DecisionRecord]:
    return [rec(action, y, at=T0 + i * step, category=category, rid=f"{category}{i}") for i, y in enumerate(outcomes)]


# -- rate filters -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "op", "value"),
    [
        (">80%", ">", 0.8),
        (">=0.9", ">=", 0.9),
        ("<50%", "<", 0.5),
        ("90%", ">=", 0.9),
        ("<= 75 %", "<=", 0.75),
        ("=100%", "=", 1.0),
        ("80", ">=", 0.8),
    ],
)
def test_rate_filters_parse(text: str, op: str, value: float) -> None:
    f = parse_rate_filter(text)
    assert f.op == op
    assert f.value == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "high", ">>80%", "180%", "-5%", "> %"])
def test_bad_rate_filters_are_rejected(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_rate_filter(text)


@given(st.floats(0, 1), st.integers(0, 100))
def test_rate_filters_match_their_condition(rate: float, percent: int) -> None:
    bound = percent / 100
    assert parse_rate_filter(f">{percent}%").matches(rate) == (rate > bound)
    assert parse_rate_filter(f"<={bound}").matches(rate) == (rate <= bound)


# -- statistics over records --------------------------------------------------------------------------------


def test_action_stats_are_bayesian_and_ordered() -> None:
    stats = action_stats([rec("a", 1.0), rec("a", 1.0), rec("b", 1.0), rec("b", 0.0), rec("c", 0.9)])
    assert [o.action for o in stats] == ["a", "c", "b"]
    a = stats[0]
    assert (a.successes, a.attempts) == (2.0, 2.0)
    assert a.success_rate == pytest.approx(0.75)
    assert a.low < a.success_rate < a.high


def test_category_trends_detect_improvement_decline_and_stability() -> None:
    records = (
        series("auth", [0.0] * 12 + [1.0] * 12)
        + series("db", [1.0] * 12 + [0.0] * 12)
        + series("ui", [1.0, 0.0] * 12)
        + series("docs", [1.0] * 5)
    )
    trends = {t.category: t for t in category_trends(records)}
    assert trends["auth"].trend.direction == "improving"
    assert trends["db"].trend.direction == "declining"
    assert trends["ui"].trend.direction == "stable"
    assert trends["docs"].trend.direction == "insufficient data"
    assert trends["auth"].trend.p_value < 0.05 < trends["ui"].trend.p_value
    assert trends["auth"].executions == 24
    assert trends["auth"].first_at == T0


def test_category_trends_summarise_duration_approaches_factors_and_tools() -> None:
    records = [
        rec("incremental", 1.0, category="api", duration=2.0, factors=("tests first",), tools=("pytest",), rid="1"),
        rec("incremental", 1.0, category="api", duration=4.0, factors=("tests first",), tools=("pytest",), rid="2"),
        rec("big-bang", 0.0, category="api", duration=9.0, factors=("luck",), tools=("vim",), rid="3"),
        rec("standard", 1.0, rid="4"),
    ]
    trends = {t.category: t for t in category_trends(records)}
    api = trends["api"]
    assert api.average_duration == pytest.approx(5.0)
    assert api.best_approaches[0].action == "incremental"
    assert api.success_factors == [("tests first", 2)]  # only successful runs count
    assert api.tools == [("pytest", 2)]
    assert "general" in trends  # records without a category


def test_bucket_choice_follows_the_span() -> None:
    assert choose_bucket(T0, T0 + timedelta(minutes=30)) == "minute"
    assert choose_bucket(T0, T0 + timedelta(hours=20)) == "hour"
    assert choose_bucket(T0, T0 + timedelta(days=20)) == "day"
    assert choose_bucket(T0, T0 + timedelta(days=200)) == "week"
    assert choose_bucket(T0, T0 + timedelta(days=2000)) == "month"
    # Enough outcomes per point: 30 days with 100 outcomes is weekly, with 1,000 daily.
    assert choose_bucket(T0, T0 + timedelta(days=30), n=100) == "week"
    assert choose_bucket(T0, T0 + timedelta(days=30), n=1000) == "day"


def test_timeline_groups_by_calendar_bucket() -> None:
    records = [
        rec("a", 1.0, at=T0, rid="1"),
        rec("a", 0.0, at=T0 + timedelta(hours=3), rid="2"),
        rec("a", 1.0, at=T0 + timedelta(days=1), rid="3"),
        rec("a", 1.0, at=T0 + timedelta(days=8), rid="4"),
    ]
    bucket, points = timeline(records, bucket="day")
    assert bucket == "day"
    assert [(p.start.day, p.n, p.success_rate) for p in points] == [(5, 2, 0.5), (6, 1, 1.0), (13, 1, 1.0)]
    _, weeks = timeline(records, bucket="week")
    assert [(p.start, p.n) for p in weeks] == [(T0.replace(hour=0), 3), (T0.replace(hour=0) + timedelta(days=7), 1)]
    _, months = timeline([*records, rec("a", 0.0, at=datetime(2026, 12, 31, tzinfo=UTC), rid="5")], bucket="month")
    assert [(p.start.month, p.end.year, p.end.month) for p in months] == [(1, 2026, 2), (12, 2027, 1)]
    for p in points:
        assert p.low <= p.success_rate <= p.high
    assert timeline([]) == ("day", [])
    with pytest.raises(ValidationError):
        timeline(records, bucket="fortnight")


def test_approaches_group_by_category_else_context_and_filter_by_rate() -> None:
    records = [
        *[rec("retry", 1.0, context="API auth failed", rid=f"r{i}") for i in range(6)],
        rec("retry", 1.0, context="api  AUTH failed", rid="r6"),
        *[rec("abort", 0.0, context="API auth failed", rid=f"a{i}") for i in range(3)],
        *[rec("pin", 1.0, category="deps", context=f"conflict {i}", rid=f"p{i}") for i in range(4)],
        rec("once", 1.0, context="rare", rid="o"),
    ]
    found = approaches(records)
    assert [(p.category, p.action, p.attempts) for p in found] == [
        (None, "retry", 7),
        ("deps", "pin", 4),
        (None, "abort", 3),
    ]
    good = approaches(records, rate=parse_rate_filter(">80%"))
    assert [p.action for p in good] == ["retry", "pin"]  # pin: 5/6 = 83%
    assert [p.action for p in approaches(records, rate=parse_rate_filter("<50%"))] == ["abort"]
    assert len(approaches(records, min_attempts=1)) == 4


# -- the report ---------------------------------------------------------------------------------------------


def _failure() -> FailurePattern:
    return FailurePattern(
        id="f1",
        signature="ConnectionRefusedError: connection refused to <host>:<port>",
        example="ConnectionRefusedError: connection refused to db:5432",
        occurrences=4,
        first_seen=T0,
        last_seen=T0 + timedelta(days=1),
        solutions=[SolutionStats(solution="start the database", successes=3, attempts=3, success_rate=0.8)],
        prevention=["check the database is up before deploying"],
    )


def test_report_as_json_and_markdown() -> None:
    records = series("auth", [0.0] * 12 + [1.0] * 12) + series("db", [1.0, 0.0] * 3, action="vacuum")
    r = build_report(records, agent="alice", now=T0 + timedelta(days=2), failure_patterns=[_failure()])
    data = json.loads(r.to_json())
    assert data["decisions"] == 30
    assert data["agent"] == "alice"
    assert data["categories"][0]["category"] == "auth"
    assert data["categories"][0]["trend"]["direction"] == "improving"
    assert data["failure_patterns"][0]["occurrences"] == 4
    assert data["bucket"] == "day"  # 30 outcomes in a day: hourly points would hold about one each
    assert sum(p["n"] for p in data["timeline"]) == 30
    assert any("improving" in i for i in data["insights"])
    md = r.to_markdown()
    for heading in ("# Learning report: alice", "## Categories", "## Actions", "## Recurring failures", "## Method"):
        assert heading in md
    assert "| auth | 24 |" in md
    assert "Cochran-Armitage" in md


def test_empty_report() -> None:
    r = build_report([], agent="bob", now=T0)
    assert r.decisions == 0
    assert r.success_rate is None
    assert "No outcomes recorded yet." in r.to_markdown()
    assert json.loads(r.to_json())["timeline"] == []


def test_chart_is_a_png(tmp_path: Path) -> None:
    records = series("auth", [0.0, 1.0, 1.0] * 10) + series("db", [1.0, 0.0] * 10)
    r = build_report(records, agent="alice", now=T0 + timedelta(days=3))
    path = write_chart(r, tmp_path / "charts" / "success.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000
    empty = write_chart(build_report([], agent="x", now=T0), tmp_path / "empty.png")
    assert empty.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValidationError, match="png"):
        write_chart(r, tmp_path / "chart.svg")


# -- through Engram -----------------------------------------------------------------------------------------


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """The facade-level tests run on every backend (SQLite and PostgreSQL)."""
    return backend_mem


def test_execution_records_and_similar_successful_executions(mem: Engram) -> None:
    m = mem.learning.record_execution(
        "Add a REST endpoint for invoices",
        approach="incremental",
        outcome=True,
        agent="alice",
        category="backend",
        task_type="feature",
        complexity="medium",
        success_factors=["tests first"],
        tools=["pytest", "httpx"],
        duration=42.0,
        calls=7,
    )
    assert m.kind == "decision"
    assert "execution" in m.tags
    assert "category:backend" in m.tags
    assert m.metadata["execution"] == {
        "type": "feature",
        "complexity": "medium",
        "success_factors": ["tests first"],
        "tools": ["pytest", "httpx"],
        "calls": 7,
        "complexity_assessed": False,
    }
    mem.learning.record_execution(
        "Add a REST endpoint for refunds", approach="big-bang", outcome=False, agent="alice", category="backend"
    )
    mem.learning.record_execution(
        "Write the release notes", approach="draft-first", outcome=True, agent="alice", category="docs"
    )
    found = mem.learning.executions("Create an API endpoint for credit notes", agent="alice")
    assert [f.record.action for f in found][:1] == ["incremental"]
    assert all(f.record.success >= 0.5 for f in found)
    assert found[0].record.execution is not None
    assert found[0].record.execution.tools == ("pytest", "httpx")
    assert found[0].to_dict()["similarity"] == found[0].similarity
    failed = mem.learning.executions("Create an API endpoint for credit notes", agent="alice", successful=False)
    assert [f.record.action for f in failed] == ["big-bang"]
    docs = mem.learning.executions("Create an API endpoint", agent="alice", category="docs", successful=None)
    assert [f.record.category for f in docs] in ([], ["docs"])
    assert mem.learning.executions("Create an API endpoint for credit notes", agent="bob") == []
    # Executions are outcomes: suggest learns from them.
    assert mem.learning.suggest("Add a REST endpoint for invoices", agent="alice").options[0].action == "incremental"


def test_bad_execution_records_are_rejected(mem: Engram) -> None:
    with pytest.raises(ValidationError, match="calls"):
        mem.learning.record_execution("t", approach="a", outcome=True, calls=-1)
    with pytest.raises(ValidationError, match="tools"):
        mem.learning.record_execution("t", approach="a", outcome=True, tools=[""])
    with pytest.raises(ValidationError, match=r"approach|action"):
        mem.learning.record_execution("t", approach="", outcome=True)
    assert mem.count(kind="decision") == 0


def test_trends_patterns_and_report_through_engram(mem: Engram, tmp_path: Path) -> None:
    for i in range(12):
        mem.learning.record_execution(
            f"migrate table {i}", approach="online", outcome=i >= 6, agent="alice", category="db", duration=1.0 + i
        )
    for _ in range(4):
        mem.learning.record("nightly build red", "rerun", "success", agent="alice")
    mem.learning.record("someone else's", "x", "success", agent="bob")

    trends = {t.category: t for t in mem.learning.trends(agent="alice")}
    assert set(trends) == {"db", "general"}
    assert trends["db"].executions == 12
    assert trends["db"].trend.direction == "improving"
    assert trends["db"].average_duration == pytest.approx(6.5)

    pats = mem.learning.approaches(agent="alice", success_rate=">80%")
    assert [(p.context, p.action, p.attempts) for p in pats] == [("nightly build red", "rerun", 4)]
    with pytest.raises(ValidationError):
        mem.learning.approaches(agent="alice", success_rate="lots")

    future = datetime.now(UTC) + timedelta(hours=1)
    assert mem.learning.trends(agent="alice", since=future) == []
    with pytest.raises(ValidationError, match="timezone"):
        mem.learning.trends(agent="alice", since=datetime(2026, 1, 1))  # noqa: DTZ001 - the point of the test

    report = mem.learning.report(agent="alice", chart=tmp_path / "out" / "chart.png")
    assert report.decisions == 16
    assert report.chart is not None
    assert Path(report.chart).read_bytes()[:4] == b"\x89PNG"
    assert f"]({report.chart})" in report.to_markdown()
    assert json.loads(report.to_json())["categories"][0]["category"] == "db"
    assert [r.agent for r in mem.learning.outcomes(agent="alice")] == ["alice"] * 16


def test_report_includes_recurring_failures(mem: Engram) -> None:
    for port in (5432, 5433):
        mem.failures.record(
            f"ConnectionRefusedError: connection refused to db.internal:{port}", agent="alice", solution="start the db"
        )
    mem.failures.record("ValueError: something else entirely", agent="alice")
    mem.learning.record("deploy", "ship", "success", agent="alice")
    report = mem.learning.report(agent="alice")
    assert [p.occurrences for p in report.failure_patterns] == [2]
    assert report.failure_patterns[0].solutions[0].solution == "start the db"
    assert "## Recurring failures" in report.to_markdown()
    assert any("Recurring failure (2x)" in i for i in report.insights)


def test_report_names_the_most_successful_approach_only_when_it_is_probably_better() -> None:
    def runs(action: str, outcomes: list[float]) -> list[DecisionRecord]:
        return [
            rec(action, s, at=T0 + timedelta(minutes=i), category="frontend", rid=f"{action}{i}")
            for i, s in enumerate(outcomes)
        ]

    # Seed 000's runs: 8 of 8 against 1 of 4. The 95% intervals overlap, yet P(better) is 0.995.
    clear = build_report(runs("incremental", [1.0] * 8) + runs("standard", [1.0, 0.0, 0.0, 0.0]), agent="a", now=T0)
    assert any("most successful approach 'incremental'" in line for line in clear.insights)
    # 2 of 2 against 0 of 1 is too little to tell (P(better) about 0.9).
    thin = build_report(runs("incremental", [1.0, 1.0]) + runs("standard", [0.0]), agent="a", now=T0)
    assert not any("most successful approach" in line for line in thin.insights)

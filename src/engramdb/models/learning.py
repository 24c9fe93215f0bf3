"""Values of outcome learning: options and suggestions, outcome records, analytics, the report, recoveries.

Computed by the pure modules of :mod:`engramdb.learning` and returned by ``mem.learning``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar

from engramdb.models._decode import object_pairs
from engramdb.models._encode import Encoded
from engramdb.models.failures import FailurePattern
from engramdb.models.memory import Memory, Outcome

__all__ = [
    "ApproachStats",
    "CategoryTrend",
    "DecisionRecord",
    "ExecutionInfo",
    "ExecutionMatch",
    "Factor",
    "LearningReport",
    "LearningStats",
    "OptionStats",
    "Recovery",
    "Suggestion",
    "TimelinePoint",
    "TrendTest",
]


def outcome_label(weight: float) -> Outcome:
    """The word for a success weight: success (1), failure (0), partial (anything between)."""
    if weight >= 1.0:
        return "success"
    if weight <= 0.0:
        return "failure"
    return "partial"


# -- suggestions -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionStats(Encoded):
    """Outcome statistics of one action in a context (evidence may be similarity-weighted)."""

    action: str
    successes: float
    attempts: float
    success_rate: float
    low: float
    high: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Factor(Encoded):
    """A success factor or tool and in how many successful runs of the recommended approach it appeared."""

    name: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion(Encoded):
    """What to do in a context: the recommended action (None if evidence is thin) and why."""

    context: str
    recommended: str | None
    #: How often a recommendation made on such evidence is right (calibrated; see engramdb.learning.recommend).
    confidence: float
    options: list[OptionStats] = field(default_factory=list)
    reason: str = ""
    #: True when a recommendation is not firm: little evidence, a confidence below the firm level, or pooled from
    #: less similar contexts (act on it, but expect to learn more; ``reason`` says which).
    tentative: bool = False
    #: Weighted outcomes of the top option in similar contexts.
    evidence: float = 0.0
    #: The model's posterior probability that the top option is the best, before calibration.
    raw_confidence: float = 0.0
    #: Seed 000: the success factors and tools of the successful runs (executions) of the recommended (else the top)
    #: option in similar contexts, most common first.
    success_factors: list[Factor] = field(default_factory=list)
    tools: list[Factor] = field(default_factory=list)

    _keys: ClassVar[tuple[str, ...]] = (
        "context",
        "recommended",
        "confidence",
        "tentative",
        "evidence",
        "raw_confidence",
        "options",
        "reason",
        "success_factors",
        "tools",
    )


# -- outcome records ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionInfo:
    """The extra facts of an execution record (a task run with an approach)."""

    task_type: str | None = None
    complexity: str | None = None
    success_factors: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    calls: int | None = None
    #: True when the complexity was assessed by the rule of engramdb.learning.complexity, not given.
    complexity_assessed: bool = False

    @staticmethod
    def _json_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The fields in :meth:`to_dict`'s JSON, for ``from_dict``: ``type`` is ``task_type``."""
        return {("task_type" if k == "type" else k): v for k, v in data.items()}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the stored form)."""
        return {
            "type": self.task_type,
            "complexity": self.complexity,
            "complexity_assessed": self.complexity_assessed,
            "success_factors": list(self.success_factors),
            "tools": list(self.tools),
            "calls": self.calls,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """A decision memory read back as an outcome: in ``context``, doing ``action`` gave ``success``."""

    id: str
    agent: str
    context: str
    action: str
    #: Success weight in [0, 1].
    success: float
    at: datetime
    alternatives: tuple[str, ...] = ()
    duration: float | None = None
    category: str | None = None
    #: Set for execution records (see ``mem.learning.record_execution``).
    execution: ExecutionInfo | None = None
    #: Who shared it with the reader, if it is not the reader's own.
    shared_by: str | None = None
    #: The user whose outcome it is (``mem.learning.record(..., user=...)``); None: the agent's own.
    user: str | None = None

    @property
    def outcome(self) -> Outcome:
        """success, failure or partial."""
        return outcome_label(self.success)

    @property
    def reward(self) -> float:
        """The success weight as a reward in [-1, 1]."""
        return 2.0 * self.success - 1.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {
            "id": self.id,
            "agent": self.agent,
            "context": self.context,
            "action": self.action,
            "outcome": self.outcome,
            "success": self.success,
            "at": self.at.isoformat(),
            "alternatives": list(self.alternatives),
            "duration": self.duration,
            "category": self.category,
        }
        if self.execution is not None:
            out["execution"] = self.execution.to_dict()
        if self.user is not None:
            out["user"] = self.user
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionMatch:
    """A past execution (or any outcome record) similar to a new task."""

    record: DecisionRecord
    #: Cosine similarity of its task description to the new one.
    similarity: float

    @staticmethod
    def _json_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The fields in :meth:`to_dict`'s JSON, for ``from_dict``: the record is the rest of it."""
        record = {k: v for k, v in data.items() if k != "similarity"}
        return {"record": record, **({"similarity": data["similarity"]} if "similarity" in data else {})}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**self.record.to_dict(), "similarity": self.similarity}


# -- analytics ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TrendTest(Encoded):
    """The result of a test for a trend in success over time."""

    #: "improving", "declining", "stable", or "insufficient data".
    direction: str
    #: Standardised statistic (positive: later outcomes are better); 0 when not computed.
    z: float
    #: Two-sided p-value; 1.0 when not computed.
    p_value: float
    n: int
    #: Success rate of the earlier and the later half, for reading (the test uses all the data).
    early_rate: float | None
    late_rate: float | None
    method: str = "Cochran-Armitage trend test (two-sided, rank time scores)"


@dataclass(frozen=True, slots=True, kw_only=True)
class CategoryTrend:
    """How one category of tasks is going: success, duration, what works, and the trend."""

    category: str
    executions: int
    successes: float
    #: Posterior mean (Beta(1, 1) prior) and credible interval of the success rate.
    success_rate: float
    low: float
    high: float
    average_duration: float | None
    #: Approaches (actions) best first.
    best_approaches: list[OptionStats] = field(default_factory=list)
    #: Success factors and tools named most often in successful runs, with their counts.
    success_factors: list[tuple[str, int]] = field(default_factory=list)
    tools: list[tuple[str, int]] = field(default_factory=list)
    trend: TrendTest
    first_at: datetime
    last_at: datetime

    @staticmethod
    def _json_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The fields in :meth:`to_dict`'s JSON, for ``from_dict``: its name and count objects as pairs."""
        return {**data, **{k: object_pairs(data[k], "name") for k in ("success_factors", "tools") if k in data}}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "category": self.category,
            "executions": self.executions,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "low": self.low,
            "high": self.high,
            "average_duration": self.average_duration,
            "best_approaches": [o.to_dict() for o in self.best_approaches],
            "success_factors": [{"name": n, "count": c} for n, c in self.success_factors],
            "tools": [{"name": n, "count": c} for n, c in self.tools],
            "trend": self.trend.to_dict(),
            "first_at": self.first_at.isoformat(),
            "last_at": self.last_at.isoformat(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelinePoint(Encoded):
    """Success in one calendar bucket (only buckets with outcomes appear)."""

    start: datetime
    end: datetime
    n: int
    successes: float
    #: Observed share of success in the bucket, and its exact (Clopper-Pearson) confidence interval.
    success_rate: float
    low: float
    high: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproachStats(Encoded):
    """A recurring situation and an approach (action) taken in it, with how often it worked."""

    #: The category, or None when the situation is identified by its (normalised) context.
    category: str | None
    #: An example context (the most recent one).
    context: str
    action: str
    successes: float
    attempts: int
    #: Posterior mean (Beta(1, 1) prior) and credible interval.
    success_rate: float
    low: float
    high: float
    last_at: datetime


# -- statistics in one call --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LearningStats(Encoded):
    """An agent's learning at a glance (``mem.learning.stats``): what it holds, how it goes, what it uses most."""

    agent: str
    #: Memories the agent can see, per kind (kinds with none are left out).
    memories: dict[str, int] = field(default_factory=dict)
    #: Outcome records (decisions and executions) with an outcome, and those still pending.
    decisions: int = 0
    pending: int = 0
    successes: float = 0.0
    #: Posterior mean success rate (Beta(1, 1) prior), None without outcomes.
    success_rate: float | None = None
    #: Actions, most used first (with their success).
    most_used: list[OptionStats] = field(default_factory=list)
    #: Categories, most used first.
    categories: list[OptionStats] = field(default_factory=list)
    failure_patterns: int = 0
    recurring_failures: int = 0
    episodes: int = 0
    episode_successes: int = 0
    episode_failures: int = 0
    #: Memories (any kind) the agent can see that were used, most used first: feedback outcomes on them
    #: (``attempts``), then retrievals (``access_count``). At most ``top``; never-used memories are left out.
    most_used_memories: list[Memory] = field(default_factory=list)
    #: Memories with at least one feedback outcome, and how many outcomes they had in all.
    memories_used: int = 0
    memory_uses: float = 0.0
    #: Posterior mean success over those outcomes pooled (Beta(1, 1) prior; a memory used more weighs
    #: more), and the best single memory's ``success_rate``; None before any feedback.
    memory_success_rate: float | None = None
    best_memory_success_rate: float | None = None
    #: Retrievals (search hits, gets) of the agent's visible memories in all.
    memory_retrievals: int = 0


# -- the report --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LearningReport(Encoded):
    """An agent's outcomes summarised: overall, per category (with trends), per action, over time."""

    agent: str
    generated_at: datetime
    since: datetime | None
    decisions: int
    successes: float
    #: Posterior mean and credible interval of the overall success rate (None without outcomes).
    success_rate: float | None
    low: float | None
    high: float | None
    average_duration: float | None
    categories: list[CategoryTrend] = field(default_factory=list)
    actions: list[OptionStats] = field(default_factory=list)
    #: "minute", "hour", "day", "week" or "month".
    bucket: str = "day"
    timeline: list[TimelinePoint] = field(default_factory=list)
    #: Per category (the largest few), the same buckets.
    category_timelines: dict[str, list[TimelinePoint]] = field(default_factory=dict)
    failure_patterns: list[FailurePattern] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)
    #: What to work on: categories under the success target, declining ones, slow categories and approaches.
    recommendations: list[str] = field(default_factory=list)
    #: The thresholds the recommendations use.
    success_target: float = 0.7
    slow_seconds: float = 300.0
    #: Where the chart was written, if it was.
    chart: str | None = None

    def with_chart(self, path: str | None) -> LearningReport:
        """A copy that refers to the chart at ``path``."""
        return replace(self, chart=path)

    def to_json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_markdown(self) -> str:
        """The report as a Markdown document (the chart linked when there is one)."""
        return _markdown(self)


def percent(x: float | None) -> str:
    """A share as a whole percentage ("-" for None), as the report writes it."""
    return "-" if x is None else f"{x:.0%}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _markdown(r: LearningReport) -> str:
    lines = [f"# Learning report: {r.agent}", ""]
    scope = f"outcomes since {r.since:%Y-%m-%d %H:%M} UTC" if r.since else "all recorded outcomes"
    lines.append(f"Generated {r.generated_at:%Y-%m-%d %H:%M} UTC from {scope}.")
    lines.append("")
    if not r.decisions:
        lines += ["No outcomes recorded yet.", ""]
    else:
        dur = f"; average duration {r.average_duration:.2f} s" if r.average_duration is not None else ""
        lines.append(
            f"**{r.decisions}** outcomes, success rate **{percent(r.success_rate)}** "
            f"(95% interval {percent(r.low)}–{percent(r.high)}){dur}."
        )
        lines.append("")
    if r.chart:
        lines += ["## Success rate over time", "", f"![Success rate per {r.bucket}]({_cell(r.chart)})", ""]
    if r.recommendations:
        lines += ["## Recommendations", ""]
        lines += [f"- {_cell(i)}" for i in r.recommendations]
        lines.append("")
    if r.insights:
        lines += ["## Insights", ""]
        lines += [f"- {_cell(i)}" for i in r.insights]
        lines.append("")
    if r.categories:
        lines += [
            "## Categories",
            "",
            "| category | runs | success | 95% interval | avg duration | best approach | trend | p |",
            "| --- | ---: | ---: | --- | ---: | --- | --- | ---: |",
        ]
        for c in r.categories:
            best = c.best_approaches[0] if c.best_approaches else None
            best_text = f"{_cell(best.action)} ({percent(best.success_rate)})" if best else "-"
            dur = f"{c.average_duration:.2f} s" if c.average_duration is not None else "-"
            p = f"{c.trend.p_value:.3g}" if c.trend.direction != "insufficient data" else "-"
            lines.append(
                f"| {_cell(c.category)} | {c.executions} | {percent(c.success_rate)} | "
                f"{percent(c.low)}–{percent(c.high)} | {dur} | {best_text} | {c.trend.direction} | {p} |"
            )
        lines.append("")
    if r.actions:
        lines += ["## Actions", "", "| action | runs | success | 95% interval |", "| --- | ---: | ---: | --- |"]
        for o in r.actions[:20]:
            lines.append(
                f"| {_cell(o.action)} | {o.attempts:g} | {percent(o.success_rate)} | "
                f"{percent(o.low)}–{percent(o.high)} |"
            )
        lines.append("")
    if r.failure_patterns:
        lines += ["## Recurring failures", "", "| occurrences | example | best fix |", "| ---: | --- | --- |"]
        for fp in r.failure_patterns[:20]:
            fix = (
                f"{_cell(fp.solutions[0].solution)} ({percent(fp.solutions[0].success_rate)})" if fp.solutions else "-"
            )
            lines.append(f"| {fp.occurrences} | {_cell(fp.example[:100])} | {fix} |")
        lines.append("")
    if r.timeline:
        latest = " (latest 30)" if len(r.timeline) > 30 else ""
        lines += [
            f"## Per {r.bucket}{latest}",
            "",
            f"| {r.bucket} starting | runs | success |",
            "| --- | ---: | ---: |",
        ]
        for pt in r.timeline[-30:]:
            lines.append(f"| {pt.start:%Y-%m-%d %H:%M} | {pt.n} | {percent(pt.success_rate)} |")
        lines.append("")
    lines += [
        "## Method",
        "",
        "Success rates are posterior means under a uniform Beta(1, 1) prior with equal-tailed 95% credible "
        "intervals. A trend is *improving* or *declining* when a two-sided Cochran-Armitage test for trend "
        "(time-ordered outcomes, rank scores) gives p < 0.05; categories with fewer than 10 outcomes are "
        "*insufficient data*.",
        "",
    ]
    return "\n".join(lines)


# -- adaptive execution ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """What a recovery hook did: the fix that worked (None: not recovered), its result, fixes that failed.

    Returned by the hook of ``mem.learning.adaptive`` (see :mod:`engramdb.learning.adaptive`).
    """

    solution: str | None = None
    #: Returned by the decorated function (or set as ``run.result``) in place of the failed run's.
    result: Any = None
    #: Fixes tried that did not work (recorded as failed attempts).
    failed: Sequence[str] = ()

    @property
    def recovered(self) -> bool:
        """True when a fix worked."""
        return self.solution is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``result`` (any Python value) is left out."""
        return {"solution": self.solution, "recovered": self.recovered, "failed": list(self.failed)}

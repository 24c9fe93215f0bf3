"""The learning report: what an agent's outcomes say, as JSON, Markdown and a PNG chart.

:func:`build_report` is pure (records and ``now`` in, a :class:`LearningReport`
out). :func:`write_chart` draws success rate over time with matplotlib's Agg
canvas (no display, no pyplot global state); matplotlib is the optional
``report`` extra and is imported only when a chart is asked for.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from engramdb.errors import ValidationError
from engramdb.learning.analytics import (
    CategoryTrend,
    TimelinePoint,
    action_stats,
    category_trends,
    option_dict,
    timeline,
)
from engramdb.learning.failures import pattern_dict
from engramdb.learning.records import DecisionRecord
from engramdb.learning.stats import credible_interval
from engramdb.models import FailurePattern, OptionStats

__all__ = ["LearningReport", "build_report", "write_chart"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LearningReport:
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
    #: Where the chart was written, if it was.
    chart: str | None = None

    def with_chart(self, path: str | None) -> LearningReport:
        """A copy that refers to the chart at ``path``."""
        return replace(self, chart=path)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "agent": self.agent,
            "generated_at": self.generated_at.isoformat(),
            "since": self.since.isoformat() if self.since else None,
            "decisions": self.decisions,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "low": self.low,
            "high": self.high,
            "average_duration": self.average_duration,
            "categories": [c.to_dict() for c in self.categories],
            "actions": [option_dict(o) for o in self.actions],
            "bucket": self.bucket,
            "timeline": [p.to_dict() for p in self.timeline],
            "category_timelines": {k: [p.to_dict() for p in v] for k, v in self.category_timelines.items()},
            "failure_patterns": [pattern_dict(p) for p in self.failure_patterns],
            "insights": list(self.insights),
            "chart": self.chart,
        }

    def to_json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_markdown(self) -> str:
        """The report as a Markdown document (the chart linked when there is one)."""
        return _markdown(self)


def _insights(report: LearningReport) -> list[str]:
    """Plain statements the statistics support (no judgement calls beyond the stated tests)."""
    out = []
    for c in report.categories:
        t = c.trend
        if t.direction in ("improving", "declining"):
            out.append(
                f"{c.category}: success is {t.direction} ({_pct(t.early_rate)} in the earlier half, "
                f"{_pct(t.late_rate)} in the later half; trend test p = {t.p_value:.3g})."
            )
        if c.high < 0.5:
            out.append(
                f"{c.category}: fails more often than it succeeds ({_pct(c.success_rate)}, "
                f"95% interval {_pct(c.low)}–{_pct(c.high)})."
            )
        if len(c.best_approaches) >= 2:
            best, second = c.best_approaches[0], c.best_approaches[1]
            if best.low > second.high:
                out.append(
                    f"{c.category}: {best.action!r} works better than {second.action!r} "
                    f"({_pct(best.success_rate)} vs {_pct(second.success_rate)}, intervals do not overlap)."
                )
    for p in report.failure_patterns[:5]:
        fix = f"; best fix {p.solutions[0].solution!r}" if p.solutions else "; no fix recorded yet"
        out.append(f"Recurring failure ({p.occurrences}x): {p.example[:80]}{fix}.")
    return out


def build_report(
    records: Sequence[DecisionRecord],
    *,
    agent: str,
    now: datetime,
    since: datetime | None = None,
    failure_patterns: Sequence[FailurePattern] = (),
    alpha: float = 0.05,
    min_n: int = 10,
    max_points: int = 40,
    chart_categories: int = 5,
) -> LearningReport:
    """Summarise outcome records (already limited to ``since`` by the caller)."""
    n = len(records)
    s = sum(r.success for r in records)
    durations = [r.duration for r in records if r.duration is not None]
    categories = category_trends(records, alpha=alpha, min_n=min_n)
    bucket, points = timeline(records, max_points=max_points)
    per_cat = {
        c.category: timeline([r for r in records if (r.category or "general") == c.category], bucket=bucket)[1]
        for c in categories[:chart_categories]
    }
    low: float | None = None
    high: float | None = None
    rate: float | None = None
    if n:
        low, high = credible_interval(1.0 + s, 1.0 + n - s)
        rate = (1.0 + s) / (2.0 + n)
    report = LearningReport(
        agent=agent,
        generated_at=now,
        since=since,
        decisions=n,
        successes=s,
        success_rate=rate,
        low=low,
        high=high,
        average_duration=sum(durations) / len(durations) if durations else None,
        categories=categories,
        actions=action_stats(records),
        bucket=bucket,
        timeline=points,
        category_timelines=per_cat,
        failure_patterns=list(failure_patterns),
    )
    return replace(report, insights=_insights(report))


# -- Markdown ----------------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _markdown(r: LearningReport) -> str:
    lines = [f"# Learning report: {r.agent}", ""]
    scope = f"since {r.since:%Y-%m-%d %H:%M} UTC" if r.since else "all recorded outcomes"
    lines.append(f"Generated {r.generated_at:%Y-%m-%d %H:%M} UTC over {scope}.")
    lines.append("")
    if not r.decisions:
        lines += ["No outcomes recorded yet.", ""]
    else:
        dur = f"; average duration {r.average_duration:.2f} s" if r.average_duration is not None else ""
        lines.append(
            f"**{r.decisions}** outcomes, success rate **{_pct(r.success_rate)}** "
            f"(95% interval {_pct(r.low)}–{_pct(r.high)}){dur}."
        )
        lines.append("")
    if r.chart:
        lines += ["## Success rate over time", "", f"![Success rate per {r.bucket}]({_cell(r.chart)})", ""]
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
            best_text = f"{_cell(best.action)} ({_pct(best.success_rate)})" if best else "-"
            dur = f"{c.average_duration:.2f} s" if c.average_duration is not None else "-"
            p = f"{c.trend.p_value:.3g}" if c.trend.direction != "insufficient data" else "-"
            lines.append(
                f"| {_cell(c.category)} | {c.executions} | {_pct(c.success_rate)} | {_pct(c.low)}–{_pct(c.high)} "
                f"| {dur} | {best_text} | {c.trend.direction} | {p} |"
            )
        lines.append("")
    if r.actions:
        lines += ["## Actions", "", "| action | runs | success | 95% interval |", "| --- | ---: | ---: | --- |"]
        for o in r.actions[:20]:
            lines.append(
                f"| {_cell(o.action)} | {o.attempts:g} | {_pct(o.success_rate)} | {_pct(o.low)}–{_pct(o.high)} |"
            )
        lines.append("")
    if r.failure_patterns:
        lines += ["## Recurring failures", "", "| occurrences | example | best fix |", "| ---: | --- | --- |"]
        for fp in r.failure_patterns[:20]:
            fix = f"{_cell(fp.solutions[0].solution)} ({_pct(fp.solutions[0].success_rate)})" if fp.solutions else "-"
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
            lines.append(f"| {pt.start:%Y-%m-%d %H:%M} | {pt.n} | {_pct(pt.success_rate)} |")
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


# -- chart -------------------------------------------------------------------------------------------------


def write_chart(report: LearningReport, path: str | os.PathLike[str]) -> Path:
    """Draw success rate over time (overall with its 95% band, and the largest categories) as a PNG."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ValidationError("the report chart needs matplotlib: pip install 'engramdb[report]'") from exc
    import matplotlib.dates as mdates

    out = Path(path)
    if out.suffix.lower() != ".png":
        raise ValidationError(f"the chart is a PNG: give a path ending in .png, not {out.name!r}")
    fig = Figure(figsize=(8.0, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    def mids(points: Sequence[TimelinePoint]) -> list[float]:
        # Matplotlib's date axis counts days since its epoch; plot the middle of each bucket.
        return [float(mdates.date2num(p.start + (p.end - p.start) / 2)) for p in points]  # type: ignore[no-untyped-call]

    if report.timeline:
        xs = mids(report.timeline)
        ax.fill_between(
            xs,
            [p.low for p in report.timeline],
            [p.high for p in report.timeline],
            color="tab:blue",
            alpha=0.15,
            linewidth=0,
            label="overall, 95% interval",
        )
        ax.plot(xs, [p.success_rate for p in report.timeline], marker="o", color="tab:blue", label="overall")
        if len(report.category_timelines) > 1:
            # Blue is the overall line's; categories take the next colours of the default cycle.
            colours = ["tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink"]
            for i, (name, pts) in enumerate(report.category_timelines.items()):
                ax.plot(
                    mids(pts),
                    [p.success_rate for p in pts],
                    marker=".",
                    linewidth=1,
                    alpha=0.8,
                    color=colours[i % len(colours)],
                    label=name[:30],
                )
        locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        ax.xaxis_date()
        ax.legend(loc="best", fontsize=8, framealpha=0.8)
    else:
        ax.text(0.5, 0.5, "no outcomes recorded", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:.0%}")
    ax.set_ylabel("success rate")
    ax.set_xlabel(f"per {report.bucket} (UTC)")
    ax.set_title(f"Success rate over time: {report.agent}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out

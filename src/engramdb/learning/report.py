"""The learning report: what an agent's outcomes say, as JSON, Markdown and a PNG chart.

:func:`build_report` is pure (records and ``now`` in, a :class:`~engramdb.models.LearningReport`
out; the value renders itself as JSON and Markdown). :func:`write_chart` draws success
rate over time with matplotlib's Agg canvas (no display, no pyplot global state);
matplotlib is the optional ``report`` extra and is imported only when a chart is asked for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from engramdb.errors import ValidationError
from engramdb.learning.analytics import GENERAL, action_stats, category_trends, timeline
from engramdb.learning.stats import credible_interval, prob_greater
from engramdb.models import DecisionRecord, FailurePattern, LearningReport, TimelinePoint
from engramdb.models.learning import percent

__all__ = ["BETTER_PROBABILITY", "build_report", "write_chart"]

#: An insight names the most successful approach of a category when the posterior probability that it beats
#: the runner-up reaches this.
BETTER_PROBABILITY = 0.95


def _insights(report: LearningReport) -> list[str]:
    """Plain statements the statistics support (no judgement calls beyond the stated tests)."""
    out = []
    for c in report.categories:
        t = c.trend
        if t.direction in ("improving", "declining"):
            out.append(
                f"{c.category}: success is {t.direction} ({percent(t.early_rate)} in the earlier half, "
                f"{percent(t.late_rate)} in the later half; trend test p = {t.p_value:.3g})."
            )
        if c.high < 0.5:
            out.append(
                f"{c.category}: fails more often than it succeeds ({percent(c.success_rate)}, "
                f"95% interval {percent(c.low)}–{percent(c.high)})."
            )
        if len(c.best_approaches) >= 2:
            best, second = c.best_approaches[0], c.best_approaches[1]
            # The posterior probability that the best approach beats the runner-up (Beta(1, 1) priors): a test
            # of the difference itself. Non-overlapping 95% intervals would demand far more (about p < 0.006).
            p_better = prob_greater(
                1.0 + best.successes,
                1.0 + best.attempts - best.successes,
                1.0 + second.successes,
                1.0 + second.attempts - second.successes,
            )
            if p_better >= BETTER_PROBABILITY:
                out.append(
                    f"{c.category}: most successful approach {best.action!r}, better than {second.action!r} "
                    f"({percent(best.success_rate)} vs {percent(second.success_rate)}; probability it is better "
                    f"{p_better:.1%})."
                )
    for p in report.failure_patterns[:5]:
        fix = f"; best fix {p.solutions[0].solution!r}" if p.solutions else "; no fix recorded yet"
        out.append(f"Recurring failure ({p.occurrences}x): {p.example[:80]}{fix}.")
    return out


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _recommendations(report: LearningReport, records: Sequence[DecisionRecord]) -> list[str]:
    """The seed's threshold recommendations, each stated with its evidence.

    A category is *under the target* when its posterior mean success is below ``success_target``
    (the 95% interval is given so a reader can judge a small sample); *declining* when its trend
    test says so; *slow* when its average duration exceeds ``slow_seconds``. An approach (action)
    is slow when its average duration over at least 2 runs exceeds ``slow_seconds``.
    """
    target, slow = report.success_target, report.slow_seconds
    out = []
    for c in report.categories:
        if c.success_rate < target:
            out.append(
                f"Focus on improving {c.category} tasks: success {percent(c.success_rate)} over {_runs(c.executions)} "
                f"(95% interval {percent(c.low)}–{percent(c.high)}), under the {percent(target)} target."
            )
        if c.trend.direction == "declining":
            out.append(
                f"Investigate declining performance in {c.category}: {percent(c.trend.early_rate)} earlier, "
                f"{percent(c.trend.late_rate)} later (p = {c.trend.p_value:.3g})."
            )
        if c.average_duration is not None and c.average_duration > slow:
            out.append(f"Optimize execution time for {c.category} tasks: {c.average_duration:.0f} s on average.")
    durations: dict[str, list[float]] = {}
    for r in records:
        if r.duration is not None:
            durations.setdefault(r.action, []).append(r.duration)
    for action, values in sorted(durations.items()):
        mean = sum(values) / len(values)
        if len(values) >= 2 and mean > slow:
            out.append(f"Approach {action!r} is slow: {mean:.0f} s on average over {len(values)} runs.")
    if not out and report.decisions:
        out.append(f"Performance meets the {percent(target)} target in every category; nothing is slow.")
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
    success_target: float = 0.7,
    slow_seconds: float = 300.0,
) -> LearningReport:
    """Summarise outcome records (already limited to ``since`` by the caller)."""
    n = len(records)
    s = sum(r.success for r in records)
    durations = [r.duration for r in records if r.duration is not None]
    categories = category_trends(records, alpha=alpha, min_n=min_n)
    bucket, points = timeline(records, max_points=max_points)
    per_cat = {
        c.category: timeline([r for r in records if (r.category or GENERAL) == c.category], bucket=bucket)[1]
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
        success_target=success_target,
        slow_seconds=slow_seconds,
    )
    return replace(report, insights=_insights(report), recommendations=_recommendations(report, records))


# -- chart -------------------------------------------------------------------------------------------------


def write_chart(report: LearningReport, path: str | os.PathLike[str]) -> Path:
    """Draw success rate over time (overall with its 95% band, and the largest categories) as a PNG."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ValidationError("the report chart needs matplotlib: pip install 'engramdb[report]'") from exc
    import matplotlib.dates as mdates
    from matplotlib.ticker import MaxNLocator

    out = Path(path)
    if out.suffix.lower() != ".png":
        raise ValidationError(f"the chart is a PNG: give a path ending in .png, not {out.name!r}")
    fig = Figure(figsize=(8.0, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    # Runs all within one calendar bucket are charted in order (see analytics.timeline), not on a time axis.
    by_run = report.bucket == "run" or report.bucket.endswith(" runs")

    def mids(points: Sequence[TimelinePoint]) -> list[float]:
        if by_run:
            return [float(i + 1) for i in range(len(points))]
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
        if len(xs) == 1:
            # A band over one point has no width: draw its interval as an error bar instead.
            (only,) = report.timeline
            below, above = [only.success_rate - only.low], [only.high - only.success_rate]
            ax.errorbar(xs, [only.success_rate], yerr=[below, above], color="tab:blue", alpha=0.4, capsize=6)
        if len(report.category_timelines) > 1 and not by_run:
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
        # The x axis spans the buckets shown (not matplotlib's default padding of a day or years).
        first, last = report.timeline[0].start, report.timeline[-1].end
        if by_run:
            ax.set_xlim(0.5, len(xs) + 0.5)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        else:
            ax.set_xlim(float(mdates.date2num(first)), float(mdates.date2num(last)))  # type: ignore[no-untyped-call]
            locator = mdates.AutoDateLocator(minticks=3, maxticks=8)  # type: ignore[no-untyped-call]
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
            ax.xaxis_date()
        ax.legend(loc="best", fontsize=8, framealpha=0.8)
    else:
        ax.text(0.5, 0.5, "no outcomes recorded", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(*_y_range(report))
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:.0%}")
    ax.set_ylabel("success rate")
    if by_run and report.timeline:
        start, end = report.timeline[0].start, report.timeline[-1].end
        ax.set_xlabel(f"{report.bucket} per point, in order ({start:%Y-%m-%d %H:%M:%S}–{end:%H:%M:%S} UTC)")
    else:
        ax.set_xlabel(f"per {report.bucket} (UTC)")
    ax.set_title(f"Success rate over time: {report.agent}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def _y_range(report: LearningReport) -> tuple[float, float]:
    """The success-rate axis: the data's range (intervals included) padded to tenths, within 0..1."""
    values = [v for p in report.timeline for v in (p.low, p.high, p.success_rate)]
    values += [p.success_rate for pts in report.category_timelines.values() for p in pts]
    if not values:
        return -0.02, 1.02
    low = max(0.0, math.floor(min(values) * 10.0 - 0.5) / 10.0)
    high = min(1.0, math.ceil(max(values) * 10.0 + 0.5) / 10.0)
    if high - low < 0.2:
        low, high = max(0.0, high - 0.2), min(1.0, low + 0.2)
    return low - 0.02, high + 0.02

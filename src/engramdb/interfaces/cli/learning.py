"""``engram learning ...``: what an agent's outcomes say, and what to do next.

Outcomes are recorded with ``engram memory record --context C --action A --outcome O``
(or the Python API); these commands read them back: ``stats``, ``patterns``,
``suggest``, ``choose``, ``feedback`` and ``report``. The failure commands of the same
group (``failures``, ``apply-pattern``) live in ``learning_failures.py`` (see the
end of this module).
"""

from __future__ import annotations

import importlib
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._common import (
    AgentOption,
    JsonOption,
    LimitOption,
    StoreOption,
    console,
    emit_json,
    new_group,
    open_engram,
    parse_outcome,
    shorten,
)
from engramdb.learning.analytics import CategoryTrend, option_dict, parse_rate_filter
from engramdb.models import OptionStats

__all__ = ["SinceOption", "app", "parse_since"]

app = new_group("learning", "Learn from outcomes: statistics, patterns, suggestions, reports.")

SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        "--recent",
        metavar="AGE|DATE",
        help="Only outcomes from the last AGE (30m, 12h, 7d, 4w) or since DATE (2026-01-31, ISO 8601).",
        show_default=False,
    ),
]
ContextOption = Annotated[str, typer.Option("--context", "-c", help="The situation, in words.", show_default=False)]
OptionsOption = Annotated[
    list[str] | None,
    typer.Option("--option", "-o", help="An action to consider (repeatable).", show_default=False),
]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """``--since``/``--recent``: an age (``7d``, ``12h``, ``30m``, ``2w``) or an ISO date; None stays None."""
    if text is None:
        return None
    now = now or datetime.now(UTC)
    m = _AGE.match(text)
    if m:
        return now - timedelta(**{_UNITS[m.group(2).lower()]: float(m.group(1))})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(
            f"bad --since {text!r}: use an age like 7d, 12h, 30m, 2w or a date like 2026-01-31"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _options_table(options: list[OptionStats], *, title: str, weighted: bool = False) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("action", style="cyan")
    table.add_column("success", justify="right", style="green")
    table.add_column("95% interval", justify="right")
    table.add_column("weighted runs" if weighted else "runs", justify="right")
    for o in options:
        table.add_row(o.action, _pct(o.success_rate), f"{_pct(o.low)}–{_pct(o.high)}", f"{o.attempts:.3g}")
    return table


def _categories_table(categories: list[CategoryTrend]) -> Table:
    table = Table(title="Categories", title_justify="left")
    table.add_column("category", style="cyan")
    table.add_column("runs", justify="right")
    table.add_column("success", justify="right", style="green")
    table.add_column("95% interval", justify="right")
    table.add_column("avg duration", justify="right")
    table.add_column("best approach")
    table.add_column("trend")
    table.add_column("p", justify="right")
    for c in categories:
        best = c.best_approaches[0] if c.best_approaches else None
        trend_style = {"improving": "green", "declining": "red"}.get(c.trend.direction, "")
        table.add_row(
            c.category,
            str(c.executions),
            _pct(c.success_rate),
            f"{_pct(c.low)}–{_pct(c.high)}",
            f"{c.average_duration:.2f} s" if c.average_duration is not None else "-",
            f"{best.action} ({_pct(best.success_rate)})" if best else "-",
            f"[{trend_style}]{c.trend.direction}[/]" if trend_style else c.trend.direction,
            f"{c.trend.p_value:.3g}" if c.trend.direction != "insufficient data" else "-",
        )
    return table


@app.command()
def stats(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    since: SinceOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Outcome statistics of an agent: overall, per action, and per category with trends."""
    start = parse_since(since)
    with open_engram(ctx, store) as mem:
        report = mem.report(agent=agent, since=start)
    if as_json:
        data = report.to_dict()
        emit_json(
            {
                k: data[k]
                for k in (
                    "agent",
                    "since",
                    "decisions",
                    "successes",
                    "success_rate",
                    "low",
                    "high",
                    "average_duration",
                    "actions",
                    "categories",
                )
            }
        )
        return
    out = console()
    if not report.decisions:
        out.print(
            f"No outcomes recorded for agent {agent}. Record some with: engram memory record --agent {agent} "
            "--context ... --action ... --outcome success"
        )
        return
    out.print(
        f"[bold]{report.decisions}[/] outcomes for agent [cyan]{agent}[/]: success rate "
        f"[green]{_pct(report.success_rate)}[/] (95% interval {_pct(report.low)}–{_pct(report.high)})"
    )
    out.print(_options_table(report.actions[:20], title="Actions"))
    out.print(_categories_table(report.categories))


@app.command()
def patterns(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    success_rate: Annotated[
        str | None,
        typer.Option(
            "--success-rate",
            metavar="CONDITION",
            help="Only patterns whose success rate meets it: '>80%', '>=0.9', '<50%'.",
            show_default=False,
        ),
    ] = None,
    min_attempts: Annotated[int, typer.Option("--min-attempts", min=1, help="Only patterns seen this often.")] = 2,
    since: SinceOption = None,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recurring situations (category, else the same context) and actions, with how often they worked."""
    rate = parse_rate_filter(success_rate) if success_rate is not None else None
    start = parse_since(since)
    with open_engram(ctx, store) as mem:
        found = mem.outcome_patterns(agent=agent, success_rate=rate, min_attempts=min_attempts, since=start)
    found = found[:limit]
    if as_json:
        emit_json([p.to_dict() for p in found])
        return
    table = Table(title=f"Patterns of {agent}" + (f" with success {rate}" if rate else ""), title_justify="left")
    table.add_column("situation", ratio=1, min_width=20)
    table.add_column("action", style="cyan")
    table.add_column("success", justify="right", style="green")
    table.add_column("95% interval", justify="right")
    table.add_column("runs", justify="right")
    table.add_column("last", no_wrap=True)
    for p in found:
        situation = f"[magenta]{p.category}[/]" if p.category else shorten(p.context, 80)
        table.add_row(
            situation,
            p.action,
            _pct(p.success_rate),
            f"{_pct(p.low)}–{_pct(p.high)}",
            str(p.attempts),
            p.last_at.astimezone().strftime("%Y-%m-%d"),
        )
    console().print(table if found else "No patterns match.")


@app.command()
def suggest(
    ctx: typer.Context,
    *,
    context: ContextOption,
    agent: AgentOption = "default",
    options: OptionsOption = None,
    limit: LimitOption = 5,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """What to do in a situation, from the outcomes of similar ones (no recommendation when evidence is thin)."""
    with open_engram(ctx, store) as mem:
        s = mem.suggest(context, agent=agent, options=options or None, limit=limit)
    if as_json:
        emit_json(
            {
                "context": s.context,
                "recommended": s.recommended,
                "confidence": s.confidence,
                "reason": s.reason,
                "options": [option_dict(o) for o in s.options],
            }
        )
        return
    out = console()
    if s.recommended is not None:
        out.print(f"Recommended: [bold cyan]{s.recommended}[/] (confidence {s.confidence:.0%})")
    else:
        out.print(f"No recommendation (confidence {s.confidence:.0%}).")
    out.print(s.reason)
    if s.options:
        out.print(_options_table(s.options, title="Options, best first", weighted=True))


@app.command()
def choose(
    ctx: typer.Context,
    *,
    context: ContextOption,
    options: Annotated[
        list[str], typer.Option("--option", "-o", help="An action to choose from (repeatable).", show_default=False)
    ],
    agent: AgentOption = "default",
    exploration: Annotated[
        float | None,
        typer.Option(
            "--exploration",
            min=0.0,
            max=1.0,
            help="0 always takes the best estimate, 1 (default) is plain Thompson sampling.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the draw.", show_default=False)] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pick one action for a situation, balancing trying options and using the best known one."""
    with open_engram(ctx, store) as mem:
        chosen = mem.choose(context, options, agent=agent, exploration=exploration, seed=seed)
    if as_json:
        emit_json({"context": context, "options": list(options), "chosen": chosen})
    else:
        typer.echo(chosen)


@app.command()
def feedback(
    ctx: typer.Context,
    memory_ids: Annotated[list[str], typer.Argument(help="Ids of the memories used for the task.", show_default=False)],
    *,
    outcome: Annotated[
        str,
        typer.Option(
            "--outcome", help="success, failure, partial, true/false, or a reward in [-1, 1].", show_default=False
        ),
    ],
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tell memories used for a task how it went: their success rate and confidence follow."""
    parsed = parse_outcome(outcome)
    with open_engram(ctx, store) as mem:
        updated = mem.feedback(memory_ids, parsed, agent=agent)
    if as_json:
        emit_json([m.to_dict() for m in updated])
        return
    for m in updated:
        rate = m.success_rate
        console().print(
            f"[cyan]{m.id}[/]: success rate {_pct(rate)} over {m.attempts:g} uses, confidence {m.confidence:.2f}"
        )


@app.command()
def report(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    since: SinceOption = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="markdown or json.", show_default=True)] = "markdown",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", metavar="FILE", help="Write the report there instead of to stdout.", show_default=False
        ),
    ] = None,
    chart: Annotated[
        Path | None,
        typer.Option(
            "--chart", metavar="FILE.png", help="Also draw success rate over time as a PNG.", show_default=False
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A report of an agent's outcomes as Markdown (default) or JSON, optionally with a PNG chart."""
    fmt = "json" if as_json else fmt.lower()
    if fmt not in ("markdown", "md", "json"):
        raise ValidationError(f"unknown --format {fmt!r} (choose markdown or json)")
    if chart is not None and chart.suffix.lower() != ".png":
        raise ValidationError(f"--chart must name a .png file, not {chart.name!r}")
    start = parse_since(since)
    with open_engram(ctx, store) as mem:
        result = mem.report(agent=agent, since=start, chart=chart)
    text = result.to_json() if fmt == "json" else result.to_markdown()
    if output is None:
        typer.echo(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
        if fmt != "json":
            console().print(f"Wrote {output}" + (f" and {chart}" if chart is not None else ""))


# -- the failures part of the learning engine --------------------------------------------------------------
# ``engram learning failures`` and ``engram learning apply-pattern`` belong to the failures/episodes/code-patterns
# work and live in ``learning_failures.py``, which adds them to this same group:
#
#     from engramdb.interfaces.cli.learning import SinceOption, app, parse_since
#
#     @app.command()
#     def failures(...): ...
#
# It is imported here, after this module's own commands, so ``engram learning --help`` lists them all.
def _load_failure_commands() -> None:
    try:
        importlib.import_module("engramdb.interfaces.cli.learning_failures")
    except ModuleNotFoundError as exc:
        if exc.name != "engramdb.interfaces.cli.learning_failures":
            raise


_load_failure_commands()

"""``engram learning ...``: what an agent's outcomes say, and what to do next.

Outcomes are recorded with ``engram memory record --context C --action A --outcome O``
(or ``mem.learning.record``); these commands read them back: ``stats``, ``patterns``,
``suggest``, ``choose``, ``feedback`` and ``report``. The failure commands of the same
group (``failures``, ``apply-pattern``) live in ``failures.py``;
:mod:`engramdb.interfaces.cli.app` registers them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import (
    AgentOption,
    ContextOption,
    JsonOption,
    LearningUserOption,
    LimitOption,
    SinceOption,
    StoreOption,
    open_engram,
    parse_outcome,
    parse_since,
)
from engramdb.interfaces.cli._refs import agent_hint, full_id, task_text
from engramdb.interfaces.cli._render import console, count_text, emit_json, pattern_facts, pct, shorten

if TYPE_CHECKING:
    from engramdb.models import CategoryTrend, FailurePattern, LearningStats, OptionStats

__all__ = ["choose", "feedback", "patterns", "pending", "report", "resolve", "stats", "suggest"]

OptionsOption = Annotated[
    list[str] | None,
    typer.Option("--option", "-o", help="An action to consider (repeatable).", show_default=False),
]
#: The fields of a learning report that ``engram learning stats --json`` shows.
STATS_FIELDS = (
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


#: The all-time fields of ``mem.learning.stats`` that ``engram learning stats --json`` adds.
STATS_OVERVIEW_FIELDS = (
    "memories",
    "pending",
    "most_used",
    "failure_patterns",
    "recurring_failures",
    "episodes",
    "episode_successes",
    "episode_failures",
    "most_used_memories",
    "memories_used",
    "memory_uses",
    "memory_success_rate",
    "best_memory_success_rate",
    "memory_retrievals",
)


def _overview_line(s: LearningStats) -> str:
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.memories.items(), key=lambda kv: -kv[1])) or "none"
    parts = [f"Memories: {kinds}"]
    if s.pending:
        parts.append(f"{s.pending} decision(s) awaiting an outcome")
    if s.failure_patterns:
        parts.append(f"{s.failure_patterns} failure pattern(s), {s.recurring_failures} recurring")
    if s.episodes:
        parts.append(f"{s.episodes} episode(s): {s.episode_successes} succeeded, {s.episode_failures} failed")
    return escape(". ".join(parts) + ".")


def _options_table(options: list[OptionStats], *, title: str, weighted: bool = False) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("action", style="cyan")
    table.add_column("success", justify="right", style="green")
    table.add_column("95% interval", justify="right")
    table.add_column("weighted runs" if weighted else "runs", justify="right")
    for o in options:
        table.add_row(o.action, pct(o.success_rate), f"{pct(o.low)}–{pct(o.high)}", f"{o.attempts:.3g}")
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
            pct(c.success_rate),
            f"{pct(c.low)}–{pct(c.high)}",
            f"{c.average_duration:.2f} s" if c.average_duration is not None else "-",
            f"{best.action} ({pct(best.success_rate)})" if best else "-",
            f"[{trend_style}]{c.trend.direction}[/]" if trend_style else c.trend.direction,
            f"{c.trend.p_value:.3g}" if c.trend.direction != "insufficient data" else "-",
        )
    return table


def stats(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    user: LearningUserOption = None,
    since: SinceOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Outcome statistics of an agent: overall, per action, and per category with trends."""
    start = parse_since(since)
    with open_engram(ctx, store) as mem:
        report = mem.learning.report(agent=agent, since=start, user=user)
        overview = mem.learning.stats(agent=agent, user=user)
        hint = agent_hint(mem, agent, empty=not report.decisions and not overview.memories and not as_json)
    if as_json:
        data = report.to_dict()
        extra = overview.to_dict()
        emit_json({k: data[k] for k in STATS_FIELDS} | {k: extra[k] for k in STATS_OVERVIEW_FIELDS})
        return
    out = console()
    if overview.memories or overview.pending:
        out.print(_overview_line(overview))
    whose = f"agent {escape(agent)}" if user is None else f"user {escape(user)} of agent {escape(agent)}"
    if not report.decisions:
        out.print(
            f"No outcomes recorded for {whose}. Record some with: engram memory record --agent {escape(agent)} "
            "--context ... --action ... --outcome success"
        )
        if hint:
            out.print(hint)
        return
    whose = f"agent [cyan]{escape(agent)}[/]"
    if user is not None:
        whose = f"user [cyan]{escape(user)}[/] of {whose}"
    out.print(
        f"[bold]{report.decisions}[/] outcome{'' if report.decisions == 1 else 's'} for {whose}: "
        "success rate "
        f"[green]{pct(report.success_rate)}[/] (95% interval {pct(report.low)}–{pct(report.high)})"
    )
    out.print(_options_table(report.actions[:20], title="Actions"))
    out.print(_categories_table(report.categories))


def patterns(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    user: LearningUserOption = None,
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
    kind: Annotated[
        str,
        typer.Option(
            "--type",
            "--kind",
            "-t",
            metavar="TYPE",
            help="decision (situations and the approaches taken) or failure (recurring failure patterns).",
        ),
    ] = "decision",
    recurring: Annotated[
        bool, typer.Option("--recurring", help="With --type failure: only patterns seen at least twice.")
    ] = False,
    since: SinceOption = None,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recurring situations (category, else the same context), the approaches taken and how often they worked.

    With --type failure: the failure patterns, by readable name, with their best fix.
    """
    chosen = kind.strip().lower()
    if chosen not in ("decision", "failure"):
        raise ValidationError(f"unknown pattern type {kind!r} (choose from decision, failure)")
    start = parse_since(since)
    if chosen == "failure":
        if success_rate is not None:
            raise ValidationError("--success-rate applies to decision patterns, not --type failure")
        if user is not None:
            raise ValidationError("--user applies to decision patterns: failure patterns are the agent's")
        with open_engram(ctx, store) as mem:
            failed = mem.failures.patterns(agent=agent, recurring=recurring, since=start)[:limit]
            hint = agent_hint(mem, agent, empty=not failed and not as_json)
        _show_failure_patterns(failed, agent=agent, as_json=as_json, hint=hint)
        return
    if recurring:
        raise ValidationError("--recurring applies to --type failure (decision patterns use --min-attempts)")
    if success_rate is not None:
        from engramdb.validate import parse_rate_filter  # here, so `engram --help` stays light

        parse_rate_filter(success_rate)  # a bad filter is named before the store is opened (or found missing)
    with open_engram(ctx, store) as mem:
        found = mem.learning.approaches(
            agent=agent, success_rate=success_rate, min_attempts=min_attempts, since=start, user=user
        )
        hint = agent_hint(mem, agent, empty=not found and not as_json)
    found = found[:limit]
    if as_json:
        emit_json([p.to_dict() for p in found])
        return
    condition = f" with success {' '.join(success_rate.split())}" if success_rate else ""
    table = Table(title=escape(f"Patterns of {agent}{condition}"), title_justify="left")
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
            pct(p.success_rate),
            f"{pct(p.low)}–{pct(p.high)}",
            str(p.attempts),
            p.last_at.astimezone().strftime("%Y-%m-%d"),
        )
    console().print(table if found else "No patterns match.")
    if hint:
        console().print(hint)


def _show_failure_patterns(found: list[FailurePattern], *, agent: str, as_json: bool, hint: str | None) -> None:
    if as_json:
        emit_json([p.to_dict() for p in found])
        return
    out = console()
    if not found:
        out.print(f"No failure patterns for agent {escape(repr(agent))}.")
        if hint:
            out.print(hint)
        return
    for p in found:
        out.print(f'Identified pattern: [bold magenta]"{escape(p.name or p.id)}"[/] ([cyan]{p.id}[/])')
        out.print(f"  • Seen {p.occurrences} time(s): {escape(shorten(p.signature, 120))}")
        for line in pattern_facts(p):
            out.print(f"  • {escape(line)}")
        working = [s for s in p.solutions if s.successes > 0]
        if working:
            best = working[0]
            tally = f"{count_text(best.successes)}/{count_text(best.attempts)}"
            out.print(f"  • Best fix: {escape(best.solution)} ({tally} worked)")
        if p.prevention:
            out.print(f"  • Prevention check: {escape(p.prevention[0])}")


def suggest(
    ctx: typer.Context,
    *,
    context: Annotated[
        str | None,
        typer.Option("--context", "-c", help="The situation, in words.", show_default=False),
    ] = None,
    task: Annotated[
        str | None,
        # Seed 001 writes `engram learning suggest --task auth-123`: a task id, resolved to the situation it names.
        typer.Option(
            "--task",
            help="A task: a memory id (or unique prefix), a task id kept as --meta task=ID, a tag, or words.",
            show_default=False,
        ),
    ] = None,
    agent: AgentOption = "default",
    user: LearningUserOption = None,
    options: OptionsOption = None,
    limit: LimitOption = 5,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """What to do in a situation, from the outcomes of similar ones (no recommendation when evidence is thin)."""
    if (context is None) == (task is None):
        raise ValidationError("give the situation with --context TEXT or --task ID (one of them)")
    note: str | None = None
    with open_engram(ctx, store) as mem:
        if task is not None:
            context, note = task_text(mem, task, agent=agent)
        assert context is not None  # one of the two, checked above
        s = mem.learning.suggest(context, agent=agent, options=options or None, limit=limit, user=user)
        # Outcomes belong to the agent that recorded them: say so when this one has none at all.
        empty = not s.options and not as_json and mem.count(agent=agent, kind="decision") == 0
    if as_json:
        emit_json(s.to_dict())
        return
    out = console()
    if note:
        out.print(f"[dim]{escape(note)}[/dim]")
    if s.recommended is not None:
        firmness = "tentative, " if s.tentative else ""
        out.print(
            f"Recommended: [bold cyan]{escape(s.recommended)}[/] ({firmness}confidence {s.confidence:.0%}, "
            f"{s.evidence:.3g} weighted outcome{'' if f'{s.evidence:.3g}' == '1' else 's'})"
        )
    else:
        out.print(f"No recommendation (confidence {s.confidence:.0%}).")
    # The reason quotes action names: '[fast]' in one is text, not markup.
    out.print(escape(s.reason))
    if s.success_factors:
        listed = ", ".join(
            f"{f.name} ({f.count} successful run{'s' if f.count != 1 else ''})" for f in s.success_factors
        )
        out.print(f"Key success factors: {escape(listed)}")
    if s.tools:
        out.print(f"Recommended tools: {escape(', '.join(f'{t.name} ({t.count})' for t in s.tools))}")
    if empty:
        out.print(
            f"[dim]Agent {escape(repr(agent))} has no recorded outcomes in this store; outcomes belong to the agent "
            "that recorded them: pass --agent NAME or set ENGRAM_AGENT.[/dim]"
        )
    if s.options:
        out.print(_options_table(s.options, title="Options, best first", weighted=True))


def choose(
    ctx: typer.Context,
    *,
    context: ContextOption,
    options: Annotated[
        list[str], typer.Option("--option", "-o", help="An action to choose from (repeatable).", show_default=False)
    ],
    agent: AgentOption = "default",
    user: LearningUserOption = None,
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
        chosen = mem.learning.choose(context, options, agent=agent, exploration=exploration, seed=seed, user=user)
    if as_json:
        emit_json({"context": context, "options": list(options), "chosen": chosen})
    else:
        typer.echo(chosen)


def feedback(
    ctx: typer.Context,
    memory_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[ID]...",
            help="Ids of the memories used for the task. None: those answering --context, else the best hit of "
            "the agent's latest search or context (within the hour).",
            show_default=False,
        ),
    ] = None,
    *,
    outcome: Annotated[
        str,
        typer.Option(
            "--outcome",
            help="success, failure, partial, true/false, a reward in [-1, 1], or feedback in words "
            "('great, exactly what I wanted').",
            show_default=False,
        ),
    ],
    agent: AgentOption = "default",
    context: Annotated[
        str | None,
        typer.Option(
            "--context", "-c", metavar="TASK", help="The task the feedback is about (without ids).", show_default=False
        ),
    ] = None,
    user: LearningUserOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tell memories used for a task how it went: their success rate and confidence follow."""
    parsed = parse_outcome(outcome)
    with open_engram(ctx, store) as mem:
        ids = [full_id(mem, i, agent=agent) for i in memory_ids] if memory_ids else None
        updated = mem.learning.feedback(ids, parsed, agent=agent, context=context, user=user)
    if as_json:
        emit_json([m.to_dict() for m in updated])
        return
    for m in updated:
        uses = f"{m.attempts:g} use{'' if m.attempts == 1 else 's'}"
        console().print(
            f"[cyan]{m.id}[/]: success rate {pct(m.success_rate)} over {uses}, confidence {m.confidence:.2f}"
        )


def report(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    user: LearningUserOption = None,
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
    success_target: Annotated[
        float,
        typer.Option(
            "--success-target",
            metavar="SHARE",
            min=0.0,
            max=1.0,
            help="Recommend attention for categories whose success rate is below this share.",
        ),
    ] = 0.7,
    slow_seconds: Annotated[
        float,
        typer.Option(
            "--slow-seconds",
            metavar="SECONDS",
            min=0.0,
            help="Recommend attention for categories and approaches slower than this on average.",
        ),
    ] = 300.0,
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
        result = mem.learning.report(
            agent=agent,
            since=start,
            chart=chart,
            success_target=success_target,
            slow_seconds=slow_seconds,
            user=user,
        )
    text = result.to_json() if fmt == "json" else result.to_markdown()
    if output is None:
        typer.echo(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
        if fmt != "json":
            console().print(f"Wrote {output}" + (f" and {chart}" if chart is not None else ""))


def resolve(
    ctx: typer.Context,
    decision_id: Annotated[
        str,
        typer.Argument(metavar="ID", help="The id (or a unique prefix) of a decision recorded with --outcome pending."),
    ],
    *,
    outcome: Annotated[
        str,
        typer.Option(
            "--outcome", help="success, failure, partial, true/false, or a reward in [-1, 1].", show_default=False
        ),
    ],
    agent: AgentOption = "default",
    user: LearningUserOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Attach the outcome to a decision recorded earlier with --outcome pending."""
    parsed = parse_outcome(outcome)
    with open_engram(ctx, store) as mem:
        memory = mem.learning.resolve(full_id(mem, decision_id, agent=agent), parsed, agent=agent, user=user)
    if as_json:
        emit_json(memory.to_dict())
        return
    action = escape(str(memory.metadata.get("action", "")))
    console().print(f"Resolved [cyan]{memory.id}[/] ({action}): {escape(str(memory.metadata.get('outcome')))}")


def pending(
    ctx: typer.Context,
    *,
    episode: Annotated[
        str | None,
        typer.Option("--episode", metavar="ID", help="Only the decisions of this episode.", show_default=False),
    ] = None,
    agent: AgentOption = "default",
    user: LearningUserOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Decisions still waiting for their outcome, oldest first (resolve them with 'engram learning resolve')."""
    with open_engram(ctx, store) as mem:
        found = mem.learning.pending(agent=agent, episode=episode, user=user)
        hint = agent_hint(mem, agent, empty=not found and not as_json)
    if as_json:
        emit_json([m.to_dict() for m in found])
        return
    if not found:
        console().print(f"No decisions awaiting an outcome for agent {escape(repr(agent))}.")
        if hint:
            console().print(hint)
        return
    table = Table(title=f"Decisions of {escape(agent)} awaiting an outcome", title_justify="left")
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("context", ratio=1, min_width=20)
    table.add_column("action", style="magenta")
    table.add_column("episode")
    table.add_column("recorded", no_wrap=True)
    for m in found:
        table.add_row(
            m.id,
            escape(shorten(m.content, 80)),
            escape(str(m.metadata.get("action", "-"))),
            escape(str(m.metadata.get("episode") or "-")),
            m.created_at.astimezone().strftime("%Y-%m-%d %H:%M"),
        )
    console().print(table)

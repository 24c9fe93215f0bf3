"""Failure patterns on the command line (``mem.failures``).

``engram learning failures`` and ``engram learning apply-pattern`` belong to the
``learning`` group, ``engram prevention generate`` to the ``prevention`` group and
``engram memory patterns`` to the ``memory`` group; :mod:`engramdb.interfaces.cli.app`
registers them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import (
    AgentOption,
    JsonOption,
    LimitOption,
    SinceOption,
    StoreOption,
    open_engram,
    parse_since,
)
from engramdb.interfaces.cli._refs import agent_hint
from engramdb.interfaces.cli._render import (
    console,
    count_text,
    emit_json,
    format_when,
    listing_table,
    pattern_facts,
    shorten,
)

if TYPE_CHECKING:
    from engramdb.models import FailurePattern, Memory, PatternPlan

__all__ = ["apply_pattern", "failures", "generate", "memory_patterns", "record_failure", "show_pattern", "solutions"]

RecurringOption = Annotated[
    bool, typer.Option("--recurring", help="Only patterns seen at least twice.", show_default=False)
]
PatternOption = Annotated[
    str,
    typer.Option("--pattern", "-p", metavar="NAME|ID", help="A failure pattern's name or id (or a unique prefix)."),
]


def _patterns_table(found: list[FailurePattern], *, title: str) -> Table:
    table = listing_table(title)
    # Ids and names are what users type into other commands: folded onto lines, never cut.
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("name", style="magenta", overflow="fold")
    table.add_column("seen", justify="right")
    table.add_column("signature", ratio=2, min_width=12)
    table.add_column("best fix", ratio=1, min_width=8)
    table.add_column("last seen", overflow="fold")
    for p in found:
        best = next((s for s in p.solutions if s.successes > 0), None)
        fix = (
            f"{shorten(best.solution, 60)} ({count_text(best.successes)}/{count_text(best.attempts)})" if best else "-"
        )
        table.add_row(
            p.id,
            escape(p.name or "-"),
            str(p.occurrences),
            escape(shorten(p.signature, 120)),
            escape(fix),
            format_when(p.last_seen),
        )
    return table


def _show_failures(
    found: list[FailurePattern], *, agent: str, title: str, as_json: bool, hint: str | None = None
) -> None:
    if as_json:
        emit_json([p.to_dict() for p in found])
        return
    if not found:
        console().print(f"No failure patterns for agent {escape(repr(agent))}.")
        if hint:
            console().print(hint)
        return
    console().print(_patterns_table(found, title=title))


def failures(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    since: SinceOption = None,
    recurring: RecurringOption = False,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Failure patterns: how often each failure happened, when, and which fixes worked.

    --recent 7d keeps the patterns seen in the last 7 days (their counts cover all time).
    """
    start = parse_since(since)
    with open_engram(ctx, store) as mem:
        found = mem.failures.patterns(agent=agent, recurring=recurring, since=start)[:limit]
        hint = agent_hint(mem, agent, empty=not found and not as_json)
    window = f" since {format_when(start)}" if start else ""
    _show_failures(found, agent=agent, title=f"Failure patterns of {agent}{window}", as_json=as_json, hint=hint)


def _print_plan(plan: PatternPlan) -> None:
    out = console()
    out.print(f"Task: [bold]{escape(plan.task)}[/]")
    out.print(f"Pattern [cyan]{escape(plan.pattern_id)}[/] ({plan.kind}): {escape(plan.title)}")
    fit = "good" if plan.relevance >= 0.5 else "fair" if plan.relevance >= 0.3 else "weak"
    out.print(f"Fit with the task: {fit} (similarity {plan.relevance:.2f})")
    for i, step in enumerate(plan.steps, 1):
        out.print(f"  {i}. {escape(step)}")
    if plan.fixes:
        table = Table(title="Fixes, best first", title_justify="left")
        table.add_column("fix", ratio=1)
        table.add_column("worked", justify="right")
        table.add_column("tried", justify="right")
        table.add_column("rate", justify="right", style="green")
        for s in plan.fixes:
            table.add_row(escape(s.solution), count_text(s.successes), count_text(s.attempts), f"{s.success_rate:.0%}")
        out.print(table)
    if plan.code:
        out.print(escape(plan.code), highlight=False)


def apply_pattern(
    ctx: typer.Context,
    pattern_id: Annotated[
        str, typer.Argument(metavar="ID", help="A failure pattern id or a memory id (e.g. a code pattern).")
    ],
    *,
    task: Annotated[str, typer.Option("--task", "-t", help="The task to apply it to.", show_default=False)],
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """How to apply a known pattern to a task: the checks to run and the fix to try, or the code to reuse."""
    if not task.strip():
        raise ValidationError("--task must not be empty")
    with open_engram(ctx, store) as mem:
        plan = mem.failures.plan(pattern_id, task, agent=agent)
    if as_json:
        emit_json(plan.to_dict())
    else:
        _print_plan(plan)


def generate(
    ctx: typer.Context,
    *,
    pattern: PatternOption,
    stage: Annotated[
        str, typer.Option("--stage", metavar="STAGE", help="The workflow stage the saved check runs before.")
    ] = "development",
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Prevention checks for a failure pattern, written from its history and the fixes that worked.

    The first is saved as a check of --stage (once: generating it again finds the saved one);
    list and run saved checks with 'engram prevention list' and 'engram prevention run'.
    """
    with open_engram(ctx, store) as mem:
        found = mem.failures.pattern(pattern, agent=agent)
        before = {c.id for c in mem.failures.checks(agent=agent, stage=stage)}
        saved = mem.failures.generate_check(found.id, stage=stage, agent=agent) if found.prevention else None
    if as_json:
        emit_json(
            {
                "pattern": found.id,
                "name": found.name,
                "signature": found.signature,
                "checks": list(found.prevention),
                "occurs_in": list(found.occurs_in),
                "effect": found.effect.to_dict() if found.effect is not None else None,
                "saved": saved.to_dict() if saved is not None else None,
            }
        )
        return
    out = console()
    out.print(f"Pattern [cyan]{found.id}[/] ({escape(found.name or '-')}): {escape(found.signature)}")
    for line in pattern_facts(found):
        out.print(f"  • {escape(line)}")
    for check in found.prevention:
        out.print(f"  - {escape(check)}")
    if saved is not None and saved.id in before:
        # Generating again finds the saved check: saying "Created" would suggest a duplicate.
        out.print(f"Prevention check [cyan]{saved.id}[/] is already saved for stage [magenta]{escape(saved.stage)}[/]")
    elif saved is not None:
        out.print(f"Created prevention check [cyan]{saved.id}[/]: {escape(shorten(saved.description, 100))}")
        out.print(f"Added to workflow stage: [magenta]{escape(saved.stage)}[/]")


_PATTERN_TYPES = {"failure": "failure", "code": "code_pattern", "code_pattern": "code_pattern"}


def memory_patterns(
    ctx: typer.Context,
    *,
    kind: Annotated[
        str,
        typer.Option("--type", "--kind", "-t", metavar="TYPE", help="failure (failure patterns) or code_pattern."),
    ] = "failure",
    agent: AgentOption = "default",
    recurring: RecurringOption = False,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Patterns in an agent's memories: recurring failures, or stored code patterns."""
    chosen = _PATTERN_TYPES.get(kind.strip().lower())
    if chosen is None:
        raise ValidationError(f"unknown pattern type {kind!r} (choose from failure, code_pattern)")
    with open_engram(ctx, store) as mem:
        if chosen == "failure":
            found = mem.failures.patterns(agent=agent, recurring=recurring)[:limit]
            hint = agent_hint(mem, agent, empty=not found and not as_json)
            _show_failures(found, agent=agent, title=f"Failure patterns of {agent}", as_json=as_json, hint=hint)
            return
        memories = mem.list(agent=agent, kind="code_pattern", limit=limit)
    _show_code_patterns(memories, agent=agent, as_json=as_json)


def _show_code_patterns(memories: list[Memory], *, agent: str, as_json: bool) -> None:
    if as_json:
        # A code pattern's facts are its memory's metadata: one flat object per pattern.
        emit_json([{"id": d["id"], **d["metadata"], "tags": d["tags"]} for d in (m.to_dict() for m in memories)])
        return
    if not memories:
        console().print(f"No code patterns for agent {escape(repr(agent))}.")
        return
    table = Table(title=f"Code patterns of {agent}", title_justify="left")
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("type", style="magenta")
    table.add_column("name", ratio=1)
    table.add_column("complexity", justify="right")
    table.add_column("lines", justify="right")
    for m in memories:
        meta = m.metadata
        table.add_row(
            m.id,
            str(meta.get("pattern_type", "-")),
            escape(shorten(str(meta.get("name") or m.content), 80)),
            f"{meta.get('complexity', '-')} ({meta.get('complexity_level', '-')})",
            str(meta.get("lines", "-")),
        )
    console().print(table)


# -- engram failures record | solutions | pattern ---------------------------------------------------------


def record_failure(
    ctx: typer.Context,
    *,
    error: Annotated[str, typer.Option("--error", "-e", metavar="TEXT", help="The error message.", show_default=False)],
    context: Annotated[
        str, typer.Option("--context", "-c", metavar="TEXT", help="What the agent was doing.", show_default=False)
    ] = "",
    fix: Annotated[
        str | None,
        # --solution: the Python API's name (failures.record(solution=...)), which users type too.
        typer.Option("--fix", "--solution", metavar="TEXT", help="The fix that worked.", show_default=False),
    ] = None,
    failed_fixes: Annotated[
        list[str] | None,
        typer.Option(
            "--failed-fix",
            "--failed-solution",
            metavar="TEXT",
            help="A fix tried that did not work (repeatable).",
            show_default=False,
        ),
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Record one occurrence of a failure, with the fix that worked and the fixes that did not."""
    if fix is not None and not fix.strip():
        raise ValidationError("--fix must not be empty")
    with open_engram(ctx, store, create=True) as mem:
        memory = mem.failures.record(
            error, agent=agent, context=context, solution=fix, failed_solutions=tuple(failed_fixes or ())
        )
        key = memory.metadata.get("pattern")
        found = mem.failures.pattern(key, agent=agent) if isinstance(key, str) and key else None
    if as_json:
        emit_json({**memory.to_dict(), "pattern_name": found.name if found is not None else None})
        return
    out = console()
    out.print(f"Recorded failure [cyan]{memory.id}[/] (agent {escape(memory.agent)})")
    if found is not None:
        out.print(
            f"Pattern [cyan]{found.id}[/] [magenta]{escape(found.name or '-')}[/]: seen {found.occurrences} time(s)"
        )


def solutions(
    ctx: typer.Context,
    error: Annotated[
        str | None,
        typer.Argument(
            metavar="ERROR", help="The error message, or only its type ('TimeoutError').", show_default=False
        ),
    ] = None,
    *,
    error_option: Annotated[
        str | None,
        # `failures record` takes the message as --error/-e: a user who just recorded one types it again here.
        typer.Option("--error", "-e", metavar="TEXT", help="The error message (instead of ERROR).", show_default=False),
    ] = None,
    agent: AgentOption = "default",
    limit: LimitOption = 3,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Fixes that worked for this failure (or similar ones), best first."""
    if (error is None) == (error_option is None):
        raise ValidationError("give the error message once: as ERROR or as --error")
    error = error if error is not None else error_option
    assert error is not None
    with open_engram(ctx, store) as mem:
        found = mem.failures.solutions(error, agent=agent, limit=limit)
        hint = agent_hint(mem, agent, empty=not found and not as_json)
    if as_json:
        emit_json([s.to_dict() for s in found])
        return
    if not found:
        console().print(f"No known fixes for {escape(repr(shorten(error, 80)))} (agent {escape(repr(agent))}).")
        if hint:
            console().print(hint)
        return
    table = Table(title="Fixes, best first", title_justify="left")
    table.add_column("fix", ratio=1)
    table.add_column("worked", justify="right")
    table.add_column("tried", justify="right")
    table.add_column("rate", justify="right", style="green")
    for s in found:
        table.add_row(escape(s.solution), count_text(s.successes), count_text(s.attempts), f"{s.success_rate:.0%}")
    console().print(table)


def show_pattern(
    ctx: typer.Context,
    pattern: Annotated[
        str, typer.Argument(metavar="NAME|ID", help="A pattern's name or id (or a unique prefix).", show_default=False)
    ],
    *,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """One failure pattern in full: its signature, occurrences, fixes and prevention checks."""
    with open_engram(ctx, store) as mem:
        found = mem.failures.pattern(pattern, agent=agent)
    if as_json:
        emit_json(found.to_dict())
        return
    out = console()
    out.print(f"Pattern [cyan]{found.id}[/] [magenta]{escape(found.name or '-')}[/]")
    out.print(f"Signature: {escape(found.signature)}")
    out.print(f"Example: {escape(shorten(found.example, 200))}")
    first, last = format_when(found.first_seen), format_when(found.last_seen)
    out.print(f"Seen {found.occurrences} time(s), first {first}, last {last}")
    for line in pattern_facts(found):
        out.print(escape(line))
    if found.solutions:
        table = Table(title="Fixes, best first", title_justify="left")
        table.add_column("fix", ratio=1)
        table.add_column("worked", justify="right")
        table.add_column("tried", justify="right")
        for s in found.solutions:
            table.add_row(escape(s.solution), count_text(s.successes), count_text(s.attempts))
        out.print(table)
    for check in found.prevention:
        out.print(f"  - {escape(check)}")

"""Failure patterns on the command line.

``engram learning failures`` and ``engram learning apply-pattern`` join the
``learning`` group (this module is imported at the end of ``learning.py``);
``engram prevention generate`` is the :data:`prevention` group, and
``engram memory patterns`` (:func:`memory_patterns`) joins the ``memory`` group
where the CLI registers its groups.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._common import (
    AgentOption,
    JsonOption,
    LimitOption,
    StoreOption,
    console,
    emit_json,
    format_when,
    new_group,
    open_engram,
    shorten,
)
from engramdb.interfaces.cli.learning import SinceOption, parse_since
from engramdb.interfaces.cli.learning import app as learning_app
from engramdb.learning.failures_api import PatternPlan, pattern_dict
from engramdb.models import FailurePattern

__all__ = ["apply_pattern", "failures", "generate", "memory_patterns", "prevention"]

prevention = new_group("prevention", "Checks that keep known failures from happening again.")

RecurringOption = Annotated[
    bool, typer.Option("--recurring", help="Only patterns seen at least twice.", show_default=False)
]
PatternOption = Annotated[
    str, typer.Option("--pattern", "-p", metavar="ID", help="A failure pattern id (or a unique prefix).")
]


def _patterns_table(found: list[FailurePattern], *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("seen", justify="right")
    table.add_column("signature", ratio=1, min_width=24)
    table.add_column("best fix", ratio=1)
    table.add_column("last seen", no_wrap=True)
    for p in found:
        working = [s for s in p.solutions if s.successes > 0]
        fix = (
            f"{shorten(working[0].solution, 60)} ({working[0].successes:g}/{working[0].attempts:g})" if working else "-"
        )
        table.add_row(
            p.id, str(p.occurrences), escape(shorten(p.signature, 120)), escape(fix), format_when(p.last_seen)
        )
    return table


def _show_failures(found: list[FailurePattern], *, agent: str, title: str, as_json: bool) -> None:
    if as_json:
        emit_json([pattern_dict(p) for p in found])
        return
    if not found:
        console().print(f"No failure patterns for agent {escape(repr(agent))}.")
        return
    console().print(_patterns_table(found, title=title))


@learning_app.command()
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
        found = mem.failure_patterns(agent=agent, recurring=recurring, since=start)[:limit]
    window = f" since {format_when(start)}" if start else ""
    _show_failures(found, agent=agent, title=f"Failure patterns of {agent}{window}", as_json=as_json)


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
            table.add_row(escape(s.solution), f"{s.successes:g}", f"{s.attempts:g}", f"{s.success_rate:.0%}")
        out.print(table)
    if plan.code:
        out.print(escape(plan.code), highlight=False)


@learning_app.command("apply-pattern")
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
        plan = mem.apply_pattern(pattern_id, task, agent=agent)
    if as_json:
        emit_json(plan.to_dict())
    else:
        _print_plan(plan)


@prevention.command()
def generate(
    ctx: typer.Context,
    *,
    pattern: PatternOption,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Prevention checks for a failure pattern, written from its history and the fixes that worked."""
    with open_engram(ctx, store) as mem:
        found = mem.failure_pattern(pattern, agent=agent)
    if as_json:
        emit_json({"pattern": found.id, "signature": found.signature, "checks": list(found.prevention)})
        return
    out = console()
    out.print(f"Pattern [cyan]{found.id}[/]: {escape(found.signature)}")
    for check in found.prevention:
        out.print(f"  - {escape(check)}")


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
            found = mem.failure_patterns(agent=agent, recurring=recurring)[:limit]
            _show_failures(found, agent=agent, title=f"Failure patterns of {agent}", as_json=as_json)
            return
        memories = mem.list(agent=agent, kind="code_pattern", limit=limit)
    _show_code_patterns(memories, agent=agent, as_json=as_json)


def _show_code_patterns(memories: list[Any], *, agent: str, as_json: bool) -> None:
    if as_json:
        emit_json([{"id": m.id, **dict(m.metadata), "tags": list(m.tags)} for m in memories])
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

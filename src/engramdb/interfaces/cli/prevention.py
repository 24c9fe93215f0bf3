"""``engram prevention add | list | run | remove``: saved checks that keep known failures from recurring.

A prevention check is a condition to verify before a workflow stage ("development", "ci",
"deploy"...), optionally attached to a failure pattern (by id or readable name). Its
predicates (``--file``, ``--env``, ``--command``, ``--module``) are evaluated by ``run``
without executing anything; a check without predicates is a reminder (``manual``).
``engram prevention generate`` (a check written from a pattern) lives in ``failures.py``;
:mod:`engramdb.interfaces.cli.app` registers them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import AgentOption, JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._refs import agent_hint
from engramdb.interfaces.cli._render import console, emit_json, listing_table, shorten

if TYPE_CHECKING:
    from engramdb.models import CheckResult, PreventionCheck

__all__ = ["add", "list_", "remove", "run"]

StageFilterOption = Annotated[
    str | None,
    typer.Option("--stage", metavar="STAGE", help="Only checks of this workflow stage.", show_default=False),
]
ListOption = Annotated[list[str] | None, typer.Option(show_default=False)]

_STATUS_STYLE = {"passed": "green", "failed": "red", "manual": "yellow"}


def _predicates(c: PreventionCheck) -> str:
    parts = [f"file {f}" for f in c.files] + [f"env {v}" for v in c.env]
    parts += [f"command {x}" for x in c.commands] + [f"module {m}" for m in c.modules]
    return ", ".join(parts) or "manual"


def _pattern_label(c: PreventionCheck) -> str:
    return c.pattern_name or c.pattern_id or "-"


def add(
    ctx: typer.Context,
    description: Annotated[
        str | None,
        typer.Argument(
            metavar="[CHECK]",
            help="What to verify, in words (default with --pattern: the pattern's first prevention line).",
            show_default=False,
        ),
    ] = None,
    *,
    stage: Annotated[
        str, typer.Option("--stage", metavar="STAGE", help="The workflow stage to run it before.", show_default=False)
    ],
    pattern: Annotated[
        str | None,
        typer.Option("--pattern", "-p", metavar="NAME|ID", help="The failure pattern it prevents.", show_default=False),
    ] = None,
    files: Annotated[
        list[str] | None,
        typer.Option("--file", metavar="PATH", help="A file that must exist (repeatable).", show_default=False),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env", metavar="VAR", help="An environment variable that must be set (repeatable).", show_default=False
        ),
    ] = None,
    commands: Annotated[
        list[str] | None,
        typer.Option(
            "--command", metavar="PROGRAM", help="A program that must be on PATH (repeatable).", show_default=False
        ),
    ] = None,
    modules: Annotated[
        list[str] | None,
        typer.Option(
            "--module", metavar="NAME", help="A Python module that must be importable (repeatable).", show_default=False
        ),
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Save a prevention check for a workflow stage, optionally attached to a failure pattern."""
    if description is None and pattern is None:
        raise ValidationError("say what to check (CHECK), or name a failure pattern with --pattern")
    with open_engram(ctx, store, create=True) as mem:
        saved = mem.failures.add_check(
            pattern,
            description,
            stage=stage,
            agent=agent,
            files=files or (),
            env=env or (),
            commands=commands or (),
            modules=modules or (),
        )
    if as_json:
        emit_json(saved.to_dict())
        return
    out = console()
    out.print(f"Created prevention check [cyan]{saved.id}[/]: {escape(saved.description)}")
    out.print(f"Added to workflow stage: [magenta]{escape(saved.stage)}[/] (checks: {escape(_predicates(saved))})")


def list_(
    ctx: typer.Context,
    *,
    stage: StageFilterOption = None,
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern", "-p", metavar="NAME|ID", help="Only checks of this failure pattern.", show_default=False
        ),
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the saved prevention checks, oldest first."""
    with open_engram(ctx, store) as mem:
        found = mem.failures.checks(agent=agent, stage=stage, pattern=pattern)
        hint = agent_hint(mem, agent, empty=not found and not as_json)
    if as_json:
        emit_json([c.to_dict() for c in found])
        return
    if not found:
        where = f" for stage {stage!r}" if stage else ""
        console().print(f"No prevention checks{escape(where)} for agent {escape(repr(agent))}.")
        if hint:
            console().print(hint)
        return
    table = listing_table(f"Prevention checks of {escape(agent)}")
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("stage", style="magenta", overflow="fold")
    table.add_column("check", ratio=2, min_width=12)
    table.add_column("verifies", ratio=1, min_width=6)
    table.add_column("pattern", overflow="fold")
    for c in found:
        table.add_row(
            c.id,
            escape(c.stage),
            escape(shorten(c.description, 120)),
            escape(_predicates(c)),
            escape(_pattern_label(c)),
        )
    console().print(table)


def _results_table(results: list[CheckResult]) -> Table:
    table = listing_table("Prevention checks")
    table.add_column("status", no_wrap=True)
    table.add_column("stage", style="magenta", overflow="fold")
    table.add_column("check", ratio=2, min_width=12)
    table.add_column("problems", ratio=1, min_width=8)
    table.add_column("id", style="cyan", no_wrap=True)
    for r in results:
        style = _STATUS_STYLE.get(r.status, "")
        table.add_row(
            f"[{style}]{r.status}[/]",
            escape(r.check.stage),
            escape(shorten(r.check.description, 100)),
            escape("; ".join(r.problems) or "-"),
            r.check.id,
        )
    return table


def run(
    ctx: typer.Context,
    *,
    stage: Annotated[
        str | None,
        typer.Option(
            "--stage", metavar="STAGE", help="Run the checks of this stage (default: all).", show_default=False
        ),
    ] = None,
    cwd: Annotated[
        str | None,
        typer.Option(
            "--cwd",
            metavar="DIR",
            help="Directory that relative --file paths are checked against (default: the current one).",
            show_default=False,
        ),
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the saved checks (nothing is executed: files, variables, programs and modules are looked up).

    Exits 1 when a check fails; a check without predicates is listed as manual and does not fail.
    """
    with open_engram(ctx, store) as mem:
        results = mem.failures.run_checks(stage, agent=agent, cwd=cwd)
    failed = [r for r in results if not r.passed]
    if as_json:
        emit_json([r.to_dict() for r in results])
    elif not results:
        where = f" for stage {stage!r}" if stage else ""
        console().print(f"No prevention checks{escape(where)} for agent {escape(repr(agent))}.")
    else:
        out = console()
        out.print(_results_table(results))
        counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "manual")}
        out.print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['manual']} to verify by hand")
    if failed:
        raise ValidationError(f"{len(failed)} of {len(results)} prevention checks failed")


def remove(
    ctx: typer.Context,
    check_id: Annotated[str, typer.Argument(metavar="ID", help="The check's id.", show_default=False)],
    *,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a saved prevention check."""
    with open_engram(ctx, store) as mem:
        mem.failures.remove_check(check_id, agent=agent)
    if as_json:
        emit_json({"id": check_id, "removed": True})
    else:
        console().print(f"Removed prevention check [cyan]{escape(check_id)}[/]")

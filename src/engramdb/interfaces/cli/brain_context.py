"""``engram context`` and ``engram knowledge distill``: the prompt context of a task, and distillation."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import (
    AgentOption,
    JsonOption,
    KindsOption,
    SessionOption,
    StoreOption,
    UserOption,
    check_kinds,
    open_engram,
)
from engramdb.interfaces.cli._render import console, emit_json, shorten

__all__ = ["context", "distill"]


def context(
    ctx: typer.Context,
    *,
    task: Annotated[str, typer.Option("--task", "-t", help="What the agent is about to do.", show_default=False)],
    agent: AgentOption = "default",
    budget: Annotated[
        int, typer.Option("--budget", "--token-budget", metavar="TOKENS", help="Largest prompt block, in tokens.")
    ] = 1500,
    user: UserOption = None,
    session: SessionOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """What an agent should know before a task, as a prompt block within a token budget.

    The recommended approach (with its success rate), warnings from similar past failures and
    their checks, known fixes, preferences, the most relevant memories, and the agent's session.
    """
    if not task.strip():
        raise ValidationError("--task must not be empty")
    with open_engram(ctx, store) as mem:
        found = mem.context(task, agent=agent, token_budget=budget, user=user, session=session)
    if as_json:
        emit_json(found.to_dict())
        return
    text = found.render()
    if text:
        typer.echo(text)
    else:
        console().print(f"Nothing known yet for this task (agent {escape(repr(agent))}).")


def distill(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    kinds: KindsOption = None,
    min_group: Annotated[
        int, typer.Option("--min-group", metavar="N", help="Smallest group of similar memories to distil.")
    ] = 3,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Distil groups of memories that say the same thing into one knowledge memory each.

    Each distilled memory states the general pattern, when it applies, a confidence from the
    sources' outcomes, and links to its sources (metadata distilled_from, tag distilled).
    Running it again updates those memories instead of adding new ones.
    """
    wanted = check_kinds(kinds)
    with open_engram(ctx, store) as mem:
        written = mem.knowledge.distill(agent=agent, kind=wanted, min_group=min_group, dry_run=dry_run)
    if as_json:
        emit_json({"dry_run": dry_run, "memories": [m.to_dict() for m in written]})
        return
    out = console()
    if not written:
        out.print(f"No group of {min_group} or more similar memories of {escape(repr(agent))} to distil.")
        return
    verb = "Would write" if dry_run else "Wrote"
    table = Table(title=f"{verb} {len(written)} distilled memor{'y' if len(written) == 1 else 'ies'}")
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("sources", justify="right")
    table.add_column("confidence", justify="right")
    table.add_column("knowledge", ratio=1)
    for m in written:
        source_count = m.metadata.get("source_count", "?")
        table.add_row(m.id[:12], str(source_count), f"{m.confidence:.2f}", escape(shorten(m.content)))
    out.print(table)

"""``engram memory cleanup``: apply the retention policy (forget expired memories for good).

It belongs to the ``memory`` group; :mod:`engramdb.interfaces.cli.app` registers it there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import JsonOption, OnlyUserOption, SessionOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, count_memories, emit_json
from engramdb.validate import load_policy

if TYPE_CHECKING:
    from engramdb.models import Expiry

__all__ = ["cleanup"]


def cleanup(
    ctx: typer.Context,
    *,
    dry_run: Annotated[bool, typer.Option("--dry-run", "-n", help="Only show what would be forgotten.")] = False,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Only this agent's memories.", show_default=False)
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            metavar="FILE",
            help="Retention policy (TOML). Default: the retention_file setting, else retention.toml in the "
            "store folder or $ENGRAM_HOME.",
            show_default=False,
        ),
    ] = None,
    user: OnlyUserOption = None,
    session: SessionOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Apply the retention policy: forget expired memories for good (content, index, vectors, history).

    Policies are per kind: max_age_days, max_count (per agent) and decay of unused,
    low-confidence memories (decay_half_life_days with decay_floor).
    """
    if policy_file is not None and not policy_file.is_file():
        problem = "is a directory, not a policy file" if policy_file.is_dir() else "does not exist"
        raise ValidationError(f"retention policy {policy_file} {problem}")
    policy = load_policy(policy_file) if policy_file is not None else None
    with open_engram(ctx, store) as mem:
        report = mem.retention.cleanup(dry_run=dry_run, agent=agent, policy=policy, user=user, session=session)
    if as_json:
        emit_json(report.to_dict())
        return
    if report.policy_empty:
        console().print("No retention policy is set: nothing expires. (See 'engram memory cleanup --help'.)")
        return
    if not report.expired:
        console().print("Nothing to clean up.")
        return
    console().print(_expiry_table(report.expired, dry_run=dry_run))
    verb = "Would forget" if dry_run else "Forgot"
    console().print(f"{verb} {count_memories(len(report.expired))}.")


def _expiry_table(expired: Sequence[Expiry], *, dry_run: bool) -> Table:
    table = Table(title="Would be forgotten" if dry_run else "Forgotten", title_justify="left")
    table.add_column("id", no_wrap=True, min_width=32, style="cyan")
    table.add_column("agent", no_wrap=True)
    table.add_column("kind", style="magenta", no_wrap=True)
    table.add_column("reason", no_wrap=True)
    table.add_column("why", ratio=1)
    for e in expired:
        table.add_row(e.memory_id, escape(e.agent), e.kind, e.reason, escape(e.detail))
    return table

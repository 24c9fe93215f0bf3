"""``engram audit log | verify`` and ``engram memory cleanup``: the audit trail and retention.

``cleanup`` belongs to the ``memory`` group; :mod:`engramdb.interfaces.cli` registers it there.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.interfaces.cli._common import (
    JsonOption,
    LimitOption,
    StoreOption,
    console,
    count_memories,
    emit_json,
    new_group,
    open_engram,
    shorten,
)
from engramdb.models import AuditEvent
from engramdb.privacy.retention import Expiry, load_policy

__all__ = ["app", "cleanup"]

app = new_group("audit", "Inspect and verify the hash-chained audit trail of writes, reads, shares and deletions.")

FilterAgentOption = Annotated[
    str | None,
    typer.Option("--agent", "-a", help="Only entries of this acting agent.", show_default=False),
]


def _detail(event: AuditEvent) -> str:
    parts = []
    for key, value in event.detail.items():
        if key == "ids":
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        parts.append(f"{key}={shown}")
    return shorten("; ".join(parts), 80)


@app.command("log")
def log(
    ctx: typer.Context,
    *,
    agent: FilterAgentOption = None,
    memory_id: Annotated[
        str | None, typer.Option("--memory", "--id", help="Only entries about this memory.", show_default=False)
    ] = None,
    action: Annotated[
        str | None,
        typer.Option(
            "--action",
            help="Only this action: create, merge, update, forget, retention, get, list, search, share, unshare, "
            "export, import.",
            show_default=False,
        ),
    ] = None,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show audit entries, newest first: who did what to which memory, and when."""
    with open_engram(ctx, store) as mem:
        events = mem.audit_log(agent=agent, memory_id=memory_id, action=action, limit=limit)
    if as_json:
        emit_json(
            [
                {
                    "seq": e.seq,
                    "at": e.at.isoformat(),
                    "action": e.action,
                    "agent": e.agent,
                    "memory_id": e.memory_id,
                    "detail": dict(e.detail),
                    "hash": e.hash,
                }
                for e in events
            ]
        )
        return
    if not events:
        console().print("The audit trail has no matching entries.")
        return
    table = Table(title="Audit trail (newest first)", title_justify="left")
    table.add_column("#", justify="right", no_wrap=True, min_width=2)
    table.add_column("when", no_wrap=True)
    table.add_column("action", style="magenta", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("memory", no_wrap=True, min_width=32, style="cyan")
    table.add_column("detail", ratio=1, min_width=12)
    for e in events:
        table.add_row(
            str(e.seq),
            e.at.astimezone().strftime("%m-%d %H:%M"),
            e.action,
            escape(e.agent or "-"),
            e.memory_id or "-",
            escape(_detail(e)),
        )
    console().print(table)


@app.command()
def verify(
    ctx: typer.Context,
    *,
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect",
            metavar="SEQ:HASH",
            help="A head printed by an earlier verify and kept elsewhere: that entry must still be there, unchanged.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check the hash chain: exit 0 if intact, 1 if any entry was edited, removed, reordered or inserted.

    Prints the head (SEQ:HASH): keep it elsewhere and pass it to --expect later, and even a
    rewrite of the whole file, or entries cut off the end with the head fixed up, shows.
    """
    with open_engram(ctx, store) as mem:
        result = mem.check_audit(expect=expect)
    if as_json:
        emit_json(result.to_dict())
    elif result.ok:
        console().print(f"Audit trail intact: {result.checked} entries. Head: {result.head_seq}:{result.head_hash}")
    if not result.ok:
        if not as_json:
            sys.stderr.write(f"error: the audit trail was tampered with: {result.reason}\n")
        raise typer.Exit(1)


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
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Apply the retention policy: forget expired memories for good (content, index, vectors, history).

    Policies are per kind: max_age_days, max_count (per agent) and decay of unused,
    low-confidence memories (decay_half_life_days with decay_floor).
    """
    if policy_file is not None and not policy_file.is_file():
        raise FileNotFoundError(2, "No such file", str(policy_file))
    policy = load_policy(policy_file) if policy_file is not None else None
    with open_engram(ctx, store) as mem:
        expired = mem.cleanup(dry_run=dry_run, agent=agent, policy=policy)
        effective = policy if policy is not None else mem.retention_policy()
    if as_json:
        emit_json({"dry_run": dry_run, "forgotten": [] if dry_run else [e.to_dict() for e in expired],
                   "expired": [e.to_dict() for e in expired]})  # fmt: skip
        return
    if effective.empty:
        console().print("No retention policy is set: nothing expires. (See 'engram memory cleanup --help'.)")
        return
    if not expired:
        console().print("Nothing to clean up.")
        return
    console().print(_expiry_table(expired, dry_run=dry_run))
    verb = "Would forget" if dry_run else "Forgot"
    console().print(f"{verb} {count_memories(len(expired))}.")


def _expiry_table(expired: list[Expiry], *, dry_run: bool) -> Table:
    table = Table(title="Would be forgotten" if dry_run else "Forgotten", title_justify="left")
    table.add_column("id", no_wrap=True, min_width=32, style="cyan")
    table.add_column("agent", no_wrap=True)
    table.add_column("kind", style="magenta", no_wrap=True)
    table.add_column("reason", no_wrap=True)
    table.add_column("why", ratio=1)
    for e in expired:
        table.add_row(e.memory_id, escape(e.agent), e.kind, e.reason, escape(e.detail))
    return table

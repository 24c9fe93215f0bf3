"""``engram audit log | verify``: the hash-chained audit trail."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from engramdb.interfaces.cli._errors import report
from engramdb.interfaces.cli._options import JsonOption, LimitOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, emit_json, listing_table, shorten
from engramdb.models import AuditEvent

__all__ = ["log", "verify"]

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
            help="Only this action: create, update, merge, forget, retention, get, list, search, share, unshare, "
            "export, import, feedback, resolve, ... (an unknown one is an error listing them all).",
            show_default=False,
        ),
    ] = None,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show audit entries, newest first: who did what to which memory, and when."""
    if action is not None:
        from engramdb.validate import check_action  # here, so `engram --help` stays light

        action = check_action(action)  # a typo is an error before the store is opened, not an empty answer
    with open_engram(ctx, store) as mem:
        events = mem.audit.log(agent=agent, memory_id=memory_id, action=action, limit=limit)
    if as_json:
        emit_json([e.to_dict() for e in events])
        return
    if not events:
        console().print("The audit trail has no matching entries.")
        return
    table = listing_table("Audit trail (newest first)")
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
        result = mem.audit.verification(expect=expect)
    if as_json:
        emit_json(result.to_dict())
    elif result.ok:
        console().print(f"Audit trail intact: {result.checked} entries. Head: {result.head_seq}:{result.head_hash}")
    if not result.ok:
        raise typer.Exit(1 if as_json else report(f"the audit trail was tampered with: {result.reason}"))

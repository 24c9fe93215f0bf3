"""``engram keys create | list | revoke``: the API keys of the REST and MCP servers.

A key acts as one agent (``--read-only``: it may not change anything; ``--admin``: it
may act for any agent). The token is printed once, by ``create``; the store keeps only
its hash. Keys live in the store, so every server in front of it sees them at once.
:mod:`engramdb.interfaces.cli.app` registers these commands.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.interfaces.cli._options import JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, emit_json, format_when

__all__ = ["create", "list_", "revoke"]


def _rights(read_only: bool, admin: bool) -> str:
    access = "read-only" if read_only else "read-write"
    return f"{access}, admin" if admin else access


def create(
    ctx: typer.Context,
    *,
    agent: Annotated[str, typer.Option("--agent", "-a", metavar="NAME", help="The agent the key acts as.")],
    read_only: Annotated[bool, typer.Option("--read-only", help="The key may read but not change anything.")] = False,
    admin: Annotated[bool, typer.Option("--admin", help="The key may act for any agent.")] = False,
    label: Annotated[
        str | None, typer.Option("--label", metavar="TEXT", help="A note on what the key is for.", show_default=False)
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key for an agent and print it, once: only its hash is stored."""
    from engramdb.interfaces._access import keys_of

    with open_engram(ctx, store, create=True) as mem:
        new = keys_of(mem).create(agent, read_only=read_only, admin=admin, label=label)
    if as_json:
        emit_json(new.to_dict())
        return
    key = new.key
    typer.echo(new.token)
    sys_note = f"key {key.id} for agent {key.agent!r} ({_rights(key.read_only, key.admin)}): store it now, "
    typer.echo(sys_note + "it cannot be shown again. Send it as 'Authorization: Bearer <key>'.", err=True)


def list_(ctx: typer.Context, *, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List the API keys (never their secrets), revoked ones included."""
    from engramdb.interfaces._access import keys_of

    with open_engram(ctx, store) as mem:
        keys = keys_of(mem).list()
    if as_json:
        emit_json({"keys": [k.to_dict() for k in keys]})
        return
    if not keys:
        console().print("No API keys: servers on loopback trust every caller. Create one with: engram keys create")
        return
    table = Table(title="API keys", title_justify="left")
    for column in ("id", "agent", "rights", "created", "status", "label"):
        table.add_column(column)
    for k in keys:
        status = "active" if k.active else f"revoked {format_when(k.revoked_at)}" if k.revoked_at else "revoked"
        table.add_row(
            k.id,
            escape(k.agent),
            _rights(k.read_only, k.admin),
            format_when(k.created_at),
            status,
            escape(k.label or ""),
        )
    console().print(table)


def revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(metavar="ID", help="The key's id (from 'engram keys list').")],
    *,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke an API key: it stops working at once, on every server of the store."""
    from engramdb.interfaces._access import keys_of

    with open_engram(ctx, store) as mem:
        key = keys_of(mem).revoke(key_id)
    if as_json:
        emit_json(key.to_dict())
        return
    console().print(f"Revoked key {key.id} of agent {escape(repr(key.agent))}.")

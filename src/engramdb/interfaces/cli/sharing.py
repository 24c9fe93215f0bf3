"""``engram memory share | unshare | shares``: consent-based sharing between agents.

These commands belong to the ``memory`` group; :mod:`engramdb.interfaces.cli.app`
registers them there.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb import validate as check
from engramdb.interfaces.cli._options import AgentOption, JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, count_memories, emit_json, format_when

__all__ = ["share", "shares", "unshare"]

IdsArgument = Annotated[
    list[str] | None,
    typer.Argument(metavar="ID", help="Ids of the owner's memories to act on.", show_default=False),
]
IdOption = Annotated[
    list[str] | None,
    typer.Option("--id", metavar="ID", help="A memory id (repeatable; same as the ID arguments).", show_default=False),
]
FromOption = Annotated[
    str, typer.Option("--from", "--from-agent", metavar="AGENT", help="The owner of the memories.", show_default=False)
]
TagOption = Annotated[
    str | None,
    typer.Option(
        "--tag", "--domain", metavar="TAG", help="Every memory of the owner carrying this tag.", show_default=False
    ),
]
PatternOption = Annotated[
    str | None,
    typer.Option(
        "--pattern",
        metavar="ID",
        help="The owner's failure memories in this failure pattern (ids from 'engram memory patterns').",
        show_default=False,
    ),
]


def _ids(arguments: list[str] | None, options: list[str] | None) -> list[str] | None:
    ids = [*(arguments or ()), *(options or ())]
    return ids or None


def share(
    ctx: typer.Context,
    ids: IdsArgument = None,
    *,
    from_agent: FromOption,
    to_agent: Annotated[
        str,
        typer.Option("--to", "--to-agent", metavar="AGENT", help="Who may read them; '*' means every agent."),
    ] = "*",
    id_options: IdOption = None,
    tag: TagOption = None,
    pattern: PatternOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Share some of an agent's memories with another agent (or '*', everyone), without copying them.

    Choose the memories by id, by --tag, or by --pattern. Recipients see them in search, list and
    learning, marked with who shared them, until 'engram memory unshare'.
    """
    with open_engram(ctx, store) as mem:
        count = mem.sharing.share(
            _ids(ids, id_options), from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern
        )
    if as_json:
        emit_json({"shared": count, "from_agent": from_agent, "to_agent": to_agent})
        return
    who = "every agent" if to_agent == "*" else f"agent {escape(repr(to_agent))}"
    console().print(f"Shared {count_memories(count)} of {escape(repr(from_agent))} with {who}.")


def unshare(
    ctx: typer.Context,
    ids: IdsArgument = None,
    *,
    from_agent: FromOption,
    to_agent: Annotated[
        str,
        typer.Option("--to", "--to-agent", metavar="AGENT", help="Whose access to revoke; '*' (default) revokes all."),
    ] = "*",
    id_options: IdOption = None,
    tag: TagOption = None,
    pattern: PatternOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke shares: the recipients no longer see those memories anywhere."""
    with open_engram(ctx, store) as mem:
        count = mem.sharing.unshare(
            _ids(ids, id_options), from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern
        )
    if as_json:
        emit_json({"unshared": count, "from_agent": from_agent, "to_agent": to_agent})
        return
    console().print(f"Revoked sharing of {count_memories(count)} of {escape(repr(from_agent))}.")


def shares(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """What an agent has shared, and what was shared with it."""
    agent = check.agent_name(agent)  # checked as --agent: the library would name it from_agent
    with open_engram(ctx, store) as mem:
        given = mem.sharing.list(from_agent=agent)
        received = mem.sharing.list(to_agent=agent)
    if as_json:
        emit_json({"given": [s.to_dict() for s in given], "received": [s.to_dict() for s in received]})
        return
    out = console()
    if not given and not received:
        out.print(f"Agent {escape(repr(agent))} has no shares.")
        return
    table = Table(title=f"Shares of {agent}", title_justify="left")
    table.add_column("direction", no_wrap=True)
    table.add_column("id", no_wrap=True, style="cyan")
    table.add_column("with", no_wrap=True)
    table.add_column("since", no_wrap=True)
    for s in given:
        table.add_row("given", s.memory_id, "everyone" if s.to_agent == "*" else s.to_agent, format_when(s.shared_at))
    for s in received:
        table.add_row("received", s.memory_id, s.from_agent, format_when(s.shared_at))
    out.print(table)

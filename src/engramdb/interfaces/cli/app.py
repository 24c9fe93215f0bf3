"""The ``engram`` command: the one place where every command is registered.

Command modules hold plain functions (their docstrings are the help, their
``Annotated`` parameters the options); they import nothing from each other or
from here. This module lists them in :data:`GROUPS` and :data:`TOP_LEVEL` and
:func:`build_app` turns the lists into the Typer app. To add a command, write the
function in the module of its area and add one line below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Final

import typer

from engramdb.interfaces.cli import (
    audit,
    brain,
    brain_context,
    chroma_import,
    code,
    conversations,
    demo,
    doctor,
    episodes,
    failures,
    keys,
    knowledge,
    learning,
    maintenance,
    memory,
    packs,
    prevention,
    retention,
    servers,
    sharing,
)
from engramdb.interfaces.cli._errors import EngramGroup
from engramdb.interfaces.cli._options import CliState, StoreOption

__all__ = ["GROUPS", "TOP_LEVEL", "Group", "app", "build_app", "main"]

Command = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Group:
    """A command group (``engram <name> <command> ...``): its help and its commands, in help order."""

    name: str
    help: str
    commands: tuple[tuple[str, Command], ...]


#: The command groups of ``engram``, in the order ``engram --help`` lists them.
GROUPS: Final[tuple[Group, ...]] = (
    Group(
        "memory",
        "Record, search, inspect, update and forget memories.",
        (
            ("record", memory.record),
            ("add", conversations.add),
            ("list", memory.list_),
            ("search", memory.search),
            ("retrieve", memory.retrieve),
            ("show", memory.show),
            ("key", memory.key_),
            ("update", memory.update),
            ("forget", memory.forget),
            ("history", memory.history),
            ("share", sharing.share),
            ("unshare", sharing.unshare),
            ("shares", sharing.shares),
            ("cleanup", retention.cleanup),
            ("patterns", failures.memory_patterns),
        ),
    ),
    Group(
        "learning",
        "Learn from outcomes: statistics, patterns, suggestions, reports.",
        (
            ("stats", learning.stats),
            ("patterns", learning.patterns),
            ("suggest", learning.suggest),
            ("choose", learning.choose),
            ("feedback", learning.feedback),
            ("report", learning.report),
            ("resolve", learning.resolve),
            ("pending", learning.pending),
            ("failures", failures.failures),
            ("apply-pattern", failures.apply_pattern),
        ),
    ),
    Group(
        "knowledge",
        "Export, import, merge, distil and seed agents' knowledge.",
        (
            ("export", knowledge.export),
            ("import", knowledge.import_),
            ("merge", knowledge.merge),
            ("distill", brain_context.distill),
            ("seed", packs.seed),
        ),
    ),
    Group(
        "audit",
        "Inspect and verify the hash-chained audit trail of writes, reads, shares and deletions.",
        (("log", audit.log), ("verify", audit.verify)),
    ),
    Group(
        "prevention",
        "Checks that keep known failures from happening again.",
        (
            ("generate", failures.generate),
            ("add", prevention.add),
            ("list", prevention.list_),
            ("run", prevention.run),
            ("remove", prevention.remove),
        ),
    ),
    Group(
        "failures",
        "Record failures with their fixes, look up fixes, inspect failure patterns.",
        (
            ("record", failures.record_failure),
            ("solutions", failures.solutions),
            ("pattern", failures.show_pattern),
        ),
    ),
    Group(
        "code",
        "Code patterns (seed 003): remember a file's functions and classes, or a named pattern; find them for a task.",
        (("remember", code.remember), ("suggest", code.suggest)),
    ),
    Group(
        "episodes",
        "Tasks recorded by id across commands: start, add events, end with an outcome and metrics.",
        (("start", episodes.start), ("event", episodes.event), ("end", episodes.end)),
    ),
    Group(
        "keys",
        "API keys of the REST and MCP servers: each acts as one agent; only a hash is stored.",
        (("create", keys.create), ("list", keys.list_), ("revoke", keys.revoke)),
    ),
    Group(
        "import",
        "Bring memories in from other stores (migrations).",
        (("chroma", chroma_import.chroma),),
    ),
)

#: Commands directly under ``engram``: (name, function, help panel).
TOP_LEVEL: Final[tuple[tuple[str, Command, str], ...]] = (
    ("demo", demo.demo, "Getting started"),
    ("context", brain_context.context, "Agents"),
    ("route", brain.route, "Agents"),
    ("route-record", brain.route_record, "Agents"),
    ("reason", brain.reason, "Agents"),
    ("reembed", maintenance.reembed, "Maintenance"),
    ("doctor", doctor.doctor, "Maintenance"),
    ("serve", servers.serve, "Servers"),
    ("mcp", servers.mcp, "Servers"),
)


def print_help(ctx: typer.Context) -> None:
    """Print the help of ``ctx``'s command and exit 0."""
    text = ctx.get_help()  # typer's rich formatter prints the help itself and returns ""
    if text:
        typer.echo(text)
    raise typer.Exit(0)


def _show_help_without_command(ctx: typer.Context) -> None:
    # A group run without a command prints its help and exits 0, instead of click's "missing command" error.
    if ctx.invoked_subcommand is None:
        print_help(ctx)


def _version_callback(value: bool) -> None:
    if value:
        try:
            number = version("engramdb")
        except PackageNotFoundError:  # running from a source tree that was never installed
            number = "unknown"
        typer.echo(f"engram (engramdb) {number}")
        raise typer.Exit(0)


def _root(
    ctx: typer.Context,
    store: StoreOption = None,
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Select the store for every subcommand; without a subcommand, print the help."""
    ctx.obj = CliState(store=store)
    _show_help_without_command(ctx)


def build_app() -> typer.Typer:
    """The ``engram`` Typer app, with every group and command of :data:`GROUPS` and :data:`TOP_LEVEL`."""
    root = typer.Typer(
        name="engram",
        cls=EngramGroup,
        help="engramdb: persistent memory and learning for LLM agents.\n\n"
        "The store is the folder given by --store, else $ENGRAM_HOME, else ~/.engram. "
        "Every command but serve and mcp takes --json for machine-readable output. New here? Run: engram demo",
        invoke_without_command=True,
        add_completion=False,
        # Tracebacks are for bugs only; the plain ones do not print local variables (which may hold secrets).
        pretty_exceptions_enable=False,
    )
    root.callback()(_root)
    for group in GROUPS:
        sub = typer.Typer(name=group.name, help=group.help, invoke_without_command=True, add_completion=False)
        sub.callback()(_show_help_without_command)
        for name, command in group.commands:
            sub.command(name)(command)
        root.add_typer(sub)
    for name, command, panel in TOP_LEVEL:
        root.command(name, rich_help_panel=panel)(command)
    return root


app: Final = build_app()


def main() -> None:
    """Entry point of the ``engram`` console script."""
    app()

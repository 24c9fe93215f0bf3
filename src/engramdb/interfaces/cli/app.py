"""The ``engram`` command: the one place where every command is registered.

Command modules hold plain functions (their docstrings are the help, their
``Annotated`` parameters the options); they import nothing from each other or
from here. This module lists them in :data:`GROUPS` and :data:`TOP_LEVEL` as
``"module:function"`` references and :func:`build_app` turns the lists into the
Typer app. To add a command, write the function in the module of its area and
add one line below.

Commands are built on first use: ``engram memory search`` imports ``memory`` and
builds that one command, not the other fifty (each costs typer a look at its
signature, and each module its imports). An agent calling the CLI at every step
pays for the command it runs only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

import typer
import typer.main
from typer.core import TyperGroup
from typer.models import CommandInfo

from engramdb.interfaces.cli._errors import EngramGroup
from engramdb.interfaces.cli._options import CliState, StoreOption

__all__ = ["GROUPS", "TOP_LEVEL", "Group", "app", "build_app", "main", "resolve"]

#: A command function, named as ``"module:function"`` (a module of this package).
CommandRef = str


@dataclass(frozen=True, slots=True)
class Group:
    """A command group (``engram <name> <command> ...``): its help and its commands, in help order."""

    name: str
    help: str
    commands: tuple[tuple[str, CommandRef], ...]


#: The command groups of ``engram``, in the order ``engram --help`` lists them.
GROUPS: Final[tuple[Group, ...]] = (
    Group(
        "memory",
        "Record, search, inspect, update and forget memories.",
        (
            ("record", "memory:record"),
            ("add", "conversations:add"),
            ("list", "memory:list_"),
            ("search", "memory:search"),
            ("retrieve", "memory:retrieve"),
            ("show", "memory:show"),
            ("key", "memory:key_"),
            ("update", "memory:update"),
            ("forget", "memory:forget"),
            ("history", "memory:history"),
            ("share", "sharing:share"),
            ("unshare", "sharing:unshare"),
            ("shares", "sharing:shares"),
            ("cleanup", "retention:cleanup"),
            ("patterns", "failures:memory_patterns"),
        ),
    ),
    Group(
        "learning",
        "Learn from outcomes: statistics, patterns, suggestions, reports.",
        (
            ("stats", "learning:stats"),
            ("patterns", "learning:patterns"),
            ("suggest", "learning:suggest"),
            ("choose", "learning:choose"),
            ("feedback", "learning:feedback"),
            ("report", "learning:report"),
            ("resolve", "learning:resolve"),
            ("pending", "learning:pending"),
            ("failures", "failures:failures"),
            ("apply-pattern", "failures:apply_pattern"),
        ),
    ),
    Group(
        "knowledge",
        "Export, import, merge, distil and seed agents' knowledge.",
        (
            ("export", "knowledge:export"),
            ("import", "knowledge:import_"),
            ("merge", "knowledge:merge"),
            ("distill", "brain_context:distill"),
            ("seed", "packs:seed"),
        ),
    ),
    Group(
        "audit",
        "Inspect and verify the hash-chained audit trail of writes, reads, shares and deletions.",
        (("log", "audit:log"), ("verify", "audit:verify")),
    ),
    Group(
        "prevention",
        "Checks that keep known failures from happening again.",
        (
            ("generate", "failures:generate"),
            ("add", "prevention:add"),
            ("list", "prevention:list_"),
            ("run", "prevention:run"),
            ("remove", "prevention:remove"),
        ),
    ),
    Group(
        "failures",
        "Record failures with their fixes, look up fixes, inspect failure patterns.",
        (
            ("record", "failures:record_failure"),
            ("solutions", "failures:solutions"),
            ("pattern", "failures:show_pattern"),
        ),
    ),
    Group(
        "code",
        "Code patterns (seed 003): remember a file's functions and classes, or a named pattern; find them for a task.",
        (("remember", "code:remember"), ("suggest", "code:suggest")),
    ),
    Group(
        "episodes",
        "Tasks recorded by id across commands: start, add events, end with an outcome and metrics.",
        (("start", "episodes:start"), ("event", "episodes:event"), ("end", "episodes:end")),
    ),
    Group(
        "keys",
        "API keys of the REST and MCP servers: each acts as one agent; only a hash is stored.",
        (("create", "keys:create"), ("list", "keys:list_"), ("revoke", "keys:revoke")),
    ),
    Group(
        "import",
        "Bring memories in from other stores (migrations).",
        (("chroma", "chroma_import:chroma"),),
    ),
)

#: Commands directly under ``engram``: (name, function, help panel).
TOP_LEVEL: Final[tuple[tuple[str, CommandRef, str], ...]] = (
    ("demo", "demo:demo", "Getting started"),
    ("context", "brain_context:context", "Agents"),
    ("route", "brain:route", "Agents"),
    ("route-record", "brain:route_record", "Agents"),
    ("reason", "brain:reason", "Agents"),
    ("reembed", "maintenance:reembed", "Maintenance"),
    ("doctor", "doctor:doctor", "Maintenance"),
    ("serve", "servers:serve", "Servers"),
    ("mcp", "servers:mcp", "Servers"),
)


def resolve(ref: CommandRef) -> Callable[..., Any]:
    """The command function ``ref`` (``"module:function"``) names, its module imported now."""
    module, _, function = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    return found


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
        from importlib.metadata import PackageNotFoundError, version  # here: its import costs every command 20 ms

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


class _LazyCommands(MutableMapping[str, Any]):
    """A group's commands by name, each built by ``build(name)`` the first time it is looked up.

    Click groups keep their commands in a mapping (``TyperGroup.commands``): this one knows every
    name from the start (for help and "did you mean") and builds a command only when asked for it.
    """

    def __init__(self, names: tuple[str, ...], build: Callable[[str], Any]) -> None:
        self._names = names
        self._build = build
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            self._built[name] = self._build(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command
        if name not in self._names:
            self._names = (*self._names, name)

    def __delitem__(self, name: str) -> None:
        self._built.pop(name, None)
        self._names = tuple(n for n in self._names if n != name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _command(name: str, ref: CommandRef, panel: str | None = None) -> Any:
    return typer.main.get_command_from_info(
        CommandInfo(name=name, callback=resolve(ref), rich_help_panel=panel),
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
    )


def _group(group: Group) -> TyperGroup:
    sub = typer.Typer(name=group.name, help=group.help, invoke_without_command=True, add_completion=False)
    sub.callback()(_show_help_without_command)
    built = typer.main.get_group(sub)
    refs: Mapping[str, CommandRef] = dict(group.commands)
    built.commands = _LazyCommands(tuple(refs), lambda name: _command(name, refs[name]))
    return built


class _LazyRoot(EngramGroup):
    """The root command: the groups of :data:`GROUPS` and the commands of :data:`TOP_LEVEL`, built on use."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        groups = {group.name: group for group in GROUPS}
        top = {name: (ref, panel) for name, ref, panel in TOP_LEVEL}

        def build(name: str) -> Any:
            if name in groups:
                return _group(groups[name])
            return _command(name, *top[name])

        # Top-level commands first, then the groups: the order typer gave them when it built them all.
        self.commands = _LazyCommands((*top, *groups), build)


def build_app() -> typer.Typer:
    """The ``engram`` Typer app, with every group and command of :data:`GROUPS` and :data:`TOP_LEVEL`."""
    root = typer.Typer(
        name="engram",
        cls=_LazyRoot,
        help="engramdb: persistent memory and learning for LLM agents.\n\n"
        "The store is the folder given by --store, else $ENGRAM_HOME, else ~/.engram. "
        "Every command but serve and mcp takes --json for machine-readable output. New here? Run: engram demo",
        invoke_without_command=True,
        add_completion=False,
        # Tracebacks are for bugs only; the plain ones do not print local variables (which may hold secrets).
        pretty_exceptions_enable=False,
    )
    root.callback()(_root)
    return root


app: Final = build_app()


def main() -> None:
    """Entry point of the ``engram`` console script."""
    app()

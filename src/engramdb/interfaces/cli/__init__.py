"""The ``engram`` command line: a thin shell over :class:`engramdb.Engram`.

Each command group lives in its own module (``memory.py``, and later
``learning.py``, ``knowledge.py``, ...) as a Typer app made with
:func:`~engramdb.interfaces.cli._common.new_group`, and is listed in
:data:`GROUPS` below. Commands parse their arguments, call the library and
format the result; errors are mapped to exit codes once, by the root command.

To add a group::

    # src/engramdb/interfaces/cli/learning.py
    app = new_group("learning", "Learn from outcomes.")

    @app.command()
    def stats(ctx: typer.Context, agent: AgentOption = "default", store: StoreOption = None,
              as_json: JsonOption = False) -> None:
        with open_engram(ctx, store) as mem:
            ...

and append ``learning.app`` to :data:`GROUPS`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Final

import typer

from engramdb.interfaces.cli import (
    audit,
    knowledge,
    learning,
    learning_failures,
    maintenance,
    memory,
    servers,
    sharing,
)
from engramdb.interfaces.cli import demo as _demo
from engramdb.interfaces.cli._common import CliState, EngramGroup, StoreOption, print_help

__all__ = ["GROUPS", "app", "main"]

#: The command groups of ``engram``, in the order ``engram --help`` lists them.
GROUPS: Final[tuple[typer.Typer, ...]] = (
    memory.app,
    learning.app,
    knowledge.app,
    audit.app,
    learning_failures.prevention,
)

# Consent-based sharing lives in its own module but belongs to the memory group.
memory.app.command("share")(sharing.share)
memory.app.command("unshare")(sharing.unshare)
memory.app.command("shares")(sharing.shares)
# Retention (forgetting expired memories) also belongs to the memory group.
memory.app.command("cleanup")(audit.cleanup)
# Failure and code patterns (``memory patterns --type failure``) come from the failures part of learning.
memory.app.command("patterns")(learning_failures.memory_patterns)

app = typer.Typer(
    name="engram",
    cls=EngramGroup,
    help="engramdb: persistent memory and learning for LLM agents.\n\n"
    "The store is the folder given by --store, else $ENGRAM_HOME, else ~/.engram. "
    "Every command takes --json for machine-readable output. New here? Run: engram demo",
    invoke_without_command=True,
    add_completion=False,
    # Tracebacks are for bugs only; the plain ones do not print local variables (which may hold secrets).
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        try:
            number = version("engramdb")
        except PackageNotFoundError:  # running from a source tree that was never installed
            number = "unknown"
        typer.echo(f"engram (engramdb) {number}")
        raise typer.Exit(0)


@app.callback()
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
    if ctx.invoked_subcommand is None:
        print_help(ctx)


for _group in GROUPS:
    app.add_typer(_group)
app.command("demo", rich_help_panel="Getting started")(_demo.demo)
app.command("reembed", rich_help_panel="Maintenance")(maintenance.reembed)
app.command("serve", rich_help_panel="Servers")(servers.serve)
app.command("mcp", rich_help_panel="Servers")(servers.mcp)


def main() -> None:
    """Entry point of the ``engram`` console script."""
    app()

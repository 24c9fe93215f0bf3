"""``engram doctor``: check a store for damage (integrity, keyword index, vectors, audit trail)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from engramdb.interfaces.cli._errors import report
from engramdb.interfaces.cli._options import JsonOption, StoreOption, store_location
from engramdb.interfaces.cli._render import console, emit_json

__all__ = ["doctor"]


def doctor(
    ctx: typer.Context,
    *,
    quick: Annotated[
        bool, typer.Option("--quick", help="SQLite quick_check instead of the full integrity_check (faster).")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check the store for damage: exit 0 if healthy, 1 with one line per failed check otherwise.

    Checks the database file (SQLite integrity_check), that the keyword index is in step with
    the memories, that every memory has a sound vector from the store's model, that the audit
    trail's hash chain verifies, and that every change has its audit entry.
    """
    # Here, so `engram --help` does not load the library.
    from engramdb.toolkit import examine

    # Opened by location, not through Engram: the facade's start-up reads would stop at the damage.
    # A mistyped path is an error (NotFound), not a new store reported healthy.
    result = examine(store_location(ctx, store), quick=quick)
    if as_json:
        emit_json(result.to_dict())
    else:
        for check in result.checks:
            mark = "[green]ok[/green]  " if check.ok else "[red]FAIL[/red]"
            console().print(f"{mark} {check.name}: {escape(check.detail)}")
    if not result.ok:
        for check in result.failed:
            report(f"{check.name}: {check.detail}")
        raise typer.Exit(1)

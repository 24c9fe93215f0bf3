"""``engram knowledge seed``: write the knowledge packs shipped with engramdb into a store.

Registered in :mod:`engramdb.interfaces.cli.app` as ``("seed", packs.seed)`` in the
``knowledge`` group.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, emit_json

__all__ = ["seed"]


def seed(
    ctx: typer.Context,
    *,
    pack: Annotated[
        list[str] | None,
        typer.Option(
            "--pack",
            "-p",
            metavar="NAME",
            help="The pack to load (repeatable; 'all' for every pack). See --list.",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str, typer.Option("--agent", "-a", metavar="NAME", help="The agent whose memories the pack becomes.")
    ] = "default",
    list_packs: Annotated[bool, typer.Option("--list", help="List the packs shipped with engramdb and exit.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Load curated knowledge packs: best practices and common errors with their fixes.

    Packs: python, git, http, sql, docker, ci, patterns (design patterns). Best practices
    become knowledge memories, common errors failure memories with their fix (so `engram
    learning failures` and suggestions find them). Each memory is tagged pack:NAME and keeps its provenance
    (source engramdb-pack:NAME@VERSION). Loading a pack again adds nothing; loading a
    newer version of it updates what changed.
    """
    from engramdb.toolkit import available_packs, load_pack

    if list_packs:
        packs = [load_pack(name) for name in available_packs()]
        if as_json:
            emit_json(
                [
                    {
                        "name": p.name,
                        "version": p.version,
                        "title": p.title,
                        "description": p.description,
                        "practices": len(p.practices),
                        "errors": len(p.errors),
                    }
                    for p in packs
                ]
            )
            return
        out = console()
        for p in packs:
            out.print(
                f"[bold]{escape(p.name)}[/bold] v{p.version}: {escape(p.description)} "
                f"({len(p.practices)} practices, {len(p.errors)} common errors)"
            )
        return
    if not pack:
        raise ValidationError("give --pack NAME (or --list to see the packs)")
    names = available_packs() if "all" in pack else list(dict.fromkeys(pack))
    chosen = [load_pack(name) for name in names]  # unknown names fail here, before the store is opened
    with open_engram(ctx, store, create=True) as mem:
        reports = [mem.knowledge.seed(p.name, agent=agent) for p in chosen]
    if as_json:
        emit_json([r.to_dict() for r in reports])
        return
    out = console()
    for r in reports:
        if not r.changed:
            out.print(f"Pack {escape(r.pack)} v{r.version} is already loaded for {escape(repr(agent))}: nothing to do.")
            continue
        was = f" (was v{r.previous_version})" if r.previous_version not in (None, r.version) else ""
        out.print(
            f"Loaded pack {escape(r.pack)} v{r.version}{was} for {escape(repr(agent))}: "
            f"{r.added} added, {r.updated} updated, {r.removed} removed, {r.unchanged} unchanged."
        )

"""``engram import chroma PATH``: bring the collections of a Chroma persist directory into the store."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from engramdb.interfaces.cli._options import JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, emit_json

__all__ = ["chroma"]


def chroma(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(metavar="PATH", help="The Chroma persist directory (holds chroma.sqlite3).")],
    *,
    agent: Annotated[
        str, typer.Option("--agent", "-a", metavar="NAME", help="The agent the imported memories belong to.")
    ] = "default",
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            "--type",
            "-t",
            metavar="KIND",
            help="Import every collection as plain memories of this kind (default: by the collection's shape: "
            "task patterns, error resolutions and code patterns become patterns, failures and code patterns; "
            "the rest knowledge).",
            show_default=False,
        ),
    ] = None,
    collections: Annotated[
        list[str] | None,
        typer.Option(
            "--collection",
            "-c",
            metavar="NAME",
            help="Import only this collection (repeatable; default: all).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report per collection what would be imported; write nothing.")
    ] = False,
    reuse_vectors: Annotated[
        bool,
        typer.Option(
            "--reuse-vectors",
            help="Use the collections' vectors instead of re-embedding: they must come from this store's model "
            "(checked on a sample of documents first).",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import every collection of a Chroma store: documents, ids and metadata (needs the 'chroma' extra).

    Each record with a document becomes a memory of AGENT tagged with its collection's name; its Chroma
    id is kept in metadata as chroma_id. Known collections (seed 004's task_patterns, seed 003's errors and
    code_patterns) become patterns for recall_patterns, failures with their fix, and code patterns.
    Documents are re-embedded with this store's model (Chroma's vectors usually come from another model)
    unless --reuse-vectors says they come from this one.
    Records imported before are skipped, so an interrupted import can be run again.
    """
    from engramdb.integrations.chroma import import_chroma  # here, so `engram --help` does not load it

    bar: Progress | None = None
    task = None
    if sys.stderr.isatty() and not as_json and not dry_run:
        bar = Progress(console=Console(stderr=True), transient=True)
        how = "reusing vectors" if reuse_vectors else "re-embedding"
        task = bar.add_task(f"importing from Chroma ({how})", total=None)

    def progress(done: int, total: int) -> None:
        if bar is not None and task is not None:
            if not bar.live.is_started:
                bar.start()
            bar.update(task, completed=done, total=total)

    try:
        # It reuses Chroma's vectors with this process's model: not through a server.
        with open_engram(ctx, store, create=True, remote_ok=False) as mem:
            report = import_chroma(
                mem,
                path,
                agent=agent,
                kind=kind,
                collections=collections or None,
                dry_run=dry_run,
                progress=progress,
                reuse_vectors=reuse_vectors,
            )
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        emit_json(report.to_dict())
        return
    table = Table(title=f"Chroma store {escape(path)}" + (" (dry run: nothing written)" if dry_run else ""))
    for column in ("collection", "as", "records", "would import" if dry_run else "imported", "already", "no document"):
        table.add_column(column, justify="left" if column in ("collection", "as") else "right")
    for c in report.collections:
        table.add_row(
            escape(c.name),
            c.shape.replace("_", " "),
            str(c.records),
            str(c.imported),
            str(c.already_imported),
            str(c.without_document),
        )
    out = console()
    out.print(table)
    verb = "Would import" if dry_run else "Imported"
    out.print(f"{verb} {report.imported} of {report.records} records as agent {escape(repr(report.agent))}.")
    out.print(escape(report.vectors_note))

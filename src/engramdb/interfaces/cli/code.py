"""``engram code remember | suggest``: seed 003's ``store_code_pattern`` and ``recall_similar_patterns``.

``remember FILE`` extracts a source file's functions, classes and error handlers; with
``--name`` the whole file is one pattern of that name, with its ``--context`` and
``--success-rate`` (seed 003's ``success_metrics``). ``suggest --task`` finds stored patterns
for a task, filtered by language, type and ``--meta KEY=VALUE`` (metadata filtering).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import (
    AgentOption,
    JsonOption,
    LimitOption,
    MetaOption,
    StoreOption,
    open_engram,
    parse_meta,
)
from engramdb.interfaces.cli._render import console, emit_json, shorten

__all__ = ["remember", "suggest"]

LanguageOption = Annotated[
    str | None,
    typer.Option("--language", "-l", help="python, javascript or typescript (default: from the file name).",
                 show_default=False),
]  # fmt: skip


def remember(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE", help="The source file ('-': standard input).")],
    *,
    name: Annotated[
        str | None, typer.Option("--name", help="Store the whole file as one pattern of this name.", show_default=False)
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="When the named pattern applies.", show_default=False)
    ] = None,
    success_rate: Annotated[
        float | None,
        typer.Option(
            "--success-rate", min=0.0, max=1.0, help="The named pattern's success rate so far.", show_default=False
        ),
    ] = None,
    language: LanguageOption = None,
    meta: MetaOption = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remember a source file's code patterns (or the whole file as one named pattern)."""
    if file == "-":
        source, filename = sys.stdin.read(), None
    else:
        path = Path(file)
        if not path.is_file():
            raise ValidationError(f"no such file: {file}")
        source, filename = path.read_text(encoding="utf-8", errors="replace"), path.name
    metrics = {"success_rate": success_rate} if success_rate is not None else None
    with open_engram(ctx, store, create=True) as mem:
        stored = mem.code.remember(
            source,
            agent=agent,
            filename=filename,
            language=language,
            metadata=parse_meta(meta) or None,
            name=name,
            context=context,
            success_metrics=metrics,
        )
    if as_json:
        emit_json([m.to_dict() for m in stored])
        return
    out = console()
    out.print(f"Remembered {len(stored)} code pattern{'s' if len(stored) != 1 else ''} of agent {escape(agent)}")
    for m in stored:
        out.print(
            f"  [cyan]{m.id}[/] {escape(str(m.metadata.get('pattern_type')))} {escape(str(m.metadata.get('name')))}"
        )


def suggest(
    ctx: typer.Context,
    *,
    task: Annotated[str, typer.Option("--task", help="The task, in words.", show_default=False)],
    language: LanguageOption = None,
    pattern_type: Annotated[
        str | None,
        typer.Option("--type", help="function, class, error_handler or named.", show_default=False),
    ] = None,
    meta: MetaOption = None,
    limit: LimitOption = 3,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stored code patterns for a task, best first (seed 003's recall_similar_patterns)."""
    with open_engram(ctx, store) as mem:
        hits = mem.code.suggest(
            task, agent=agent, language=language, pattern_type=pattern_type, metadata=parse_meta(meta) or None,
            limit=limit,
        )  # fmt: skip
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    if not hits:
        console().print(f"No code patterns for {escape(repr(task))} (agent {escape(repr(agent))}).")
        return
    table = Table(title=f"Code patterns for: {shorten(task, 60)}", title_justify="left")
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("type", style="magenta")
    table.add_column("name", ratio=1)
    table.add_column("context")
    table.add_column("success", justify="right")
    for h in hits:
        m = h.memory.metadata
        metrics = m.get("success_metrics")
        rate = metrics.get("success_rate") if isinstance(metrics, dict) else None
        table.add_row(
            h.memory.id,
            escape(str(m.get("pattern_type", "-"))),
            escape(shorten(str(m.get("name") or h.memory.content), 60)),
            escape(shorten(str(m.get("context") or "-"), 40)),
            f"{rate:.0%}" if isinstance(rate, int | float) else "-",
        )
    console().print(table)

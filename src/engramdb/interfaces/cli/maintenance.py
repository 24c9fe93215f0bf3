"""Store maintenance commands at the top level: ``engram reembed``."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.progress import Progress

from engramdb.interfaces.cli._options import JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, emit_json

__all__ = ["reembed"]


def reembed(ctx: typer.Context, *, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Re-embed memories whose vectors come from another embedding model.

    Needed after switching the embedder setting. Resumable: run it again after an interruption.
    """
    done = 0
    bar: Progress | None = None
    task = None
    if sys.stderr.isatty() and not as_json:
        bar = Progress(console=Console(stderr=True), transient=True)
        task = bar.add_task("re-embedding memories", total=None)

    def progress(n: int, total: int) -> None:
        nonlocal done
        done = n
        if bar is not None and task is not None:
            if not bar.live.is_started:
                bar.start()
            bar.update(task, completed=n, total=total)

    try:
        # Opening with on_model_mismatch="reembed" re-embeds whatever is stale before it returns.
        with open_engram(ctx, store, on_model_mismatch="reembed", progress=progress):
            pass
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        emit_json({"reembedded": done})
    else:
        console().print(f"Re-embedded {done} memories." if done else "Every memory is up to date.")

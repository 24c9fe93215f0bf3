"""A progress bar for long maintenance runs (re-embedding), shown only on an interactive terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["Progress", "terminal_progress"]

#: Called with (done, total) as work proceeds.
Progress = Callable[[int, int], None]


def terminal_progress(total: int) -> Progress:
    """A rich progress bar on an interactive stderr; silent otherwise."""
    if total == 0 or not sys.stderr.isatty():
        return lambda done, total: None
    from rich.progress import Progress as RichProgress

    bar = RichProgress(transient=True)
    task = bar.add_task("re-embedding memories", total=total)
    bar.start()

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done)
        if done >= total:
            bar.stop()

    return report

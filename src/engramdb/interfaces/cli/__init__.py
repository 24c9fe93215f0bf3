"""The ``engram`` command line: a thin shell over :class:`engramdb.Engram`.

Layout:

- :mod:`~engramdb.interfaces.cli.app` builds the Typer app: every group and command is registered there, once,
  and built on first use.
- One module per area holds that area's commands as plain functions: ``memory``, ``sharing``, ``retention``,
  ``learning``, ``failures``, ``knowledge``, ``audit``, ``maintenance``, ``servers``, ``demo``.
- Shared plumbing: ``_options`` (the options and their parsing, opening the store), ``_errors`` (every user
  error becomes one line on stderr and exit code 1) and ``_render`` (JSON via each value's ``to_dict``, tables).
- ``_fast``: ``memory search|record --json`` through ``$ENGRAM_URL`` with the standard library only (an
  agent's per-step call costs milliseconds, not the start of typer, rich and httpx); anything else, and any
  request the server refuses, goes the full way.

Commands parse their arguments, call the public API (``mem.learning.suggest``, ``mem.failures.patterns``, ...)
and print the result; they hold no rules of their own.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engramdb.interfaces.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``engram`` console script."""
    from engramdb.interfaces.cli._fast import run

    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from engramdb.interfaces.cli.app import main as full

    full()


class _Package(ModuleType):
    """This package, whose ``app`` is the Typer app, built on first use (the short way never imports typer).

    A property rather than a module ``__getattr__``: importing the submodule ``app`` makes the import system
    set the package's ``app`` to that submodule, which would then shadow the Typer app of the same name.
    """

    @property
    def app(self) -> Any:
        from engramdb.interfaces.cli.app import app

        return app

    @app.setter
    def app(self, value: Any) -> None:
        pass  # the submodule, set by the import system: ``app`` stays the Typer app


sys.modules[__name__].__class__ = _Package

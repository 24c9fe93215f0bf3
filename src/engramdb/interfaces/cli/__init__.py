"""The ``engram`` command line: a thin shell over :class:`engramdb.Engram`.

Layout:

- :mod:`~engramdb.interfaces.cli.app` builds the Typer app: every group and command is registered there, once.
- One module per area holds that area's commands as plain functions: ``memory``, ``sharing``, ``retention``,
  ``learning``, ``failures``, ``knowledge``, ``audit``, ``maintenance``, ``servers``, ``demo``.
- Shared plumbing: ``_options`` (the options and their parsing, opening the store), ``_errors`` (every user
  error becomes one line on stderr and exit code 1) and ``_render`` (JSON via each value's ``to_dict``, tables).

Commands parse their arguments, call the public API (``mem.learning.suggest``, ``mem.failures.patterns``, ...)
and print the result; they hold no rules of their own.
"""

from __future__ import annotations

from engramdb.interfaces.cli.app import app, main

__all__ = ["app", "main"]

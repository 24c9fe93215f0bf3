"""Running the ``engram`` app in-process for the CLI tests (``CliRunner``), and what every run must show.

Imported by the ``test_cli*.py`` modules; the fixtures they share (isolated home,
store folder) are in ``conftest.py`` next to this file.
"""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner, Result

from engramdb.interfaces.cli import app

runner = CliRunner()


def run(*args: str, stdin: bytes | str | None = None) -> Result:
    """Run ``engram ARGS...`` in-process, ``stdin`` as its standard input."""
    return runner.invoke(app, list(args), input=stdin)


def ok(*args: str, stdin: bytes | str | None = None) -> str:
    """Run a command that must succeed (exit 0); its stdout."""
    result = run(*args, stdin=stdin)
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr or result.stdout}"
    return result.stdout


def ok_json(*args: str, stdin: bytes | str | None = None) -> Any:
    """Run a command with ``--json`` that must succeed; its output parsed."""
    return json.loads(ok(*args, "--json", stdin=stdin))


def fails(*args: str, stdin: bytes | str | None = None, no_traceback: bool = True, empty_stdout: bool = True) -> str:
    """Run a command that must fail as a user error: exit 1, one ``error: ...`` line on stderr; that line.

    ``no_traceback`` also checks that no traceback shows, ``empty_stdout`` that nothing went to stdout.
    """
    result = run(*args, stdin=stdin)
    assert result.exit_code == 1, f"exit {result.exit_code}: {result.stdout}{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    if no_traceback:
        assert "Traceback" not in result.output
    if empty_stdout:
        assert result.stdout == ""
    return lines[0]

"""``engram`` run in-process against one store folder, for the seed tests (fixture ``cli`` in conftest.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner, Result

from engramdb.interfaces.cli import app

__all__ = ["Cli"]


@dataclass
class Cli:
    """``engram`` against one store folder."""

    store: str
    runner: CliRunner

    def run(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """``engram --store STORE ARGS...``."""
        return self.runner.invoke(app, ["--store", self.store, *args], env=env)

    def ok(self, *args: str, env: dict[str, str] | None = None) -> str:
        """A command that must succeed; its stdout."""
        result = self.run(*args, env=env)
        assert result.exit_code == 0, f"engram {' '.join(args)}: exit {result.exit_code}: {result.output}"
        return result.stdout

    def json(self, *args: str, env: dict[str, str] | None = None) -> Any:
        """A command run with ``--json`` that must succeed; its output parsed."""
        return json.loads(self.ok(*args, "--json", env=env))

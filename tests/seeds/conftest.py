"""The seed conformance suite: each usage example of ``../shared/seeds/`` run as its engramdb equivalent.

One module per seed (``test_seed_000_*.py`` ... ``test_seed_004_*.py``); each test's docstring quotes the seed
line it checks. A test of a feature still being built is marked ``xfail(strict=True)`` with the issue it waits
for, so it fails the moment the feature lands and the mark must go.

CLI examples run the real ``engram`` app in-process (typer's ``CliRunner``) against a store folder of the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from seed_cli import Cli
from typer.testing import CliRunner


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No seed test touches the user's ~/.engram, and no ENGRAM_AGENT leaks in."""
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENGRAM_CONFIG", raising=False)
    monkeypatch.delenv("ENGRAM_AGENT", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``engram`` on a fresh store folder of this test."""
    return Cli(store=str(tmp_path / "store"), runner=CliRunner())

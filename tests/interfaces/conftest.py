"""Fixtures of the CLI tests (helpers to run commands are in ``cli_helpers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may touch the user's ~/.engram: the default store is a temp folder."""
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENGRAM_CONFIG", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A store folder that does not exist yet (modules with a seeded store override this)."""
    return str(tmp_path / "store")

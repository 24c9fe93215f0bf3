"""Fixtures of the dashboard tests: headless Chromium and a screenshot folder that outlives the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_helpers import Browser, chromium


@pytest.fixture(scope="session")
def browser() -> Browser:
    """Headless Chromium (skipped when absent, failed under CI=true)."""
    return Browser(chromium())


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests' screenshots go (the session's temp dir, kept by pytest for inspection)."""
    return tmp_path_factory.mktemp("screenshots")

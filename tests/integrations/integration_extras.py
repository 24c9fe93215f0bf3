"""Loading an optional extra in the integration tests: skipped with a reason when absent, except in CI.

Under ``CI=true`` (where ``pip install -e ".[dev]"`` brings every extra) a missing package fails the test
module instead, so an integration can never be skipped silently there.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str, extra: str) -> ModuleType:
    """Import ``module``: skip the calling test module if it is missing, or fail under ``CI=true``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{module} is required in CI (the dev extra installs it): {exc}", pytrace=False)
        pytest.skip(f"{module} is not installed: pip install 'engramdb[{extra}]'", allow_module_level=True)

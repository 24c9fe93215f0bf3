"""Helpers of the dashboard tests: the optional packages, a real uvicorn server on loopback, headless Chromium.

A missing package or browser skips the tests with the reason, except under ``CI=true``,
where it fails them: ``.ci/run`` installs Chromium (``.ci/install-services.sh``) and the
dev extra brings FastAPI, uvicorn and Jinja2.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import server_helpers

#: Headless Chromium as Debian packages it.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip with ``reason`` locally; fail under CI, where everything is installed."""
    server_helpers.skip_or_fail(reason, required="required in CI")


def require(module: str) -> ModuleType:
    """Import a module of the ``rest`` extra, or skip (fail in CI)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        skip_or_fail(f"{module} is not installed ({exc}): pip install 'engramdb[rest]'")
        raise AssertionError("unreachable") from exc


def chromium() -> str:
    """The path of the Chromium binary, or skip (fail in CI)."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    skip_or_fail("headless Chromium is not installed: apt-get install chromium (see .ci/install-services.sh)")
    raise AssertionError("unreachable")


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` with a real uvicorn server in a background thread on a free loopback port; its base URL."""
    with server_helpers.serve_asgi(app, uvicorn=require("uvicorn"), lifespan="off") as url:
        yield url


class Browser:
    """Headless Chromium, one process per page: the DOM after loading, or a screenshot."""

    def __init__(self, binary: str, *, width: int = 1280, height: int = 2000) -> None:
        self.binary = binary
        self.width = width
        self.height = height

    def _run(self, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="engram-chromium-") as profile:
            cmd = [
                self.binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile}",
                f"--window-size={self.width},{self.height}",
                *extra,
                url,
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, cwd=profile)
        assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
        return done

    def dom(self, url: str) -> str:
        """The page's DOM as Chromium serializes it after loading (scripts, had there been any, have run)."""
        return self._run(url, "--dump-dom").stdout

    def screenshot(self, url: str, path: Path) -> Path:
        """A PNG of the page's first ``width`` x ``height`` pixels at ``path``."""
        self._run(url, f"--screenshot={path}", "--hide-scrollbars")
        assert path.exists(), f"chromium wrote no screenshot to {path}"
        return path


def check_screenshot(path: Path, *, width: int = 1280, height: int = 2000) -> None:
    """The PNG has the window's size and shows a rendered page: the dark header bar, and more than a blank page."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - matplotlib (dev extra) brings Pillow
        skip_or_fail("Pillow is not installed (it comes with the dev extra's matplotlib)")
        raise
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == (width, height)
        rgb = image.convert("RGB")
        # The header bar (#1d2330) across the top, the page's light background below it.
        corner = rgb.getpixel((width - 5, 5))
        assert isinstance(corner, tuple), corner
        assert max(corner) < 80, f"no dark header bar at the top: {corner}"
        colors = rgb.getcolors(maxcolors=1 << 20)
        assert colors is None or len(colors) > 20, "the screenshot is (nearly) blank"
        # Text in the body: dark pixels below the header.
        body = rgb.crop((0, 60, width, 600)).convert("L")
        dark = sum(body.histogram()[:100])
        assert dark > 500, "no text rendered below the header"

"""What the tests that start real servers share: skip locally but fail in CI, a free port, a lazily started server.

``tests/storage/pg_server.py`` (PostgreSQL), ``tests/sessions/redis_server.py`` (Redis) and the web and
deployment tests use these; ``tests/`` is on ``sys.path`` through ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Generic, NoReturn, Protocol, TypeVar

import pytest

__all__ = ["LazyServer", "free_port", "in_ci", "serve_asgi", "skip_or_fail"]


def in_ci() -> bool:
    """True under ``CI=true``, where ``.ci/run`` installed every server and package."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def skip_or_fail(reason: str, *, required: str, unavailable: str | None = None) -> NoReturn:
    """Skip with ``reason`` locally; fail in CI so a broken install cannot pass silently.

    The messages read ``"<required>: <reason>"`` in CI and ``"<unavailable>: <reason>"`` (or just the
    reason) otherwise.
    """
    if in_ci():
        pytest.fail(f"{required}: {reason}", pytrace=False)
    pytest.skip(reason if unavailable is None else f"{unavailable}: {reason}")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=_Stoppable)


class LazyServer(Generic[S]):
    """Starts the server on first use; remembers a failure so every test reports the same reason."""

    def __init__(self, start: Callable[[], S], *, on_failure: Callable[[str], NoReturn]) -> None:
        self._start = start
        self._on_failure = on_failure
        self.server: S | None = None
        self.error: str | None = None

    def get(self) -> S:
        if self.server is None and self.error is None:
            try:
                self.server = self._start()
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                self.error = str(exc)
        if self.server is None:
            self._on_failure(self.error or "unknown error")
        return self.server

    def stop(self) -> None:
        if self.server is not None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self.server.stop()
            self.server = None


@contextlib.contextmanager
def serve_asgi(app: Any, *, uvicorn: ModuleType, **config: Any) -> Iterator[str]:
    """Serve ``app`` with a real uvicorn (the module given: the caller decides whether a missing one skips) in a
    background thread on a free loopback port; its base URL. ``config``: more ``uvicorn.Config`` settings."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # the OS picks a free port, and we hold it: no race with other tests
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive(), "the server thread died"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()

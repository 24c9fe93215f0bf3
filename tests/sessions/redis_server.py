"""A throwaway Redis server for the tests: ``redis-server`` in a temp dir, on a free loopback port.

Started once per test session (lazily, by the first test that needs it) and stopped at
the end, as ``tests/storage/pg_server.py`` does for PostgreSQL. No persistence (a test
server). When ``redis-server`` or the ``redis`` package is missing, the tests are
skipped with the reason, except under ``CI=true``, where they fail (``.ci/run``
installs both).
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import server_helpers


def unavailable() -> str | None:
    """Why a Redis test server cannot run here, or None if it can."""
    if importlib.util.find_spec("redis") is None:
        return "python package 'redis' is missing (pip install 'engramdb[redis]')"
    if shutil.which("redis-server") is None:
        return "redis-server not found; run .ci/install-services.sh (Debian package redis-server)"
    return None


def skip_or_fail(reason: str) -> NoReturn:
    """Skip with ``reason`` locally; fail in CI so a broken install cannot pass silently."""
    server_helpers.skip_or_fail(reason, required="redis required in CI", unavailable="redis unavailable")


@dataclass
class RedisServer:
    """A running test server."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls) -> RedisServer:
        reason = unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        binary = shutil.which("redis-server")
        assert binary is not None
        root = Path(tempfile.mkdtemp(prefix="engram-redis-"))
        for _attempt in range(5):  # the port may be taken between choosing and binding it
            port = server_helpers.free_port()
            log = root / "redis.log"
            args = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(root), "--save", ""]
            args += ["--appendonly", "no", "--daemonize", "no", "--logfile", str(log)]
            process = subprocess.Popen(
                [binary, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            server = cls(root=root, port=port, process=process)
            if server._wait():
                return server
            server._kill()
        text = (root / "redis.log").read_text(errors="replace")[-2000:] if (root / "redis.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"redis-server did not start: {text}")

    def _wait(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False
                with contextlib.suppress(redis.exceptions.RedisError):
                    if client.ping():
                        return True
                time.sleep(0.05)
            return False
        finally:
            client.close()

    def _kill(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.root, ignore_errors=True)


#: The session's server (stopped by tests/sessions/conftest.py).
SERVER: server_helpers.LazyServer[RedisServer] = server_helpers.LazyServer(RedisServer.start, on_failure=skip_or_fail)

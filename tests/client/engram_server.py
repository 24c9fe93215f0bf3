"""A real ``engram serve`` on a loopback port, started by the tests in a subprocess (the remote client's server)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from server_helpers import LazyServer, free_port, skip_or_fail

__all__ = ["SERVER", "EngramServer"]


_MAIN = "from engramdb.interfaces.cli import main; main()"


class EngramServer:
    """``engram serve --store <temp dir> --port <free port>``; ``url`` once it answers ``/health``."""

    def __init__(self, store: str | None = None, *, env: dict[str, str] | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="engram-serve-")
        self.store = store or str(Path(self._tmp.name) / "store")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        run_env.update(env or {})
        self._log = open(Path(self._tmp.name) / "server.log", "wb")  # noqa: SIM115 - open while the server runs
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "serve", "--store", self.store, "--port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=run_env,
        )
        deadline = time.monotonic() + 60
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"engram serve exited: {self.log()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("engram serve did not answer within 60 s")
            time.sleep(0.1)

    def log(self) -> str:
        return (Path(self._tmp.name) / "server.log").read_text(errors="replace")

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._log.close()
        self._tmp.cleanup()


def _unavailable(reason: str) -> None:
    skip_or_fail(reason, required="engram serve must start in CI", unavailable="engram serve unavailable")


#: One server for the session's remote tests (each test uses its own agents).
SERVER: LazyServer[EngramServer] = LazyServer(EngramServer, on_failure=_unavailable)  # type: ignore[arg-type]

"""A script that ends without ``close()`` while the background vector worker is busy exits cleanly.

Before the exit hook, the worker thread could still be inside the embedder's native code while the
interpreter finalized, and the process aborted (SIGABRT, exit 134) in about half of such runs.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engramdb import Engram

SCRIPT = textwrap.dedent(
    """
    import sys
    from engramdb import Engram

    mem = Engram(sys.argv[1])
    mem.failures.record("ConnectionError: cannot reach db-1.prod.internal:5432", agent="a", solution="restart the VPN")
    found = mem.failures.solutions("ConnectionError: cannot reach db-2.prod.internal:5432", agent="a")
    print(found[0].solution if found else "none", flush=True)
    # no close()
    """
)


@pytest.mark.parametrize("run", range(4))  # it aborted in 4 of 6 runs
def test_exit_without_close_does_not_abort_and_keeps_the_failure(tmp_path: Path, run: int) -> None:
    store = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(store)], check=False, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == "restart the VPN"
    with Engram(store) as mem:
        assert mem.flush(timeout=120)
        found = mem.failures.solutions("cannot reach db-3.prod.internal:5432", agent="a")
        assert found[0].solution == "restart the VPN"

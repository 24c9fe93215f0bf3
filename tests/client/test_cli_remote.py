"""With ENGRAM_URL set, `engram` commands go through the server: the same answers, no store or model here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

_RUN = """
import sys
from engramdb.interfaces.cli import main
sys.argv = ["engram", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
loaded = sorted(m for m in ("onnxruntime", "numpy", "engramdb.engram", "engramdb.storage") if m in sys.modules)
print("LOADED=" + ",".join(loaded), file=sys.stderr)
sys.exit(code)
"""


def engram(url: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    if url is not None:
        env["ENGRAM_URL"] = url
    return subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def loaded(result: subprocess.CompletedProcess[str]) -> str:
    return next(line for line in result.stderr.splitlines() if line.startswith("LOADED=")).removeprefix("LOADED=")


def test_record_search_list_go_through_the_server_without_loading_the_library(server, agent):
    record = engram(
        server.url,
        *("memory", "record", "--agent", agent, "--type", "decision", "--context", "auth-failure"),
        *("--action", "retry-with-backoff", "--outcome", "success", "--json"),
    )
    assert record.returncode == 0, record.stderr
    stored = json.loads(record.stdout)
    assert stored["agent"] == agent
    assert loaded(record) == ""  # no numpy, no ONNX runtime, no storage: only the client
    search = engram(server.url, "memory", "search", "authentication failure", "--agent", agent, "--json")
    assert search.returncode == 0, search.stderr
    assert [h["memory"]["id"] for h in json.loads(search.stdout)] == [stored["id"]]
    assert loaded(search) == ""
    # The server has it: another client sees the same memory.
    with httpx.Client(base_url=server.url) as http:
        assert http.get(f"/memories/{stored['id']}", params={"agent": agent}).json()["id"] == stored["id"]


def test_errors_through_the_server_are_one_line_and_exit_1(server, agent):
    result = engram(server.url, "memory", "show", "no-such-id", "--agent", agent)
    assert result.returncode == 1
    assert "no-such-id" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreachable_server_is_one_line(agent):
    result = engram("http://127.0.0.1:9", "memory", "list", "--agent", agent)
    assert result.returncode == 1
    assert "cannot reach the engram server" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_command_that_needs_the_store_here_refuses_the_server_in_one_line(server, tmp_path):
    result = engram(server.url, "import", "chroma", str(tmp_path))
    assert result.returncode == 1
    assert "pass --store" in result.stderr
    assert "Traceback" not in result.stderr

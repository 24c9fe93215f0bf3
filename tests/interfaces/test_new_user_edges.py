"""Edges a new user hit walking through the README and the seeds (task Q): an 80-column terminal,
stored text that holds terminal escape sequences, and an MCP client that closes stdin right after
its last request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ok, ok_json

NPM = "npm ERR! network timeout at: https://registry.npmjs.org/{}"


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """An 80-column terminal (what rich assumes when stdout is not a terminal)."""
    monkeypatch.setenv("COLUMNS", "80")


def _fits(out: str) -> None:
    lines = out.splitlines()
    assert lines
    assert all(len(line) <= 80 for line in lines), out


def test_failure_and_prevention_tables_fit_80_columns_with_every_column(store: str, narrow: None) -> None:
    """The failure-pattern and prevention tables were wider than 80 columns: rich cropped their last column
    (the 'last seen' date, the pattern, a check's id) without a mark."""
    for pkg in ("left-pad", "react"):
        ok(
            "failures",
            "record",
            "-e",
            NPM.format(pkg),
            "--fix",
            "npm config set fetch-retries 5",
            "-a",
            "alice",
            "--store",
            store,
        )
    pattern = ok_json("memory", "patterns", "--type", "failure", "-a", "alice", "--store", store)[0]
    ok("prevention", "generate", "--pattern", pattern["name"], "-a", "alice", "--store", store)
    (check,) = ok_json("prevention", "list", "-a", "alice", "--store", store)

    for args in (("memory", "patterns", "--type", "failure"), ("learning", "failures")):
        out = ok(*args, "-a", "alice", "--store", store)
        _fits(out)
        assert "last seen" in out
        assert pattern["id"] in out
        assert pattern["last_seen"][:10] in out
    out = ok("prevention", "list", "-a", "alice", "--store", store)
    _fits(out)
    assert check["id"] in out
    assert "pattern" in out.splitlines()[1]
    out = ok("prevention", "run", "-a", "alice", "--store", store)
    _fits(out)
    assert check["id"] in out
    out = ok("audit", "log", "--limit", "5", "--store", store)
    _fits(out)
    assert "detail" in out


ESCAPES = "evil \x1b[2J\x1b]0;pwned\x07 text"


def test_stored_escape_sequences_never_reach_the_terminal(store: str) -> None:
    """A memory (another agent's, an imported file's) holding ESC sequences was printed raw: it could clear
    the screen or retitle the window. Every table and detail view shows them as \\xNN instead."""
    memory_id = ok_json("memory", "record", ESCAPES, "-a", "mallory", "--store", store)["id"]
    for args in (
        ("memory", "list"),
        ("memory", "search", "evil"),
        ("memory", "show", memory_id),
        ("memory", "history", memory_id),
    ):
        out = ok(*args, "-a", "mallory", "--store", store)
        assert "\x1b" not in out, (args, out)
        assert "\x07" not in out, (args, out)
        assert "\\x1b[2J" in out, (args, out)
    # JSON keeps the text exactly (escaped by the JSON encoder).
    assert ok_json("memory", "show", memory_id, "-a", "mallory", "--store", store)["content"] == ESCAPES


def _engram() -> list[str]:
    exe = Path(sys.executable).with_name("engram")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from engramdb.interfaces.cli import main; main()"]


def test_mcp_stdio_answers_every_request_read_before_stdin_closed(tmp_path: Path) -> None:
    """`printf REQUESTS | engram mcp` got no answer to the requests still running when stdin closed (the SDK
    cancels them at end of input), although their writes were done."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}
    call = {"jsonrpc": "2.0", "method": "tools/call"}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            **call,
            "id": 2,
            "params": {"name": "remember", "arguments": {"content": "kafka lag on orders", "agent": "a"}},
        },
        {**call, "id": 3, "params": {"name": "search", "arguments": {"query": "kafka", "agent": "a"}}},
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [*_engram(), "mcp", "--store", str(tmp_path / "store")],
        input=stdin.encode(),
        capture_output=True,
        env=env,
        timeout=300,
        check=False,
    )
    answers = {a["id"]: a for a in map(json.loads, done.stdout.decode().splitlines())}
    assert sorted(answers) == [1, 2, 3], done.stdout.decode()[:500]
    # (the SDK runs requests concurrently: the search may or may not see the memory written beside it)
    assert "kafka lag" in answers[2]["result"]["content"][0]["text"]
    assert "hits" in answers[3]["result"]["content"][0]["text"]


def test_rest_episode_lifecycle_across_requests(tmp_path: Path) -> None:
    """Seed 003's lifecycle (start, record_event with an agent role, end with metrics) over REST: only a finished
    episode could be recorded there (``POST /episodes``), so a task spanning requests could not be followed."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    import httpx
    from rest_helpers import error_of, serving

    from engramdb import Engram
    from engramdb.interfaces.rest import create_app

    with Engram(tmp_path / "store") as mem, serving(create_app(mem)) as url, httpx.Client(base_url=url) as api:
        started = api.post("/episodes/start", json={"task": "implement REST API", "agent": "swarm",
                                                    "metadata": {"priority": "high"}})  # fmt: skip
        assert started.status_code == 201, started.text
        episode = started.json()["episode_id"]
        step = {"episode_id": episode, "agent": "swarm", "kind": "code_generation", "role": "worker_backend"}
        assert api.post("/episodes/event", json={**step, "data": {"lines": 45}}).status_code == 200
        assert api.post("/episodes/event", json={**step, "kind": "verification", "role": "qa_sentinel"}).is_success
        # Another agent, an unknown id, a bad outcome: one-line errors that change nothing.
        assert "no episode" in error_of(api.post("/episodes/event", json={**step, "agent": "bob"}), 404)
        assert "no episode" in error_of(api.post("/episodes/end", json={"episode_id": "nope", "agent": "swarm"}), 404)
        bad = {"episode_id": episode, "agent": "swarm", "outcome": "maybe"}
        assert "outcome" in error_of(api.post("/episodes/end", json=bad), 422)
        assert "kind" in error_of(api.post("/episodes/event", json={**step, "kind": ""}), 422)
        assert "task" in error_of(api.post("/episodes/start", json={"task": ""}), 422)
        end = {"episode_id": episode, "agent": "swarm", "outcome": "success", "metrics": {"tests": 12}}
        ended = api.post("/episodes/end", json=end)
        assert ended.status_code == 200, ended.text
        record = ended.json()
        assert record["outcome"] == "success"
        assert [(e["kind"], e["role"]) for e in record["events"]] == [
            ("code_generation", "worker_backend"),
            ("verification", "qa_sentinel"),
        ]
        assert "has ended" in error_of(api.post("/episodes/end", json=end), 422)
        assert [e.id for e in mem.episodes.list("build a REST API", agent="swarm")] == [episode]


def test_mcp_stdio_does_not_wait_for_a_request_the_client_cancelled(tmp_path: Path) -> None:
    """The answer to a cancelled request never comes: at the end of input the server must not wait for it
    (it would wait up to five minutes; the run below allows two)."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "x"}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}},
    ]
    done = subprocess.run(
        [*_engram(), "mcp", "--store", str(tmp_path / "store")],
        input="".join(json.dumps(line) + "\n" for line in lines).encode(),
        capture_output=True,
        env={**os.environ, "ENGRAM_HOME": str(tmp_path / "home")},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-500:]
    assert 1 in {a["id"] for a in map(json.loads, done.stdout.decode().splitlines())}


def test_the_config_files_agent_is_the_cli_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # defaults < config file < environment < --agent, as for the library.
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('agent = "from-file"\n')
    store = str(tmp_path / "cfgstore")
    monkeypatch.delenv("ENGRAM_AGENT", raising=False)
    assert ok_json("memory", "record", "kept by the file's agent", "--store", store)["agent"] == "from-file"
    monkeypatch.setenv("ENGRAM_AGENT", "from-env")
    assert ok_json("memory", "record", "kept by the env's agent", "--store", store)["agent"] == "from-env"
    assert (
        ok_json("memory", "record", "kept by the flag's agent", "--agent", "flag", "--store", store)["agent"] == "flag"
    )
    monkeypatch.delenv("ENGRAM_AGENT")
    assert [m["content"] for m in ok_json("memory", "list", "--store", store)] == ["kept by the file's agent"]

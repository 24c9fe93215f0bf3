"""The MCP server: ``engram mcp --store DIR`` as a subprocess, driven over stdio by the SDK's own client."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from engramdb.interfaces.mcp import TOOLS


def _engram() -> tuple[str, list[str]]:
    exe = shutil.which("engram", path=str(Path(sys.executable).parent))
    if exe:
        return exe, []
    return sys.executable, ["-c", "from engramdb.interfaces.cli import main; main()"]


@asynccontextmanager
async def connected(store: Path) -> AsyncIterator[ClientSession]:
    """A client session with ``engram mcp --store STORE`` running as a subprocess."""
    command, prefix = _engram()
    params = StdioServerParameters(
        command=command,
        args=[*prefix, "mcp", "--store", str(store)],
        env={**os.environ, "ENGRAM_HOME": str(store.parent / "home")},
    )
    # The server's log lines go to its stderr; keep them out of the test output unless it fails.
    with (store.parent / "server.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def run(store: Path, scenario: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with connected(store) as session:
                await scenario(session)

    anyio.run(main)


def is_error(result: Any) -> bool:
    # The SDK's 2.x line names the field is_error; 1.x isError.
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def payload(result: Any) -> dict[str, Any]:
    """A successful tool result's JSON object."""
    assert not is_error(result), text_of(result)
    data = json.loads(text_of(result))
    assert isinstance(data, dict)
    return data


def test_lists_the_tools(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) == set(TOOLS)
        schema = getattr(tools["remember"], "input_schema", None) or getattr(tools["remember"], "inputSchema", {})
        assert schema["required"] == ["content"]
        assert {"agent", "kind", "tags", "metadata"} <= set(schema["properties"])
        assert all(t.description for t in listed.tools)

    run(tmp_path / "store", scenario)


def test_remember_search_get_forget(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        m = payload(
            await session.call_tool(
                "remember",
                {"content": "The build server needs Java 21 and 8 GB of RAM", "agent": "alice", "tags": ["ci"]},
            )
        )
        assert (m["agent"], m["tags"]) == ("alice", ["ci"])
        await session.call_tool("remember", {"content": "Alice likes short commit messages", "agent": "alice"})

        hits = payload(await session.call_tool("search", {"query": "what does the CI machine need", "agent": "alice"}))
        assert hits["hits"][0]["memory"]["id"] == m["id"]
        assert payload(await session.call_tool("search", {"query": "build server", "agent": "bob"}))["hits"] == []

        got = payload(await session.call_tool("get", {"memory_id": m["id"], "agent": "alice"}))
        assert got["content"] == m["content"]
        # Another agent cannot see it: a tool error with the library's one-line message.
        hidden = await session.call_tool("get", {"memory_id": m["id"], "agent": "bob"})
        assert is_error(hidden)
        assert m["id"] in text_of(hidden)

        assert payload(await session.call_tool("forget", {"memory_id": m["id"], "agent": "alice"})) == {
            "forgotten": m["id"]
        }
        assert is_error(await session.call_tool("get", {"memory_id": m["id"], "agent": "alice"}))

    run(tmp_path / "store", scenario)


def test_bad_calls_return_error_results(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        unknown_kind = await session.call_tool("remember", {"content": "x", "kind": "gossip"})
        assert is_error(unknown_kind)
        assert "gossip" in text_of(unknown_kind)
        assert "Traceback" not in text_of(unknown_kind)

        missing = await session.call_tool("remember", {"kind": "knowledge"})  # no content: fails the input schema
        assert is_error(missing)
        assert is_error(await session.call_tool("record_outcome", {"context": "c", "action": "a", "outcome": "meh"}))
        assert is_error(await session.call_tool("no_such_tool", {}))

        # Nothing was stored by the failed calls.
        assert payload(await session.call_tool("search", {"query": "x"}))["hits"] == []

    run(tmp_path / "store", scenario)


def test_learning_and_failure_tools(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        context = "flaky integration test in the checkout service"
        for outcome in ("success", "success", "success"):
            rec = payload(
                await session.call_tool(
                    "record_outcome",
                    {"context": context, "action": "quarantine-test", "outcome": outcome, "alternatives": ["rerun"]},
                )
            )
            assert rec["kind"] == "decision"
        await session.call_tool("record_outcome", {"context": context, "action": "rerun", "outcome": False})

        suggestion = payload(await session.call_tool("suggest", {"context": context}))
        assert suggestion["options"][0]["action"] == "quarantine-test"
        chosen = payload(
            await session.call_tool("choose", {"context": context, "options": ["quarantine-test", "rerun"]})
        )
        assert chosen["chosen"] in ("quarantine-test", "rerun")

        for host in ("db1.internal", "db2.internal"):
            failure = payload(
                await session.call_tool(
                    "record_failure",
                    {"error": f"ConnectionRefusedError: connect to {host}:5432 refused", "solution": "start postgres"},
                )
            )
            assert failure["kind"] == "failure"
        sols = payload(
            await session.call_tool(
                "solutions", {"error": "ConnectionRefusedError: connect to db9.internal:5432 refused"}
            )
        )
        assert sols["solutions"][0]["solution"] == "start postgres"
        patterns = payload(await session.call_tool("failure_patterns", {"recurring": True}))["patterns"]
        assert [p["occurrences"] for p in patterns] == [2]

    run(tmp_path / "store", scenario)


def test_context_and_session_tools(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        schema = getattr(tools["context"], "input_schema", None) or getattr(tools["context"], "inputSchema", {})
        assert schema["required"] == ["task"]
        assert set(schema["properties"]) == {"task", "agent", "token_budget", "user", "session"}
        assert schema["properties"]["token_budget"]["maximum"] >= schema["properties"]["token_budget"]["minimum"]
        assert schema["additionalProperties"] is False

        await session.call_tool(
            "remember", {"content": "Deploys need the change ticket in the commit message", "agent": "alice"}
        )
        added = payload(
            await session.call_tool("session_add", {"content": "we are deploying v2 today", "agent": "alice"})
        )
        assert added["message"]["content"] == "we are deploying v2 today"
        window = payload(await session.call_tool("session", {"agent": "alice"}))
        assert [m["content"] for m in window["messages"]] == ["we are deploying v2 today"]
        assert payload(await session.call_tool("session", {"agent": "bob"}))["messages"] == []

        ctx = payload(await session.call_tool("context", {"task": "deploy v2", "agent": "alice", "token_budget": 300}))
        assert "change ticket" in ctx["prompt"]
        assert "deploying v2 today" in ctx["prompt"]
        assert ctx["prompt_tokens"] <= 300
        assert "change ticket" not in text_of(await session.call_tool("context", {"task": "deploy v2", "agent": "bob"}))
        assert is_error(await session.call_tool("context", {"task": "x", "token_budget": 0}))
        assert is_error(await session.call_tool("context", {"task": "x", "budget": 100}))

    run(tmp_path / "store", scenario)


def _answer(proc: subprocess.Popen[bytes], timeout: float = 30) -> dict[str, Any]:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the server did not answer"
    line = proc.stdout.readline()
    assert line, "the server closed its output"
    answer: dict[str, Any] = json.loads(line)
    return answer


def test_malformed_json_rpc_is_answered_never_hangs(tmp_path: Path) -> None:
    """Lines the SDK cannot read get a JSON-RPC error (with the request's id when it has one); the server lives on."""
    command, prefix = _engram()
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home")}
    with (tmp_path / "server.log").open("w") as errlog:
        proc = subprocess.Popen(
            [command, *prefix, "mcp", "--store", str(tmp_path / "store")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=env,
        )
    assert proc.stdin is not None

    def send(line: bytes) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert _answer(proc, 120)["id"] == 1
        send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
        call = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
        cases: list[tuple[bytes, Any]] = [
            (b"{not json", None),
            (b"[]", None),
            (b"\xff\xfe garbage", None),
            (call % (5, b"remember", b'{"content":"bad \\ud800"}'), 5),
            (call % (6, b"search", b'{"query":"caf\\udce9"}'), 6),
            (call % (7, b"remember", b'{"content":"x","metadata":' + deep + b"}"), None),
            (call % (8, b"remember", b'"not an object"'), 8),
            (b'{"jsonrpc":"2.0","id":9,"method":"no/such/method"}', 9),
        ]
        for line, expected_id in cases:
            send(line)
            answer = _answer(proc)
            assert answer["id"] == expected_id, (line[:50], answer)
            assert "error" in answer, answer
            assert "\n" not in answer["error"]["message"]
        # A tool call with an unknown argument: a one-line tool error; then the server still answers.
        send(call % (10, b"remember", b'{"content":"x","bogus":1}'))
        result = _answer(proc)["result"]
        assert result["isError"] is True
        assert "bogus" in result["content"][0]["text"]
        send(b'{"jsonrpc":"2.0","id":11,"method":"ping"}')
        assert _answer(proc) == {"jsonrpc": "2.0", "id": 11, "result": {}}
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()
    # Nothing was stored by the refused calls.
    from engramdb import Engram

    with Engram(tmp_path / "store") as mem:
        assert mem.count() == 0


def test_route_tools_take_the_seed_inputs(tmp_path: Path) -> None:
    """Seed 002's ``route(task_type, complexity, context_length, require_fast, require_cheap)`` as MCP tools."""

    async def scenario(session: ClientSession) -> None:
        models = ["claude-sonnet-4-20250514", "gpt-4o", "llama3.1:8b"]
        args = {"task": "plan the migration", "models": models, "task_type": "reasoning", "complexity": "complex"}
        choice = payload(await session.call_tool("route", args))
        assert (choice["model"], choice["fallback"], choice["decided_by"]) == (models[0], "gpt-4o", "table")
        cheap = payload(await session.call_tool("route", {**args, "require_fast": True, "require_cheap": True}))
        assert cheap["model"] == "llama3.1:8b"
        rec = payload(
            await session.call_tool(
                "route_record", {"task": "plan it", "model": "gpt-4o", "outcome": "success", "task_type": "reasoning"}
            )
        )
        assert "llm-route" in rec["tags"]
        assert is_error(await session.call_tool("route", {**args, "complexity": "hard"}))

    run(tmp_path / "store", scenario)


def test_the_parity_tools_update_list_keyed_count_clear(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> None:
        call = session.call_tool
        m = payload(await call("remember", {"content": "editor: vim", "agent": "alice", "key": "editor"}))
        changed = payload(await call("update", {"memory_id": m["id"], "agent": "alice", "tags": ["tools"]}))
        assert changed["tags"] == ["tools", "key:editor"]
        assert payload(await call("recall_key", {"key": "editor", "agent": "alice"}))["id"] == m["id"]
        assert [c["action"] for c in payload(await call("history", {"memory_id": m["id"]}))["changes"]] == [
            "create",
            "update",
        ]
        assert payload(await call("count", {"agent": "alice"})) == {"count": 1}
        assert [x["id"] for x in payload(await call("list", {"agent": "alice"}))["memories"]] == [m["id"]]
        refused = await call("clear", {"agent": "alice", "confirm": "bob"})
        assert is_error(refused)
        assert "confirm" in text_of(refused)
        assert payload(await call("clear", {"agent": "alice", "confirm": "alice"})) == {"forgotten": 1}
        assert payload(await call("verify_audit", {}))["ok"] is True

    run(tmp_path / "store", scenario)

"""The MCP server: ``engram mcp --store DIR`` as a subprocess, driven over stdio by the SDK's own client."""

from __future__ import annotations

import json
import os
import shutil
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

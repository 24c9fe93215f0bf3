"""MCP over streamable HTTP, authenticated with the store's API keys, driven by the SDK's own client.

For every tool (a test checks the table covers them all), a client holding alice's key can
neither read nor change bob's memories; after bob shares, alice can read what he shared.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from rest_helpers import serving  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.embeddings.base import Embedder  # noqa: E402
from engramdb.interfaces._access import keys_of  # noqa: E402
from engramdb.interfaces.mcp import MCP_PATH, TOOLS, create_http_app  # noqa: E402

MARK = "zanzibarquokka"


@dataclass
class World:
    mem: Engram
    url: str
    tokens: dict[str, str]
    ids: dict[str, str]

    def state(self) -> Any:
        memories = sorted((m.to_dict() for m in self.mem.list(agent="bob", limit=1000)), key=lambda m: m["id"])
        for m in memories:
            m.pop("last_accessed", None)
            m.pop("access_count", None)
        bob_session = [m.content for m in self.mem.session("bob").messages]
        alice_session = [m.content for m in self.mem.session("alice").messages]
        return (
            memories,
            self.mem.sharing.list(from_agent="bob"),
            self.mem.count(agent="alice"),
            bob_session,
            (alice_session),
        )


@asynccontextmanager
async def session_for(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url + MCP_PATH, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def run(url: str, token: str | None, scenario: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with session_for(url, token) as session:
                await scenario(session)

    anyio.run(main)


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _seed(mem: Engram) -> dict[str, str]:
    ids = {"memory": mem.remember(f"Bob's deploy password rotation {MARK} schedule", agent="bob").id}
    mem.learning.record(f"flaky {MARK} build", f"retry-{MARK}", "success", agent="bob")
    mem.failures.record(f"ConnectionRefusedError: {MARK} db refused", agent="bob", solution=f"restart {MARK}")
    with mem.episodes.begin(f"deploy {MARK} service", agent="bob") as e:
        e.event("build", {"ok": True})
    mem.session("bob").add(f"bob's session: the {MARK} rollout is at noon")
    return ids


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[World]:
    store = tmp_path_factory.mktemp("mcp-http") / "store"
    with Engram(store, embedder=embedder) as mem:
        keys = keys_of(mem)
        tokens = {"alice": keys.create("alice").token, "bob": keys.create("bob").token}
        tokens["alice-ro"] = keys.create("alice", read_only=True).token
        ids = _seed(mem)
        mem.remember("Alice keeps her notes in the wiki", agent="alice")
        with serving(create_http_app(mem)) as url:
            yield World(mem, url, tokens, ids)


#: (tool, arguments, denied): denied calls must fail (naming bob, or bob's memory by id); the others succeed
#: and show nothing of bob's. Admin-only tools are denied to alice whatever the agent.
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("remember", {"content": "planted", "agent": "bob"}, True),
    ("search", {"query": f"deploy password {MARK}", "agent": "bob"}, True),
    ("search", {"query": f"deploy password {MARK}"}, False),
    ("get", {"memory_id": "{B}"}, True),
    ("get", {"memory_id": "{B}", "agent": "bob"}, True),
    ("forget", {"memory_id": "{B}"}, True),
    ("forget", {"memory_id": "{B}", "agent": "bob"}, True),
    ("add_conversation", {"messages": [{"role": "user", "content": "I live in Oslo"}], "agent": "bob"}, True),
    ("record_outcome", {"context": "c", "action": "a", "outcome": "success", "agent": "bob"}, True),
    ("suggest", {"context": f"flaky {MARK} build", "agent": "bob"}, True),
    ("suggest", {"context": f"flaky {MARK} build"}, False),
    ("choose", {"context": "c", "options": ["a", "b"], "agent": "bob"}, True),
    ("route", {"task": "label ticket", "models": ["gpt-4o"], "agent": "bob"}, True),
    ("route_record", {"task": "label ticket", "model": "gpt-4o", "outcome": "success", "agent": "bob"}, True),
    ("record_failure", {"error": "planted", "agent": "bob"}, True),
    ("solutions", {"error": f"ConnectionRefusedError: {MARK} db refused", "agent": "bob"}, True),
    ("solutions", {"error": f"ConnectionRefusedError: {MARK} db refused"}, False),
    ("failure_patterns", {"agent": "bob"}, True),
    ("failure_patterns", {}, False),
    ("preflight", {"action": f"connect to the {MARK} db", "agent": "bob"}, True),
    ("preflight", {"action": f"connect to the {MARK} db"}, False),
    ("record_episode", {"task": "planted", "agent": "bob"}, True),
    ("start_episode", {"task": "planted", "agent": "bob"}, True),
    ("episode_event", {"episode_id": "{B}", "kind": "planted"}, True),
    ("episode_event", {"episode_id": "{B}", "kind": "planted", "agent": "bob"}, True),
    ("end_episode", {"episode_id": "{B}"}, True),
    ("end_episode", {"episode_id": "{B}", "agent": "bob"}, True),
    ("find_episodes", {"task": f"deploy {MARK} service", "agent": "bob"}, True),
    ("find_episodes", {"task": f"deploy {MARK} service"}, False),
    ("analyze_episodes", {"agent": "bob"}, True),
    ("analyze_episodes", {}, False),
    ("stats", {"agent": "bob"}, True),
    ("stats", {}, False),
    ("context", {"task": f"rotate the deploy password {MARK}", "agent": "bob"}, True),
    ("context", {"task": f"rotate the deploy password {MARK}"}, False),
    ("session_add", {"content": "planted", "agent": "bob"}, True),
    ("session", {"agent": "bob"}, True),
    ("session", {}, False),
    ("share", {"from_agent": "bob", "to_agent": "alice"}, True),
    ("share", {"memory_ids": ["{B}"], "to_agent": "carol"}, True),
    ("unshare", {"from_agent": "bob", "to_agent": "alice"}, True),
    ("update", {"memory_id": "{B}", "content": "planted"}, True),
    ("update", {"memory_id": "{B}", "content": "planted", "agent": "bob"}, True),
    ("history", {"memory_id": "{B}"}, True),
    ("history", {"memory_id": "{B}", "agent": "bob"}, True),
    ("list", {"agent": "bob"}, True),
    ("list", {}, False),
    ("count", {"agent": "bob"}, True),
    ("count", {}, False),
    ("recall_key", {"key": "editor", "agent": "bob"}, True),
    ("remember_many", {"items": [{"content": "planted", "agent": "bob"}]}, True),
    ("clear", {"agent": "bob", "confirm": "bob"}, True),
    ("cleanup", {"agent": "bob", "dry_run": True}, True),
    ("feedback", {"memory_ids": ["{B}"], "outcome": "success"}, True),
    ("feedback", {"memory_ids": ["{B}"], "outcome": "success", "agent": "bob"}, True),
    ("resolve", {"decision_id": "{B}", "outcome": "success"}, True),
    ("pending", {"agent": "bob"}, True),
    ("pending", {}, False),
    ("approaches", {"agent": "bob"}, True),
    ("approaches", {}, False),
    ("learning_stats", {"agent": "bob"}, True),
    ("learning_stats", {}, False),
    ("learning_report", {"agent": "bob"}, True),
    ("outcomes", {"agent": "bob"}, True),
    ("trends", {"agent": "bob"}, True),
    ("executions", {"task": f"deploy {MARK} service", "agent": "bob"}, True),
    ("executions", {"task": f"deploy {MARK} service"}, False),
    ("record_execution", {"task": "planted", "approach": "a", "outcome": "success", "agent": "bob"}, True),
    ("failure_pattern", {"pattern_id": "x", "agent": "bob"}, True),
    ("prevention", {"pattern_id": "x", "agent": "bob"}, True),
    ("plan", {"pattern_id": "x", "task": "t", "agent": "bob"}, True),
    ("generate_check", {"pattern": "x", "agent": "bob"}, True),
    ("add_check", {"pattern": "x", "check_text": "planted", "agent": "bob"}, True),
    ("checks", {"agent": "bob"}, True),
    ("checks", {}, False),
    ("remove_check", {"check_id": "x", "agent": "bob"}, True),
    ("remember_code", {"source": "def planted():\n    return 1\n", "agent": "bob"}, True),
    ("suggest_code", {"task": "planted", "agent": "bob"}, True),
    ("export_knowledge", {"agent": "bob"}, True),
    ("import_knowledge", {"content": "{}", "agent": "bob"}, True),
    ("merge", {"from_agent": "bob", "to_agent": "alice"}, True),
    ("share_list", {"from_agent": "bob"}, True),
    ("distill", {"agent": "bob", "dry_run": True}, True),
    ("seed", {"pack": "python", "agent": "bob"}, True),
    ("reason", {"goal": "planted", "agent": "bob"}, True),
    ("audit_log", {"agent": "bob"}, True),
    ("verify_audit", {}, False),
    ("doctor", {"quick": True}, True),
]


def _fill(args: dict[str, Any], b: str) -> dict[str, Any]:
    filled: dict[str, Any] = json.loads(json.dumps(args).replace("{B}", b))
    return filled


def test_the_table_covers_every_tool() -> None:
    assert {tool for tool, _, _ in CASES} == set(TOOLS)


def test_alice_cannot_reach_bobs_memories(world: World) -> None:
    before = world.state()
    b = world.ids["memory"]

    async def scenario(session: ClientSession) -> None:
        listed = {t.name for t in (await session.list_tools()).tools}
        assert listed == set(TOOLS)
        for tool, args, denied in CASES:
            result = await session.call_tool(tool, _fill(args, b))
            text = text_of(result)
            assert "\n" not in text
            if denied:
                assert is_error(result), (tool, args, text)
                assert "bob" in text or b in text or "needs an admin" in text, (tool, text)
            else:
                assert not is_error(result), (tool, text)
                shown = text
                for value in args.values():
                    if isinstance(value, str):
                        shown = shown.replace(value, "")
                assert MARK not in shown, (tool, text)
                assert b not in shown

    run(world.url, world.tokens["alice"], scenario)
    assert world.state() == before


def test_after_bob_shares_alice_can_read(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        keys = keys_of(mem)
        alice, bob = keys.create("alice").token, keys.create("bob").token
        b = _seed(mem)["memory"]
        with serving(create_http_app(mem)) as url:

            async def before(session: ClientSession) -> None:
                assert is_error(await session.call_tool("get", {"memory_id": b}))

            async def share(session: ClientSession) -> None:
                result = await session.call_tool("share", {"memory_ids": [b], "to_agent": "alice"})
                assert json.loads(text_of(result)) == {"shared": 1}

            async def after(session: ClientSession) -> None:
                got = await session.call_tool("get", {"memory_id": b})
                assert MARK in text_of(got)
                hits = await session.call_tool("search", {"query": f"deploy password {MARK}"})
                assert b in text_of(hits)
                assert is_error(await session.call_tool("forget", {"memory_id": b}))

            run(url, alice, before)
            run(url, bob, share)
            run(url, alice, after)
        assert mem.get(b).agent == "bob"


def test_read_only_key_cannot_write_and_unknown_arguments_are_rejected(world: World) -> None:
    before = world.state()

    async def scenario(session: ClientSession) -> None:
        denied = await session.call_tool("remember", {"content": "planted"})
        assert is_error(denied)
        assert "read-only" in text_of(denied)
        denied = await session.call_tool("session_add", {"content": "planted"})
        assert is_error(denied)
        assert "read-only" in text_of(denied)
        unknown = await session.call_tool("search", {"query": "wiki", "tag": ["x"]})
        assert is_error(unknown)
        assert "tag" in text_of(unknown)
        assert "\n" not in text_of(unknown)
        bad_type = await session.call_tool("search", {"query": 5})
        assert is_error(bad_type)
        assert "\n" not in text_of(bad_type)
        found = await session.call_tool("search", {"query": "where are alice's notes"})
        assert "wiki" in text_of(found)

    run(world.url, world.tokens["alice-ro"], scenario)
    assert world.state() == before


def test_requests_without_a_valid_key_are_refused(world: World) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=world.url, timeout=30, headers=headers) as client:
        for extra in ({}, {"Authorization": "Bearer engram_000000000000_forged"}, {"X-API-Key": "nope"}):
            response = client.post(MCP_PATH, json=body, headers=extra)
            assert response.status_code == 401, response.text
            assert set(response.json()) == {"error"}
        # DNS rebinding: another Host name is refused before authentication.
        assert client.post(MCP_PATH, json=body, headers={"Host": "evil.example"}).status_code == 421
        cross = client.post(MCP_PATH, json=body, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403


def test_malformed_json_rpc_over_http_is_answered(world: World) -> None:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {world.tokens['alice']}",
        "Content-Type": "application/json",
    }
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    surrogate = (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"remember",'
        b'"arguments":{"content":"bad \\ud800"}}}'
    )
    nested = b'{"jsonrpc":"2.0","id":4,"method":"ping","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
    before = world.state()
    with httpx.Client(base_url=world.url, timeout=30, headers=headers) as client:
        opened = client.post(MCP_PATH, json=hello)
        assert opened.status_code == 200, opened.text
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        client.post(MCP_PATH, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        for raw in (b"{not json", b"[]", b"\xff\xfe", surrogate, nested, b'{"jsonrpc":"2.0","id":5}'):
            response = client.post(MCP_PATH, content=raw, headers=session)
            assert response.status_code == 400, (raw[:40], response.status_code, response.text)
            assert response.json()["error"]["code"] in (-32700, -32600, -32602)
        # The session still works.
        ping = client.post(MCP_PATH, json={"jsonrpc": "2.0", "id": 6, "method": "ping"}, headers=session)
        assert ping.status_code == 200
        assert '"id":6' in ping.text
    assert world.state() == before

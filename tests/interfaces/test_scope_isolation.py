"""No user ever sees another user's memory, through the CLI, REST and MCP (streamable HTTP) alike.

Hypothesis writes memories of random users and conversation threads (some of the agent itself, no user)
through each interface, then reads as every user and thread there (search, list, count): each answer
holds only that user's memories and the agent's own, only that thread's when one is named, and the
counts match the data. Real servers on loopback over one real store (SQLite, and PostgreSQL on the tests'
throwaway server); a fresh agent per example.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")

from cli_helpers import ok_json  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from pg_server import SERVER  # noqa: E402
from rest_helpers import serving  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.interfaces.mcp import MCP_PATH, create_http_app  # noqa: E402
from engramdb.interfaces.rest import create_app  # noqa: E402

BACKENDS = ("sqlite", "postgres")
USERS = ("u1", "u2", "u3")
SESSIONS = (None, "s1", "s2")
WORDS = ("alpha", "bravo", "charlie")
Row = tuple[str | None, str | None, str]

rows = st.lists(
    st.tuples(st.sampled_from((None, *USERS)), st.sampled_from(SESSIONS), st.sampled_from(WORDS)),
    min_size=1,
    max_size=6,
)
EXAMPLES = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _items(agent: str, data: list[Row]) -> list[dict[str, Any]]:
    return [
        {"content": f"{word} note {n}", "agent": agent, "kind": "episode", "user": user, "session": session}
        for n, (user, session, word) in enumerate(data)
    ]


def _expected(data: list[Row], user: str, session: str | None) -> int:
    return sum(1 for u, s, _ in data if u in (None, user) and (session is None or s == session))


def _check(memories: list[dict[str, Any]], user: str, session: str | None) -> None:
    for m in memories:
        assert m["user"] in (None, user), (user, m)
        assert session is None or m["session"] == session, (session, m)


def _scoped(user: str, session: str | None) -> dict[str, str]:
    return {"user": user} | ({"session": session} if session is not None else {})


def _location(backend: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh store on ``backend`` (postgres: a new database; skipped, or failed under CI=true, without a server)."""
    if backend == "postgres":
        return SERVER.get().new_database()
    return str(tmp_path_factory.mktemp(backend) / "store")


@pytest.fixture(scope="module", params=BACKENDS)
def location(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One store per backend for the module (each example writes under a fresh agent)."""
    return _location(request.param, tmp_path_factory)


@pytest.fixture(scope="module", params=BACKENDS)
def cli_location(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The CLI's own store per backend: it opens with the default model, the servers' store with another."""
    return _location(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def served(location: str) -> Iterator[tuple[str, str]]:
    """The REST and MCP (streamable HTTP) servers of one store (static embedder: fast, real)."""
    with (
        Engram(location, embedder="static", vectors="sync") as mem,
        serving(create_app(mem)) as rest,
        serving(create_http_app(mem)) as mcp,
    ):
        yield rest, mcp


@EXAMPLES
@given(data=rows, query=st.sampled_from(WORDS))
def test_rest_never_shows_another_users_memory(served: tuple[str, str], data: list[Row], query: str) -> None:
    agent = f"a{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=served[0], timeout=60) as api:
        response = api.post("/memories/batch", json={"items": _items(agent, data)})
        assert response.status_code == 201, response.text
        for user in USERS:
            for session in SESSIONS:
                scope = _scoped(user, session)
                hits = api.post("/search", json={"query": query, "agent": agent, "limit": 50, **scope}).json()["hits"]
                _check([h["memory"] for h in hits], user, session)
                listed = api.get("/memories", params={"agent": agent, **scope}).json()["memories"]
                _check(listed, user, session)
                count = api.get("/count", params={"agent": agent, **scope}).json()["count"]
                assert count == len(listed) == _expected(data, user, session)
                for m in listed:  # by id too: another user's scope answers 404
                    other = next(u for u in USERS if u not in (user, m["user"]))
                    if m["user"] is not None:
                        assert (
                            api.get(f"/memories/{m['id']}", params={"agent": agent, "user": other}).status_code == 404
                        )


async def _mcp_scenario(url: str, agent: str, data: list[Row], query: str) -> None:
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(url + MCP_PATH, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()

        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            result = await session.call_tool(tool, args)
            text = "".join(getattr(b, "text", "") for b in result.content)
            assert not getattr(result, "is_error", getattr(result, "isError", False)), text
            out: dict[str, Any] = json.loads(text)
            return out

        await call("remember_many", {"items": _items(agent, data)})
        for user in USERS:
            for thread in SESSIONS:
                scope = _scoped(user, thread)
                hits = (await call("search", {"query": query, "agent": agent, "limit": 50, **scope}))["hits"]
                _check([h["memory"] for h in hits], user, thread)
                listed = (await call("list", {"agent": agent, **scope}))["memories"]
                _check(listed, user, thread)
                count = (await call("count", {"agent": agent, **scope}))["count"]
                assert count == len(listed) == _expected(data, user, thread)


@EXAMPLES
@given(data=rows, query=st.sampled_from(WORDS))
def test_mcp_never_shows_another_users_memory(served: tuple[str, str], data: list[Row], query: str) -> None:
    agent = f"a{uuid.uuid4().hex[:10]}"

    async def main() -> None:
        with anyio.fail_after(120):
            await _mcp_scenario(served[1], agent, data, query)

    anyio.run(main)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows.filter(lambda d: len(d) <= 4), query=st.sampled_from(WORDS))
def test_cli_never_shows_another_users_memory(cli_location: str, data: list[Row], query: str) -> None:
    store = cli_location
    agent = f"a{uuid.uuid4().hex[:10]}"
    for user, session, word in data:
        args = ["memory", "record", f"{word} note", "--agent", agent, "--type", "episode", "--store", store]
        args += ["--user", user] if user else []
        args += ["--session", session] if session else []
        ok_json(*args)
    for user in USERS:
        for session in SESSIONS:
            scope = ["--user", user] + (["--session", session] if session else [])
            hits = ok_json("memory", "search", query, "--agent", agent, "--limit", "50", "--store", store, *scope)
            _check([h["memory"] for h in hits], user, session)
            listed = ok_json("memory", "list", "--agent", agent, "--store", store, *scope)
            _check(listed, user, session)
            assert len(listed) == _expected(data, user, session)


def test_cli_as_of_and_key_answer_with_the_past(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    base = ["--agent", "bot", "--user", "ana", "--store", store]
    ok_json("memory", "record", "Ana lives in Lisbon", "--key", "home", "--at", "2026-01-10", *base)
    ok_json("memory", "record", "Ana lives in Berlin", "--key", "home", "--at", "2026-06-01", *base)
    assert ok_json("memory", "key", "home", *base)["content"] == "Ana lives in Berlin"
    assert ok_json("memory", "key", "home", "--as-of", "2026-03-01", *base)["content"] == "Ana lives in Lisbon"
    then = ok_json("memory", "search", "where does Ana live", "--as-of", "2026-03-01", *base)
    assert [h["memory"]["content"] for h in then] == ["Ana lives in Lisbon"]
    now = ok_json("memory", "search", "where does Ana live", *base)
    assert [h["memory"]["content"] for h in now] == ["Ana lives in Berlin"]


def test_rest_session_windows_and_context_are_per_thread(served: tuple[str, str]) -> None:
    agent = f"a{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=served[0], timeout=60) as api:
        body = {"content": "my flight leaves at nine", "agent": agent, "user": "u1", "session": "s1"}
        assert api.post("/session/messages", json=body).status_code == 201
        mine = api.get("/session", params={"agent": agent, "user": "u1", "session": "s1"}).json()
        assert [m["content"] for m in mine["messages"]] == ["my flight leaves at nine"]
        assert (mine["user"], mine["session"]) == ("u1", "s1")
        for other in ({"user": "u2", "session": "s1"}, {"user": "u1", "session": "s2"}, {}):
            assert api.get("/session", params={"agent": agent, **other}).json()["messages"] == []
        ctx = api.post("/context", json={"task": "plan the trip", "agent": agent, "user": "u2"}).json()
        assert "flight leaves at nine" not in json.dumps(ctx)
        ctx = api.post("/context", json={"task": "plan the trip", "agent": agent, "user": "u1", "session": "s1"})
        assert "flight leaves at nine" in json.dumps(ctx.json())
        bad = api.get("/session", params={"agent": agent, "user": " padded"})
        assert bad.status_code == 422  # the library's ValidationError, one line

"""Learning per user through every interface: REST, the remote client, MCP (streamable HTTP) and the CLI.

Hypothesis records outcomes of random users (some the agent's own, no user) through each interface, then
reads the learning back as every user: outcomes, pending decisions and suggestions hold only that
user's records and the agent's own, never another user's; without a user, the agent's learning holds
them all. Real servers on loopback over one real store; a fresh agent per example.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")

from cli_helpers import fails, ok, ok_json  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from rest_helpers import serving  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.errors import NotFound  # noqa: E402
from engramdb.interfaces.mcp import MCP_PATH, create_http_app  # noqa: E402
from engramdb.interfaces.rest import create_app  # noqa: E402

USERS = ("u1", "u2")
ACTIONS = ("retry", "rollback")
CONTEXT = "the nightly deploy failed with a timeout"
Row = tuple[str | None, str, str]

rows = st.lists(
    st.tuples(st.sampled_from((None, *USERS)), st.sampled_from(ACTIONS), st.sampled_from(("success", "failure"))),
    min_size=1,
    max_size=5,
)
EXAMPLES = settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _expected(data: list[Row], user: str | None) -> int:
    return sum(1 for u, _, _ in data if user is None or u in (None, user))


def _actions(data: list[Row], user: str | None) -> set[str]:
    return {a for u, a, _ in data if user is None or u in (None, user)}


def _check(outcomes: list[dict[str, Any]], data: list[Row], user: str | None) -> None:
    assert len(outcomes) == _expected(data, user)
    for r in outcomes:
        assert user is None or r.get("user") in (None, user), (user, r)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    location = tmp_path_factory.mktemp("learn-iso") / "store"
    with (
        Engram(location, embedder="static", vectors="sync") as mem,
        serving(create_app(mem)) as rest,
        serving(create_http_app(mem)) as mcp,
    ):
        yield rest, mcp


@EXAMPLES
@given(data=rows)
def test_rest_and_the_remote_client_keep_each_users_learning(served: tuple[str, str], data: list[Row]) -> None:
    agent = f"a{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=served[0], timeout=60) as api:
        for n, (user, action, outcome) in enumerate(data):
            body = {"context": f"{CONTEXT} #{n}", "action": action, "outcome": outcome, "agent": agent}
            response = api.post("/outcomes", json=body | ({"user": user} if user else {}))
            assert response.status_code == 201, response.text
            assert response.json()["user"] == user
        pending = api.post(
            "/outcomes", json={"context": CONTEXT, "action": "wait", "outcome": "pending", "agent": agent}
        )
        assert pending.status_code == 201, pending.text
        for user in (None, *USERS):
            scope = {"user": user} if user else {}
            found = api.get("/learning/outcomes", params={"agent": agent, **scope}).json()["outcomes"]
            _check(found, data, user)
            s = api.post("/suggest", json={"context": CONTEXT, "agent": agent, "limit": 50, **scope}).json()
            assert {o["action"] for o in s["options"]} <= _actions(data, user)
            report = api.get("/learning/report", params={"agent": agent, **scope}).json()
            assert report["decisions"] == _expected(data, user)
            assert len(api.get("/learning/pending", params={"agent": agent, **scope}).json()["memories"]) == 1
    remote = Engram(served[0])
    try:
        for user in (None, *USERS):
            records = remote.learning.outcomes(agent=agent, user=user)
            _check([r.to_dict() for r in records], data, user)
            assert all(user is None or r.user in (None, user) for r in records)
        theirs = [r for r in remote.learning.outcomes(agent=agent) if r.user is not None]
        for r in theirs:
            other = next(u for u in USERS if u != r.user)
            assert r.id not in {x.id for x in remote.learning.outcomes(agent=agent, user=other)}
    finally:
        remote.close()


def test_rest_refuses_a_bad_user_in_one_line(served: tuple[str, str]) -> None:
    with httpx.Client(base_url=served[0], timeout=60) as api:
        body = {"context": CONTEXT, "action": "retry", "outcome": "success", "agent": "bad-user", "user": " padded"}
        response = api.post("/outcomes", json=body)
        assert response.status_code == 422
        assert "\n" not in response.json()["error"]
        assert "user" in response.json()["error"]
        assert api.get("/count", params={"agent": "bad-user"}).json()["count"] == 0
        resolve = {"decision_id": "nope", "outcome": "success", "agent": "bad-user", "user": "u1"}
        assert api.post("/learning/resolve", json=resolve).status_code == 404


async def _mcp_scenario(url: str, agent: str, data: list[Row]) -> None:
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

        for n, (user, action, outcome) in enumerate(data):
            args = {"context": f"{CONTEXT} #{n}", "action": action, "outcome": outcome, "agent": agent}
            await call("record_outcome", args | ({"user": user} if user else {}))
        for user in (None, *USERS):
            scope = {"user": user} if user else {}
            _check((await call("outcomes", {"agent": agent, **scope}))["outcomes"], data, user)
            s = await call("suggest", {"context": CONTEXT, "agent": agent, "limit": 50, **scope})
            assert {o["action"] for o in s["options"]} <= _actions(data, user)
            trends = (await call("trends", {"agent": agent, **scope}))["trends"]
            assert sum(t["executions"] for t in trends) == _expected(data, user)


@EXAMPLES
@given(data=rows)
def test_mcp_keeps_each_users_learning(served: tuple[str, str], data: list[Row]) -> None:
    agent = f"a{uuid.uuid4().hex[:10]}"

    async def main() -> None:
        with anyio.fail_after(120):
            await _mcp_scenario(served[1], agent, data)

    anyio.run(main)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows.filter(lambda d: len(d) <= 3))
def test_cli_keeps_each_users_learning(tmp_path_factory: pytest.TempPathFactory, data: list[Row]) -> None:
    store = str(tmp_path_factory.mktemp("cli-learn") / "store")
    base = ["--agent", "bot", "--store", store]
    ids: dict[str, str | None] = {}
    for n, (user, action, outcome) in enumerate(data):
        args = ["memory", "record", "--context", f"{CONTEXT} #{n}", "--action", action, "--outcome", outcome]
        m = ok_json(*args, *base, *(["--user", user] if user else []))
        assert m["user"] == user
        ids[m["id"]] = user
    for user in USERS:
        s = ok_json("learning", "suggest", "--context", CONTEXT, "--limit", "50", "--user", user, *base)
        assert {o["action"] for o in s["options"]} <= _actions(data, user)
        report = json.loads(ok("learning", "report", "--format", "json", "--user", user, *base))
        assert report["decisions"] == _expected(data, user)
    everyone = json.loads(ok("learning", "report", "--format", "json", *base))
    assert everyone["decisions"] == len(data)


def test_cli_resolve_and_pending_take_the_user(tmp_path_factory: pytest.TempPathFactory) -> None:
    store = str(tmp_path_factory.mktemp("cli-pending") / "store")
    base = ["--agent", "bot", "--store", store]
    record = ["memory", "record", "--context", CONTEXT, "--action", "retry", "--outcome", "pending"]
    d = ok_json(*record, "--user", "u1", *base)
    assert [m["id"] for m in ok_json("learning", "pending", "--user", "u1", *base)] == [d["id"]]
    assert ok_json("learning", "pending", "--user", "u2", *base) == []
    assert "user 'u2'" in fails("learning", "resolve", d["id"], "--outcome", "success", "--user", "u2", *base)
    done = ok_json("learning", "resolve", d["id"], "--outcome", "success", "--user", "u1", *base)
    assert done["metadata"]["outcome"] == "success"
    with Engram(store) as mem, pytest.raises(NotFound):
        mem.learning.resolve(d["id"], "failure", agent="bot", user="u2")

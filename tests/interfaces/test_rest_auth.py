"""Authenticated REST: with API keys, every endpoint acts as the key's agent.

For every endpoint of the app (a test checks the table below covers them all), a caller
holding alice's key can neither read nor change bob's memories: naming bob is 403, bob's
memory by id is 404, and listings never show bob's data; bob's store stays unchanged.
After bob shares, alice can read (never change) what he shared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from rest_helpers import error_of, serving

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.interfaces._access import keys_of
from engramdb.interfaces.rest import API_PREFIX, create_app

#: Words only bob's memories contain: a response to alice must never show them.
MARK = "zanzibarquokka"


@dataclass
class World:
    mem: Engram
    url: str
    tokens: dict[str, str]
    bob_memory: str = ""
    ids: dict[str, str] = field(default_factory=dict)

    def client(self, who: str | None, *, header: str = "bearer") -> httpx.Client:
        headers = {}
        if who is not None:
            token = self.tokens[who]
            headers = {"Authorization": f"Bearer {token}"} if header == "bearer" else {"X-API-Key": token}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def bob_state(self) -> Any:
        """Everything of bob's that a change would show: his memories, the history of each, his session."""
        memories = sorted((m.to_dict() for m in self.mem.list(agent="bob", limit=1000)), key=lambda m: m["id"])
        for m in memories:
            m.pop("last_accessed", None)
            m.pop("access_count", None)
        histories = {m["id"]: len(self.mem.history(m["id"])) for m in memories}
        session = [(m.role, m.content) for m in self.mem.session("bob").messages]
        return memories, histories, self.mem.sharing.list(from_agent="bob"), session


def _seed_bob(mem: Engram) -> dict[str, str]:
    ids = {}
    ids["memory"] = mem.remember(f"Bob's deploy password rotation {MARK} schedule", agent="bob", tags=["ops"]).id
    ids["decision"] = mem.learning.record(
        f"flaky {MARK} build", f"retry-{MARK}", "success", agent="bob", alternatives=["give-up"]
    ).id
    ids["failure"] = mem.failures.record(
        f"ConnectionRefusedError: {MARK} db refused", agent="bob", solution=f"restart {MARK}"
    ).id
    with mem.episodes.begin(f"deploy {MARK} service", agent="bob") as e:
        e.event("build", {"ok": True})
    assert e.memory is not None
    ids["episode"] = e.memory.id
    mem.session("bob").add(f"bob's session: the {MARK} rollout is at noon")
    return ids


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[World]:
    store = tmp_path_factory.mktemp("auth") / "store"
    with Engram(store, embedder=embedder) as mem:
        keys = keys_of(mem)
        tokens = {
            "alice": keys.create("alice").token,
            "bob": keys.create("bob").token,
            "alice-ro": keys.create("alice", read_only=True).token,
            "admin": keys.create("root", admin=True).token,
        }
        ids = _seed_bob(mem)
        mem.remember("Alice keeps her notes in the wiki", agent="alice")
        with serving(create_app(mem)) as url:
            yield World(mem, url, tokens, ids["memory"], ids)


# -- the table: every endpoint, asked by alice for bob's data ---------------------------------------------

#: (method, path template, request keywords, expected status); ``{B}`` is bob's memory id.
#: 403: the request names bob. 404: bob's memory by id. 200/201 + no MARK: alice's own view.
CASES: list[tuple[str, str, dict[str, Any], int]] = [
    ("POST", "/memories", {"json": {"content": "planted", "agent": "bob"}}, 403),
    ("POST", "/memories/batch", {"json": {"items": [{"content": "planted", "agent": "bob"}]}}, 403),
    ("GET", "/memories", {"params": {"agent": "bob"}}, 403),
    ("GET", "/memories", {}, 200),
    ("GET", "/memories/{B}", {}, 404),
    ("GET", "/memories/{B}", {"params": {"agent": "bob"}}, 403),
    ("PATCH", "/memories/{B}", {"json": {"content": "hijacked"}}, 404),
    ("PATCH", "/memories/{B}", {"json": {"content": "hijacked"}, "params": {"agent": "bob"}}, 403),
    ("DELETE", "/memories/{B}", {}, 404),
    ("DELETE", "/memories/{B}", {"params": {"agent": "bob"}}, 403),
    ("GET", "/memories/{B}/history", {}, 404),
    ("GET", "/memories/{B}/history", {"params": {"agent": "bob"}}, 403),
    ("POST", "/search", {"json": {"query": f"deploy password {MARK}", "agent": "bob"}}, 403),
    ("POST", "/search", {"json": {"query": f"deploy password {MARK}"}}, 200),
    ("GET", "/stats", {"params": {"agent": "bob"}}, 403),
    ("GET", "/stats", {}, 200),
    ("POST", "/outcomes", {"json": {"context": "c", "action": "a", "outcome": "success", "agent": "bob"}}, 403),
    ("POST", "/suggest", {"json": {"context": f"flaky {MARK} build", "agent": "bob"}}, 403),
    ("POST", "/suggest", {"json": {"context": f"flaky {MARK} build"}}, 200),
    ("POST", "/choose", {"json": {"context": "c", "options": ["a", "b"], "agent": "bob"}}, 403),
    ("POST", "/failures", {"json": {"error": "planted", "agent": "bob"}}, 403),
    ("POST", "/solutions", {"json": {"error": f"ConnectionRefusedError: {MARK} db refused", "agent": "bob"}}, 403),
    ("POST", "/solutions", {"json": {"error": f"ConnectionRefusedError: {MARK} db refused"}}, 200),
    ("GET", "/failure-patterns", {"params": {"agent": "bob"}}, 403),
    ("GET", "/failure-patterns", {}, 200),
    ("POST", "/preflight", {"json": {"action": f"connect to the {MARK} db", "agent": "bob"}}, 403),
    ("POST", "/preflight", {"json": {"action": f"connect to the {MARK} db"}}, 200),
    ("POST", "/episodes", {"json": {"task": "planted", "agent": "bob"}}, 403),
    ("POST", "/episodes/start", {"json": {"task": "planted", "agent": "bob"}}, 403),
    ("POST", "/episodes/event", {"json": {"episode_id": "{B}", "kind": "planted"}}, 404),
    ("POST", "/episodes/event", {"json": {"episode_id": "{B}", "kind": "planted", "agent": "bob"}}, 403),
    ("POST", "/episodes/end", {"json": {"episode_id": "{B}"}}, 404),
    ("POST", "/episodes/end", {"json": {"episode_id": "{B}", "agent": "bob"}}, 403),
    ("POST", "/episodes/search", {"json": {"task": f"deploy {MARK} service", "agent": "bob"}}, 403),
    ("POST", "/episodes/search", {"json": {"task": f"deploy {MARK} service"}}, 200),
    ("POST", "/episodes/analyze", {"json": {"agent": "bob"}}, 403),
    ("POST", "/episodes/analyze", {"json": {}}, 200),
    ("POST", "/shares", {"json": {"from_agent": "bob", "to_agent": "alice", "tag": "ops"}}, 403),
    ("POST", "/shares", {"json": {"memory_ids": ["{B}"], "to_agent": "carol"}}, 404),
    ("DELETE", "/shares", {"json": {"from_agent": "bob", "to_agent": "alice"}}, 403),
    ("GET", "/shares", {"params": {"agent": "bob"}}, 403),
    ("GET", "/shares", {}, 200),
    ("GET", "/audit", {"params": {"agent": "bob"}}, 403),
    ("GET", "/audit", {}, 200),
    ("GET", "/audit/verify", {}, 200),
    ("POST", "/context", {"json": {"task": f"rotate the deploy password {MARK}", "agent": "bob"}}, 403),
    ("POST", "/context", {"json": {"task": f"rotate the deploy password {MARK}"}}, 200),
    ("POST", "/session/messages", {"json": {"content": "planted", "agent": "bob"}}, 403),
    ("GET", "/session", {"params": {"agent": "bob"}}, 403),
    ("GET", "/session", {}, 200),
    ("GET", "/me", {}, 200),
    # Conversations and routing.
    ("POST", "/memories/add", {"json": {"messages": [{"role": "user", "content": "planted"}], "agent": "bob"}}, 403),
    ("POST", "/route", {"json": {"task": "t", "models": ["a", "b"], "agent": "bob"}}, 403),
    ("POST", "/route/outcomes", {"json": {"task": "t", "model": "a", "outcome": "success", "agent": "bob"}}, 403),
    # The parity routes (interfaces/_ops_more.py).
    ("GET", "/count", {"params": {"agent": "bob"}}, 403),
    ("GET", "/count", {}, 200),
    ("GET", "/keyed", {"params": {"key": "editor", "agent": "bob"}}, 403),
    ("DELETE", "/memories", {"json": {"agent": "bob", "confirm": "bob"}}, 403),
    ("POST", "/reason", {"json": {"goal": "g", "agent": "bob"}}, 403),
    ("POST", "/learning/feedback", {"json": {"memory_ids": ["{B}"], "outcome": "success"}}, 404),
    ("POST", "/learning/feedback", {"json": {"memory_ids": ["{B}"], "outcome": "success", "agent": "bob"}}, 403),
    ("POST", "/learning/resolve", {"json": {"decision_id": "{B}", "outcome": "success", "agent": "bob"}}, 403),
    ("GET", "/learning/pending", {"params": {"agent": "bob"}}, 403),
    ("GET", "/learning/outcomes", {"params": {"agent": "bob"}}, 403),
    ("GET", "/learning/outcomes", {}, 200),
    ("GET", "/learning/stats", {"params": {"agent": "bob"}}, 403),
    ("GET", "/learning/report", {"params": {"agent": "bob"}}, 403),
    ("GET", "/learning/trends", {"params": {"agent": "bob"}}, 403),
    ("GET", "/learning/approaches", {"params": {"agent": "bob"}}, 403),
    (
        "POST",
        "/learning/executions",
        {"json": {"task": "t", "approach": "a", "outcome": "success", "agent": "bob"}},
        403,
    ),
    ("POST", "/learning/executions/search", {"json": {"task": f"flaky {MARK} build", "agent": "bob"}}, 403),
    ("POST", "/learning/executions/search", {"json": {"task": f"flaky {MARK} build"}}, 200),
    ("GET", "/failure-pattern", {"params": {"pattern_id": "p", "agent": "bob"}}, 403),
    ("GET", "/failure-pattern/prevention", {"params": {"pattern_id": "p", "agent": "bob"}}, 403),
    ("POST", "/failure-pattern/plan", {"json": {"pattern_id": "p", "task": "t", "agent": "bob"}}, 403),
    ("GET", "/checks", {"params": {"agent": "bob"}}, 403),
    ("POST", "/checks", {"json": {"pattern": None, "check_text": "planted", "agent": "bob"}}, 403),
    ("POST", "/checks/generate", {"json": {"pattern": "p", "agent": "bob"}}, 403),
    ("DELETE", "/checks", {"json": {"check_id": "c", "agent": "bob"}}, 403),
    ("POST", "/code", {"json": {"source": "def f():\n    return 1\n", "agent": "bob"}}, 403),
    ("POST", "/code/suggest", {"json": {"task": "t", "agent": "bob"}}, 403),
    ("GET", "/share-list", {"params": {"from_agent": "bob"}}, 403),
    ("GET", "/share-list", {}, 200),
    ("GET", "/knowledge/export", {"params": {"agent": "bob"}}, 403),
    ("GET", "/knowledge/export", {}, 200),
    ("POST", "/knowledge/import", {"json": {"content": "planted", "agent": "bob"}}, 403),
    ("POST", "/knowledge/distill", {"json": {"agent": "bob", "dry_run": True}}, 403),
    ("POST", "/knowledge/merge", {"json": {"from_agent": "bob"}}, 403),
    ("POST", "/knowledge/seed", {"json": {"pack": "python", "agent": "bob"}}, 403),
]
#: Endpoints anyone may call, with or without a key.
PUBLIC = {("GET", "/health")}
#: Endpoints for admin keys only: the store check, retention over every agent, key management.
ADMIN: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/doctor", {"params": {"quick": "true"}}),
    ("POST", "/retention/cleanup", {"json": {"dry_run": True}}),
    ("GET", "/api-keys", {}),
    ("POST", "/api-keys", {"json": {"agent": "carol", "read_only": True}}),
    ("DELETE", "/api-keys", {"json": {"key_id": "no-such-key"}}),
]


def _fill(value: Any, b: str) -> Any:
    return json.loads(json.dumps(value).replace("{B}", b))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _send(client: httpx.Client, method: str, path: str, kwargs: dict[str, Any], b: str) -> httpx.Response:
    return client.request(method, path.replace("{B}", b), **_fill(kwargs, b))


def test_the_table_covers_every_endpoint(world: World) -> None:
    app = create_app(world.mem)
    # The API's operations as its schema lists them (the dashboard's pages are outside it:
    # tests/interfaces/test_rest_dashboard.py), by their unversioned alias (the same endpoint).
    routes = {
        (method.upper(), path.removeprefix(API_PREFIX))
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    covered = {(m, p.replace("{B}", "{memory_id}")) for m, p, _, _ in CASES} | PUBLIC | {(m, p) for m, p, _ in ADMIN}
    assert routes == covered


@pytest.mark.parametrize(("method", "path", "kwargs"), ADMIN, ids=[f"{c[0]} {c[1]}" for c in ADMIN])
def test_admin_endpoints_refuse_other_keys(world: World, method: str, path: str, kwargs: dict[str, Any]) -> None:
    before = world.bob_state()
    with world.client("alice") as alice:
        assert "admin" in error_of(_send(alice, method, path, kwargs, world.bob_memory), 403)
    with world.client("admin") as admin:
        response = _send(admin, method, path, kwargs, world.bob_memory)
        assert response.status_code in (200, 201, 404), response.text  # 404: the unknown key id
    assert world.bob_state() == before


@pytest.mark.parametrize(("method", "path", "kwargs", "status"), CASES, ids=[f"{c[0]} {c[1]} {c[3]}" for c in CASES])
def test_alice_cannot_reach_bobs_memories(
    world: World, method: str, path: str, kwargs: dict[str, Any], status: int
) -> None:
    before = world.bob_state()
    with world.client("alice") as alice:
        response = _send(alice, method, path, kwargs, world.bob_memory)
    if status >= 400:
        message = error_of(response, status)
        if status == 403:
            assert "bob" in message
    else:
        assert response.status_code == status, response.text
        # Nothing of bob's, beyond the request's own words echoed back.
        shown = response.text
        for echoed in sorted(_strings(kwargs), key=len, reverse=True):
            shown = shown.replace(json.dumps(echoed)[1:-1], "")
        assert MARK not in shown
        assert world.bob_memory not in shown
    assert world.bob_state() == before


@pytest.mark.parametrize(("method", "path", "kwargs", "status"), CASES, ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_every_endpoint_needs_a_key(world: World, method: str, path: str, kwargs: dict[str, Any], status: int) -> None:
    before = world.bob_state()
    with world.client(None) as anonymous:
        response = _send(anonymous, method, path, kwargs, world.bob_memory)
        error_of(response, 401)
        assert response.headers["www-authenticate"] == "Bearer"
        wrong = {"headers": {"Authorization": "Bearer engram_000000000000_forged"}}
        error_of(_send(anonymous, method, path, {**kwargs, **wrong}, world.bob_memory), 401)
    assert world.bob_state() == before


def test_health_needs_no_key(world: World) -> None:
    with world.client(None) as anonymous:
        assert anonymous.get("/health").json()["status"] == "ok"


def test_read_only_key_cannot_write(world: World) -> None:
    writes: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/memories", {"json": {"content": "planted"}}),
        ("POST", "/memories/batch", {"json": {"items": [{"content": "planted"}]}}),
        ("POST", "/outcomes", {"json": {"context": "c", "action": "a", "outcome": "success"}}),
        ("POST", "/failures", {"json": {"error": "planted"}}),
        ("POST", "/episodes", {"json": {"task": "planted"}}),
        ("POST", "/episodes/start", {"json": {"task": "planted"}}),
        ("POST", "/episodes/event", {"json": {"episode_id": "x", "kind": "planted"}}),
        ("POST", "/episodes/end", {"json": {"episode_id": "x"}}),
        ("POST", "/shares", {"json": {"tag": "notes", "to_agent": "bob"}}),
        ("DELETE", "/shares", {"json": {"to_agent": "bob"}}),
        ("POST", "/session/messages", {"json": {"content": "planted"}}),
    ]
    own = world.mem.list(agent="alice")[0]
    writes += [
        ("PATCH", f"/memories/{own.id}", {"json": {"content": "changed"}}),
        ("DELETE", f"/memories/{own.id}", {}),
        ("DELETE", "/memories", {"json": {"confirm": "alice"}}),
        ("POST", "/learning/feedback", {"json": {"memory_ids": [own.id], "outcome": "success"}}),
        ("POST", "/checks", {"json": {"pattern": None, "check_text": "planted"}}),
        ("POST", "/code", {"json": {"source": "def f():\n    return 1\n"}}),
        ("POST", "/knowledge/import", {"json": {"content": "planted"}}),
        ("POST", "/knowledge/seed", {"json": {"pack": "python"}}),
    ]
    count = world.mem.count(agent="alice")
    with world.client("alice-ro", header="x-api-key") as ro:
        for method, path, kwargs in writes:
            assert "read-only" in error_of(ro.request(method, path, **kwargs), 403)
        # Reads work, as alice.
        assert ro.get("/me").json()["agent"] == "alice"
        assert ro.get(f"/memories/{own.id}").json()["content"] == own.content
        assert ro.post("/search", json={"query": "wiki notes"}).json()["hits"][0]["memory"]["id"] == own.id
    assert world.mem.count(agent="alice") == count
    assert world.mem.get(own.id).content == own.content
    assert world.mem.session("alice").messages == []


def test_admin_key_acts_for_any_agent(world: World) -> None:
    with world.client("admin") as admin:
        assert admin.get("/me").json() == {
            "authenticated": True,
            "agent": "root",
            "read_only": False,
            "admin": True,
            "key_id": admin.get("/me").json()["key_id"],
        }
        assert MARK in admin.get(f"/memories/{world.bob_memory}").text
        listed = admin.get("/memories", params={"agent": "bob"}).json()["memories"]
        assert world.bob_memory in {m["id"] for m in listed}
        # Without naming an agent, an admin key lists its own agent's memories.
        assert admin.get("/memories").json()["memories"] == []


def test_revoked_key_stops_working_at_once(world: World) -> None:
    keys = keys_of(world.mem)
    new = keys.create("alice")
    with httpx.Client(base_url=world.url, headers={"X-API-Key": new.token}) as client:
        assert client.get("/me").json()["agent"] == "alice"
        keys.revoke(new.key.id)
        error_of(client.get("/me"), 401)


def test_after_bob_shares_alice_can_read_but_not_change(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        keys = keys_of(mem)
        alice_token, bob_token = keys.create("alice").token, keys.create("bob").token
        ids = _seed_bob(mem)
        b = ids["memory"]
        with (
            serving(create_app(mem)) as url,
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {alice_token}"}) as alice,
            httpx.Client(base_url=url, headers={"X-API-Key": bob_token}) as bob,
        ):
            error_of(alice.get(f"/memories/{b}"), 404)
            shared = bob.post("/shares", json={"memory_ids": [b, ids["failure"]], "to_agent": "alice"})
            assert shared.json() == {"shared": 2}, shared.text
            assert MARK in alice.get(f"/memories/{b}").text
            hits = alice.post("/search", json={"query": f"deploy password {MARK}"}).json()["hits"]
            assert b in [h["memory"]["id"] for h in hits]
            assert b in {m["id"] for m in alice.get("/memories").json()["memories"]}
            assert alice.get("/shares").json()["incoming"]
            # Shared is not owned: alice still cannot change or delete it, nor share it on.
            error_of(alice.patch(f"/memories/{b}", json={"content": "hijacked"}), 404)
            error_of(alice.delete(f"/memories/{b}"), 404)
            error_of(alice.post("/shares", json={"memory_ids": [b], "to_agent": "carol"}), 404)
            assert mem.get(b).content.startswith("Bob's deploy password")
            # Bob takes it back: alice loses it again.
            assert bob.request("DELETE", "/shares", json={"memory_ids": [b], "to_agent": "alice"}).json() == {
                "unshared": 1
            }
            error_of(alice.get(f"/memories/{b}"), 404)


def test_openapi_declares_the_auth_schemes(world: World) -> None:
    with world.client(None) as anonymous:
        spec = anonymous.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert {s["type"] for s in schemes.values()} == {"http", "apiKey"}
    assert any(s.get("scheme") == "bearer" for s in schemes.values())
    assert any(s.get("name") == "X-API-Key" for s in schemes.values())
    assert spec["paths"][f"{API_PREFIX}/memories"]["post"]["security"]

"""The REST API: a real uvicorn server on a loopback port, a real store and model, talked to with httpx."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from rest_helpers import error_of, serving  # noqa: E402

from engramdb import Engram  # noqa: E402 - after the skips: the REST extra is optional
from engramdb.embeddings.base import Embedder  # noqa: E402
from engramdb.interfaces.rest import create_app  # noqa: E402


@contextmanager
def running(mem: Engram) -> Iterator[httpx.Client]:
    """Serve ``mem`` on a free loopback port; a client for it."""
    with serving(create_app(mem)) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client


@pytest.fixture
def api(tmp_path: Path, embedder: Embedder) -> Iterator[httpx.Client]:
    """A client of a fresh server over a fresh on-disk store."""
    with Engram(tmp_path / "store", embedder=embedder) as mem, running(mem) as client:
        yield client


def remember(api: httpx.Client, content: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/memories", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    memory: dict[str, Any] = response.json()
    return memory


def count(api: httpx.Client, agent: str = "default") -> int:
    response = api.get("/memories", params={"agent": agent, "limit": 1000})
    assert response.status_code == 200, response.text
    return len(response.json()["memories"])


# -- memories ------------------------------------------------------------------------------------------


def test_health(api: httpx.Client) -> None:
    response = api.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_remember_then_search_finds_it(api: httpx.Client) -> None:
    m = remember(api, "The staging database runs PostgreSQL 15 on port 5433", agent="alice", tags=["db"])
    remember(api, "Alice prefers tabs over spaces in Go code", agent="alice", kind="preference")
    assert m["agent"] == "alice"
    assert m["kind"] == "knowledge"
    assert m["tags"] == ["db"]

    response = api.post("/search", json={"query": "which port does the staging database use", "agent": "alice"})
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert hits[0]["memory"]["id"] == m["id"]
    assert hits[0]["score"] > 0

    # Filters are the library's hard filters; another agent sees nothing.
    only_prefs = api.post("/search", json={"query": "database port", "agent": "alice", "kind": ["preference"]})
    assert all(h["memory"]["kind"] == "preference" for h in only_prefs.json()["hits"])
    assert api.post("/search", json={"query": "staging database", "agent": "bob"}).json()["hits"] == []


def test_get_patch_history_delete(api: httpx.Client) -> None:
    m = remember(api, "Deploys happen on Tuesdays", agent="alice")
    got = api.get(f"/memories/{m['id']}", params={"agent": "alice"})
    assert got.status_code == 200
    assert got.json()["content"] == "Deploys happen on Tuesdays"

    patched = api.patch(
        f"/memories/{m['id']}",
        params={"agent": "alice"},
        json={"content": "Deploys happen on Thursdays", "tags": ["ops"]},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["content"] == "Deploys happen on Thursdays"
    assert patched.json()["tags"] == ["ops"]
    assert patched.json()["metadata"] == {}  # not sent: unchanged

    changes = api.get(f"/memories/{m['id']}/history").json()["changes"]
    assert [c["action"] for c in changes] == ["create", "update"]
    assert changes[1]["before"]["content"] == "Deploys happen on Tuesdays"

    deleted = api.delete(f"/memories/{m['id']}", params={"agent": "alice"})
    assert deleted.status_code == 204
    assert deleted.content == b""
    error_of(api.get(f"/memories/{m['id']}"), 404)
    assert count(api, "alice") == 0


def test_list_filters_and_pages(api: httpx.Client) -> None:
    api.post(
        "/memories/batch",
        json={
            "items": [
                {"content": f"Fact number {i} about caching layers", "agent": "alice", "tags": ["cache"]}
                for i in range(3)
            ]
            + [{"content": "Use UTC timestamps everywhere", "agent": "alice", "kind": "preference"}]
        },
    ).raise_for_status()
    everything = api.get("/memories", params={"agent": "alice"}).json()["memories"]
    assert len(everything) == 4
    prefs = api.get("/memories", params={"agent": "alice", "kind": "preference"}).json()["memories"]
    assert [m["content"] for m in prefs] == ["Use UTC timestamps everywhere"]
    tagged = api.get("/memories", params={"agent": "alice", "tag": "cache"}).json()["memories"]
    assert len(tagged) == 3
    page = api.get("/memories", params={"agent": "alice", "limit": 2, "offset": 3}).json()
    assert len(page["memories"]) == 1
    assert (page["limit"], page["offset"]) == (2, 3)


def test_other_agents_memory_is_not_found(api: httpx.Client) -> None:
    m = remember(api, "Alice's private API token rotation schedule: monthly", agent="alice")
    path = f"/memories/{m['id']}"
    message = error_of(api.get(path, params={"agent": "bob"}), 404)
    assert m["id"] in message
    error_of(api.patch(path, params={"agent": "bob"}, json={"content": "hijacked"}), 404)
    error_of(api.delete(path, params={"agent": "bob"}), 404)
    error_of(api.get(f"{path}/history", params={"agent": "bob"}), 404)
    # Nothing changed for the owner.
    assert api.get(path, params={"agent": "alice"}).json()["content"] == m["content"]


def test_unknown_memory_and_route_are_404(api: httpx.Client) -> None:
    error_of(api.get("/memories/no-such-id"), 404)
    error_of(api.get("/no/such/route"), 404)


# -- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({}, "content"),  # required field missing
        ({"content": "x", "kind": "gossip"}, "gossip"),  # the library's rule: unknown kind
        ({"content": "x", "tag": ["a"]}, "tag"),  # unknown field (a typo of tags)
        ({"content": 42}, "content"),  # wrong type
        ({"content": "   "}, "content"),  # the library's rule: empty content
        ({"content": "x", "confidence": 7}, "confidence"),
    ],
)
def test_bad_memory_bodies_are_rejected_and_change_nothing(
    api: httpx.Client, body: dict[str, Any], needle: str
) -> None:
    message = error_of(api.post("/memories", json=body), (400, 422))
    assert needle in message
    assert count(api) == 0


def test_malformed_json_and_bad_query_are_rejected(api: httpx.Client) -> None:
    error_of(api.post("/memories", content=b"{not json", headers={"content-type": "application/json"}), (400, 422))
    error_of(api.get("/memories", params={"limit": "many"}), (400, 422))
    error_of(api.get("/memories", params={"limit": 0}), (400, 422))
    error_of(api.post("/search", json={"query": "", "agent": "alice"}), (400, 422))
    assert count(api) == 0


def test_bad_batch_item_rejects_the_whole_batch(api: httpx.Client) -> None:
    items = [{"content": "fine"}, {"content": "bad", "kind": "nonsense"}]
    message = error_of(api.post("/memories/batch", json={"items": items}), (400, 422))
    assert "item 1" in message
    assert count(api) == 0


def test_bad_patch_changes_nothing(api: httpx.Client) -> None:
    m = remember(api, "The cache TTL is 300 seconds")
    path = f"/memories/{m['id']}"
    error_of(api.patch(path, json={"kind": "gossip"}), (400, 422))
    error_of(api.patch(path, json={"agent": "alice"}), (400, 422))  # agent is a query parameter, not a field
    error_of(api.patch(path, json={}), (400, 422))  # nothing to update
    after = api.get(path).json()
    assert (after["kind"], after["content"]) == ("knowledge", "The cache TTL is 300 seconds")
    assert len(api.get(f"{path}/history").json()["changes"]) == 1


# -- learning and failures -----------------------------------------------------------------------------


def test_record_then_suggest_and_choose(api: httpx.Client) -> None:
    context = "the payments API times out during the nightly batch"
    for outcome in ("success", "success", "success", True):
        r = api.post(
            "/outcomes",
            json={"context": context, "action": "retry-with-backoff", "outcome": outcome, "agent": "alice"},
        )
        assert r.status_code == 201, r.text
        assert r.json()["kind"] == "decision"
    for bad in ("failure", -1.0):
        api.post(
            "/outcomes", json={"context": context, "action": "raise-timeout", "outcome": bad, "agent": "alice"}
        ).raise_for_status()

    s = api.post("/suggest", json={"context": context, "agent": "alice"})
    assert s.status_code == 200, s.text
    suggestion = s.json()
    assert suggestion["options"][0]["action"] == "retry-with-backoff"
    assert suggestion["recommended"] in (None, "retry-with-backoff")
    assert 0 <= suggestion["confidence"] <= 1

    chosen = api.post(
        "/choose", json={"context": context, "options": ["retry-with-backoff", "raise-timeout"], "agent": "alice"}
    ).json()["chosen"]
    assert chosen in ("retry-with-backoff", "raise-timeout")

    # Bad outcome: the library's message, nothing recorded.
    before = count(api, "alice")
    error_of(api.post("/outcomes", json={"context": context, "action": "x", "outcome": "meh", "agent": "alice"}), 422)
    error_of(api.post("/outcomes", json={"context": context, "action": "x", "outcome": 3.5, "agent": "alice"}), 422)
    assert count(api, "alice") == before
    # Another agent has no evidence at all.
    assert api.post("/suggest", json={"context": context, "agent": "bob"}).json()["recommended"] is None


def test_failures_solutions_and_patterns(api: httpx.Client) -> None:
    for path in ("/srv/a.db", "/srv/b.db"):
        r = api.post(
            "/failures",
            json={
                "error": f"sqlite3.OperationalError: database is locked: {path}",
                "agent": "alice",
                "solution": "enable WAL mode",
                "failed_solutions": ["sleep and retry"],
            },
        )
        assert r.status_code == 201, r.text
        assert r.json()["kind"] == "failure"

    sols = api.post(
        "/solutions", json={"error": "sqlite3.OperationalError: database is locked: /tmp/c.db", "agent": "alice"}
    ).json()["solutions"]
    assert sols[0]["solution"] == "enable WAL mode"

    patterns = api.get("/failure-patterns", params={"agent": "alice", "recurring": "true"}).json()["patterns"]
    assert len(patterns) == 1
    assert patterns[0]["occurrences"] == 2
    assert api.get("/failure-patterns", params={"agent": "bob"}).json()["patterns"] == []
    error_of(api.post("/failures", json={"error": "", "agent": "alice"}), 422)


# -- sharing and audit ---------------------------------------------------------------------------------


def test_share_unshare_and_audit(api: httpx.Client) -> None:
    m = remember(api, "The on-call rota lives in the ops wiki", agent="alice")
    path = f"/memories/{m['id']}"
    error_of(api.get(path, params={"agent": "bob"}), 404)

    shared = api.post("/shares", json={"memory_ids": [m["id"]], "from_agent": "alice", "to_agent": "bob"})
    assert shared.status_code == 200, shared.text
    assert shared.json() == {"shared": 1}
    assert api.get(path, params={"agent": "bob"}).json()["id"] == m["id"]

    revoked = api.request("DELETE", "/shares", json={"memory_ids": [m["id"]], "from_agent": "alice", "to_agent": "bob"})
    assert revoked.json() == {"unshared": 1}
    error_of(api.get(path, params={"agent": "bob"}), 404)
    # Only the owner can share.
    error_of(api.post("/shares", json={"memory_ids": [m["id"]], "from_agent": "bob"}), 404)

    events = api.get("/audit", params={"agent": "alice", "limit": 50}).json()["events"]
    actions = {e["action"] for e in events}
    assert {"create", "share", "unshare"} <= actions
    assert all(e["agent"] == "alice" for e in events)
    verification = api.get("/audit/verify").json()
    assert verification["ok"] is True


# -- the brain and the short-term session -----------------------------------------------------------------


def test_context_renders_what_the_agent_knows(api: httpx.Client) -> None:
    remember(api, "Deploys to production need the change ticket number in the commit", agent="alice")
    remember(api, "Production deploys use the blue-green script", agent="bob")
    response = api.post("/context", json={"task": "deploy the service to production", "agent": "alice"})
    assert response.status_code == 200, response.text
    ctx = response.json()
    assert (ctx["task"], ctx["agent"], ctx["token_budget"]) == ("deploy the service to production", "alice", 1500)
    assert "change ticket number" in ctx["prompt"]
    assert "blue-green" not in response.text
    assert 0 < ctx["prompt_tokens"] <= 1500
    assert any(s["items"] for s in ctx["sections"])
    small = api.post("/context", json={"task": "deploy", "agent": "alice", "token_budget": 40}).json()
    assert small["prompt_tokens"] <= 40
    # The budget's bounds, an unknown field and a missing task: 422, one line.
    for body in ({"task": "x", "token_budget": 1}, {"task": "x", "budget": 100}, {}, {"task": "   "}):
        error_of(api.post("/context", json=body), 422)


def test_session_messages_then_the_window(api: httpx.Client) -> None:
    assert api.get("/session", params={"agent": "alice"}).json()["messages"] == []
    added = api.post("/session/messages", json={"content": "let's migrate the queue first", "agent": "alice"})
    assert added.status_code == 201, added.text
    assert added.json()["message"]["role"] == "user"
    api.post("/session/messages", json={"content": "ok, queue first", "role": "assistant", "agent": "alice"})
    window = api.get("/session", params={"agent": "alice"}).json()
    assert window["agent"] == "alice"
    assert [(m["role"], m["content"]) for m in window["messages"]] == [
        ("user", "let's migrate the queue first"),
        ("assistant", "ok, queue first"),
    ]
    assert window["tokens"] == sum(m["tokens"] for m in window["messages"])
    assert window["tokens"] <= window["token_budget"]
    # Another agent's window is its own.
    assert api.get("/session", params={"agent": "bob"}).json()["messages"] == []
    # The window is part of the agent's context.
    assert "migrate the queue first" in api.post("/context", json={"task": "queue", "agent": "alice"}).json()["prompt"]
    error_of(api.post("/session/messages", json={"content": "", "agent": "alice"}), 422)
    error_of(api.post("/session/messages", json={"content": "x", "role": 5}), 422)
    error_of(api.get("/session", params={"agent": "alice", "limit": 3}), 422)


def test_storage_failure_is_503_without_traceback(tmp_path: Path, embedder: Embedder) -> None:
    mem = Engram(tmp_path / "store", embedder=embedder)
    mem.close()  # every store call now fails with StorageError
    with running(mem) as client:
        error_of(client.get("/memories"), 503)


# -- the command -------------------------------------------------------------------------------------------


def _engram() -> list[str]:
    exe = shutil.which("engram", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from engramdb.interfaces.cli import main; main()"]


def test_engram_serve_command(tmp_path: Path, embedder: Embedder) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [*_engram(), "serve", "--port", str(port), "--store", str(tmp_path / "store")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            while True:
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
                try:
                    health = client.get("/health")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "engram serve did not start"
                    time.sleep(0.1)
            assert health.json()["status"] == "ok"
            remember(client, "served by the engram command", agent="cli")
            # The dashboard is served at / by the same command.
            home = client.get("/")
            assert home.status_code == 200
            assert home.headers["content-type"].startswith("text/html")
            assert "engramdb dashboard" in home.text
            assert "served by the engram command" in client.get("/ui/memories", params={"agent": "cli"}).text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()
    # The server closed its store cleanly: the memory is there for the next process.
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        assert [m.content for m in mem.list(agent="cli")] == ["served by the engram command"]


def test_route_takes_the_seed_inputs(api: httpx.Client) -> None:
    """Seed 002's routing inputs over REST: ``POST /route`` and ``POST /route/outcomes``."""
    models = ["claude-sonnet-4-20250514", "deepseek-coder:33b"]
    body = {"task": "write the parser", "models": models, "task_type": "code_generation", "complexity": "medium"}
    choice = api.post("/route", json=body)
    assert choice.status_code == 200, choice.text
    assert (choice.json()["model"], choice.json()["fallback"]) == tuple(models)
    long = api.post("/route", json={**body, "task_type": "chat", "complexity": None, "context_length": 64000})
    assert long.json()["model"] == models[0]
    rec = api.post("/route/outcomes", json={"task": "t", "model": models[1], "outcome": "failure"})
    assert rec.status_code == 201, rec.text
    assert "complexity must be one of" in error_of(api.post("/route", json={**body, "complexity": "hard"}), 422)


def test_code_patterns_with_a_name_and_metadata(api: httpx.Client) -> None:
    """Seed 003's ``store_code_pattern(pattern_name, code, language, context, success_metrics)`` over REST."""
    code = "def issue_token(user_id, secret):\n    payload = {'sub': user_id}\n    return jwt.encode(payload, secret)\n"
    body = {
        "source": code,
        "name": "JWT Authentication",
        "context": "REST API authentication",
        "success_metrics": {"success_rate": 1.0},
        "metadata": {"framework": "fastapi"},
    }
    stored = api.post("/code", json=body)
    assert stored.status_code == 201, stored.text
    (memory,) = stored.json()["memories"]
    assert memory["metadata"]["success_metrics"] == {"success_rate": 1.0}
    hits = api.post("/code/suggest", json={"task": "user authentication", "metadata": {"framework": "fastapi"}})
    assert [h["memory"]["id"] for h in hits.json()["hits"]] == [memory["id"]]

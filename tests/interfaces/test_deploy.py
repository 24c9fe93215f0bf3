"""The deployment recipe (issue 9 item 8): two ``engram serve`` in front of one PostgreSQL and one Redis, with keys.

Real processes on loopback, as an operator would run them: ``engram keys create`` makes
the keys, both servers get the same ``--store postgresql://...`` and
``ENGRAM_SESSIONS=redis://...``. A memory written through one server is searchable
through the other, a session message posted through one is in ``GET /session`` through
the other, alice's key gets nothing of bob's through either (memories, search, context,
session, dashboard), and a key revoked with the CLI stops working on both at once.

Needs PostgreSQL (``tests/storage/pg_server.py``) and redis-server
(``tests/sessions/redis_server.py``): skipped without them locally, failed under ``CI=true``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sessions"))

import pg_server
import redis_server
from rest_helpers import error_of

import server_helpers

#: Words only bob's data contains: nothing alice gets may show them.
MARK = "zanzibarquokka"


def _require(*modules: str) -> None:
    """Skip without these modules locally; fail under CI=true (the recipe must run there)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        redis_server.skip_or_fail(f"python packages missing: {', '.join(missing)} (pip install 'engramdb[rest]')")


@pytest.fixture(scope="module", autouse=True)
def _stop_redis_at_end() -> Iterator[None]:
    yield
    redis_server.SERVER.stop()


def _engram() -> list[str]:
    exe = shutil.which("engram", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from engramdb.interfaces.cli import main; main()"]


@contextmanager
def engram_serve(store: str, env: dict[str, str], log: Path) -> Iterator[str]:
    """``engram serve --store STORE`` on a free loopback port until the block ends; its base URL."""
    port = server_helpers.free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*_engram(), "serve", "--port", str(port), "--store", store], env=env, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "engram serve did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_two_servers_one_postgres_one_redis_with_keys(tmp_path: Path) -> None:
    _require("fastapi", "uvicorn", "jinja2", "psycopg", "redis")
    store = pg_server.SERVER.get().new_database()
    sessions = redis_server.SERVER.get().url()
    import redis

    with redis.Redis.from_url(sessions) as r:
        r.flushdb()
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_SESSIONS": sessions}

    def key(agent: str) -> dict[str, str]:
        done = subprocess.run(
            [*_engram(), "keys", "create", "--agent", agent, "--store", store, "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        created: dict[str, str] = json.loads(done.stdout)
        return created

    alice, bob = key("alice"), key("bob")
    with ExitStack() as stack:
        one = stack.enter_context(engram_serve(store, env, tmp_path / "one.log"))
        two = stack.enter_context(engram_serve(store, env, tmp_path / "two.log"))
        assert "API keys required (2 active)" in (tmp_path / "one.log").read_text()

        def client(url: str, token: str) -> httpx.Client:
            return stack.enter_context(httpx.Client(base_url=url, headers={"X-API-Key": token}, timeout=60))

        bob_one, bob_two = client(one, bob["token"]), client(two, bob["token"])
        alice_one, alice_two = client(one, alice["token"]), client(two, alice["token"])

        # Memories: written through one, read and searched through the other.
        written = bob_one.post("/memories", json={"content": f"The {MARK} release train leaves every second Tuesday"})
        assert written.status_code == 201, written.text
        memory = written.json()
        assert memory["agent"] == "bob"
        assert bob_two.get(f"/memories/{memory['id']}").json()["content"] == memory["content"]
        hits = bob_two.post("/search", json={"query": "when does the release train leave"}).json()["hits"]
        assert hits[0]["memory"]["id"] == memory["id"]

        # The short-term session: posted through one, in the window through the other (Redis).
        posted = bob_one.post("/session/messages", json={"content": f"rolling out {MARK} to eu-west first"})
        assert posted.status_code == 201, posted.text
        window = bob_two.get("/session").json()
        assert window["agent"] == "bob"
        assert [m["content"] for m in window["messages"]] == [f"rolling out {MARK} to eu-west first"]
        bob_two.post("/session/messages", json={"content": "then us-east", "role": "assistant"})
        assert [m["content"] for m in bob_one.get("/session").json()["messages"]][-1] == "then us-east"
        # The context served by either server holds both (the memory from PostgreSQL, the window from Redis).
        for bob_client in (bob_one, bob_two):
            prompt = bob_client.post("/context", json={"task": "plan the release rollout"}).json()["prompt"]
            assert "release train" in prompt
            assert "eu-west" in prompt

        # Alice's own session is hers, on both servers.
        alice_two.post("/session/messages", json={"content": "alice is reviewing the docs"})
        assert [m["content"] for m in alice_one.get("/session").json()["messages"]] == ["alice is reviewing the docs"]

        # Alice's key gets nothing of bob's, through either server.
        for alice_client in (alice_one, alice_two):
            error_of(alice_client.get(f"/memories/{memory['id']}"), 404)
            error_of(alice_client.get("/memories", params={"agent": "bob"}), 403)
            error_of(alice_client.get("/session", params={"agent": "bob"}), 403)
            error_of(alice_client.post("/context", json={"task": "release rollout", "agent": "bob"}), 403)
            error_of(alice_client.post("/session/messages", json={"content": "planted", "agent": "bob"}), 403)
            assert alice_client.post("/search", json={"query": f"release train {MARK}"}).json()["hits"] == []
            shown = [
                alice_client.get("/session").text,
                alice_client.post("/context", json={"task": "plan the release rollout"}).json()["prompt"],
                alice_client.get("/memories").text,
            ]
            assert not [s for s in shown if MARK in s or "eu-west" in s]
            # The dashboard, as a browser sends the key (HTTP Basic, the key as password).
            page = httpx.get(alice_client.base_url.join("/ui/memories"), auth=("alice", alice["token"]), timeout=60)
            assert page.status_code == 200, page.text[:300]
            assert MARK not in page.text
            assert alice_client.get("/ui/memories", params={"agent": "bob"}).status_code == 403
        assert [m["content"] for m in bob_one.get("/session").json()["messages"]] == [
            f"rolling out {MARK} to eu-west first",
            "then us-east",
        ]

        # The dashboard is served at / by both; a page without a key asks the browser for one.
        for url in (one, two):
            home = httpx.get(f"{url}/", timeout=60)
            assert home.status_code == 200
            assert "engramdb dashboard" in home.text
            refused = httpx.get(f"{url}/ui/memories", timeout=60)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Basic")
        assert MARK in bob_two.get("/ui/memories").text

        # Bob shares through server two; alice reads through server one.
        assert bob_two.post("/shares", json={"memory_ids": [memory["id"]], "to_agent": "alice"}).json() == {"shared": 1}
        assert alice_one.get(f"/memories/{memory['id']}").status_code == 200
        # A key revoked with the CLI stops working on both servers at once.
        subprocess.run([*_engram(), "keys", "revoke", alice["id"], "--store", store], env=env, check=True)
        error_of(alice_one.get("/me"), 401)
        error_of(alice_two.get("/session"), 401)

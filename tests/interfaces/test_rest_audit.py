"""``GET /audit`` narrows by memory and action, and ``GET /audit/verify`` checks a kept head, like the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from rest_helpers import error_of, serving

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.rest import create_app


@pytest.fixture
def api(tmp_path: Path, embedder: Embedder) -> Iterator[httpx.Client]:
    """A client of a fresh server over a fresh on-disk store."""
    with (
        Engram(tmp_path / "store", embedder=embedder) as mem,
        serving(create_app(mem)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        yield client


def test_audit_log_narrows_by_memory_and_action(api: httpx.Client) -> None:
    first = api.post("/memories", json={"content": "The cache TTL is 300 seconds", "agent": "alice"}).json()
    api.post("/memories", json={"content": "Deploys happen on Tuesdays", "agent": "alice"})
    assert api.post("/search", json={"query": "cache TTL", "agent": "alice"}).status_code == 200

    about = api.get("/audit", params={"agent": "alice", "memory": first["id"]})
    assert about.status_code == 200, about.text
    assert {e["memory_id"] for e in about.json()["events"]} == {first["id"]}
    assert "create" in {e["action"] for e in about.json()["events"]}

    searches = api.get("/audit", params={"agent": "alice", "action": "search"}).json()["events"]
    assert [e["action"] for e in searches] == ["search"]
    assert api.get("/audit", params={"agent": "alice", "action": "create"}).json()["events"][0]["action"] == "create"

    assert "memory id" in error_of(api.get("/audit", params={"memory": ""}), 422)


def test_audit_verify_checks_a_kept_head(api: httpx.Client) -> None:
    api.post("/memories", json={"content": "The cache TTL is 300 seconds"})
    head = api.get("/audit/verify").json()["head"]
    api.post("/memories", json={"content": "Deploys happen on Tuesdays"})

    kept = api.get("/audit/verify", params={"expect": head})
    assert kept.status_code == 200, kept.text
    assert kept.json()["ok"] is True
    seq = head.split(":")[0]
    forged = api.get("/audit/verify", params={"expect": f"{seq}:{'0' * 64}"}).json()
    assert forged["ok"] is False
    assert forged["reason"]
    assert "SEQ:HASH" in error_of(api.get("/audit/verify", params={"expect": "banana"}), 422)

"""``engram mcp --transport http`` answers ``/health`` and ``/metrics`` beside ``/mcp``, as ``engram serve`` does."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from rest_helpers import serving

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.mcp import MCP_PATH, create_http_app

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[tuple[Engram, str, str]]:
    with Engram(tmp_path_factory.mktemp("mcp-ops") / "store", embedder=embedder) as mem:
        token = mem.keys.create(agent="alice").token
        mem.remember("The deploy window is Tuesday", agent="alice")
        with serving(create_http_app(mem, allow_unauthenticated=False)) as url:
            yield mem, url, token


def test_health_needs_no_key_and_says_the_store_and_model_are_ready(served: tuple[Engram, str, str]) -> None:
    mem, url, _ = served
    response = httpx.get(url + "/health", timeout=60)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok"
    assert body["model"] == mem.embedder.model_id
    assert body["store"]["ready"]
    assert body["embedder"]["ready"]


def test_metrics_need_a_key_and_count_mcp_requests_by_route(served: tuple[Engram, str, str]) -> None:
    _, url, token = served
    with httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/metrics").status_code == 401
        refused = client.post(MCP_PATH, json=PING, headers=ACCEPT)  # no key: refused, and counted
        assert refused.status_code == 401
        answer = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    text = answer.text
    assert 'engram_http_requests_total{method="POST",route="/mcp",status="401"}' in text
    assert 'engram_http_requests_total{method="GET",route="/metrics",status="401"}' in text
    assert "engram_store_memories 1.0" in text


def test_other_paths_are_counted_as_unmatched(served: tuple[Engram, str, str]) -> None:
    _, url, token = served
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/no-such-path").status_code == 404
        text = client.get("/metrics").text
    assert 'route="unmatched",status="404"' in text

"""The metadata filter of ``search``/``list``/``count`` through every interface: REST, the remote and async
clients, MCP and the CLI give what the library gives, and refuse a bad filter with one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from cli_helpers import fails, ok_json
from rest_helpers import error_of, serving

from engramdb import AsyncEngram, Engram, RemoteEngram
from engramdb.embeddings.base import Embedder
from engramdb.errors import ValidationError
from engramdb.interfaces.rest import create_app

OAUTH = "OAuth2 Implementation Pattern with refresh tokens"
PYTHON = {"language": "python", "framework": "fastapi"}


def _fill(mem: Engram) -> dict[str, str]:
    return {
        "fastapi": mem.remember(f"{OAUTH} (fastapi)", agent="swarm", metadata=PYTHON).id,
        "flask": mem.remember(f"{OAUTH} (flask)", agent="swarm", metadata={"language": "python", "stars": 5}).id,
        "express": mem.remember(f"{OAUTH} (express)", agent="swarm", metadata={"language": "javascript"}).id,
    }


@pytest.fixture
def served(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[str, dict[str, str]]]:
    with Engram(tmp_path / "rest", embedder=embedder) as mem, serving(create_app(mem)) as url:
        yield url, _fill(mem)


def test_rest_search_list_and_count_filter_on_metadata(served: tuple[str, dict[str, str]]) -> None:
    url, ids = served
    with httpx.Client(base_url=url, timeout=60) as rest:
        body = {"query": "OAuth2 implementation", "agent": "swarm", "metadata": PYTHON}
        hits = rest.post("/search", json=body).json()["hits"]
        assert [h["memory"]["id"] for h in hits] == [ids["fastapi"]]
        listed = rest.get("/memories", params={"agent": "swarm", "metadata": '{"stars": 5}'}).json()["memories"]
        assert [m["id"] for m in listed] == [ids["flask"]]
        count = rest.get("/count", params={"agent": "swarm", "metadata": '{"language": "python"}'}).json()
        assert count == {"count": 2}
        assert "metadata filter must be a JSON object" in error_of(
            rest.get("/memories", params={"agent": "swarm", "metadata": "language=python"}), (400, 422)
        )
        bad = {**body, "metadata": {"language": ["python"]}}
        assert "must be a string, number, true/false or null" in error_of(rest.post("/search", json=bad), (400, 422))


def test_remote_and_async_clients_send_the_filter(served: tuple[str, dict[str, str]]) -> None:
    url, ids = served
    with RemoteEngram(url) as remote:
        hits = remote.search("OAuth2 implementation", agent="swarm", metadata={"language": "python"})
        assert {h.memory.id for h in hits} == {ids["fastapi"], ids["flask"]}
        assert [m.id for m in remote.list(agent="swarm", metadata={"language": "javascript"})] == [ids["express"]]
        assert remote.count(agent="swarm", metadata=PYTHON) == 1
        with pytest.raises(ValidationError, match="must be a finite number"):
            remote.list(agent="swarm", metadata={"stars": float("inf")})

    async def scenario() -> int:
        async with AsyncEngram(url) as amem:
            return await amem.count(agent="swarm", metadata={"stars": 5.0})

    assert anyio.run(scenario) == 1


def test_mcp_tools_filter_on_metadata(tmp_path: Path, embedder: Embedder) -> None:
    pytest.importorskip("mcp")
    from test_mcp import is_error, payload, run, text_of

    store = tmp_path / "store"
    with Engram(store, embedder=embedder) as mem:
        ids = _fill(mem)

    async def scenario(session: Any) -> None:
        found = payload(await session.call_tool("search", {"query": "OAuth2", "agent": "swarm", "metadata": PYTHON}))
        assert [h["memory"]["id"] for h in found["hits"]] == [ids["fastapi"]]
        counted = payload(await session.call_tool("count", {"agent": "swarm", "metadata": {"language": "python"}}))
        assert counted["count"] == 2
        listed = payload(await session.call_tool("list", {"agent": "swarm", "metadata": {"stars": 5}}))
        assert [m["id"] for m in listed["memories"]] == [ids["flask"]]
        bad = await session.call_tool("count", {"agent": "swarm", "metadata": {"stars": [5]}})
        assert is_error(bad)
        assert "metadata filter value of 'stars'" in text_of(bad)
        assert "\n" not in text_of(bad)

    run(store, scenario)


def test_cli_meta_option_filters_search_and_list(tmp_path: Path, embedder: Embedder) -> None:
    store = str(tmp_path / "store")
    with Engram(store, embedder=embedder) as mem:
        ids = _fill(mem)
    base = ("--store", store)
    hits = ok_json(
        *base, "memory", "search", "OAuth2", "--agent", "swarm", "--meta", "language=python", "-m", "stars=5"
    )
    assert [h["memory"]["id"] for h in hits] == [ids["flask"]]
    listed = ok_json(*base, "memory", "list", "--agent", "swarm", "--meta", "framework=fastapi")
    assert [m["id"] for m in listed] == [ids["fastapi"]]
    # A quoted JSON string is a string: "5" is not 5.
    assert ok_json(*base, "memory", "list", "--agent", "swarm", "--meta", 'stars="5"') == []
    assert "bad --meta 'language': expected KEY=VALUE" in fails(*base, "memory", "list", "--meta", "language")
    assert json.loads(json.dumps(listed))  # plain JSON out

"""``add`` with an LLM configured, through the CLI, REST and MCP (issue 23: "with and without an LLM" everywhere).

The LLM is configured as users do it (``ENGRAM_LLM`` and friends in the environment) and is a real
OpenAI-protocol server on loopback answering with mem0-style decisions; each interface's answer says the
LLM decided (``extractor``), and the fact it added is stored in the user's scope.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ok_json

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from llm_server import FakeServer, Reply

CHAT = [{"role": "user", "content": "We adopted a dog last week, his name is Rex."}]
DECIDED = Reply(json.dumps({"facts": [{"event": "ADD", "text": "The user has a dog named Rex.", "key": "pet:dog"}]}))


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """The loopback LLM, configured through the environment (also seen by subprocesses)."""
    server = FakeServer()
    server.answer = lambda request: DECIDED
    monkeypatch.setenv("ENGRAM_LLM", "openai:test-model")
    monkeypatch.setenv("ENGRAM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("ENGRAM_LLM_KEY_ENV", "TEST_LLM_KEY")
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    yield server
    server.stop()


def _check(result: dict[str, Any], server: FakeServer) -> None:
    assert result["extractor"] == "llm:openai:test-model"
    assert [(f["action"], f["memory"]["content"], f["memory"]["user"]) for f in result["facts"]] == [
        ("add", "The user has a dog named Rex.", "ann")
    ]
    assert "his name is Rex" in server.requests[-1]["messages"][-1]["content"]


def test_cli_add_with_an_llm(llm: FakeServer, tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT), encoding="utf-8")
    store = str(tmp_path / "store")
    _check(ok_json("memory", "add", str(chat), "--agent", "bot", "--user", "ann", "--store", store), llm)


def test_rest_add_with_an_llm(llm: FakeServer, tmp_path: Path, embedder: Embedder) -> None:
    pytest.importorskip("fastapi")
    import httpx
    from rest_helpers import serving

    from engramdb.interfaces.rest import create_app

    with (
        Engram(tmp_path / "rest", embedder=embedder) as mem,
        serving(create_app(mem)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        response = client.post("/memories/add", json={"messages": CHAT, "agent": "bot", "user": "ann"})
        assert response.status_code == 201, response.text
        _check(response.json(), llm)
        assert mem.recall_key("pet:dog", agent="bot", user="ann").content == "The user has a dog named Rex."


def test_mcp_add_with_an_llm(llm: FakeServer, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import payload, run

    async def scenario(session: Any) -> None:
        args = {"messages": CHAT, "agent": "bot", "user": "ann"}
        _check(payload(await session.call_tool("add_conversation", args)), llm)

    run(tmp_path / "store", scenario)

"""``add`` through every interface: ``engram memory add`` (file, stdin), REST ``POST /memories/add``, MCP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import fails, ok, ok_json

from engramdb import Engram
from engramdb.embeddings.base import Embedder

FIRST = [
    {"role": "user", "content": "Hi, I'm Sam. I live in Paris and I prefer vim."},
    {"role": "assistant", "content": "Nice to meet you, Sam!"},
]
MOVED = [{"role": "user", "content": "I moved to Berlin last month."}]


# -- CLI -------------------------------------------------------------------------------------------------------


def test_cli_adds_from_a_file_and_a_changed_fact_from_stdin_supersedes(tmp_path: Path, store: str) -> None:
    first = tmp_path / "first.json"
    first.write_text(json.dumps(FIRST))
    out = ok("--store", store, "memory", "add", str(first), "--agent", "bot")
    assert "Stored 2 turns for agent 'bot'; facts: 3 added (rules)." in out
    assert "The user lives in Paris." in out
    res = ok_json("--store", store, "memory", "add", "-", "--agent", "bot", stdin=json.dumps({"messages": MOVED}))
    assert res["superseded"] == 1
    assert [(f["action"], f["key"], f["previous"]) for f in res["facts"]] == [
        ("supersede", "home", "The user lives in Paris.")
    ]
    home = ok_json("--store", store, "memory", "key", "home", "--agent", "bot")
    assert home["content"] == "The user lives in Berlin."


def test_cli_reads_json_lines_from_stdin_without_a_file_argument(store: str) -> None:
    lines = "\n".join(json.dumps(m) for m in FIRST)
    res = ok_json("--store", store, "memory", "add", "--at", "2026-03-01", stdin=lines)
    assert [t["occurred_at"] for t in res["turns"]] == ["2026-03-01T00:00:00+00:00"] * 2


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("", "standard input is empty"),
        ("not json", "neither JSON nor JSON Lines"),
        ('{"role": "user", "content": "hi"}', "messages must be a list"),
        ('[{"role": "robot", "content": "hi"}]', "unknown role 'robot'"),
        ('[{"role": "user"}]', "message 0 has no content"),
        ('[{"role": "user", "content": 3}]', "content must be a string"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(store: str, stdin: str, message: str) -> None:
    assert message in fails("--store", store, "memory", "add", stdin=stdin)
    assert not Path(store).exists() or ok_json("--store", store, "memory", "list") == []


def test_cli_missing_file(store: str) -> None:
    assert fails("--store", store, "memory", "add", "/no/such/file.json") == "error: no such file: /no/such/file.json"


# -- REST ------------------------------------------------------------------------------------------------------

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from rest_helpers import error_of, serving  # noqa: E402

from engramdb.interfaces.rest import create_app  # noqa: E402


@pytest.fixture
def rest(tmp_path: Path, embedder: Embedder) -> Iterator[Any]:
    with (
        Engram(tmp_path / "rest", embedder=embedder) as mem,
        serving(create_app(mem)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        yield client


def test_rest_add_and_supersede(rest: Any) -> None:
    response = rest.post("/memories/add", json={"messages": FIRST, "agent": "bot", "at": "2026-03-01T09:00:00Z"})
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["added"], len(body["turns"]), body["extractor"]) == (3, 2, "rules")
    moved = rest.post("/memories/add", json={"messages": MOVED, "agent": "bot"}).json()
    assert [(f["action"], f["memory"]["content"]) for f in moved["facts"]] == [
        ("supersede", "The user lives in Berlin.")
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": "hello"}, "messages must be a list"),
        ({"messages": [{"role": "user", "content": ["a"]}]}, "content must be a string"),
        ({"messages": [{"role": "bot", "content": "a"}]}, "unknown role 'bot'"),
        ({"messages": [{"content": "a"}]}, "message 0 has no role"),
        ({"messages": FIRST, "colour": 1}, "colour"),
        ({}, "messages"),
    ],
)
def test_rest_bad_input_is_a_one_line_400_and_writes_nothing(rest: Any, body: dict[str, Any], message: str) -> None:
    assert message in error_of(rest.post("/memories/add", json=body), (400, 422))
    assert rest.get("/memories", params={"limit": 10}).json()["memories"] == []


# -- MCP -------------------------------------------------------------------------------------------------------


def test_mcp_add_conversation_tool(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import is_error, payload, run, text_of

    async def scenario(session: Any) -> None:
        first = payload(await session.call_tool("add_conversation", {"messages": FIRST, "agent": "bot"}))
        assert first["added"] == 3
        moved = payload(await session.call_tool("add_conversation", {"messages": MOVED, "agent": "bot"}))
        assert moved["superseded"] == 1
        bad = await session.call_tool("add_conversation", {"messages": [{"role": "user", "content": 1}]})
        assert is_error(bad)
        assert "message 0: content must be a string" in text_of(bad)
        assert "\n" not in text_of(bad)

    run(tmp_path / "store", scenario)

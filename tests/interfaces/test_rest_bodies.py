"""Request bodies that are not strict JSON: one clear 422 line from a real server, and nothing stored.

FastAPI alone answered these with ``body.1: JSON decode error``, a 400 ``There was an error
parsing the body`` (bad UTF-8, deep nesting) or ``body: Field required`` (no body), and kept the
last of two duplicate keys silently.
"""

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

JSON = {"content-type": "application/json"}


@pytest.fixture
def api(tmp_path: Path, embedder: Embedder) -> Iterator[httpx.Client]:
    """A client of a fresh server over a fresh on-disk store."""
    with (
        Engram(tmp_path / "store", embedder=embedder) as mem,
        serving(create_app(mem)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        yield client


def stored(api: httpx.Client) -> int:
    response = api.get("/memories", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return len(response.json()["memories"])


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"content": "x"', "not valid JSON: Expecting ',' delimiter (line 1, column 16)"),
        (b"{not json", "not valid JSON: Expecting property name"),
        (b"", "the request body is empty"),
        (b"[]", "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
        (b'{"content": "a", "content": "b"}', "the key 'content' appears twice"),
        (b'{"content": "x", "confidence": NaN}', "NaN is not a JSON value"),
        (b'{"content": "x", "confidence": -Infinity}', "-Infinity is not a JSON value"),
        (b'{"content": "x", "metadata": {"big": 1e400}}', "the number 1e400 is out of range"),
        (b'{"content": "caf\xe9"}', "not valid UTF-8 (byte 16)"),
        (b'{"content": "x", "metadata": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001, "nested too deeply"),
    ],
)
def test_a_body_that_is_not_strict_json_is_one_clear_422(api: httpx.Client, body: bytes, needle: str) -> None:
    message = error_of(api.post("/memories", content=body, headers=JSON), 422)
    assert needle in message
    assert stored(api) == 0


def test_every_body_endpoint_reads_strict_json(api: httpx.Client) -> None:
    m = api.post("/memories", json={"content": "The cache TTL is 300 seconds"}).json()
    patch = api.patch(f"/memories/{m['id']}", content=b'{"content": "a", "content": "b"}', headers=JSON)
    assert "appears twice" in error_of(patch, 422)
    assert "not valid JSON" in error_of(api.post("/search", content=b'{"query": ', headers=JSON), 422)
    assert api.get(f"/memories/{m['id']}").json()["content"] == "The cache TTL is 300 seconds"
    assert len(api.get(f"/memories/{m['id']}/history").json()["changes"]) == 1


def test_strict_json_still_takes_ordinary_bodies(api: httpx.Client) -> None:
    body = b'{"content": "Staging DB listens on port 5433", "confidence": 0.75, "metadata": {"n": [1, 2.5e3, null]}}'
    response = api.post("/memories", content=body, headers=JSON)
    assert response.status_code == 201, response.text
    assert response.json()["metadata"] == {"n": [1, 2500.0, None]}
    assert response.json()["confidence"] == 0.75


def test_shares_of_an_empty_agent_name_the_agent_parameter(api: httpx.Client) -> None:
    message = error_of(api.get("/shares", params={"agent": ""}), 422)
    assert message == "agent must be a non-empty name without surrounding whitespace, not ''"

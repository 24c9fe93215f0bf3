"""The dashboard served by the REST app (what ``engram serve`` runs): HTML at ``/`` and ``/ui/...``.

Same keys as the API (a browser sends its key as HTTP Basic authentication's password,
asked for by a 401 ``WWW-Authenticate: Basic``), same Host and cross-site checks; the
pages check their own query parameters (an HTML 400 page, not the API's JSON 422).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from rest_helpers import error_of, serving

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.rest import create_app

#: Words only bob's memories contain: a page shown to alice must never show them.
MARK = "zanzibarquokka"


@dataclass
class Served:
    mem: Engram
    url: str
    tokens: dict[str, str]


def _seed(mem: Engram) -> None:
    mem.remember("Alice keeps her notes in the wiki", agent="alice")
    mem.remember(f"Bob's deploy password rotation {MARK} schedule", agent="bob")


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Served]:
    """A store without keys, served as ``engram serve`` does on loopback (trusted callers)."""
    with Engram(tmp_path_factory.mktemp("dash-open") / "store", embedder=embedder) as mem:
        _seed(mem)
        with serving(create_app(mem)) as url:
            yield Served(mem, url, {})


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Served]:
    """A store with keys: every page needs one."""
    with Engram(tmp_path_factory.mktemp("dash-keys") / "store", embedder=embedder) as mem:
        _seed(mem)
        tokens = {
            "alice": mem.keys.create("alice").token,
            "admin": mem.keys.create("root", admin=True).token,
        }
        with serving(create_app(mem, allow_unauthenticated=False)) as url:
            yield Served(mem, url, tokens)


def _html(response: httpx.Response, status: int = 200) -> str:
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("text/html")
    assert "Traceback" not in response.text
    return response.text


def test_root_is_the_dashboard(open_server: Served) -> None:
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        page = _html(client.get("/"))
        assert "engramdb dashboard" in page
        assert 'action="/ui/memories"' in page
        shown = _html(client.get("/ui/memories", params={"agent": "alice"}))
        assert "notes in the wiki" in shown
        assert MARK not in shown
        # The API is still there, beside it.
        assert client.get("/health").json()["status"] == "ok"


def test_the_pages_check_their_own_parameters(open_server: Served) -> None:
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        # The dashboard's unknown parameter: its own HTML page (the API's check skips its routes), with the
        # status the API gives the same error: one map, one meaning.
        page = _html(client.get("/ui/memories", params={"agent": "alice", "colour": "red"}), 422)
        assert "colour" in page
        _html(client.get("/ui/memories", params={"agent": "alice", "limit": "many"}), 422)
        # The API's unknown parameter: its JSON 422.
        assert "colour" in error_of(client.get("/memories", params={"colour": "red"}), 422)


def test_the_dashboard_is_not_in_the_api_schema(open_server: Served) -> None:
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert "/" not in paths
    assert not [p for p in paths if p.startswith("/ui")]
    assert {"/v1/memories", "/v1/context", "/v1/session", "/v1/session/messages"} <= set(paths)


def test_pages_need_a_key_and_a_browser_is_asked_for_one(keyed_server: Served) -> None:
    with httpx.Client(base_url=keyed_server.url, timeout=60) as client:
        for page in ("/ui/memories", "/ui/learning", "/ui/failures", "/ui/shares", "/ui/audit"):
            refused = client.get(page)
            text = _html(refused, 401)
            assert MARK not in text
            # The browser's login prompt: HTTP Basic, the key as the password.
            assert refused.headers["www-authenticate"].startswith("Basic realm=")
        wrong = client.get("/ui/memories", auth=("anyone", "engram_000000000000_forged"))
        _html(wrong, 401)
        # The API's own refusal is unchanged (JSON, Bearer).
        refused_api = client.get("/memories")
        error_of(refused_api, 401)
        assert refused_api.headers["www-authenticate"] == "Bearer"


def test_a_key_shows_its_agents_pages_only(keyed_server: Served) -> None:
    alice = keyed_server.tokens["alice"]
    with httpx.Client(base_url=keyed_server.url, timeout=60, auth=("alice", alice)) as browser:
        page = _html(browser.get("/ui/memories"))
        assert "notes in the wiki" in page
        assert MARK not in page
        _html(browser.get("/ui/memories", params={"agent": "bob"}), 403)
        found = _html(browser.get("/ui/memories", params={"q": f"deploy password {MARK}"}))
        assert "Bob's deploy" not in found
    # The API's headers work on the pages too (a script may fetch them).
    with httpx.Client(base_url=keyed_server.url, timeout=60, headers={"X-API-Key": alice}) as script:
        assert "notes in the wiki" in _html(script.get("/ui/memories"))
    # An admin key may look at any agent's pages.
    admin = keyed_server.tokens["admin"]
    with httpx.Client(base_url=keyed_server.url, timeout=60, auth=("root", admin)) as root:
        assert MARK in _html(root.get("/ui/memories", params={"agent": "bob"}))


def test_the_pages_pass_the_host_and_cross_site_checks(keyed_server: Served) -> None:
    alice = keyed_server.tokens["alice"]
    with httpx.Client(base_url=keyed_server.url, timeout=60, auth=("alice", alice)) as browser:
        error_of(browser.get("/ui/memories", headers={"Host": "evil.example"}), 421)
        error_of(browser.get("/", headers={"Host": "evil.example"}), 421)
        error_of(browser.get("/ui/memories", headers={"Sec-Fetch-Site": "cross-site"}), 403)
        error_of(browser.get("/ui/memories", headers={"Origin": "http://evil.example"}), 403)
        # A same-origin navigation is fine.
        assert browser.get("/ui/memories", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def test_a_server_refusing_trusted_callers_refuses_pages_without_keys(tmp_path: Path, embedder: Embedder) -> None:
    # No keys in the store and trusted callers not allowed (engram serve off loopback without
    # --allow-unauthenticated never starts; an app built this way refuses): the pages ask for a key.
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        _seed(mem)
        with serving(create_app(mem, allow_unauthenticated=False)) as url, httpx.Client(base_url=url) as client:
            _html(client.get("/ui/memories", params={"agent": "bob"}), 401)
            error_of(client.get("/memories", params={"agent": "bob"}), 401)

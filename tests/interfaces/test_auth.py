"""API keys (engramdb.services.keys), the ``engram keys`` commands, and the HTTP servers' host and startup policy."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest
from cli_helpers import fails, ok, ok_json

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.errors import NotFound, ValidationError
from engramdb.interfaces._access import Caller, allowed_host_names, host_name
from engramdb.services.keys import META_KEY, AccessDenied


def test_only_a_hash_is_stored(mem: Engram) -> None:
    keys = mem.keys
    new = keys.create("alice", label="laptop")
    raw = mem.store.meta.get(META_KEY)
    assert raw is not None
    assert new.token not in raw
    assert new.token.split("_")[-1] not in raw
    assert hashlib.sha256(new.token.encode()).hexdigest() in raw
    assert len(new.token) > 40
    assert keys.authenticate(new.token) == new.key
    assert keys.authenticate(new.token + "x") is None
    assert keys.authenticate(new.token[:-1] + ("A" if new.token[-1] != "A" else "B")) is None
    assert keys.authenticate("engram_nope") is None
    assert keys.authenticate("bad \ud800") is None
    assert [k.to_dict()["label"] for k in keys.list()] == ["laptop"]
    assert "token" not in keys.list()[0].to_dict()


def test_revoke_and_validation(mem: Engram) -> None:
    keys = mem.keys
    a, b = keys.create("alice"), keys.create("bob", read_only=True)
    assert keys.configured()
    assert keys.revoke(a.key.id).revoked_at is not None
    assert keys.authenticate(a.token) is None
    assert keys.authenticate(b.token) == b.key
    assert [k.id for k in keys.list(include_revoked=False)] == [b.key.id]
    with pytest.raises(NotFound):
        keys.revoke("nope")
    for bad in ("", " alice", "a\nb", "x" * 300, "bad \ud800"):
        with pytest.raises(ValidationError):
            keys.create(bad)
    keys.revoke(b.key.id)
    assert not keys.configured()


def test_caller_policy(mem: Engram) -> None:
    keys = mem.keys
    alice = Caller(keys.create("alice").key)
    assert alice.agent(None) == alice.agent("alice") == "alice"
    assert alice.scope(None) == "alice"
    with pytest.raises(AccessDenied, match="bob"):
        alice.agent("bob")
    ro = Caller(keys.create("alice", read_only=True).key)
    with pytest.raises(AccessDenied, match="read-only"):
        ro.require_write()
    admin = Caller(keys.create("root", admin=True).key)
    assert admin.agent("bob") == "bob"
    assert admin.scope(None) is None
    trusted = Caller()
    assert (trusted.agent(None), trusted.agent("bob"), trusted.scope(None)) == ("default", "bob", None)


def test_host_names() -> None:
    assert host_name("Example.COM:8765") == "example.com"
    assert host_name("[::1]:80") == "[::1]"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert allowed_host_names("127.0.0.1") == frozenset({"127.0.0.1", "localhost", "[::1]"})
    assert allowed_host_names("::1") == frozenset({"127.0.0.1", "localhost", "[::1]"})
    assert allowed_host_names("10.0.0.5", ["api.example.com"]) == frozenset({"10.0.0.5", "api.example.com"})
    assert allowed_host_names("0.0.0.0") == frozenset()
    assert allowed_host_names("0.0.0.0", ["*"]) is None


def test_keys_commands(store: str) -> None:
    created = ok_json("keys", "create", "--agent", "alice", "--read-only", "--store", store)
    assert created["agent"] == "alice"
    assert created["read_only"] is True
    assert created["token"].startswith("engram_")
    token_only = ok("keys", "create", "--agent", "bob", "--admin", "--store", store)
    assert token_only.strip().startswith("engram_")
    listed = ok_json("keys", "list", "--store", store)["keys"]
    assert [(k["agent"], k["admin"]) for k in listed] == [("alice", False), ("bob", True)]
    assert all("token" not in k and "sha256" not in k for k in listed)
    assert "alice" in ok("keys", "list", "--store", store)
    assert ok_json("keys", "revoke", created["id"], "--store", store)["active"] is False
    assert "no API key" in fails("keys", "revoke", "nope", "--store", store)
    assert "agent" in fails("keys", "create", "--agent", "", "--store", store)


def test_serve_refuses_a_public_address_without_keys(store: str) -> None:
    message = fails("serve", "--host", "0.0.0.0", "--allowed-host", "api.example.com", "--store", store)
    assert "--allow-unauthenticated" in message
    no_name = fails("mcp", "--transport", "http", "--host", "0.0.0.0", "--allow-unauthenticated", "--store", store)
    assert "--allowed-host" in no_name


def test_dns_rebinding_and_cross_site_requests_are_refused(tmp_path: Path, embedder: Embedder) -> None:
    pytest.importorskip("fastapi")
    from rest_helpers import error_of, serving

    from engramdb.interfaces.rest import create_app

    with Engram(tmp_path / "store", embedder=embedder) as mem, serving(create_app(mem)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            body = json.dumps({"content": "planted by a web page"})
            assert client.get("/health", headers={"Host": "localhost:1234"}).status_code == 200
            error_of(client.get("/memories", headers={"Host": "attacker.example:8765"}), 421)
            error_of(client.post("/memories", content=body, headers={"Host": "rebind.attacker.example"}), 421)
            # A cross-site form or fetch without preflight: simple content types and foreign origins are refused.
            error_of(client.post("/memories", content=body, headers={"Content-Type": "text/plain"}), 415)
            json_headers = {"Content-Type": "application/json"}
            error_of(client.post("/memories", content=body, headers={**json_headers, "Origin": "http://evil"}), 403)
            error_of(
                client.post("/memories", content=body, headers={**json_headers, "Sec-Fetch-Site": "cross-site"}), 403
            )
            error_of(client.get("/memories", headers={"Origin": "null"}), 403)
            same = client.post("/memories", content=body, headers={**json_headers, "Origin": url})
            assert same.status_code == 201
            error_of(client.get("/memories", params={"agnet": "alice"}), 422)
        assert mem.count() == 1

"""The remote client raises the library's own errors for a server's refusals, and rebuilds values losslessly."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "interfaces"))

from rest_helpers import serving

from engramdb import (
    AccessDenied,
    Change,
    ConfigError,
    Engram,
    EngramError,
    Hit,
    Memory,
    NotAuthenticated,
    NotFound,
    RemoteEngram,
    StorageError,
    ValidationError,
)
from engramdb.interfaces.rest import create_app
from engramdb.models._decode import from_dict


@pytest.fixture(scope="module")
def keyed(tmp_path_factory, embedder):
    with Engram(tmp_path_factory.mktemp("keys") / "store", embedder=embedder) as mem:
        tokens = {
            "alice": mem.keys.create("alice").token,
            "ro": mem.keys.create("alice", read_only=True).token,
            "admin": mem.keys.create("root", admin=True).token,
        }
        mem.remember("bob's private note", agent="bob")
        with serving(create_app(mem)) as url:
            yield url, tokens


def test_keys_errors_map_to_the_library_errors(keyed, monkeypatch):
    url, tokens = keyed
    with Engram(url) as anonymous, pytest.raises(NotAuthenticated, match="API key"):
        anonymous.search("x")
    with Engram(url, api_key="engram_000000000000_forged") as forged, pytest.raises(NotAuthenticated):
        forged.count()
    with Engram(url, api_key=tokens["alice"]) as alice:
        m = alice.remember("alice's own note")  # no agent named: the key's agent
        assert m.agent == "alice"
        with pytest.raises(AccessDenied, match="bob"):
            alice.list(agent="bob")
        with pytest.raises(PermissionError):  # AccessDenied is a PermissionError, remotely too
            alice.keys.list()
    with Engram(url, api_key=tokens["ro"]) as ro, pytest.raises(AccessDenied, match="read-only"):
        ro.remember("planted")
    monkeypatch.setenv("ENGRAM_API_KEY", tokens["admin"])
    with Engram(url) as admin:  # the key from the environment
        assert {k.agent for k in admin.keys.list()} >= {"alice", "root"}
        assert admin.count(agent="bob") == 1


def test_environment_url_and_bad_locations(keyed, monkeypatch):
    url, tokens = keyed
    monkeypatch.setenv("ENGRAM_URL", url)
    monkeypatch.setenv("ENGRAM_API_KEY", tokens["alice"])
    with Engram() as mem:
        assert isinstance(mem, RemoteEngram)
        assert mem.count() >= 1
    with pytest.raises(ConfigError, match="embedder"):
        Engram(url, embedder="static")
    with pytest.raises(ConfigError, match="api_key"):
        Engram(":memory:", api_key="k")
    with Engram("http://127.0.0.1:9") as nowhere, pytest.raises(StorageError, match="cannot reach"):
        nowhere.count()
    with Engram(url) as mem:
        with pytest.raises(ValidationError, match="memory id"):
            mem.get("")
        with pytest.raises(NotFound):
            mem.get("a/../../health")  # an id is one path segment, whatever it holds
        with pytest.raises(EngramError, match="not available through a server"):
            mem.session("alice")


_text = st.text(max_size=30)
# Hypothesis bounds are naive; the values carry UTC.
_moment = st.datetimes(
    timezones=st.just(UTC),
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_memories = st.builds(
    Memory,
    id=_text,
    agent=_text,
    kind=st.sampled_from(["knowledge", "decision", "failure", "preference"]),
    content=_text,
    tags=st.lists(_text, max_size=3).map(tuple),
    metadata=st.dictionaries(_text, _json, max_size=3),
    created_at=_moment,
    updated_at=_moment,
    last_accessed=st.none() | _moment,
    access_count=st.integers(0, 10**6),
    confidence=st.floats(0, 1),
    successes=st.floats(0, 100),
    attempts=st.floats(0, 100),
    visibility=st.sampled_from(["private", "shared", "public"]),
    shared_by=st.none() | _text,
)


@given(_memories, st.floats(-10, 10), st.none() | st.floats(0, 1))
def test_from_dict_rebuilds_what_to_dict_wrote(memory, score, vector):
    assert from_dict(Memory, memory.to_dict()) == memory
    hit = Hit(memory, score, None, vector)
    assert from_dict(Hit, hit.to_dict()) == hit
    change = Change(seq=1, memory_id=memory.id, action="update", at=memory.created_at, actor=memory.agent)
    assert from_dict(Change, change.to_dict()) == change


@given(_json)
def test_from_dict_refuses_what_does_not_fit_with_one_error(data):
    with pytest.raises(ValidationError) as refused:  # no random JSON is a whole memory
        from_dict(Memory, data)
    assert "\n" not in str(refused.value)

"""Sharing with consent: chosen memories, a tag, a failure pattern, with one agent or everyone; and revoking."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engramdb import Engram, NotFound, ValidationError
from engramdb.models import Memory


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """Every facade-level test here runs on each backend (SQLite and PostgreSQL)."""
    return backend_mem


@pytest.fixture
def alice(mem: Engram) -> dict[str, Memory]:
    ms = mem.remember_many(
        [
            {
                "content": "Refresh the OAuth token before calling the billing API",
                "agent": "alice",
                "tags": ["auth", "api"],
            },
            {"content": "Login endpoint rate limits at 10 requests per second", "agent": "alice", "tags": ["auth"]},
            {"content": "Alice's private thoughts about the reorg", "agent": "alice", "tags": ["personal"]},
            {"content": "Use pgbouncer in transaction mode for the orders database", "agent": "alice", "tags": ["db"]},
        ]
    )
    return dict(zip(["token", "ratelimit", "private", "db"], ms, strict=True))


def visible(mem: Engram, agent: str) -> set[str]:
    return {m.id for m in mem.list(agent=agent, limit=1000)}


def searchable(mem: Engram, agent: str, query: str) -> set[str]:
    return {h.memory.id for h in mem.search(query, agent=agent, limit=50)}


def test_sharing_chosen_memories_shows_them_with_provenance(mem: Engram, alice: dict[str, Memory]):
    before = datetime.now(UTC)
    assert mem.sharing.share([alice["token"].id], from_agent="alice", to_agent="bob") == 1
    assert visible(mem, "bob") == {alice["token"].id}
    hit = mem.search("OAuth token billing", agent="bob")[0]
    assert hit.memory.id == alice["token"].id
    assert hit.memory.shared_by == "alice"
    assert hit.memory.shared_at is not None
    assert hit.memory.shared_at >= before
    got = mem.get(alice["token"].id, agent="bob")
    assert (got.shared_by, got.agent, got.visibility) == ("alice", "alice", "shared")
    # The owner sees it as its own; nobody else sees it at all.
    assert mem.get(alice["token"].id, agent="alice").shared_by is None
    assert visible(mem, "carol") == set()
    # Nothing was copied: one memory, read in place.
    assert mem.count(agent="alice") == 4
    assert mem.count(agent="bob") == 1


def test_unchosen_private_memories_stay_private(mem: Engram, alice: dict[str, Memory]):
    mem.sharing.share([alice["token"].id], from_agent="alice", to_agent="bob")
    for query in ("private thoughts about the reorg", "pgbouncer orders database", "rate limits login"):
        assert searchable(mem, "bob", query) <= {alice["token"].id}
    with pytest.raises(NotFound):
        mem.get(alice["private"].id, agent="bob")


def test_sharing_a_tag_shares_only_the_owners_tagged_memories(mem: Engram, alice: dict[str, Memory]):
    bobs = mem.remember("Bob's own auth note", agent="bob", tags=["auth"])
    assert mem.sharing.share(from_agent="alice", to_agent="carol", tag="auth") == 2
    assert visible(mem, "carol") == {alice["token"].id, alice["ratelimit"].id}
    # bob's memory with the same tag was not alice's to give.
    assert bobs.id not in visible(mem, "carol")


def test_a_tag_share_is_a_snapshot_not_a_standing_grant(mem: Engram, alice: dict[str, Memory]):
    mem.sharing.share(from_agent="alice", to_agent="bob", tag="auth")
    later = mem.remember("New auth finding written after the share", agent="alice", tags=["auth"])
    assert later.id not in visible(mem, "bob")
    # Consent is renewed explicitly, and sharing again is harmless.
    assert mem.sharing.share(from_agent="alice", to_agent="bob", tag="auth") == 3
    assert later.id in visible(mem, "bob")


def test_publishing_to_everyone_and_revoking(mem: Engram, alice: dict[str, Memory]):
    assert mem.sharing.share([alice["db"].id], from_agent="alice") == 1  # to_agent defaults to "*"
    for agent in ("bob", "carol", "someone-new"):
        assert alice["db"].id in searchable(mem, agent, "pgbouncer transaction mode")
        assert mem.get(alice["db"].id, agent=agent).shared_by == "alice"
    assert mem.sharing.unshare([alice["db"].id], from_agent="alice") == 1
    for agent in ("bob", "carol", "someone-new"):
        assert searchable(mem, agent, "pgbouncer transaction mode") == set()
        with pytest.raises(NotFound):
            mem.get(alice["db"].id, agent=agent)
    assert mem.get(alice["db"].id).visibility == "private"


def test_revoking_one_recipient_keeps_the_others(mem: Engram, alice: dict[str, Memory]):
    token = alice["token"].id
    mem.sharing.share([token], from_agent="alice", to_agent="bob")
    mem.sharing.share([token], from_agent="alice", to_agent="carol")
    assert mem.sharing.unshare([token], from_agent="alice", to_agent="bob") == 1
    assert token not in visible(mem, "bob")
    assert token not in searchable(mem, "bob", "OAuth token billing API")
    assert token in visible(mem, "carol")
    assert mem.get(token).visibility == "shared"
    # Revoking again is a no-op; revoking everyone ends carol's access too.
    assert mem.sharing.unshare([token], from_agent="alice", to_agent="bob") == 0
    assert mem.sharing.unshare([token], from_agent="alice") == 1
    assert token not in visible(mem, "carol")


def test_a_share_with_everyone_outlives_revoking_one_agent(mem: Engram, alice: dict[str, Memory]):
    token = alice["token"].id
    mem.sharing.share([token], from_agent="alice", to_agent="*")
    mem.sharing.share([token], from_agent="alice", to_agent="bob")
    mem.sharing.unshare([token], from_agent="alice", to_agent="bob")
    # Documented: bob still reads it through the share with everyone.
    assert mem.get(token, agent="bob").shared_by == "alice"
    mem.sharing.unshare([token], from_agent="alice", to_agent="*")
    with pytest.raises(NotFound):
        mem.get(token, agent="bob")


def test_revoked_by_tag(mem: Engram, alice: dict[str, Memory]):
    mem.sharing.share(from_agent="alice", to_agent="bob", tag="auth")
    mem.sharing.share([alice["db"].id], from_agent="alice", to_agent="bob")
    assert mem.sharing.unshare(from_agent="alice", to_agent="bob", tag="auth") == 2
    assert visible(mem, "bob") == {alice["db"].id}


def test_a_forgotten_memory_is_no_longer_shared(mem: Engram, alice: dict[str, Memory]):
    mem.sharing.share([alice["token"].id], from_agent="alice", to_agent="bob")
    mem.forget(alice["token"].id, agent="alice")
    assert visible(mem, "bob") == set()
    assert mem.sharing.list(to_agent="bob") == []


def test_sharing_is_all_or_nothing_when_one_id_is_not_the_owners(mem: Engram, alice: dict[str, Memory]):
    bobs = mem.remember("bob's note", agent="bob")
    with pytest.raises(NotFound, match="owned by agent 'alice'"):
        mem.sharing.share([alice["token"].id, bobs.id], from_agent="alice", to_agent="carol")
    with pytest.raises(NotFound):
        mem.sharing.share([alice["token"].id, "no-such-id"], from_agent="alice", to_agent="carol")
    assert visible(mem, "carol") == set()
    assert mem.sharing.list() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "say which memories"),
        ({"tag": "auth", "pattern": "abc"}, "only one of"),
        ({"memory_ids": ["x"], "tag": "auth"}, "only one of"),
        ({"tag": "auth", "to_agent": "alice"}, "cannot share with itself"),
        ({"tag": "auth", "to_agent": ""}, "to_agent must be an agent name"),
        ({"tag": "auth", "to_agent": " bob"}, "to_agent must be an agent name"),
        ({"tag": "auth", "from_agent": "*"}, "reserved"),
        ({"tag": "   "}, "tag must be a non-empty"),
        ({"memory_ids": [""]}, "memory id must be a non-empty"),
    ],
)
def test_bad_share_requests_are_refused_clearly(mem: Engram, alice: dict[str, Memory], kwargs: dict, message: str):
    args = {"from_agent": "alice", "to_agent": "bob", **kwargs}
    ids = args.pop("memory_ids", None)
    for call in (mem.sharing.share, mem.sharing.unshare):
        with pytest.raises(ValidationError, match=message):
            call(ids, **args)
    assert mem.sharing.list() == []


def test_sharing_a_tag_with_nothing_under_it_shares_nothing(mem: Engram, alice: dict[str, Memory]):
    assert mem.sharing.share(from_agent="alice", to_agent="bob", tag="nothing-here") == 0
    assert visible(mem, "bob") == set()


def test_shares_listing(mem: Engram, alice: dict[str, Memory]):
    mem.sharing.share([alice["token"].id], from_agent="alice", to_agent="bob")
    mem.sharing.share([alice["db"].id], from_agent="alice", to_agent="*")
    bobs = mem.remember("bob's public tip", agent="bob")
    mem.sharing.share([bobs.id], from_agent="bob", to_agent="*")
    given = mem.sharing.list(from_agent="alice")
    assert {(s.memory_id, s.to_agent) for s in given} == {(alice["token"].id, "bob"), (alice["db"].id, "*")}
    received = mem.sharing.list(to_agent="bob")
    # What reaches bob: alice's direct share and her share with everyone, not bob's own publication.
    assert {(s.memory_id, s.from_agent) for s in received} == {(alice["token"].id, "alice"), (alice["db"].id, "alice")}
    assert all(s.shared_at.tzinfo is not None for s in received)
    assert len(mem.sharing.list()) == 3
    assert received[0].to_dict()["from_agent"] == "alice"


def test_share_and_unshare_leave_history(mem: Engram, alice: dict[str, Memory]):
    token = alice["token"].id
    mem.sharing.share([token], from_agent="alice", to_agent="bob")
    mem.sharing.unshare([token], from_agent="alice", to_agent="bob")
    actions = [c.action for c in mem.history(token)]
    assert actions[-2:] == ["share", "unshare"]


def test_public_visibility_is_separate_from_shares(mem: Engram, alice: dict[str, Memory]):
    # A memory the owner made public is readable by all; unshare does not silently change that.
    mem.update(alice["db"].id, agent="alice", visibility="public")
    assert mem.get(alice["db"].id, agent="bob").shared_by == "alice"
    assert mem.sharing.unshare([alice["db"].id], from_agent="alice") == 0
    assert mem.get(alice["db"].id, agent="bob").visibility == "public"
    mem.update(alice["db"].id, agent="alice", visibility="private")
    with pytest.raises(NotFound):
        mem.get(alice["db"].id, agent="bob")


def test_shares_and_revocations_are_in_the_audit_trail(mem: Engram, alice: dict[str, Memory]):
    mem.sharing.share(from_agent="alice", to_agent="bob", tag="auth")
    mem.sharing.unshare([alice["token"].id], from_agent="alice", to_agent="bob")
    shares = mem.audit.log(action="share")
    assert {(e.agent, e.memory_id, e.detail["to_agent"]) for e in shares} == {
        ("alice", alice["token"].id, "bob"),
        ("alice", alice["ratelimit"].id, "bob"),
    }
    [revoked] = mem.audit.log(action="unshare")
    assert (revoked.agent, revoked.memory_id) == ("alice", alice["token"].id)
    assert mem.audit.verify()
    # A refused share leaves no trace of having happened.
    with pytest.raises(NotFound):
        mem.sharing.share([alice["token"].id], from_agent="bob", to_agent="carol")
    assert len(mem.audit.log(action="share")) == 2

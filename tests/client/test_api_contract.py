"""One contract for the public API, run embedded (SQLite), on PostgreSQL and through the remote client.

Each test drives ``api`` (see conftest) exactly as a user would and checks the same answers and
the same errors on every backend: the remote client must be indistinguishable from the library.
"""

from __future__ import annotations

import io

import pytest

from engramdb import Change, Hit, Memory, NotFound, Suggestion, ValidationError


def test_remember_get_search_update_history_forget(api, agent):
    m = api.remember("Deploys to staging need the VPN up first", agent=agent, kind="knowledge", tags=["deploy"])
    assert isinstance(m, Memory)
    assert (m.agent, m.kind, m.tags) == (agent, "knowledge", ("deploy",))
    assert api.get(m.id, agent=agent) == m
    hits = api.search("how do I deploy to staging", agent=agent)
    assert isinstance(hits[0], Hit)
    assert hits[0].memory.id == m.id
    changed = api.update(m.id, agent=agent, content="Deploys to staging need the VPN and a token")
    assert changed.content.endswith("a token")
    history = api.history(m.id, agent=agent)
    assert [c.action for c in history] == ["create", "update"]
    assert all(isinstance(c, Change) for c in history)
    api.forget(m.id, agent=agent)
    with pytest.raises(NotFound):
        api.get(m.id, agent=agent)
    assert api.count(agent=agent) == 0


def test_the_same_errors(api, agent):
    with pytest.raises(ValidationError, match="unknown kind"):
        api.remember("x", agent=agent, kind="bogus")
    with pytest.raises(ValidationError):
        api.remember("", agent=agent)
    with pytest.raises(NotFound):
        api.get("no-such-id", agent=agent)
    with pytest.raises(KeyError):  # NotFound is a KeyError, remotely too
        api.update("no-such-id", agent=agent, content="y")
    with pytest.raises(ValidationError, match="confirm"):
        api.clear(agent=agent, confirm="someone-else")


def test_keyed_memories_supersede_and_clear_removes_everything(api, agent):
    first = api.remember("editor: vim", agent=agent, kind="preference", key="editor")
    second = api.remember("editor: helix", agent=agent, kind="preference", key="editor")
    assert second.id == first.id
    assert api.recall_key("editor", agent=agent).content == "editor: helix"
    assert "supersede" in [c.action for c in api.history(first.id, agent=agent)]
    with pytest.raises(NotFound):
        api.recall_key("shell", agent=agent)
    api.remember_many([{"content": f"fact {i}", "agent": agent} for i in range(3)], force=True)
    assert api.count(agent=agent) == 4
    assert len(api.list(agent=agent, limit=2)) == 2
    # 4 current memories and the superseded value of the key (kept for as_of questions): clear forgets all.
    assert api.clear(agent=agent, confirm=agent) == 5
    assert api.list(agent=agent) == []


def test_min_score_per_search(api, agent):
    api.remember("The cafeteria serves lentil soup on Tuesdays", agent=agent)
    loose = api.search("kubernetes pod eviction", agent=agent, min_score=0.0)
    strict = api.search("kubernetes pod eviction", agent=agent, min_score=0.99)
    assert len(loose) == 1
    assert strict == []
    with pytest.raises(ValidationError, match="min_score"):
        api.search("soup", agent=agent, min_score=2)


def test_learning_and_failures(api, agent):
    for outcome in ("success", "success", "failure"):
        api.learning.record("flaky integration test", "retry once", outcome, agent=agent)
    api.learning.record("flaky integration test", "quarantine it", "failure", agent=agent)
    s = api.learning.suggest("flaky integration test", agent=agent)
    assert isinstance(s, Suggestion)
    assert s.options[0].action == "retry once"
    assert api.learning.stats(agent=agent).decisions == 4
    api.failures.record("ModuleNotFoundError: No module named 'yaml'", agent=agent, solution="pip install pyyaml")
    sols = api.failures.solutions("ModuleNotFoundError: No module named 'yaml'", agent=agent)
    assert sols[0].solution == "pip install pyyaml"
    patterns = api.failures.patterns(agent=agent)
    assert patterns[0].occurrences == 1
    assert api.failures.pattern(patterns[0].id, agent=agent).signature == patterns[0].signature


def test_sharing_context_audit_and_knowledge_files(api, agent, tmp_path):
    other = agent + "-b"
    m = api.remember("The release checklist lives in docs/release.md", agent=agent)
    assert api.sharing.share([m.id], from_agent=agent, to_agent=other) == 1
    assert [h.memory.id for h in api.search("release checklist", agent=other)] == [m.id]
    assert [s.memory_id for s in api.sharing.list(from_agent=agent)] == [m.id]
    ctx = api.context("prepare the release", agent=agent)
    assert "docs/release.md" in ctx.render()
    assert api.audit.verify() is True
    assert any(e.memory_id == m.id for e in api.audit.log(agent=agent, limit=50))
    path = tmp_path / "k.jsonl"
    assert api.knowledge.export_file(path, agent=agent) == 1
    buffer = io.BytesIO(path.read_bytes())
    assert api.knowledge.import_file(buffer, agent=agent) == 0  # already there: nothing added


def test_conversations_in_and_routing(api, agent):
    res = api.add([{"role": "user", "content": "I moved to Berlin last month"}], agent=agent)
    assert len(res.turns) == 1
    assert res.turns[0].kind == "conversation"
    choice = api.routing.decide("summarise a long contract", models=["small-fast", "large-smart"], agent=agent)
    assert choice.model in ("small-fast", "large-smart")
    assert api.routing.route("summarise a long contract", models=["small-fast", "large-smart"], agent=agent) in (
        "small-fast",
        "large-smart",
    )
    assert api.routing.record("summarise", choice.model, "success", agent=agent).kind == "decision"


def test_user_scopes_are_hard_filters_everywhere(api, agent):
    api.remember("Ann prefers window seats", agent=agent, user="ann", kind="preference", key="seat")
    api.remember("Bob prefers aisle seats", agent=agent, user="bob", kind="preference", key="seat")
    api.remember("The airline allows one carry-on", agent=agent)
    seen = {h.memory.content for h in api.search("seat preference carry-on", agent=agent, user="ann")}
    assert seen == {"Ann prefers window seats", "The airline allows one carry-on"}
    assert api.recall_key("seat", agent=agent, user="bob").content == "Bob prefers aisle seats"
    assert api.count(agent=agent, user="ann") == 2
    assert {m.content for m in api.list(agent=agent, user="bob")} == {
        "Bob prefers aisle seats",
        "The airline allows one carry-on",
    }

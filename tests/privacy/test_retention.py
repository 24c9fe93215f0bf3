"""Retention: pure policy evaluation (property-tested), policy files, and cleanup as a thorough forget."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb._util import new_id
from engramdb.embeddings.base import Embedder
from engramdb.errors import ConfigError
from engramdb.models import Memory, RetentionPolicy, RetentionRule
from engramdb.privacy.retention import evaluate, load_policy, parse_policy

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def mem(
    *,
    agent: str = "alice",
    kind: str = "conversation",
    age_days: float = 0,
    idle_days: float | None = None,
    confidence: float = 0.5,
    pinned: bool = False,
) -> Memory:
    created = NOW - timedelta(days=age_days)
    return Memory(
        id=new_id(),
        agent=agent,
        kind=kind,
        content="x",
        created_at=created,
        updated_at=created,
        last_accessed=None if idle_days is None else NOW - timedelta(days=idle_days),
        confidence=confidence,
        metadata={"pinned": True} if pinned else {},
    )


def test_max_age_removes_only_older_memories_of_that_kind() -> None:
    old, young, other = mem(age_days=40), mem(age_days=10), mem(kind="knowledge", age_days=400)
    policy = RetentionPolicy(rules={"conversation": RetentionRule(max_age_days=30)})
    expired = evaluate([old, young, other], policy, now=NOW)
    assert [(e.memory_id, e.reason) for e in expired] == [(old.id, "max_age")]


def test_max_count_keeps_each_agents_newest() -> None:
    alice = [mem(age_days=d) for d in (5, 1, 3, 2)]
    bob = [mem(agent="bob", age_days=d) for d in (9, 8)]
    policy = RetentionPolicy(rules={"conversation": RetentionRule(max_count=2)})
    expired = {e.memory_id for e in evaluate([*alice, *bob], policy, now=NOW)}
    assert expired == {alice[0].id, alice[2].id}  # the 5- and 3-day-old ones; bob is within his limit


def test_decay_removes_unused_low_confidence_memories_and_access_renews() -> None:
    rule = RetentionRule(decay_half_life_days=30, decay_floor=0.1)
    policy = RetentionPolicy(default=rule)
    weak_unused = mem(kind="knowledge", age_days=100, confidence=0.3)  # 0.3 * 0.5**(100/30) = 0.03
    strong_unused = mem(kind="knowledge", age_days=100, confidence=0.95)  # 0.095: goes too, just
    strong_recent = mem(kind="knowledge", age_days=60, confidence=0.95)  # 0.24: stays
    weak_used = mem(kind="knowledge", age_days=100, idle_days=1, confidence=0.3)  # retrieved yesterday
    expired = {
        e.memory_id: e.reason for e in evaluate([weak_unused, strong_unused, strong_recent, weak_used], policy, now=NOW)
    }
    assert expired == {weak_unused.id: "decay", strong_unused.id: "decay"}


def test_pinned_memories_never_expire_but_take_up_places() -> None:
    pinned_old = mem(age_days=1000, pinned=True)
    newer = [mem(age_days=d) for d in (1, 2)]
    policy = RetentionPolicy(rules={"conversation": RetentionRule(max_age_days=30, max_count=2)})
    expired = {e.memory_id for e in evaluate([pinned_old, *newer], policy, now=NOW)}
    assert expired == {newer[1].id}


def test_own_rule_beats_default_and_empty_policy_keeps_everything() -> None:
    policy = RetentionPolicy(rules={"knowledge": RetentionRule()}, default=RetentionRule(max_age_days=1))
    memories = [mem(kind="knowledge", age_days=10), mem(kind="conversation", age_days=10)]
    assert [e.kind for e in evaluate(memories, policy, now=NOW)] == ["conversation"]
    assert evaluate(memories, RetentionPolicy(), now=NOW) == []
    assert RetentionPolicy().empty


@settings(max_examples=80, deadline=None)
@given(
    ages=st.lists(st.floats(min_value=0, max_value=1000), min_size=0, max_size=30),
    max_age=st.floats(min_value=1, max_value=500),
    max_count=st.integers(min_value=0, max_value=10),
)
def test_survivors_respect_every_limit(ages: list[float], max_age: float, max_count: int) -> None:
    memories = [mem(age_days=a) for a in ages]
    policy = RetentionPolicy(rules={"conversation": RetentionRule(max_age_days=max_age, max_count=max_count)})
    expired = {e.memory_id for e in evaluate(memories, policy, now=NOW)}
    survivors = [m for m in memories if m.id not in expired]
    assert len(survivors) <= max_count
    assert all((NOW - m.created_at).total_seconds() / 86400 <= max_age for m in survivors)
    # Nothing is removed that both limits would keep: the survivors are the newest young ones.
    young = sorted((m for m in memories if (NOW - m.created_at).total_seconds() / 86400 <= max_age),
                   key=lambda m: (m.created_at, m.id), reverse=True)  # fmt: skip
    assert {m.id for m in survivors} == {m.id for m in young[:max_count]}


def test_policy_file_parsing_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "retention.toml"
    path.write_text(
        "[default]\nmax_age_days = 365\n[conversation]\nmax_age_days = 30\nmax_count = 100\n"
        "[knowledge]\ndecay_half_life_days = 90\ndecay_floor = 0.05\n"
    )
    policy = load_policy(path)
    assert policy.rule_for("conversation") == RetentionRule(max_age_days=30, max_count=100)
    assert policy.rule_for("decision") == RetentionRule(max_age_days=365)
    assert policy.to_dict()["knowledge"] == {"decay_half_life_days": 90.0, "decay_floor": 0.05}
    assert load_policy(tmp_path / "missing.toml").empty
    for bad, message in [
        ({"gossip": {"max_age_days": 1}}, "unknown kind"),
        ({"conversation": {"max_age": 1}}, "unknown limit"),
        ({"conversation": {"max_age_days": -1}}, "positive"),
        ({"conversation": {"max_count": 1.5}}, "integer"),
        ({"conversation": {"decay_floor": 0.1}}, "go together"),
        ({"conversation": {"decay_half_life_days": 3, "decay_floor": 2}}, "within"),
        ({"conversation": 5}, "table"),
        # The section is named once: "retention policy: [conversation] max_age_days must be a number, ..."
        ({"conversation": {"max_age_days": "x"}}, r"^retention policy: \[conversation\] max_age_days must be a number"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_policy(bad)
    path.write_text("[conversation\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy(path)


# -- cleanup through the facade: the thorough forget ------------------------------------------------


def _everywhere(db: Path, needle: str) -> list[str]:
    """Tables (and the keyword index) where ``needle`` still appears in any text column."""
    found = []
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.Error:
                continue
            if any(isinstance(v, str) and needle in v for row in rows for v in row):
                found.append(table)
        hits = conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (needle,)).fetchone()[0]
    conn.close()
    return found + (["memories_fts"] if hits else [])


def test_cleanup_dry_run_then_forgets_thoroughly(tmp_path: Path, embedder: Embedder) -> None:
    store = tmp_path / "store"
    policy = RetentionPolicy(rules={"conversation": RetentionRule(max_count=1)})
    with Engram(store, embedder=embedder) as m:
        old = m.remember("zanzibarian chat about the outage", agent="alice", kind="conversation")
        m.update(old.id, content="zanzibarian chat about the outage, edited")
        kept = m.remember("newer chat", agent="alice", kind="conversation")
        other = m.remember("bob's chat", agent="bob", kind="conversation")
        fact = m.remember("a fact", agent="alice")
        preview = m.retention.cleanup(dry_run=True, policy=policy)
        assert preview.dry_run
        assert [e.memory_id for e in preview.expired] == [old.id]
        assert preview.forgotten == ()
        assert preview.to_dict()["expired"][0]["memory_id"] == old.id
        assert m.get(old.id).content.startswith("zanzibarian")  # nothing removed yet
        assert m.retention.cleanup(agent="bob", policy=policy).expired == ()
        gone = m.retention.cleanup(policy=policy)
        assert [(e.memory_id, e.reason) for e in gone.forgotten] == [(old.id, "max_count")]
        assert m.retention.cleanup().policy_empty  # no policy file: nothing expires
        assert {x.id for x in m.list(agent="alice", limit=10)} == {kept.id, fact.id}
        assert m.get(other.id).agent == "bob"
        assert [c.action for c in m.history(old.id)][-1] == "forget"
        assert all(c.before is None and c.after is None for c in m.history(old.id))
        assert m.audit.log(action="retention")[0].memory_id == old.id
        assert m.audit.verify()
        assert all(h.memory.id != old.id for h in m.search("zanzibarian", agent="alice"))
    assert _everywhere(store / "engram.db", "zanzibarian") == []


def test_policy_file_in_the_store_and_scheduled_cleanup_on_open(tmp_path: Path, embedder: Embedder) -> None:
    store = tmp_path / "store"
    with Engram(store, embedder=embedder) as m:
        short = m.remember("ephemeral chat", agent="alice", kind="conversation")
        keep = m.remember("durable fact", agent="alice")
    (store / "retention.toml").write_text("[conversation]\nmax_count = 0\n")
    with Engram(store, embedder=embedder) as m:  # no schedule: nothing happens on open
        assert m.get(short.id)
        assert m.retention.policy.rule_for("conversation") is not None
    with Engram(store, embedder=embedder, retention_interval_hours=24) as m:
        assert [x.id for x in m.list(agent="alice")] == [keep.id]
        again = m.remember("another chat", agent="alice", kind="conversation")
    with Engram(store, embedder=embedder, retention_interval_hours=24) as m:
        assert m.get(again.id)  # ran less than 24 h ago: not again

"""The pure rules of sharing and transfer: selectors, provenance, combined statistics, import and merge plans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb.errors import ValidationError
from engramdb.knowledge import provenance, transfer
from engramdb.knowledge.dedupe import Duplicate
from engramdb.models import Change, Memory
from engramdb.privacy import sharing as rules

T0 = datetime(2026, 1, 1, tzinfo=UTC)
VEC = np.ones(4, dtype=np.float32) / 2


def mem(id: str = "m1", agent: str = "alice", **over: Any) -> Memory:  # noqa: A002 - mirrors Memory.id
    fields: dict[str, Any] = {"kind": "knowledge", "content": f"content of {id}", "created_at": T0, "updated_at": T0}
    fields.update(over)
    return Memory(id=id, agent=agent, **fields)


def incoming(m: Memory, source: Memory | None = None) -> transfer.Incoming:
    return transfer.Incoming(memory=m, vector=VEC, source=source or m)


# -- selectors ------------------------------------------------------------------------------------------------


def test_selection_takes_exactly_one_selector():
    assert rules.selection(["a", "b", "a"], tag=None, pattern=None).memory_ids == ("a", "b")
    assert rules.selection("a", tag=None, pattern=None).memory_ids == ("a",)
    assert rules.selection(None, tag=" auth ", pattern=None).tag == "auth"
    assert rules.selection(None, tag=None, pattern="abc").describe() == "pattern 'abc'"
    with pytest.raises(ValidationError, match="say which memories"):
        rules.selection([], tag="", pattern=None)
    with pytest.raises(ValidationError, match="only one of"):
        rules.selection(["a"], tag="t", pattern="p")
    with pytest.raises(ValidationError, match="NUL"):
        rules.selection(["a\x00"], tag=None, pattern=None)


@pytest.mark.parametrize("bad", ["", " bob", "alice", None, 3])
def test_recipient_is_another_agent_or_everyone(bad: object):
    assert rules.recipient("*", from_agent="alice") == "*"
    assert rules.recipient("bob", from_agent="alice") == "bob"
    with pytest.raises(ValidationError):
        rules.recipient(bad, from_agent="alice")


# -- provenance and statistics ----------------------------------------------------------------------------------


def test_a_copy_keeps_statistics_and_names_its_first_origin():
    src = mem("b1", "bob", successes=2.0, attempts=3.0, access_count=4, confidence=0.7, visibility="shared")
    copy = provenance.copied(src, to_agent="alice", new_id="a9", at=T0 + timedelta(days=1))
    assert (copy.id, copy.agent, copy.visibility) == ("a9", "alice", "private")
    assert (copy.successes, copy.attempts, copy.access_count, copy.confidence) == (2.0, 3.0, 4, 0.7)
    assert copy.metadata["origin"]["agent"] == "bob"
    assert copy.metadata["origin"]["id"] == "b1"
    again = provenance.copied(copy, to_agent="carol", new_id="c9", at=T0)
    assert again.metadata["origin"]["id"] == "b1"  # a copy of a copy points at the original
    assert provenance.origins(again) == {("carol", "c9"), ("bob", "b1")}


stats = st.tuples(st.floats(0, 50), st.floats(0, 50), st.integers(0, 1000), st.floats(0, 1))


@given(stats, stats)
def test_combined_sums_evidence_and_keeps_the_stronger_belief(a: tuple, b: tuple):
    target = mem("t", "alice", attempts=a[0] + a[1], successes=a[0], access_count=a[2], confidence=a[3])
    source = mem("s", "bob", attempts=b[0] + b[1], successes=b[0], access_count=b[2], confidence=b[3])
    changes = provenance.combined(target, source, similarity=0.97, at=T0)
    merged = transfer.applied(target, changes)
    assert merged.successes == pytest.approx(target.successes + source.successes)
    assert merged.attempts == pytest.approx(target.attempts + source.attempts)
    assert merged.successes <= merged.attempts + 1e-9
    assert merged.access_count == target.access_count + source.access_count
    assert merged.confidence == max(target.confidence, source.confidence)
    assert ("bob", "s") in provenance.origins(merged)
    # A second merge of another source keeps the first in the provenance.
    other = mem("s2", "carol")
    twice = transfer.applied(merged, provenance.combined(merged, other, similarity=0.96, at=T0))
    assert {("bob", "s"), ("carol", "s2")} <= provenance.origins(twice)


def test_provenance_survives_the_bounded_merge_history():
    target = mem("t")
    for i in range(30):
        target = transfer.applied(target, provenance.combined(target, mem(f"s{i}", "bob"), similarity=0.99, at=T0))
    assert len(target.metadata["merged_from"]) <= 20
    assert {("bob", f"s{i}") for i in range(30)} <= provenance.origins(target)


def test_refreshed_takes_the_newer_copy_and_joins_counters():
    old = mem("m", content="v1", access_count=5, successes=1.0, attempts=4.0)
    new = mem("m", content="v2", updated_at=T0 + timedelta(hours=1), access_count=3, successes=3.0, attempts=3.0)
    changes = transfer.refreshed(old, new)
    assert changes["content"] == "v2"
    assert "access_count" not in changes  # 5 already is the larger count
    assert (changes["successes"], changes.get("attempts", old.attempts)) == (3.0, 4.0)
    assert transfer.refreshed(new, old) == {"access_count": 5, "attempts": 4.0}
    assert transfer.refreshed(old, old) == {}


# -- plans --------------------------------------------------------------------------------------------------


def test_plan_import_adds_refreshes_merges_and_refuses_takeovers():
    stored_dup = mem("d0", content="Deploys go out on Tuesdays")
    entries = [
        incoming(mem("new")),
        incoming(mem("same", content="v2", updated_at=T0 + timedelta(1))),
        incoming(mem("dup", content="Deploys go out on Tuesday")),
    ]

    def find(m: Memory, v: Any) -> Duplicate | None:
        return Duplicate(stored_dup, 0.97) if m.id == "dup" else None

    history = {"new": [Change(seq=1, memory_id="new", action="create", at=T0, actor="alice")]}
    plan = transfer.plan_import(
        entries, existing={"same": mem("same", content="v1")}, find_duplicate=find, history=history, actor="x", at=T0
    )
    assert [i.memory.id for i in plan.add] == ["new"]
    assert [(t, a) for t, _, a in plan.folded] == [("same", "import"), ("d0", "merge")]
    assert plan.written == 3
    assert [c.action for c in plan.history] == ["create", "import"]
    assert {p.memory_id for p in plan.patches} == {"same", "d0"}
    with pytest.raises(ValidationError, match="another agent"):
        transfer.plan_import(
            [incoming(mem("x"))], existing={"x": mem("x", "bob")}, find_duplicate=None, history={}, actor="a", at=T0
        )


def test_plan_import_skips_what_an_earlier_import_merged():
    target = transfer.applied(mem("d0"), provenance.combined(mem("d0"), mem("f1"), similarity=0.99, at=T0))
    plan = transfer.plan_import(
        [incoming(mem("f1"))],
        existing={},
        find_duplicate=lambda m, v: Duplicate(target, 0.99),
        history={},
        actor="a",
        at=T0,
    )
    assert (plan.written, plan.unchanged) == (0, 1)


def test_plan_merge_never_merges_events_and_skips_known_origins():
    copies = [
        incoming(mem("c1", kind="decision"), mem("b1", "bob", kind="decision")),
        incoming(mem("c2"), mem("b2", "bob")),
        incoming(mem("c3"), mem("b3", "bob")),
    ]
    target = mem("a1")
    plan = transfer.plan_merge(
        copies,
        known_origins={("bob", "b3")},
        find_duplicate=lambda m, v: Duplicate(target, 0.99),
        at=T0,
    )
    assert [i.memory.id for i in plan.add] == ["c1"]  # a decision is one piece of evidence: copied
    assert [t for t, _, _ in plan.folded] == ["a1"]
    assert plan.unchanged == 1

"""Durability pieces of the storage layer: deferred read bookkeeping, history for checks, audit coverage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from storage_helpers import MODEL, NOW, StoreFactory, memory, unit_vectors

from engramdb.auditcoverage import coverage
from engramdb.models import AuditEvent, AuditRecord, Change
from engramdb.storage._deferred import Deferred
from engramdb.storage.base import Store
from engramdb.storage.sqlite import open_sqlite


def _change(memory_id: str, action: str, at: datetime, seq: int = 1) -> Change:
    return Change(seq=seq, memory_id=memory_id, action=action, at=at, actor="a")


def _event(memory_id: str | None, action: str, at: datetime, seq: int = 1, **detail: object) -> AuditEvent:
    return AuditEvent(seq=seq, action=action, agent="a", memory_id=memory_id, at=at, detail=detail)


def test_deferred_touches_add_up_and_stay_bounded() -> None:
    pending = Deferred(limit=3)
    pending.add_touches(["a", "b", "a"], "2024-01-01T00:00:00.000000+00:00")
    pending.add_touches(["a"], "2024-01-02T00:00:00.000000+00:00")
    batch = pending.take()
    assert batch.touches == {"a": (2, "2024-01-02T00:00:00.000000+00:00"), "b": (1, "2024-01-01T00:00:00.000000+00:00")}
    assert len(pending) == 0
    pending.add_touches(["c"], "2024-01-03T00:00:00.000000+00:00")
    pending.restore(batch)  # the write failed: everything is pending again, counts merged
    assert len(pending) == 3
    pending.add_touches(["d", "e"], "2024-01-04T00:00:00.000000+00:00")
    assert len(pending) == 3
    assert pending.dropped == 2


def test_deferred_audit_entries_keep_their_order_and_bound() -> None:
    pending = Deferred(limit=2)
    records = [AuditRecord(action="get", agent="a", at=NOW, detail={"n": n}) for n in range(3)]
    pending.add_audit(records)
    batch = pending.take()
    assert [r.detail["n"] for r in batch.audit] == [1, 2]
    assert batch.dropped == 1


def test_history_all_pages_every_memory_in_seq_order(tmp_path: Path) -> None:
    with open_sqlite(tmp_path) as store:
        first, second = memory("one"), memory("two")
        store.memories.add([first, second], unit_vectors(2), model_id=MODEL, actor="alice")
        store.memories.delete(first.id, actor="alice", at=NOW)
        every = store.memories.history_all()
        assert [(c.memory_id, c.action) for c in every] == [
            (first.id, "create"),
            (second.id, "create"),
            (first.id, "forget"),
        ]
        assert store.memories.history_all(after_seq=every[0].seq, limit=1) == [every[1]]


def test_checks_role_reports_a_sound_store(store: Store, store_factory: StoreFactory) -> None:
    store.memories.add([memory("x"), memory("y")], unit_vectors(2), model_id=MODEL, actor="alice")
    expected = [] if store_factory.backend == "sqlite" else None  # PostgreSQL checks its own pages
    assert store.checks.database() == expected
    assert store.checks.database(quick=True) == expected
    assert store.checks.keyword_index() == []
    rows = [row for batch in store.checks.iter_vectors(batch=1) for row in batch]
    assert len(rows) == 2
    assert {r.model_id for r in rows} == {MODEL}
    assert all(r.vector is not None and r.vector.shape == (r.dim,) for r in rows)
    assert store.checks.pending() == 0


def test_history_all_on_every_backend(store: Store) -> None:
    m = memory("z")
    store.memories.add([m], unit_vectors(1), model_id=MODEL, actor="alice")
    store.shares.share([m.id], from_agent="alice", to_agent="bob", at=NOW)
    assert [c.action for c in store.memories.history_all()] == ["create", "share"]


def test_coverage_matches_each_change_to_its_entry() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    history = [
        _change("m1", "create", at),
        _change("m1", "update", at + timedelta(seconds=1)),
        _change("m1", "forget", at + timedelta(seconds=2)),
        _change("m2", "create", at + timedelta(seconds=3)),
        _change("m2", "feedback", at + timedelta(seconds=4)),  # outcome counters: audited like any change
        _change("m2", "reembed", at + timedelta(seconds=5)),  # not an audited action
    ]
    events = [
        _event("m1", "create", at),
        _event("m1", "update", at + timedelta(seconds=1)),
        _event("m1", "retention", at + timedelta(seconds=2)),
        _event("m2", "search", at + timedelta(seconds=3)),  # a read does not cover a create
        _event("m2", "feedback", at + timedelta(seconds=4)),
    ]
    result = coverage(history, events)
    assert result.checked == 5
    assert result.skipped == 1
    assert [(c.memory_id, c.action) for c in result.missing] == [("m2", "create")]
    assert not result.ok


def test_coverage_trusts_an_import_for_the_history_it_brought_and_skips_what_predates_the_trail() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    began = at - timedelta(days=400)
    history = [
        _change("old", "create", began - timedelta(days=1)),  # before the trail began
        _change("imp", "create", at - timedelta(days=300)),  # brought by the import
        _change("imp", "update", at - timedelta(days=200)),
        _change("imp", "update", at + timedelta(seconds=5)),  # after the import: needs its own entry
    ]
    events = [_event(None, "export", began), _event("imp", "import", at, seq=2, origin_id="x", origin_agent="b")]
    result = coverage(history, events)
    assert [(c.memory_id, c.at) for c in result.missing] == [("imp", at + timedelta(seconds=5))]
    assert result.skipped == 1

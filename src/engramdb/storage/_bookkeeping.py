"""Read-path bookkeeping that must never fail a read, and the audit append both roles share.

Reads write too: a search or get counts as an access (``memories.touch``) and is audited.
When the disk is full (or the file system reports an I/O error) that bookkeeping cannot be
written, but the read itself succeeded and must be returned. :class:`~engramdb.storage._deferred.Deferred` keeps such
bookkeeping in memory (bounded: beyond :data:`LIMIT` items the oldest are dropped and
counted) and the backend writes it at the start of its next write transaction, in that
transaction: it lands with the next successful write, or stays pending if that write fails too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from engramdb.models import AuditEvent
from engramdb.models.audit import AuditRecord
from engramdb.storage._codecs import AUDIT_COLUMNS, AUDIT_HEAD_KEY, audit_head_value, chain_rows
from engramdb.storage._deferred import Batch
from engramdb.storage._dialect import Conn, Dialect

__all__ = ["READ_ACTIONS", "append_audit", "is_read", "touch_rows", "write_deferred"]

#: Audit actions of reads: their entries may wait for the next write when the disk is full.
READ_ACTIONS: Final = frozenset({"get", "list", "search"})

_UPSERT_META: Final = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
#: One deferred touch: the access count grows by the reads it stands for, the time only moves forward.
_TOUCH_ONE: Final = (
    "UPDATE memories SET access_count = access_count + ?, last_accessed = CASE "
    "WHEN last_accessed IS NULL OR last_accessed < ? THEN ? ELSE last_accessed END WHERE id = ?"
)


def is_read(records: Sequence[AuditRecord]) -> bool:
    """Whether every entry records a read (see :data:`READ_ACTIONS`)."""
    return all(r.action in READ_ACTIONS for r in records)


def append_audit(d: Dialect, conn: Conn, records: Sequence[AuditRecord]) -> list[AuditEvent]:
    """Chain and insert audit entries inside an open write (the dialect's audit lock held), moving the head."""
    d.lock_audit(conn)
    last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    events, rows = chain_rows(records, last)
    d.insert_rows(conn, "audit", [c.strip() for c in AUDIT_COLUMNS.split(",")], rows)
    conn.execute(_UPSERT_META, (AUDIT_HEAD_KEY, audit_head_value(events)))
    return events


def touch_rows(d: Dialect, conn: Conn, memory_ids: Sequence[str], at: str) -> None:
    """``last_accessed = at`` and ``access_count + 1`` for each distinct id, inside an open write."""
    clause, param = d.one_of("id", list(dict.fromkeys(memory_ids)))
    # Rows are locked in id order, so concurrent touches of overlapping sets cannot deadlock.
    conn.execute(
        "UPDATE memories SET last_accessed = ?, access_count = access_count + 1 WHERE id IN "
        f"(SELECT id FROM memories WHERE {clause} ORDER BY id{d.for_update})",
        (at, param),
    )


def write_deferred(d: Dialect, conn: Conn, batch: Batch) -> None:
    """Write a taken batch inside the open write transaction ``conn`` (touches in id order: no deadlocks)."""
    if batch.touches:
        conn.executemany(
            _TOUCH_ONE,
            [(count, at, at, memory_id) for memory_id, (count, at) in sorted(batch.touches.items())],
        )
    records = list(batch.audit)
    if batch.dropped:
        detail: dict[str, Any] = {"dropped": batch.dropped}
        records.append(AuditRecord(action="bookkeeping_dropped", agent=None, at=datetime.now(UTC), detail=detail))
    if records:
        append_audit(d, conn, records)

"""Read-path bookkeeping that must never fail a read, and the audit append both roles share.

Reads write too: a search or get counts as an access (``memories.touch``) and is audited.
When the disk is full (or the file system reports an I/O error) that bookkeeping cannot be
written, but the read itself succeeded and must be returned. :class:`Deferred` keeps such
bookkeeping in memory (bounded: beyond :data:`LIMIT` items the oldest are dropped and
counted) and the backend writes it at the start of its next write transaction, in that
transaction: it lands with the next successful write, or stays pending if that write fails too.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from engramdb.models import AuditEvent
from engramdb.models.audit import AuditRecord
from engramdb.storage._codecs import AUDIT_COLUMNS, AUDIT_HEAD_KEY, audit_head_value, chain_rows
from engramdb.storage._dialect import Conn, Dialect

__all__ = ["LIMIT", "READ_ACTIONS", "Batch", "Deferred", "append_audit", "is_read", "touch_rows"]

#: Audit actions of reads: their entries may wait for the next write when the disk is full.
READ_ACTIONS: Final = frozenset({"get", "list", "search"})

#: At most this many pending touched ids and this many pending audit entries are kept.
LIMIT: Final = 10_000

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
    conn.executemany(f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
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


@dataclass(slots=True)
class Batch:
    """Bookkeeping taken out of :class:`Deferred` to be written by one transaction."""

    #: id -> (reads not yet counted, time of the last of them).
    touches: dict[str, tuple[int, str]] = field(default_factory=dict)
    audit: list[AuditRecord] = field(default_factory=list)
    dropped: int = 0

    def __bool__(self) -> bool:
        return bool(self.touches or self.audit or self.dropped)


class Deferred:
    """Bookkeeping of reads that could not be written yet (see the module docstring). Thread-safe."""

    def __init__(self, *, limit: int = LIMIT) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._pending = Batch()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending.touches) + len(self._pending.audit)

    @property
    def dropped(self) -> int:
        """Items given up because more than the limit were pending (reported in the audit trail once written)."""
        with self._lock:
            return self._pending.dropped

    def add_touches(self, memory_ids: Sequence[str], at: str) -> None:
        """Remember one read of each distinct id at ``at``."""
        with self._lock:
            touches = self._pending.touches
            for memory_id in dict.fromkeys(memory_ids):
                count, last = touches.pop(memory_id, (0, at))
                touches[memory_id] = (count + 1, max(last, at))
            while len(touches) > self._limit:
                del touches[next(iter(touches))]
                self._pending.dropped += 1

    def add_audit(self, records: Sequence[AuditRecord]) -> None:
        """Remember audit entries to append later (in order)."""
        with self._lock:
            audit = self._pending.audit
            audit.extend(records)
            excess = len(audit) - self._limit
            if excess > 0:
                del audit[:excess]
                self._pending.dropped += excess

    def take(self) -> Batch:
        """Everything pending (possibly nothing); :meth:`restore` it if the transaction writing it fails."""
        with self._lock:
            if not self._pending:
                return Batch()
            batch, self._pending = self._pending, Batch()
            return batch

    def restore(self, batch: Batch) -> None:
        """Put back a batch whose transaction did not commit (ahead of what was deferred since)."""
        if not batch:
            return
        with self._lock:
            newer = self._pending
            self._pending = batch
            for memory_id, (count, at) in newer.touches.items():
                old_count, old_at = batch.touches.pop(memory_id, (0, at))
                batch.touches[memory_id] = (old_count + count, max(old_at, at))
            batch.audit.extend(newer.audit)
            batch.dropped += newer.dropped
        # Re-apply the bounds.
        self.add_touches([], "")
        self.add_audit([])

    @staticmethod
    def write(d: Dialect, conn: Conn, batch: Batch) -> None:
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

"""Bookkeeping of reads waiting for the next write transaction (see :mod:`engramdb.storage._bookkeeping`).

Kept apart from the SQL that writes it so the dialect protocol can name :class:`Deferred` without an import cycle.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from engramdb.models.audit import AuditRecord

__all__ = ["LIMIT", "Batch", "Deferred"]

#: At most this many pending touched ids and this many pending audit entries are kept.
LIMIT: Final = 10_000


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

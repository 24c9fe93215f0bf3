"""SQLite store methods for the hash-chained audit trail (a mixin of :class:`~engramdb.storage.sqlite.SQLiteStore`).

Appending reads the last entry's hash and inserts the new entries in one
``BEGIN IMMEDIATE`` transaction (the store's write transaction), so concurrent
writers, threads or processes, extend one unbroken chain. The head (last sequence
number and hash) is kept in ``meta`` in the same transaction, so entries cut off
the end of the log are detected too. Hashing itself is pure: :mod:`engramdb.privacy.audit`;
the rows and the query are built in :mod:`engramdb.storage._common`.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from engramdb.models import AuditEvent
from engramdb.privacy.audit import AuditRecord
from engramdb.storage._common import (
    AUDIT_COLUMNS,
    AUDIT_HEAD_KEY,
)
from engramdb.storage._common_audit import AuditReads, audit_head_value, chain_rows

__all__ = ["AUDIT_HEAD_KEY", "AuditMixin"]


class AuditMixin(AuditReads):
    """Audit-trail methods; rely on the store's ``_reading``/``_writing`` contexts."""

    _placeholder = "?"

    if TYPE_CHECKING:

        def _writing(self) -> AbstractContextManager[Any]: ...

    def append_audit(self, records: Sequence[AuditRecord]) -> builtins.list[AuditEvent]:
        """See :meth:`Store.append_audit`."""
        if not records:
            return []
        with self._writing() as w:
            conn: sqlite3.Connection = w.conn
            last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            events, rows = chain_rows(records, last)
            conn.executemany(f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (AUDIT_HEAD_KEY, audit_head_value(events)),
            )
        return events

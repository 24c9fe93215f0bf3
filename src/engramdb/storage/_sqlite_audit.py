"""SQLite store methods for the hash-chained audit trail (a mixin of :class:`~engramdb.storage.sqlite.SQLiteStore`).

Appending reads the last entry's hash and inserts the new entries in one
``BEGIN IMMEDIATE`` transaction (the store's write transaction), so concurrent
writers, threads or processes, extend one unbroken chain. The head (last sequence
number and hash) is kept in ``meta`` in the same transaction, so entries cut off
the end of the log are detected too. Hashing itself is pure: :mod:`engramdb.privacy.audit`.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from engramdb._util import parse_ts
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.models import AuditEvent
from engramdb.privacy.audit import GENESIS, AuditRecord, chain, format_at

__all__ = ["AUDIT_HEAD_KEY", "AuditMixin"]

#: Meta key holding ``"<seq>:<hash>"`` of the last audit entry.
AUDIT_HEAD_KEY: Final = "audit_head"

_COLUMNS: Final = "seq, at, action, agent, memory_id, detail, hash"


def _row_to_event(row: Sequence[Any]) -> AuditEvent:
    seq, at, action, agent, memory_id, detail, digest = row
    try:
        parsed = json.loads(detail)
        when = parse_ts(at)
    except (TypeError, ValueError) as exc:
        raise CorruptStoreError(f"audit entry {seq} is unreadable: {exc}") from exc
    if when is None or not isinstance(parsed, dict):
        raise CorruptStoreError(f"audit entry {seq} is unreadable")
    return AuditEvent(
        seq=int(seq),
        action=str(action),
        agent=agent,
        memory_id=memory_id,
        at=when,
        detail=parsed,
        hash=str(digest),
    )


class AuditMixin:
    """Audit-trail methods; rely on the store's ``_reading``/``_writing`` contexts."""

    if TYPE_CHECKING:

        def _reading(self, *, snapshot: bool = False) -> AbstractContextManager[sqlite3.Connection]: ...

        def _writing(self) -> AbstractContextManager[Any]: ...

    def append_audit(self, records: Sequence[AuditRecord]) -> builtins.list[AuditEvent]:
        """Append entries to the audit trail, chained to the last one; returns them numbered and hashed."""
        if not records:
            return []
        rows: list[tuple[Any, ...]] = []
        with self._writing() as w:
            conn: sqlite3.Connection = w.conn
            last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            last_seq, prev_hash = (int(last[0]), str(last[1])) if last is not None else (0, GENESIS)
            try:
                events = chain(records, prev_hash=prev_hash, last_seq=last_seq)
                for e in events:
                    detail = json.dumps(dict(e.detail), sort_keys=True, ensure_ascii=False, allow_nan=False)
                    rows.append((e.seq, format_at(e.at), e.action, e.agent, e.memory_id, detail, e.hash))
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"audit detail must be JSON: {exc}") from exc
            conn.executemany(f"INSERT INTO audit ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            head = f"{events[-1].seq}:{events[-1].hash}"
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (AUDIT_HEAD_KEY, head),
            )
        return events

    def audit_events(
        self,
        *,
        agent: str | None = None,
        memory_id: str | None = None,
        action: str | None = None,
        after_seq: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> builtins.list[AuditEvent]:
        """Audit entries with ``seq > after_seq``, each given argument narrowing them; oldest first by default."""
        clauses: list[str] = ["seq > ?"]
        params: list[Any] = [after_seq]
        for column, value in (("agent", agent), ("memory_id", memory_id), ("action", action)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        order = "DESC" if newest_first else "ASC"
        sql = f"SELECT {_COLUMNS} FROM audit WHERE {' AND '.join(clauses)} ORDER BY seq {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._reading() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [_row_to_event(r) for r in rows]

    def audit_head(self) -> tuple[int, str] | None:
        """``(seq, hash)`` of the last entry as recorded with the last append, or None if none ever was."""
        with self._reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (AUDIT_HEAD_KEY,)).fetchone()
        if row is None:
            return None
        seq, _, digest = str(row[0]).partition(":")
        try:
            return int(seq), digest
        except ValueError:
            return -1, digest  # a damaged head never matches: verification reports it

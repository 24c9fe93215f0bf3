"""PostgreSQL store methods for sharing, knowledge transfer and the audit trail.

Mixins of :class:`~engramdb.storage.postgres.PostgresStore`, the twins of the SQLite
store's ``_sqlite_sharing``, ``_sqlite_transfer`` and ``_sqlite_audit`` modules: the
rules they apply live once in :mod:`engramdb.storage._common`; here is only PostgreSQL's
SQL. They rely on the store's ``_reading``/``_writing`` contexts, which yield a psycopg
connection inside the right transaction.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.models import AuditEvent, Change, Share
from engramdb.privacy.audit import AuditRecord
from engramdb.storage._common import (
    AUDIT_COLUMNS,
    AUDIT_HEAD_KEY,
    ShareChange,
    check_share_agents,
    checked_vector,
    equal_conditions,
    imported_history,
    on_share,
    on_unshare,
    require_found,
    row_to_share,
    ts,
)
from engramdb.storage._common_audit import AuditReads, audit_head_value, chain_rows
from engramdb.storage._pg_schema import LOCK_AUDIT
from engramdb.storage._pg_sql import INSERT_HISTORY

if TYPE_CHECKING:
    import psycopg

    from engramdb.storage.base import Vectors

    Conn = psycopg.Connection[tuple[Any, ...]]

__all__ = ["AUDIT_HEAD_KEY", "PgAuditMixin", "PgSharingMixin", "PgTransferMixin"]


class _Base:
    if TYPE_CHECKING:

        def _reading(self, *, snapshot: bool = False) -> AbstractContextManager[Conn]: ...

        def _writing(self) -> AbstractContextManager[Conn]: ...


def _owned(conn: Conn, memory_ids: Sequence[str], agent: str) -> builtins.list[tuple[Any, ...]]:
    """(id, visibility) of ``agent``'s own memories among ``memory_ids``, locked: only the owner consents."""
    return conn.execute(
        "SELECT id, visibility FROM memories WHERE id = ANY(%s::text[]) AND agent = %s ORDER BY rid FOR UPDATE",
        (builtins.list(memory_ids), agent),
    ).fetchall()


def _record(conn: Conn, memory_id: str, action: str, change: ShareChange, *, at: datetime, actor: str) -> None:
    """Apply ``change``: the memory's visibility and a history entry."""
    if change.visibility is not None:
        conn.execute("UPDATE memories SET visibility = %s WHERE id = %s", (change.visibility, memory_id))
    conn.execute(INSERT_HISTORY, change.history(memory_id, action, at=at, actor=actor))


class PgSharingMixin(_Base):
    """Share and unshare: consent rows in ``shares``, visibility kept in step, a history entry per memory."""

    def share(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """See :meth:`Store.share`."""
        check_share_agents(from_agent, to_agent)
        with self._writing() as conn:
            shared = 0
            for memory_id, visibility in _owned(conn, memory_ids, from_agent):
                cur = conn.execute(
                    "INSERT INTO shares (memory_id, from_agent, to_agent, shared_at) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (memory_id, from_agent, to_agent, ts(at)),
                )
                if cur.rowcount == 0:
                    continue
                shared += 1
                _record(conn, memory_id, "share", on_share(visibility, to_agent), at=at, actor=from_agent)
        return shared

    def unshare(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """See :meth:`Store.unshare`."""
        check_share_agents(from_agent, to_agent)
        with self._writing() as conn:
            withdrawn = 0
            for memory_id, visibility in _owned(conn, memory_ids, from_agent):
                cur = conn.execute(
                    "DELETE FROM shares WHERE memory_id = %s AND (%s = '*' OR to_agent = %s)",
                    (memory_id, to_agent, to_agent),
                )
                if cur.rowcount == 0:
                    continue
                withdrawn += 1
                left = conn.execute("SELECT 1 FROM shares WHERE memory_id = %s LIMIT 1", (memory_id,)).fetchone()
                change = on_unshare(visibility, to_agent, shares_left=left is not None)
                _record(conn, memory_id, "unshare", change, at=at, actor=from_agent)
        return withdrawn


class PgTransferMixin(_Base):
    """Grouped writes, stored vectors, share listings and imported history."""

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Group writes: every write this store makes on this thread inside the block commits together or not at all.

        Re-entrant. Other threads keep their own connections (they do not see the block's
        writes until it commits). Raise to roll everything back; do not search inside.
        """
        with self._writing():
            yield

    def get_vectors(self, memory_ids: Sequence[str], *, model_id: str) -> dict[str, Vectors]:
        """See :meth:`Store.get_vectors`."""
        if not memory_ids:
            return {}
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT memory_id, dim, embedding FROM vectors WHERE model_id = %s AND memory_id = ANY(%s::text[])",
                (model_id, builtins.list(memory_ids)),
            ).fetchall()
        # pgvector >= 0.3 loads a Vector object, older releases a numpy array.
        return {
            memory_id: checked_vector(memory_id, dim, e.to_numpy() if hasattr(e, "to_numpy") else e)
            for memory_id, dim, e in rows
        }

    def list_shares(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """See :meth:`Store.list_shares`."""
        conds, params = equal_conditions((("from_agent", from_agent), ("to_agent", to_agent)), placeholder="%s")
        if memory_ids is not None:
            conds.append("memory_id = ANY(%s::text[])")
            params.append(builtins.list(memory_ids))
        where = " AND ".join(conds) or "TRUE"
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT memory_id, from_agent, to_agent, shared_at FROM shares WHERE {where} "
                'ORDER BY shared_at, memory_id COLLATE "C", to_agent COLLATE "C"',
                params,
            ).fetchall()
        return [row_to_share(row) for row in rows]

    def import_history(self, changes: Sequence[Change]) -> None:
        """See :meth:`Store.import_history`."""
        if not changes:
            return
        rows, ids = imported_history(changes)
        with self._writing() as conn:
            found = conn.execute("SELECT id FROM memories WHERE id = ANY(%s::text[])", (ids,)).fetchall()
            require_found(ids, (r[0] for r in found))
            with conn.cursor() as cur:
                # Tombstones of earlier memories with the same id stay: they record a forget.
                cur.executemany(
                    "DELETE FROM history WHERE memory_id = %s AND seq > COALESCE("
                    "(SELECT max(seq) FROM history WHERE memory_id = %s AND action = 'forget'), 0)",
                    [(i, i) for i in ids],
                )
                cur.executemany(INSERT_HISTORY, rows)


class PgAuditMixin(_Base, AuditReads):
    """The hash-chained audit trail: appends serialised by an advisory lock held to the commit."""

    _placeholder = "%s"

    def append_audit(self, records: Sequence[AuditRecord]) -> builtins.list[AuditEvent]:
        """See :meth:`Store.append_audit`."""
        if not records:
            return []
        with self._writing() as conn:
            # Held until commit: concurrent appenders (threads or processes) queue here, so each
            # reads the head the previous one wrote and the chain stays one line.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_AUDIT,))
            last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            events, rows = chain_rows(records, last)
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (AUDIT_HEAD_KEY, audit_head_value(events)),
            )
        return events

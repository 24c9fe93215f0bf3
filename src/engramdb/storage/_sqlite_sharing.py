"""SQLite store methods for sharing: consent rows in ``shares`` (a mixin of
:class:`~engramdb.storage.sqlite.SQLiteStore`).

Visibility itself is enforced in every read (:func:`engramdb.storage._sqlite_sql.filter_sql`);
these methods only record and withdraw an owner's consent and apply the share rules of
:mod:`engramdb.storage._common` (``private`` <-> ``shared``, a history entry per memory).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.storage._common import ShareChange, check_share_agents, on_share, on_unshare, ts
from engramdb.storage._sqlite_sql import INSERT_HISTORY, ids_json
from engramdb.storage._vector_index import attrs_op

if TYPE_CHECKING:
    from engramdb.storage.sqlite import _Write

__all__ = ["SharingMixin"]


class SharingMixin:
    """Share and unshare; rely on the store's ``_writing`` context."""

    if TYPE_CHECKING:

        def _writing(self) -> AbstractContextManager[Any]: ...

    def share(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """See :meth:`Store.share`."""
        check_share_agents(from_agent, to_agent)
        with self._writing() as w:
            shared = 0
            for memory_id, kind, visibility in _owned(w.conn, memory_ids, from_agent):
                cur = w.conn.execute(
                    "INSERT OR IGNORE INTO shares (memory_id, from_agent, to_agent, shared_at) VALUES (?, ?, ?, ?)",
                    (memory_id, from_agent, to_agent, ts(at)),
                )
                if cur.rowcount == 0:
                    continue
                shared += 1
                _record(w, memory_id, kind, "share", on_share(visibility, to_agent), at=at, actor=from_agent)
        return shared

    def unshare(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """See :meth:`Store.unshare`."""
        check_share_agents(from_agent, to_agent)
        with self._writing() as w:
            withdrawn = 0
            for memory_id, kind, visibility in _owned(w.conn, memory_ids, from_agent):
                cur = w.conn.execute(
                    "DELETE FROM shares WHERE memory_id = ? AND (? = '*' OR to_agent = ?)",
                    (memory_id, to_agent, to_agent),
                )
                if cur.rowcount == 0:
                    continue
                withdrawn += 1
                left = w.conn.execute("SELECT 1 FROM shares WHERE memory_id = ? LIMIT 1", (memory_id,)).fetchone()
                change = on_unshare(visibility, to_agent, shares_left=left is not None)
                _record(w, memory_id, kind, "unshare", change, at=at, actor=from_agent)
        return withdrawn


def _owned(conn: sqlite3.Connection, memory_ids: Sequence[str], agent: str) -> list[Any]:
    """(id, kind, visibility) of ``agent``'s own memories among ``memory_ids``: only the owner consents."""
    return conn.execute(
        "SELECT id, kind, visibility FROM memories "
        "WHERE id IN (SELECT value FROM json_each(?)) AND agent = ? ORDER BY rid",
        (ids_json(memory_ids), agent),
    ).fetchall()


def _record(
    w: _Write, memory_id: str, kind: str, action: str, change: ShareChange, *, at: datetime, actor: str
) -> None:
    """Apply ``change`` inside the write ``w``: the memory's visibility (and the vector cache's) and a history entry."""
    if change.visibility is not None:
        w.conn.execute("UPDATE memories SET visibility = ? WHERE id = ?", (change.visibility, memory_id))
        w.ops.append(attrs_op(memory_id, kind, change.visibility))
    w.conn.execute(INSERT_HISTORY, change.history(memory_id, action, at=at, actor=actor))

"""SQLite store methods for sharing: consent rows in ``shares`` (a mixin of
:class:`~engramdb.storage.sqlite.SQLiteStore`).

Visibility itself is enforced in every read (:func:`engramdb.storage._sqlite_sql.filter_sql`);
these methods only record and withdraw an owner's consent, keep ``visibility`` in step
(``private`` <-> ``shared``), and write a history entry per memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.storage._sqlite_sql import check_share_agents, dumps, ids_json, ts
from engramdb.storage._vector_index import attrs_op

__all__ = ["SharingMixin"]


class SharingMixin:
    """Share and unshare; rely on the store's ``_writing`` context."""

    if TYPE_CHECKING:

        def _writing(self) -> AbstractContextManager[Any]: ...

    def share(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """Share ``from_agent``'s own memories among ``memory_ids`` with ``to_agent`` ('*' = everyone).

        Memories of other agents are skipped (only the owner can consent). A private
        memory becomes ``shared``. Returns how many memories were newly shared.
        """
        check_share_agents(from_agent, to_agent)
        with self._writing() as w:
            conn = w.conn
            owned = conn.execute(
                "SELECT id, kind, visibility FROM memories "
                "WHERE id IN (SELECT value FROM json_each(?)) AND agent = ? ORDER BY rid",
                (ids_json(memory_ids), from_agent),
            ).fetchall()
            shared = 0
            for memory_id, kind, visibility in owned:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO shares (memory_id, from_agent, to_agent, shared_at) VALUES (?, ?, ?, ?)",
                    (memory_id, from_agent, to_agent, ts(at)),
                )
                if cur.rowcount == 0:
                    continue
                shared += 1
                before: dict[str, Any] = {}
                after: dict[str, Any] = {"shared_with": to_agent}
                if visibility == "private":
                    conn.execute("UPDATE memories SET visibility = 'shared' WHERE id = ?", (memory_id,))
                    before["visibility"], after["visibility"] = "private", "shared"
                    w.ops.append(attrs_op(memory_id, kind, "shared"))
                self._log(conn, memory_id, "share", at=at, actor=from_agent, before=before, after=after)
        return shared

    def unshare(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """Withdraw shares of ``from_agent``'s memories; ``to_agent='*'`` withdraws every share.

        A ``shared`` memory left with no shares becomes ``private`` again (a ``public``
        one stays public: that is a visibility change, made with :meth:`update`).
        Returns how many memories lost at least one share.
        """
        check_share_agents(from_agent, to_agent)
        with self._writing() as w:
            conn = w.conn
            owned = conn.execute(
                "SELECT id, kind, visibility FROM memories "
                "WHERE id IN (SELECT value FROM json_each(?)) AND agent = ? ORDER BY rid",
                (ids_json(memory_ids), from_agent),
            ).fetchall()
            withdrawn = 0
            for memory_id, kind, visibility in owned:
                cur = conn.execute(
                    "DELETE FROM shares WHERE memory_id = ? AND (? = '*' OR to_agent = ?)",
                    (memory_id, to_agent, to_agent),
                )
                if cur.rowcount == 0:
                    continue
                withdrawn += 1
                before: dict[str, Any] = {"shared_with": to_agent}
                after: dict[str, Any] = {}
                left = conn.execute("SELECT 1 FROM shares WHERE memory_id = ? LIMIT 1", (memory_id,)).fetchone()
                if left is None and visibility == "shared":
                    conn.execute("UPDATE memories SET visibility = 'private' WHERE id = ?", (memory_id,))
                    before["visibility"], after["visibility"] = "shared", "private"
                    w.ops.append(attrs_op(memory_id, kind, "private"))
                self._log(conn, memory_id, "unshare", at=at, actor=from_agent, before=before, after=after)
        return withdrawn

    @staticmethod
    def _log(
        conn: sqlite3.Connection,
        memory_id: str,
        action: str,
        *,
        at: datetime,
        actor: str,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
    ) -> None:
        conn.execute(
            "INSERT INTO history (memory_id, action, at, actor, before, after) VALUES (?, ?, ?, ?, ?, ?)",
            (memory_id, action, ts(at), actor, dumps(before, what="change"), dumps(after, what="change")),
        )

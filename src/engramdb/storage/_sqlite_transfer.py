"""SQLite store methods for sharing listings and knowledge transfer (export, import, merge).

A mixin of :class:`~engramdb.storage.sqlite.SQLiteStore`, kept apart so the core
store stays readable: grouping writes in one transaction (:meth:`atomic`), reading
stored vectors back (export), listing shares, and giving imported memories the
history they had in their source store.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from engramdb.models import Change, Share
from engramdb.storage._common import checked_vector, equal_conditions, imported_history, require_found, row_to_share
from engramdb.storage._sqlite_sql import INSERT_HISTORY, ids_json

if TYPE_CHECKING:
    from engramdb.storage.base import Vectors

__all__ = ["TransferMixin"]


class TransferMixin:
    """Transfer and sharing-listing methods; relies on the store's ``_reading``/``_writing`` contexts."""

    if TYPE_CHECKING:

        def _reading(self, *, snapshot: bool = False) -> AbstractContextManager[sqlite3.Connection]: ...

        def _writing(self) -> AbstractContextManager[Any]: ...

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Group writes: every write this store makes inside the block commits together or not at all.

        The block holds the store's write lock (other threads wait). Raise to roll
        everything back; do not run searches inside (they need their own snapshot).
        """
        with self._writing():
            yield

    def get_vectors(self, memory_ids: Sequence[str], *, model_id: str) -> dict[str, Vectors]:
        """See :meth:`Store.get_vectors`."""
        if not memory_ids:
            return {}
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT memory_id, dim, vec FROM vectors "
                "WHERE model_id = ? AND memory_id IN (SELECT value FROM json_each(?))",
                (model_id, ids_json(memory_ids)),
            ).fetchall()
        return {
            memory_id: checked_vector(memory_id, dim, np.frombuffer(blob, dtype=np.float32))
            for memory_id, dim, blob in rows
        }

    def list_shares(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """See :meth:`Store.list_shares`."""
        conds, params = equal_conditions((("from_agent", from_agent), ("to_agent", to_agent)), placeholder="?")
        if memory_ids is not None:
            conds.append("memory_id IN (SELECT value FROM json_each(?))")
            params.append(ids_json(memory_ids))
        where = " AND ".join(conds) or "1"
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT memory_id, from_agent, to_agent, shared_at FROM shares WHERE {where} "
                "ORDER BY shared_at, memory_id, to_agent",
                params,
            ).fetchall()
        return [row_to_share(row) for row in rows]

    def import_history(self, changes: Sequence[Change]) -> None:
        """See :meth:`Store.import_history`."""
        if not changes:
            return
        rows, ids = imported_history(changes)
        with self._writing() as w:
            conn: sqlite3.Connection = w.conn
            found = conn.execute(
                "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids_json(ids),)
            ).fetchall()
            require_found(ids, (r[0] for r in found))
            # Tombstones of earlier memories with the same id stay: they record a forget.
            conn.executemany(
                "DELETE FROM history WHERE memory_id = ? AND seq > COALESCE("
                "(SELECT max(seq) FROM history WHERE memory_id = ? AND action = 'forget'), 0)",
                [(i, i) for i in ids],
            )
            conn.executemany(INSERT_HISTORY, rows)

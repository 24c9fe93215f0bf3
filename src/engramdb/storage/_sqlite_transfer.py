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

from engramdb._util import parse_ts
from engramdb.errors import CorruptStoreError, NotFound, ValidationError
from engramdb.models import Change, Share
from engramdb.storage._sqlite_sql import dumps, ids_json, jsonable, ts

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
        """The stored vectors from ``model_id`` of these memories (ids without one are left out)."""
        if not memory_ids:
            return {}
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT memory_id, dim, vec FROM vectors "
                "WHERE model_id = ? AND memory_id IN (SELECT value FROM json_each(?))",
                (model_id, ids_json(memory_ids)),
            ).fetchall()
        out: dict[str, Vectors] = {}
        for memory_id, dim, blob in rows:
            vector = np.frombuffer(blob, dtype=np.float32)
            if vector.shape != (int(dim),):
                raise CorruptStoreError(f"the vector of memory {memory_id!r} is damaged")
            out[memory_id] = vector.copy()
        return out

    def list_shares(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """Shares in force, oldest first; each argument given narrows them (``to_agent`` matches exactly)."""
        conds, params = [], []
        if from_agent is not None:
            conds.append("from_agent = ?")
            params.append(from_agent)
        if to_agent is not None:
            conds.append("to_agent = ?")
            params.append(to_agent)
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
        out = []
        for memory_id, owner, recipient, at in rows:
            when = parse_ts(at)
            if when is None:
                raise CorruptStoreError(f"share of memory {memory_id!r} has no time")
            out.append(Share(memory_id=memory_id, from_agent=owner, to_agent=recipient, shared_at=when))
        return out

    def import_history(self, changes: Sequence[Change]) -> None:
        """Give existing memories the history they had in another store.

        Every memory named in ``changes`` has the history of its current life (the
        entries after its last ``forget`` tombstone, if an earlier memory with that id
        was forgotten) replaced by those ``changes`` (in the given order; actions, times,
        actors and values kept, with this store's sequence numbers). Meant for an
        import, inside :meth:`atomic` right after ``add``. Raises NotFound if a named
        memory does not exist.
        """
        if not changes:
            return
        rows = []
        for c in changes:
            if not c.action or not c.actor:
                raise ValidationError("a history entry needs an action and an actor")
            before = None if c.before is None else dumps(jsonable(c.before), what="history entry")
            after = None if c.after is None else dumps(jsonable(c.after), what="history entry")
            rows.append((c.memory_id, c.action, ts(c.at), c.actor, before, after))
        ids = builtins.list(dict.fromkeys(c.memory_id for c in changes))
        with self._writing() as w:
            conn: sqlite3.Connection = w.conn
            found = {
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids_json(ids),)
                )
            }
            missing = [i for i in ids if i not in found]
            if missing:
                raise NotFound(f"no memory with id {missing[0]!r}")
            # Tombstones of earlier memories with the same id stay: they record a forget.
            conn.executemany(
                "DELETE FROM history WHERE memory_id = ? AND seq > COALESCE("
                "(SELECT max(seq) FROM history WHERE memory_id = ? AND action = 'forget'), 0)",
                [(i, i) for i in ids],
            )
            conn.executemany(
                "INSERT INTO history (memory_id, action, at, actor, before, after) VALUES (?, ?, ?, ?, ?, ?)", rows
            )

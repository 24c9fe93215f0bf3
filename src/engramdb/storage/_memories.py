"""The memories role of both SQL backends, written once over a :class:`~engramdb.storage._dialect.Dialect`.

SQL here runs on SQLite and PostgreSQL alike (``?`` placeholders; the PostgreSQL dialect
translates them). What each write changes is decided first (:mod:`engramdb.storage._planning`)
and values are encoded by :mod:`engramdb.storage._codecs`, so both backends store and return
identical memories.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage.base import Vectors

from engramdb.errors import StorageError, ValidationError
from engramdb.models import Change, Memory
from engramdb.storage._bookkeeping import touch_rows
from engramdb.storage._checks import (
    as_unit_rows,
    check_changes,
    check_new_memories,
    check_page,
    not_found,
    require_found,
)
from engramdb.storage._codecs import (
    MEMORY_COLUMNS,
    created_history,
    imported_history,
    in_order,
    memory_row,
    row_to_change,
    row_to_memory,
    shared_row_to_memory,
    tag_rows,
    tombstone,
    ts,
)
from engramdb.storage._dialect import Conn, Dialect
from engramdb.storage._planning import plan_update
from engramdb.storage.base import MODEL_META_KEY, Filter, ListOrder, UsageTotals

__all__ = ["INSERT_HISTORY", "SQLMemories", "delete_vectors", "fetch_locked", "write_vectors"]

#: Inserts one history row (:func:`engramdb.storage._codecs.history_row`).
INSERT_HISTORY: Final = "INSERT INTO history (memory_id, action, at, actor, before, after) VALUES (?, ?, ?, ?, ?, ?)"
#: The columns of a history row (:func:`engramdb.storage._codecs.history_row`), in order.
HISTORY_COLUMNS: Final = ("memory_id", "action", "at", "actor", "before", "after")
#: The columns of a new memory's row (:func:`engramdb.storage._codecs.memory_row`), in order.
_MEMORY_INSERT_COLUMNS: Final = (
    "id", "agent", "kind", "content", "tags", "metadata", "created_at", "updated_at", "last_accessed", "access_count",
    "confidence", "successes", "attempts", "visibility", "redacted", "user_id", "session_id", "occurred_at",
    "valid_until",
)  # fmt: skip
_INSERT_TAG: Final = "INSERT INTO memory_tags (memory_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING"
#: ORDER BY of each list order; ending in the row id makes it total, so offset pages never overlap.
_LIST_ORDER: Final[dict[str, str]] = {
    "newest": "m.created_at DESC, m.rid DESC",
    "most_used": "m.attempts DESC, m.access_count DESC, m.created_at DESC, m.rid DESC",
}
#: Usage totals in one pass (CASE, not FILTER: the same SQL on both backends). The best rate is
#: Memory.success_rate's posterior mean, over memories with feedback only.
_USAGE: Final = (
    "SELECT coalesce(sum(CASE WHEN m.attempts > 0 THEN 1 ELSE 0 END), 0), coalesce(sum(m.attempts), 0), "
    "coalesce(sum(m.successes), 0), coalesce(sum(m.access_count), 0), "
    "max(CASE WHEN m.attempts > 0 THEN (m.successes + 1.0) / (m.attempts + 2.0) END), "
    "coalesce(sum(m.confidence), 0), max(m.confidence) FROM memories m WHERE "
)


def fetch_locked(d: Dialect, conn: Conn, memory_id: str) -> Memory:
    """A memory inside a write, its row locked until the commit where the backend locks rows; NotFound if missing."""
    row = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?{d.for_update}", (memory_id,)).fetchone()
    if row is None:
        raise not_found(memory_id)
    return row_to_memory(row)


def delete_vectors(d: Dialect, conn: Conn, clause: str, param: Any) -> None:
    """Delete the vectors of the memories ``clause`` (over ``memory_id``, with ``param``) selects, from every table
    holding vectors.

    The staging table first: its row may be locked by the mover folding it into ``vectors``, which then commits
    before this goes on, and the next statement deletes the row it moved (the other order would leave it).
    """
    for table in d.vector_tables:
        conn.execute(f"DELETE FROM {table} WHERE {clause}", (param,))


def write_vectors(
    d: Dialect,
    conn: Conn,
    memories: Sequence[Memory],
    unit: _F32,
    *,
    model_id: str,
    new: bool = False,
) -> None:
    """Insert or replace the vectors of existing memories inside a write (dimension checked).

    ``new``: the memories were inserted in this transaction, so they have no vector to replace.
    """
    dim = int(unit.shape[1])
    ids = [m.id for m in memories]
    these, ids_param = d.one_of("memory_id", ids)
    if d.vector_counts:
        # Another dimension counts against this one unless every such row is one being replaced here.
        checks = [
            "SELECT c.dim FROM vector_counts c WHERE c.model_id = ? AND c.dim <> ? AND c.n > "
            f"(SELECT count(*) FROM vectors v WHERE {these} AND v.model_id = c.model_id AND v.dim = c.dim) LIMIT 1"
        ]
        params: tuple[Any, ...] = (model_id, dim, ids_param)
    else:
        checks = [
            f"SELECT dim FROM {table} WHERE model_id = ? AND (dim < ? OR dim > ?) AND NOT {these} LIMIT 1"
            for table in d.vector_tables
        ]
        params = (model_id, dim, dim, ids_param)
    for check in checks:
        other = conn.execute(check, params).fetchone()
        if other is not None:
            raise ValidationError(f"model {model_id!r} vectors have dimension {other[0]} in this store, not {dim}")
    d.prepare_vectors(model_id, dim)
    # The first vectors written name the model that searches use.
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (MODEL_META_KEY, model_id))
    if not new:
        # A replaced vector is deleted and inserted again rather than updated in place, so it gets a new
        # seq: another process's vector cache then sees it as new (an append) after dropping the rows that
        # are gone (engramdb.storage._vector_index.VectorIndex.reconcile), instead of rebuilding its index.
        delete_vectors(d, conn, these, ids_param)
    if d.vectors_by_agent:
        # PostgreSQL: into the staging table, folded into the HNSW graphs later by one mover (``_pg_staging``).
        d.insert_rows(
            conn,
            d.vector_tables[0],
            ("memory_id", "agent", "open", "model_id", "dim", d.vector_column),
            [
                (m.id, m.agent, m.visibility != "private", model_id, dim, d.encode_vector(unit[n]))
                for n, m in enumerate(memories)
            ],
        )
    else:
        d.insert_rows(
            conn,
            "vectors",
            ("memory_id", "model_id", "dim", d.vector_column),
            [(memory_id, model_id, dim, d.encode_vector(unit[n])) for n, memory_id in enumerate(ids)],
        )
    d.vectors_written(memories, unit, model_id=model_id)


class SQLMemories:
    """:class:`~engramdb.storage.base.MemoryRepo` over a SQL dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect

    # -- writes -----------------------------------------------------------------------------
    def add(
        self,
        memories: Sequence[Memory],
        vectors: Vectors | None,
        *,
        model_id: str,
        actor: str | None,
        unvectored: frozenset[int] = frozenset(),
    ) -> None:
        """See :meth:`MemoryRepo.add`: every table's rows in one statement each, whatever the batch's mix."""
        if not memories:
            return
        d = self._d
        ids = check_new_memories(memories)
        keep = [n for n in range(len(memories)) if n not in unvectored] if vectors is not None else []
        unit = None
        if vectors is not None:
            given = np.asarray(vectors, dtype=np.float32)
            if given.ndim != 2 or given.shape[0] != len(memories):
                raise ValidationError(f"got vectors of shape {given.shape} for {len(memories)} memories")
            # The rows left to the background worker may be placeholders (zeros): only the others are checked.
            unit = as_unit_rows(given[keep], rows=len(keep)) if keep else None
        rows = [memory_row(m) for m in memories]
        history = [created_history(m, actor=m.agent if actor is None else actor) for m in memories]
        with d.write() as conn:
            if unit is not None:
                # Before any row is written (PostgreSQL: creating an index waits for other writers).
                d.prepare_vectors(model_id, int(unit.shape[1]))
            clause, param = d.one_of("id", ids)
            clash = conn.execute(f"SELECT id FROM memories WHERE {clause} LIMIT 1", (param,)).fetchone()
            if clash is not None:
                raise ValidationError(f"a memory with id {clash[0]!r} already exists")
            d.insert_new(conn, "memories", _MEMORY_INSERT_COLUMNS, rows)
            tags = [row for m in memories for row in tag_rows(m.id, m.tags)]
            if tags:
                d.insert_rows(conn, "memory_tags", ("memory_id", "tag"), tags)
            d.insert_rows(conn, "history", HISTORY_COLUMNS, history)
            if unit is not None:
                write_vectors(d, conn, [memories[n] for n in keep], unit, model_id=model_id, new=True)

    def update(
        self,
        memory_id: str,
        changes: Mapping[str, Any],
        *,
        vector: Vectors | None,
        model_id: str,
        actor: str,
        at: datetime,
        action: str = "update",
    ) -> Memory:
        """See :meth:`MemoryRepo.update`; what is written is planned by :func:`~engramdb.storage._planning.plan_update`.

        The row is read with the dialect's lock (``FOR UPDATE`` on PostgreSQL; SQLite's write
        transaction holds the database lock), so a read-modify-write inside ``atomic()`` is safe.
        """
        check_changes(changes)
        unit = as_unit_rows(vector, rows=1) if vector is not None else None
        d = self._d
        with d.write() as conn:
            if unit is not None:
                d.prepare_vectors(model_id, int(unit.shape[1]))
            plan = plan_update(fetch_locked(d, conn, memory_id), changes, action=action, actor=actor, at=at)
            after = plan.after
            if after:
                assignments = ", ".join(f"{name} = ?" for name in plan.columns)
                conn.execute(f"UPDATE memories SET {assignments} WHERE id = ?", (*plan.columns.values(), memory_id))
                if plan.withdraws_shares:
                    conn.execute("DELETE FROM shares WHERE memory_id = ?", (memory_id,))
                if plan.new_tag_rows is not None:
                    conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (memory_id,))
                    if plan.new_tag_rows:
                        conn.executemany(_INSERT_TAG, plan.new_tag_rows)
                conn.execute(INSERT_HISTORY, plan.history)
            result = fetch_locked(d, conn, memory_id)
            if unit is not None:
                write_vectors(d, conn, [result], unit, model_id=model_id)
            elif "content" in after:
                # The old vector no longer describes the text: the memory shows up in vectors.iter_stale.
                delete_vectors(d, conn, "memory_id = ?", memory_id)
                d.vector_removed(memory_id)
            if "kind" in after or "visibility" in after:
                d.attributes_changed(memory_id, kind=result.kind, visibility=result.visibility)
        return result

    def delete(self, memory_id: str, *, actor: str, at: datetime) -> None:
        """Forget a memory: its row, keyword terms, vector, tags, shares and history contents.

        A ``forget`` tombstone without content stays in the history. Joins an open ``atomic()``
        block; what the backend does beyond SQL (SQLite: merge the keyword index before the
        commit, truncate the log after the outermost one) runs once per transaction.
        """
        d = self._d
        with d.write() as conn:
            fetch_locked(d, conn, memory_id)
            # Vectors, tags and shares would go with the row (ON DELETE CASCADE); explicit for clarity.
            delete_vectors(d, conn, "memory_id = ?", memory_id)
            for table in ("memory_tags", "shares"):
                conn.execute(f"DELETE FROM {table} WHERE memory_id = ?", (memory_id,))
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            conn.execute("UPDATE history SET before = NULL, after = NULL WHERE memory_id = ?", (memory_id,))
            conn.execute(INSERT_HISTORY, tombstone(memory_id, at=at, actor=actor))
            d.vector_removed(memory_id)
            d.forgotten()

    def touch(self, memory_ids: Sequence[str], *, at: datetime) -> None:
        """Record a retrieval: ``last_accessed = at`` and ``access_count + 1``, once per distinct id.

        See :meth:`MemoryRepo.touch`: on a full disk the touch waits in memory for the next write.
        """
        if not memory_ids:
            return
        d = self._d
        try:
            with d.write() as conn:
                touch_rows(d, conn, memory_ids, ts(at))
        except StorageError as exc:
            # A read must not fail for its bookkeeping: on a full disk the next write catches up.
            if d.in_write() or not d.out_of_space(exc):
                raise
            d.deferred.add_touches(memory_ids, ts(at))

    def import_history(self, changes: Sequence[Change]) -> None:
        """See :meth:`MemoryRepo.import_history`."""
        if not changes:
            return
        rows, ids = imported_history(changes)
        d = self._d
        clause, param = d.one_of("id", ids)
        with d.write() as conn:
            found = conn.execute(f"SELECT id FROM memories WHERE {clause}{d.for_update}", (param,)).fetchall()
            require_found(ids, (r[0] for r in found))
            # Tombstones of earlier memories with the same id stay: they record a forget.
            conn.executemany(
                "DELETE FROM history WHERE memory_id = ? AND seq > COALESCE("
                "(SELECT max(seq) FROM history WHERE memory_id = ? AND action = 'forget'), 0)",
                [(i, i) for i in ids],
            )
            conn.executemany(INSERT_HISTORY, rows)

    # -- reads ------------------------------------------------------------------------------
    def get(self, memory_id: str, flt: Filter | None = None) -> Memory | None:
        """See :meth:`MemoryRepo.get`."""
        return self.get_many([memory_id], flt).get(memory_id)

    def get_many(self, memory_ids: Sequence[str], flt: Filter | None = None) -> dict[str, Memory]:
        """See :meth:`MemoryRepo.get_many`."""
        if not memory_ids:
            return {}
        d = self._d
        f = d.filter_sql(flt)
        clause, param = d.one_of("m.id", memory_ids)
        # Inside a write, the rows read are locked to the commit (in id order: no deadlock between
        # two such reads), so a read-modify-write in one atomic() block cannot lose an update.
        lock = f" ORDER BY m.id{d.for_update}" if d.for_update and d.in_write() else ""
        with d.read() as conn:
            rows = conn.execute(
                f"SELECT {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS} FROM memories m "
                f"WHERE {clause} AND {f.where}{lock}",
                (*f.shared_by_params, *f.shared_at_params, param, *f.params),
            ).fetchall()
        return in_order(memory_ids, map(shared_row_to_memory, rows))

    def list(
        self, flt: Filter, *, limit: int = 100, offset: int = 0, order: ListOrder = "newest"
    ) -> builtins.list[Memory]:
        """See :meth:`MemoryRepo.list`."""
        check_page(limit, offset)
        order_by = _LIST_ORDER.get(order) if isinstance(order, str) else None
        if order_by is None:
            raise ValidationError(f"unknown list order {order!r}: expected one of {', '.join(_LIST_ORDER)}")
        f = self._d.filter_sql(flt)
        with self._d.read() as conn:
            rows = conn.execute(
                f"SELECT {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS} FROM memories m WHERE {f.where} "
                f"ORDER BY {order_by} LIMIT ? OFFSET ?",
                (*f.shared_by_params, *f.shared_at_params, *f.params, limit, offset),
            ).fetchall()
        return [shared_row_to_memory(row) for row in rows]

    def count(self, flt: Filter) -> int:
        """See :meth:`MemoryRepo.count`."""
        f = self._d.filter_sql(flt, visit_all=True)
        with self._d.read() as conn:
            row = conn.execute(f"SELECT count(*) FROM memories m WHERE {f.where}", f.params).fetchone()
        return int(row[0]) if row is not None else 0

    def usage(self, flt: Filter) -> UsageTotals:
        """See :meth:`MemoryRepo.usage`."""
        f = self._d.filter_sql(flt, visit_all=True)
        with self._d.read() as conn:
            row = conn.execute(_USAGE + f.where, f.params).fetchone()
        used, attempts, successes, accesses, best, confidence, best_confidence = (
            row if row is not None else (0, 0.0, 0.0, 0, None, 0.0, None)
        )
        return UsageTotals(
            used=int(used),
            attempts=float(attempts),
            successes=float(successes),
            accesses=int(accesses),
            best_success_rate=None if best is None else float(best),
            confidence_sum=float(confidence),
            best_confidence=None if best_confidence is None else float(best_confidence),
        )

    def history_all(self, *, after_seq: int = 0, limit: int = 1000) -> builtins.list[Change]:
        """See :meth:`MemoryRepo.history_all`."""
        check_page(limit, 0)
        with self._d.read() as conn:
            rows = conn.execute(
                "SELECT seq, memory_id, action, at, actor, before, after FROM history WHERE seq > ? "
                "ORDER BY seq LIMIT ?",
                (after_seq, limit),
            ).fetchall()
        return [row_to_change(row) for row in rows]

    def history(self, memory_id: str) -> builtins.list[Change]:
        """See :meth:`MemoryRepo.history`."""
        with self._d.read() as conn:
            rows = conn.execute(
                "SELECT seq, memory_id, action, at, actor, before, after FROM history WHERE memory_id = ? ORDER BY seq",
                (memory_id,),
            ).fetchall()
        return [row_to_change(row) for row in rows]

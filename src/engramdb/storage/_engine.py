"""The SQL engine: every role of a store written once over a :class:`~engramdb.storage._dialect.Dialect`.

:func:`sql_store` bundles them into a :class:`~engramdb.storage.base.Store`. The roles are
small classes sharing one dialect (composition: no backend subclasses them); the memories
role lives in :mod:`engramdb.storage._memories`, the others here.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage.base import Vectors

from engramdb.errors import StorageError
from engramdb.models import AuditEvent, Share
from engramdb.models.audit import AuditRecord
from engramdb.storage._bookkeeping import append_audit, is_read
from engramdb.storage._checks import as_unit_rows, check_distinct, check_meta, check_share_agents, require_found
from engramdb.storage._codecs import (
    AUDIT_HEAD_KEY,
    MEMORY_COLUMNS,
    checked_vector,
    parse_audit_head,
    row_to_event,
    row_to_memory,
    row_to_share,
    ts,
)
from engramdb.storage._dialect import Conn, Dialect
from engramdb.storage._filters import audit_query, equal_conditions
from engramdb.storage._memories import INSERT_HISTORY, SQLMemories, write_vectors
from engramdb.storage._planning import ShareChange, keyset_batches, on_share, on_unshare
from engramdb.storage.base import Store, StoredVector

__all__ = ["SQLAudit", "SQLChecks", "SQLMeta", "SQLShares", "SQLVectors", "all_vectors", "sql_store"]

_UPSERT_META: Final = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


def sql_store(dialect: Dialect) -> Store:
    """The :class:`~engramdb.storage.base.Store` of a SQL backend: every role over ``dialect``."""
    return Store(
        location=dialect.location,
        meta=SQLMeta(dialect),
        memories=SQLMemories(dialect),
        search=dialect.search,
        vectors=SQLVectors(dialect),
        shares=SQLShares(dialect),
        audit=SQLAudit(dialect),
        checks=SQLChecks(dialect),
        _atomic=dialect.atomic,
        _close=dialect.close,
        _relax=dialect.relax_commit,
        concurrent_reads=dialect.concurrent_reads,
        _in_write=dialect.in_write,
        _background=dialect.background_turn,
        _give_way=dialect.give_way,
    )


class SQLMeta:
    """:class:`~engramdb.storage.base.MetaRepo` over a SQL dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect

    def get(self, key: str) -> str | None:
        """See :meth:`MetaRepo.get`: inside ``store.atomic()`` the key stays locked until the commit."""
        d = self._d
        if d.in_write():
            # A read-modify-write (API keys: read the list, append, set): concurrent ones of the same key
            # queue here, so none overwrites another's change.
            with d.write() as conn:
                d.lock_meta(conn, key)
                row = conn.execute(f"SELECT value FROM meta WHERE key = ?{d.for_update}", (key,)).fetchone()
        else:
            with d.read() as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        """See :meth:`MetaRepo.set`."""
        check_meta(key, value, internal=self._d.internal_meta)
        with self._d.write() as conn:
            conn.execute(_UPSERT_META, (key, value))


def all_vectors(d: Dialect, columns: str) -> str:
    """A FROM item (to alias) of every vector row, ``columns`` of each: one table, or on PostgreSQL the staged rows
    and the folded ones (a memory's vector is in one of them)."""
    if len(d.vector_tables) == 1:
        return d.vector_tables[0]
    return "(" + " UNION ALL ".join(f"SELECT {columns} FROM {table}" for table in d.vector_tables) + ")"


#: The vector row columns the stale counts read (of :func:`all_vectors`).
_STALE_COLUMNS = "memory_id, model_id, dim"


class SQLVectors:
    """:class:`~engramdb.storage.base.VectorRepo` over a SQL dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect

    def count_stale(self, model_id: str) -> int:
        """See :meth:`VectorRepo.count_stale`."""
        with self._d.read_apart() as conn:  # a scan of every memory: no search waits for it
            # As iter_stale: a memory has at most one vector row, so as many of the model's vectors as memories means
            # none is stale (on SQLite an index count); only otherwise is each memory looked at.
            current = (
                "SELECT coalesce(sum(n), 0) FROM vector_counts WHERE model_id = ? AND dim > 0"
                if self._d.vector_counts
                else f"SELECT count(*) FROM {all_vectors(self._d, _STALE_COLUMNS)} v WHERE v.model_id = ? AND v.dim > 0"
            )
            counted = conn.execute(f"SELECT count(*), ({current}) FROM memories", (model_id,)).fetchone()
            if counted is not None and int(counted[0]) == int(counted[1]):
                return 0
            # The union of PostgreSQL's two vector tables is built only for the memory-by-memory count.
            vectors = all_vectors(self._d, _STALE_COLUMNS)
            row = conn.execute(
                f"SELECT count(*) FROM memories m LEFT JOIN {vectors} v ON v.memory_id = m.id "
                "WHERE v.memory_id IS NULL OR v.model_id <> ?",
                (model_id,),
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def iter_stale(self, model_id: str, *, batch: int = 256) -> Iterator[list[tuple[str, str]]]:
        """See :meth:`VectorRepo.iter_stale` (batching: :func:`~engramdb.storage._planning.keyset_batches`)."""

        vectors = all_vectors(self._d, _STALE_COLUMNS)

        def fetch(after: int, upto: int, size: int) -> list[Any]:
            with self._d.read() as conn:
                return conn.execute(
                    f"SELECT m.rid, m.id, m.content FROM memories m LEFT JOIN {vectors} v ON v.memory_id = m.id "
                    "WHERE m.rid > ? AND m.rid <= ? AND (v.memory_id IS NULL OR v.model_id <> ?) "
                    "ORDER BY m.rid LIMIT ?",
                    (after, upto, model_id, size),
                ).fetchall()

        with self._d.read_apart() as conn:  # reads every vector row: no search waits for it
            # One snapshot: a memory has at most one vector row, so as many of the model's vectors as memories
            # means none is stale. Every process opening the store asks; the scan below reads every memory and its
            # vector row (at 1M, 4 writer processes' scans were the server's largest load, bench/RESULTS.md).
            row = conn.execute(
                f"SELECT max(rid), count(*), (SELECT count(*) FROM {vectors} v WHERE v.model_id = ? AND v.dim > 0) "
                "FROM memories",
                (model_id,),
            ).fetchone()
        if row is None or row[0] is None or int(row[1]) == int(row[2]):
            return
        yield from keyset_batches(batch, fetch, top=int(row[0]))

    def set(self, memory_ids: Sequence[str], vectors: Vectors, *, model_id: str) -> None:
        """See :meth:`VectorRepo.set`."""
        check_distinct(memory_ids)
        unit = as_unit_rows(vectors, rows=len(memory_ids))
        if not memory_ids:
            return
        d = self._d
        clause, param = d.one_of("m.id", memory_ids)
        with d.write() as conn:
            d.prepare_vectors(model_id, int(unit.shape[1]))
            rows = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {clause}{d.for_update}", (param,))
            found = {m.id: m for m in map(row_to_memory, rows.fetchall())}
            require_found(memory_ids, found)
            write_vectors(d, conn, [found[i] for i in memory_ids], unit, model_id=model_id)

    def get(
        self, memory_ids: Sequence[str], *, model_id: str, agents: Sequence[str] | None = None
    ) -> dict[str, Vectors]:
        """See :meth:`VectorRepo.get`."""
        if not memory_ids:
            return {}
        d = self._d
        clause, param = d.one_of("memory_id", memory_ids)
        params: tuple[Any, ...] = (model_id, param)
        if agents and d.vectors_by_agent:
            # Prunes to the owners' partitions at plan time: 5 ids, 16 partitions on PostgreSQL: 2.2 -> 1.3 ms
            # (bench/RESULTS.md, issue 26, third round).
            owners, owners_param = d.one_of("agent", sorted(set(agents)))
            clause, params = f"{clause} AND {owners}", (*params, owners_param)
        column = d.vector_column
        vectors = all_vectors(d, f"memory_id, {'agent, ' if d.vectors_by_agent else ''}model_id, dim, {column}")
        rows = d.fetch_vectors(
            f"SELECT memory_id, dim, {column} FROM {vectors} v WHERE model_id = ? AND {clause}", params
        )
        return {memory_id: checked_vector(memory_id, dim, d.decode_vector(value)) for memory_id, dim, value in rows}


class SQLShares:
    """:class:`~engramdb.storage.base.ShareRepo` over a SQL dialect: consent rows in ``shares``.

    Visibility itself is enforced in every read (:func:`~engramdb.storage._filters.filter_clauses`);
    sharing only records and withdraws an owner's consent, keeps ``private`` <-> ``shared`` in
    step and writes a history entry per memory.
    """

    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect

    def share(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """See :meth:`ShareRepo.share`."""
        check_share_agents(from_agent, to_agent)
        with self._d.write() as conn:
            shared = 0
            for memory_id, kind, visibility in self._owned(conn, memory_ids, from_agent):
                cur = conn.execute(
                    "INSERT INTO shares (memory_id, from_agent, to_agent, shared_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (memory_id, from_agent, to_agent, ts(at)),
                )
                if cur.rowcount == 0:
                    continue
                shared += 1
                self._record(conn, memory_id, kind, "share", on_share(visibility, to_agent), at=at, actor=from_agent)
        return shared

    def unshare(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """See :meth:`ShareRepo.unshare`."""
        check_share_agents(from_agent, to_agent)
        with self._d.write() as conn:
            withdrawn = 0
            for memory_id, kind, visibility in self._owned(conn, memory_ids, from_agent):
                cur = conn.execute(
                    "DELETE FROM shares WHERE memory_id = ? AND (? = '*' OR to_agent = ?)",
                    (memory_id, to_agent, to_agent),
                )
                if cur.rowcount == 0:
                    continue
                withdrawn += 1
                left = conn.execute("SELECT 1 FROM shares WHERE memory_id = ? LIMIT 1", (memory_id,)).fetchone()
                change = on_unshare(visibility, to_agent, shares_left=left is not None)
                self._record(conn, memory_id, kind, "unshare", change, at=at, actor=from_agent)
        return withdrawn

    def list(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """See :meth:`ShareRepo.list`."""
        d = self._d
        conds, params = equal_conditions((("from_agent", from_agent), ("to_agent", to_agent)))
        if memory_ids is not None:
            clause, param = d.one_of("memory_id", memory_ids)
            conds.append(clause)
            params.append(param)
        where = " AND ".join(conds) or "1 = 1"
        with d.read() as conn:
            rows = conn.execute(
                f"SELECT memory_id, from_agent, to_agent, shared_at FROM shares WHERE {where} "
                f"ORDER BY shared_at, {d.order_bytes('memory_id')}, {d.order_bytes('to_agent')}",
                params,
            ).fetchall()
        return [row_to_share(row) for row in rows]

    def _owned(self, conn: Conn, memory_ids: Sequence[str], agent: str) -> builtins.list[Any]:
        """(id, kind, visibility) of ``agent``'s own memories among ``memory_ids``, locked: only the owner consents."""
        clause, param = self._d.one_of("id", memory_ids)
        return conn.execute(
            f"SELECT id, kind, visibility FROM memories WHERE {clause} AND agent = ? ORDER BY rid{self._d.for_update}",
            (param, agent),
        ).fetchall()

    def _record(
        self, conn: Conn, memory_id: str, kind: str, action: str, change: ShareChange, *, at: datetime, actor: str
    ) -> None:
        """Apply ``change``: the memory's visibility (and the backend's copy of it) and a history entry."""
        if change.visibility is not None:
            conn.execute("UPDATE memories SET visibility = ? WHERE id = ?", (change.visibility, memory_id))
            self._d.attributes_changed(memory_id, kind=kind, visibility=change.visibility)
        conn.execute(INSERT_HISTORY, change.history(memory_id, action, at=at, actor=actor))


class SQLAudit:
    """:class:`~engramdb.storage.base.AuditRepo` over a SQL dialect.

    Appending reads the last entry's hash and inserts the new entries in the store's write
    transaction (with the dialect's audit lock held to the commit), so concurrent writers,
    threads or processes, extend one unbroken chain. The head (last sequence number and
    hash) is kept in ``meta`` in the same transaction, so entries cut off the end are
    detected too. Hashing itself is pure: :mod:`engramdb.auditchain`.
    """

    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect

    def append(self, records: Sequence[AuditRecord], *, deferrable: bool | None = None) -> list[AuditEvent]:
        """See :meth:`AuditRepo.append`."""
        if not records:
            return []
        d = self._d
        try:
            with d.write() as conn:
                return append_audit(d, conn, records)
        except StorageError as exc:
            if deferrable is None:
                deferrable = is_read(records)
            if not deferrable or d.in_write() or not d.out_of_space(exc):
                raise
            d.deferred.add_audit(records)
            return []

    def events(
        self,
        *,
        agent: str | None = None,
        memory_id: str | None = None,
        action: str | None = None,
        after_seq: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> list[AuditEvent]:
        """See :meth:`AuditRepo.events`."""
        statement, params = audit_query(
            agent=agent,
            memory_id=memory_id,
            action=action,
            after_seq=after_seq,
            limit=limit,
            newest_first=newest_first,
        )
        with self._d.read() as conn:
            rows = conn.execute(statement, params).fetchall()
        return [row_to_event(r) for r in rows]

    def head(self) -> tuple[int, str] | None:
        """See :meth:`AuditRepo.head`."""
        with self._d.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (AUDIT_HEAD_KEY,)).fetchone()
        return None if row is None else parse_audit_head(str(row[0]))


class SQLChecks:
    """:class:`~engramdb.storage.base.StoreChecks` over a SQL dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._d = dialect

    def database(self, *, quick: bool = False) -> builtins.list[str] | None:
        """See :meth:`StoreChecks.database`."""
        return self._d.database_problems(quick=quick)

    def keyword_index(self) -> builtins.list[str]:
        """See :meth:`StoreChecks.keyword_index`."""
        return self._d.keyword_index_problems()

    def iter_vectors(self, *, batch: int = 1000) -> Iterator[builtins.list[StoredVector]]:
        """See :meth:`StoreChecks.iter_vectors`."""
        d = self._d
        vectors = all_vectors(d, f"memory_id, model_id, dim, {d.vector_column}")
        after = 0
        while True:
            with d.read() as conn:
                rows = conn.execute(
                    f"SELECT m.rid, m.id, v.model_id, v.dim, v.{d.vector_column} FROM memories m "
                    f"LEFT JOIN {vectors} v ON v.memory_id = m.id WHERE m.rid > ? ORDER BY m.rid LIMIT ?",
                    (after, max(1, batch)),
                ).fetchall()
            if not rows:
                return
            after = int(rows[-1][0])
            yield [
                StoredVector(
                    memory_id=memory_id,
                    model_id=model_id,
                    dim=None if dim is None else int(dim),
                    vector=None if value is None else np.asarray(d.decode_vector(value), dtype=np.float32),
                )
                for _, memory_id, model_id, dim, value in rows
            ]

    def pending(self) -> int:
        """See :meth:`StoreChecks.pending`."""
        return len(self._d.deferred)

"""The scale-out store: PostgreSQL with pgvector and PostgreSQL full-text search.

``PostgresStore("postgresql://user:password@host/db")`` (or ``Engram("postgresql://...")``)
keeps memories in one PostgreSQL database (tables on the connection's ``search_path``),
creating the ``vector`` extension and the schema on first use. Many processes and
machines can share one store: writes are ordinary transactions, the audit chain is
extended under an advisory lock, and searches run in the database, so there is no
cache to keep in step between clients.

Connections come from a small ``psycopg_pool`` pool (``pool_size``, default 4) rather
than one connection under a lock (the SQLite store's design): on a server backend the
point is that threads of one process (a fleet of agents behind one API) search and
write *concurrently*. :meth:`atomic` pins one pooled connection to the calling thread
for the block, so every write of that thread joins the block's transaction while
other threads keep their own connections.

* keywords: a generated ``tsvector`` (English stemming over content and tags) with a GIN
  index; terms are OR-ed and ranked by ``ts_rank_cd`` (higher is better).
* vectors: pgvector ``<=>`` cosine distance, score ``1 - distance``. With fewer than
  ``exact_search_below`` vectors in the table (the planner's estimate), the search is an
  exact scan; above it, it uses the HNSW index of the model (``hnsw.ef_search = max(100, k)``
  and pgvector's iterative scan, so hard filters still fill the top ``k``) at a recall of
  about 0.99 instead of 1.
* forgetting deletes the row, its vector, tags, shares and keyword entry and scrubs the
  history in one transaction; PostgreSQL reclaims the dead row versions at the next
  (auto)vacuum, and the server's write-ahead log keeps them until it is recycled.
"""

from __future__ import annotations

import builtins
import hashlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from engramdb.errors import StorageError, ValidationError
from engramdb.models import Change, Memory
from engramdb.storage._common import (
    AUDIT_HEAD_KEY,
    MEMORY_COLUMNS,
    StoreBase,
    as_unit_rows,
    check_changes,
    check_distinct,
    check_meta,
    check_new_memories,
    check_page,
    created_history,
    in_order,
    keyset_batches,
    memory_row,
    not_found,
    plan_update,
    require_found,
    row_to_change,
    row_to_memory,
    shared_row_to_memory,
    tag_rows,
    tombstone,
    ts,
)
from engramdb.storage._pg_mixins import PgAuditMixin, PgSharingMixin, PgTransferMixin
from engramdb.storage._pg_schema import LOCK_VECTOR_INDEX, migrate
from engramdb.storage._pg_sql import INSERT_HISTORY, filter_sql, tsquery_sql
from engramdb.storage.base import MODEL_META_KEY, Candidate, Filter, Vectors

if TYPE_CHECKING:
    from engramdb.config import Settings

__all__ = ["PostgresStore"]

Conn = psycopg.Connection[tuple[Any, ...]]

#: Meta keys the store maintains itself (set_meta refuses them).
_INTERNAL_META: Final = frozenset({AUDIT_HEAD_KEY})
#: Below this many vectors (planner estimate) searches scan exactly instead of using the HNSW index.
EXACT_SEARCH_BELOW: Final = 20_000
_MIN_EF_SEARCH: Final = 100
_INSERT_MEMORY = (
    "INSERT INTO memories (id, agent, kind, content, tags, metadata, created_at, updated_at, "
    "last_accessed, access_count, confidence, successes, attempts, visibility, redacted) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def redact_url(location: str) -> str:
    """``location`` without its password (store locations show up in messages and logs)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", location)


class PostgresStore(PgSharingMixin, PgTransferMixin, PgAuditMixin, StoreBase):
    """An engramdb store in a PostgreSQL database: ``PostgresStore("postgresql://u:p@host/db")``.

    Implements :class:`~engramdb.storage.base.Store`. Raises :class:`~engramdb.errors.StorageError`
    when the server cannot be reached or pgvector is missing, :class:`~engramdb.errors.NotAStoreError`
    for a database holding other tables of the same names, and :class:`~engramdb.errors.SchemaVersionError`
    for a store written by a newer engramdb.
    """

    def __init__(
        self,
        location: str,
        *,
        settings: Settings | None = None,
        pool_size: int = 4,
        exact_search_below: int = EXACT_SEARCH_BELOW,
    ) -> None:
        self.location: str = redact_url(location)
        self._exact_below = exact_search_below
        self._local = threading.local()
        timeout = settings.busy_timeout if settings is not None else 30.0
        self._timeout = max(1.0, timeout)
        try:
            with psycopg.connect(location, autocommit=True, connect_timeout=int(self._timeout)) as conn:
                migrate(conn, location=self.location)
        except (StorageError, ValidationError):
            raise
        except psycopg.Error as exc:
            raise self._translate(exc) from exc
        self._pool: ConnectionPool[Conn] | None = ConnectionPool(
            location,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            configure=register_vector,
            timeout=self._timeout,
            name="engramdb",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=self._timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            self._pool.close()
            self._pool = None
            raise StorageError(f"{self.location}: cannot open a connection pool ({exc})") from exc

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Close every pooled connection (idempotent); further calls raise StorageError."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    # -- connections and transactions -----------------------------------------------------------
    def _translate(self, exc: BaseException) -> StorageError | ValidationError:
        if isinstance(exc, psycopg.DataError):
            # e.g. a NUL character, which PostgreSQL text cannot hold: bad input, nothing written.
            return ValidationError(f"value cannot be stored in PostgreSQL: {str(exc).splitlines()[0]}")
        if isinstance(exc, PoolTimeout):
            return StorageError(f"{self.location}: no database connection available ({exc})")
        if isinstance(exc, psycopg.OperationalError):
            return StorageError(f"{self.location}: cannot reach the database ({str(exc).strip()})")
        if isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
            return StorageError(f"{self.location}: a concurrent write conflicted; retry ({exc})")
        return StorageError(f"{self.location}: {str(exc).strip()}")

    def _require_pool(self) -> ConnectionPool[Conn]:
        if self._pool is None:
            raise StorageError(f"{self.location}: the store is closed")
        return self._pool

    @contextmanager
    def _reading(self, *, snapshot: bool = False) -> Iterator[Conn]:
        """A connection for reads: the thread's open write transaction if any (reads see its writes)."""
        pinned: Conn | None = getattr(self._local, "conn", None)
        if pinned is not None:
            if snapshot:
                raise StorageError("searches cannot run inside an atomic() block")
            yield pinned
            return
        pool = self._require_pool()
        try:
            with pool.connection() as conn:
                if snapshot:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._translate(exc) from exc

    @contextmanager
    def _writing(self) -> Iterator[Conn]:
        """One transaction on a pooled connection pinned to this thread; re-entrant (joins an open one)."""
        pinned: Conn | None = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        pool = self._require_pool()
        try:
            with pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._translate(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """A write transaction on a raw psycopg connection, for engramdb modules adding their own tables."""
        with self._writing() as conn:
            yield conn

    # -- metadata ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """See :meth:`Store.get_meta`."""
        with self._reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """See :meth:`Store.set_meta`."""
        check_meta(key, value, internal=_INTERNAL_META)
        with self._writing() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- writes -----------------------------------------------------------------------------
    def add(self, memories: Sequence[Memory], vectors: Vectors | None, *, model_id: str, actor: str) -> None:
        """See :meth:`Store.add`."""
        if not memories:
            return
        ids = check_new_memories(memories)
        unit = as_unit_rows(vectors, rows=len(memories)) if vectors is not None else None
        rows = [memory_row(m) for m in memories]
        history = [created_history(m, actor=actor) for m in memories]
        with self._writing() as conn:
            if unit is not None:
                # Before any row is written: creating an index waits for other writers' transactions.
                self._ensure_vector_index(conn, model_id, int(unit.shape[1]))
            clash = conn.execute("SELECT id FROM memories WHERE id = ANY(%s::text[]) LIMIT 1", (ids,)).fetchone()
            if clash is not None:
                raise ValidationError(f"a memory with id {clash[0]!r} already exists")
            try:
                # A savepoint: a concurrent insert of the same id is bad input, not a broken transaction.
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(_INSERT_MEMORY, rows)
            except psycopg.errors.UniqueViolation as exc:
                raise ValidationError("a memory with one of these ids already exists") from exc
            with conn.cursor() as cur:
                tags = [row for m in memories for row in tag_rows(m.id, m.tags)]
                if tags:
                    cur.executemany("INSERT INTO memory_tags (memory_id, tag) VALUES (%s, %s)", tags)
                cur.executemany(INSERT_HISTORY, history)
            if unit is not None:
                self._write_vectors(conn, ids, unit, model_id=model_id)

    def _ensure_vector_index(self, conn: Conn, model_id: str, dim: int) -> None:
        """Create the HNSW index of ``model_id``'s ``dim``-dimensional vectors if it does not exist yet.

        pgvector's HNSW needs a fixed dimension while the column holds any, so the index is a
        partial expression index per (model, dimension): ``embedding::vector(dim)`` over the
        rows of that model. It is created in the writer's transaction (DDL is transactional)
        under an advisory lock, so concurrent first writers create it exactly once.
        """
        # Looked up on every vector write rather than cached: a cached "exists" could outlive the
        # rollback of the transaction that created the index.
        found = conn.execute(
            "SELECT 1 FROM vector_indexes WHERE model_id = %s AND dim = %s", (model_id, dim)
        ).fetchone()
        if found is not None:
            return
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_VECTOR_INDEX,))
        found = conn.execute(
            "SELECT 1 FROM vector_indexes WHERE model_id = %s AND dim = %s", (model_id, dim)
        ).fetchone()
        if found is None:
            digest = hashlib.sha256(f"{model_id}\x00{dim}".encode()).hexdigest()[:16]
            name = f"vectors_hnsw_{digest}"
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {name} ON vectors USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
                    "WHERE model_id = {model} AND dim = {dim}"
                ).format(name=sql.Identifier(name), dim=sql.Literal(dim), model=sql.Literal(model_id))
            )
            conn.execute(
                "INSERT INTO vector_indexes (model_id, dim, index_name) VALUES (%s, %s, %s)", (model_id, dim, name)
            )

    def _write_vectors(self, conn: Conn, ids: Sequence[str], unit: Vectors, *, model_id: str) -> None:
        """Insert or replace the vectors of existing memories (dimension checked against the model's others)."""
        dim = int(unit.shape[1])
        other = conn.execute(
            "SELECT dim FROM vectors WHERE model_id = %s AND dim <> %s AND NOT memory_id = ANY(%s::text[]) LIMIT 1",
            (model_id, dim, list(ids)),
        ).fetchone()
        if other is not None:
            raise ValidationError(f"model {model_id!r} vectors have dimension {other[0]} in this store, not {dim}")
        self._ensure_vector_index(conn, model_id, dim)
        # The first vectors written name the model that searches use.
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", (MODEL_META_KEY, model_id)
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO vectors (memory_id, model_id, dim, embedding) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (memory_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
                "embedding = excluded.embedding",
                [(i, model_id, dim, unit[n]) for n, i in enumerate(ids)],
            )

    @staticmethod
    def _fetch(conn: Conn, memory_id: str, *, lock: bool = False) -> Memory:
        suffix = " FOR UPDATE" if lock else ""
        row = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s{suffix}", (memory_id,)).fetchone()
        if row is None:
            raise not_found(memory_id)
        return row_to_memory(row)

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
        """See :meth:`Store.update`; what is written is planned by :func:`~engramdb.storage._common.plan_update`."""
        check_changes(changes)
        unit = as_unit_rows(vector, rows=1) if vector is not None else None
        with self._writing() as conn:
            if unit is not None:
                self._ensure_vector_index(conn, model_id, int(unit.shape[1]))
            plan = plan_update(self._fetch(conn, memory_id, lock=True), changes, action=action, actor=actor, at=at)
            after = plan.after
            if after:
                assignments = ", ".join(f"{name} = %s" for name in plan.columns)
                conn.execute(f"UPDATE memories SET {assignments} WHERE id = %s", (*plan.columns.values(), memory_id))
                if plan.withdraws_shares:
                    conn.execute("DELETE FROM shares WHERE memory_id = %s", (memory_id,))
                if plan.new_tag_rows is not None:
                    conn.execute("DELETE FROM memory_tags WHERE memory_id = %s", (memory_id,))
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO memory_tags (memory_id, tag) VALUES (%s, %s)", plan.new_tag_rows)
                conn.execute(INSERT_HISTORY, plan.history)
            result = self._fetch(conn, memory_id)
            if unit is not None:
                self._write_vectors(conn, [memory_id], unit, model_id=model_id)
            elif "content" in after:
                conn.execute("DELETE FROM vectors WHERE memory_id = %s", (memory_id,))
        return result

    def delete(self, memory_id: str, *, actor: str, at: datetime) -> None:
        """Forget a memory: its row (and with it the keyword entry), vector, tags, shares and history contents.

        A ``forget`` tombstone without content stays in the history.
        """
        with self._writing() as conn:
            self._fetch(conn, memory_id, lock=True)
            # Vectors, tags and shares go with the row (ON DELETE CASCADE); explicit for clarity.
            for table in ("vectors", "memory_tags", "shares"):
                conn.execute(sql.SQL("DELETE FROM {} WHERE memory_id = %s").format(sql.Identifier(table)), (memory_id,))
            conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
            conn.execute("UPDATE history SET before = NULL, after = NULL WHERE memory_id = %s", (memory_id,))
            conn.execute(INSERT_HISTORY, tombstone(memory_id, at=at, actor=actor))

    def touch(self, memory_ids: Sequence[str], *, at: datetime) -> None:
        """Record a retrieval: ``last_accessed = at`` and ``access_count + 1``, once per distinct id."""
        if not memory_ids:
            return
        with self._writing() as conn:
            # Rows are locked in id order, so concurrent touches of overlapping sets cannot deadlock.
            conn.execute(
                "UPDATE memories SET last_accessed = %s, access_count = access_count + 1 WHERE id IN "
                "(SELECT id FROM memories WHERE id = ANY(%s::text[]) ORDER BY id FOR UPDATE)",
                (ts(at), list(dict.fromkeys(memory_ids))),
            )

    # -- reads ------------------------------------------------------------------------------
    def get_many(self, memory_ids: Sequence[str], flt: Filter | None = None) -> dict[str, Memory]:
        """See :meth:`Store.get_many`."""
        if not memory_ids:
            return {}
        f = filter_sql(flt)
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS} FROM memories m "
                f"WHERE m.id = ANY(%s::text[]) AND {f.where}",
                (*f.shared_by_params, *f.shared_at_params, list(memory_ids), *f.params),
            ).fetchall()
        return in_order(memory_ids, map(shared_row_to_memory, rows))

    def list(self, flt: Filter, *, limit: int = 100, offset: int = 0) -> builtins.list[Memory]:
        """See :meth:`Store.list`."""
        check_page(limit, offset)
        f = filter_sql(flt)
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS} FROM memories m WHERE {f.where} "
                "ORDER BY m.created_at DESC, m.rid DESC LIMIT %s OFFSET %s",
                (*f.shared_by_params, *f.shared_at_params, *f.params, limit, offset),
            ).fetchall()
        return [shared_row_to_memory(row) for row in rows]

    def count(self, flt: Filter) -> int:
        """See :meth:`Store.count`."""
        f = filter_sql(flt)
        with self._reading() as conn:
            row = conn.execute(f"SELECT count(*) FROM memories m WHERE {f.where}", f.params).fetchone()
        return int(row[0]) if row is not None else 0

    def history(self, memory_id: str) -> builtins.list[Change]:
        """See :meth:`Store.history`."""
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT seq, memory_id, action, at, actor, before, after FROM history "
                "WHERE memory_id = %s ORDER BY seq",
                (memory_id,),
            ).fetchall()
        return [row_to_change(row) for row in rows]

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> builtins.list[Candidate]:
        """Full-text candidates matching any of ``terms``, best ``ts_rank_cd`` first (higher is better)."""
        query = tsquery_sql(terms)
        if query is None or limit <= 0:
            return []
        expr, term_params = query
        f = filter_sql(flt)
        with self._reading() as conn:
            rows = conn.execute(
                f"WITH q AS (SELECT {expr} AS query) "
                "SELECT m.id, ts_rank_cd(m.tsv, q.query) AS rank FROM memories m, q "
                f"WHERE m.tsv @@ q.query AND {f.where} ORDER BY rank DESC, m.rid LIMIT %s",
                (*term_params, *f.params, limit),
            ).fetchall()
        return [Candidate(memory_id, float(rank)) for memory_id, rank in rows]

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> builtins.list[Candidate]:
        """Cosine candidates among the current model's vectors, best first (score = 1 - cosine distance)."""
        query = as_unit_rows(vector, rows=1)[0]
        if limit <= 0:
            return []
        f = filter_sql(flt)
        with self._reading(snapshot=True) as conn:
            row = conn.execute(
                "SELECT m.value, (SELECT v.dim FROM vectors v WHERE v.model_id = m.value LIMIT 1), "
                "(SELECT reltuples FROM pg_class WHERE oid = to_regclass('vectors')) "
                "FROM meta m WHERE m.key = %s",
                (MODEL_META_KEY,),
            ).fetchone()
            if row is None or row[1] is None:
                return []
            model_id, dim, estimate = str(row[0]), int(row[1]), float(row[2] or -1)
            if query.shape != (dim,):
                raise ValidationError(f"query vector has dimension {query.shape[0]}, the store's vectors have {dim}")
            # reltuples is -1 until the table is first analysed: scan exactly until the planner knows better.
            if 0 <= self._exact_below <= estimate:
                conn.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true), "
                    "set_config('hnsw.iterative_scan', 'strict_order', true)",
                    (str(max(_MIN_EF_SEARCH, limit)),),
                )
                # The expression the model's partial HNSW index is built on.
                distance: sql.Composable = sql.SQL("v.embedding::vector({dim}) <=> %s::vector({dim})").format(
                    dim=sql.Literal(dim)
                )
            else:
                # Not the indexed expression: the planner scans the rows that pass the filter.
                distance = sql.SQL("v.embedding <=> %s::vector")
            statement = sql.SQL(
                "SELECT v.memory_id, {distance} AS d FROM vectors v JOIN memories m ON m.id = v.memory_id "
                "WHERE v.model_id = {model} AND v.dim = {dim} AND {where} ORDER BY d LIMIT %s"
            ).format(distance=distance, model=sql.Literal(model_id), dim=sql.Literal(dim), where=sql.SQL(f.where))
            rows = conn.execute(statement, (query, *f.params, limit)).fetchall()
        return [Candidate(memory_id, 1.0 - float(d)) for memory_id, d in rows]

    # -- embedding maintenance --------------------------------------------------------------
    def count_vectors_not_from(self, model_id: str) -> int:
        """See :meth:`Store.count_vectors_not_from`."""
        with self._reading() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories m LEFT JOIN vectors v ON v.memory_id = m.id "
                "WHERE v.memory_id IS NULL OR v.model_id <> %s",
                (model_id,),
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def iter_missing_vectors(self, model_id: str, *, batch: int = 256) -> Iterator[builtins.list[tuple[str, str]]]:
        """See :meth:`Store.iter_missing_vectors` (batching: :func:`~engramdb.storage._common.keyset_batches`)."""

        def fetch(after: int, size: int) -> builtins.list[Any]:
            with self._reading() as conn:
                return conn.execute(
                    "SELECT m.rid, m.id, m.content FROM memories m LEFT JOIN vectors v ON v.memory_id = m.id "
                    "WHERE m.rid > %s AND (v.memory_id IS NULL OR v.model_id <> %s) ORDER BY m.rid LIMIT %s",
                    (after, model_id, size),
                ).fetchall()

        yield from keyset_batches(batch, fetch)

    def set_vectors(self, memory_ids: Sequence[str], vectors: Vectors, *, model_id: str) -> None:
        """See :meth:`Store.set_vectors`."""
        check_distinct(memory_ids)
        unit = as_unit_rows(vectors, rows=len(memory_ids))
        if not memory_ids:
            return
        with self._writing() as conn:
            self._ensure_vector_index(conn, model_id, int(unit.shape[1]))
            found = {
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE id = ANY(%s::text[]) FOR UPDATE", (list(memory_ids),)
                ).fetchall()
            }
            require_found(memory_ids, found)
            self._write_vectors(conn, memory_ids, unit, model_id=model_id)

"""The scale-out store: PostgreSQL with pgvector and PostgreSQL full-text search.

``open_postgres("postgresql://user:password@host/db")`` (or ``Engram("postgresql://...")``)
keeps memories in one PostgreSQL database (tables on the connection's ``search_path``),
creating the ``vector`` extension and the schema on first use. Many processes and
machines can share one store: writes are ordinary transactions, the audit chain is
extended under an advisory lock, and searches run in the database, so there is no
cache to keep in step between clients. The roles of the store are the shared SQL engine
(:mod:`engramdb.storage._engine`); this module supplies what is PostgreSQL's own.

Connections come from a small ``psycopg_pool`` pool (``pool_size``, default 4) rather
than one connection under a lock (the SQLite store's design): on a server backend the
point is that threads of one process (a fleet of agents behind one API) search and
write *concurrently*. ``store.atomic()`` pins one pooled connection to the calling thread
for the block, so every write of that thread joins the block's transaction while
other threads keep their own connections.

* keywords: a generated ``tsvector`` (English stemming over content and tags) with a GIN
  index, and each memory's lexemes as postings (``memory_terms``, schema step 11: the lexeme's count in the memory
  and the memory's length, keyed by agent and lexeme); terms are OR-ed and ranked by BM25 as FTS5 computes it (the
  embedded store's ranking, higher is better; ``_pg_keywords``): a reader's own matches from the postings' index
  alone, other agents' public and shared matches found by the GIN index and scored from their postings. Document
  counts and the mean length come from a sample of the store (``_pg_terms``); the terms kept are the embedded
  store's (the rarest, while their document counts fit its budget), each reading at most its newest
  ``term_postings`` postings of the reader; others' open rows are selected by the rarest terms, up to about
  ``KEYWORD_RANK_ROWS`` (see :meth:`PgSearch.keyword_candidates`).
* vectors: pgvector ``<=>`` cosine distance, score ``1 - distance``. The table is hash-partitioned by agent
  (schema step 5), each partition with its own HNSW graph per model: an agent's search reads its partition's graph
  (``v.agent = reader`` prunes to it) and, apart, the other agents' public and shared rows, exactly when they are
  few (see ``_pg_nearest.vector_branches``). With fewer than ``exact_search_below`` vectors in the table (the
  planner's estimate), the search is an exact scan; above it, the HNSW graphs (``hnsw.ef_search`` 100 on a graph of
  20k vectors, growing with the square root of its size, at least ``k``; pgvector's relaxed iterative scan, so hard
  filters still fill the top ``k``) at a recall@10 of about 0.99 instead of 1, except for a reader owning a small
  share of its partition, scanned exactly (see :meth:`PgSearch._plan`). One round trip: the HNSW settings are
  pipelined with the search, and the current model is cached and checked by the search statement itself.
* new vectors (schema step 6): written to ``vectors_staged``, a small table without a vector index that searches
  scan exactly in the same statement, and folded into the graphs in batches by one mover per store (a thread of
  every instance, one at a time by an advisory lock; ``pg_vector_mover``): see ``_pg_staging``.
* statistics: searches run ANALYZE in the background when a bulk load left them behind (``_pg_analyze``).
* warm-up (``settings.warm``): the open opens a search's connections (:data:`SEARCH_CONNECTIONS`, each planning the
  store's relations once) and takes the first look at the statistics on a thread, so a process's first searches
  find them ready.
* visibility: statements that gather rows through indexes (keyword matches, the exact vector scan, counts)
  spell the agent filter so the planner can answer it from indexes too (see ``_pg_sql.filter_sql``); the
  HNSW path tests it row by row.
* read-modify-writes lock their rows (``SELECT ... FOR UPDATE``) until the commit; ``meta.get`` inside
  ``store.atomic()`` also locks its key (row lock plus a per-key advisory lock, for a key without a row).
* forgetting deletes the row, its vector, tags, shares and keyword entry and scrubs the
  history in one transaction; PostgreSQL reclaims the dead row versions at the next
  (auto)vacuum, and the server's write-ahead log keeps them until it is recycled.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.adapt import AdaptersMap
from psycopg_pool import ConnectionPool, PoolTimeout

from engramdb._threads import JOIN_SECONDS, THREAD_PREFIX, Background
from engramdb.config import WRITES_YIELD
from engramdb.errors import StorageError, ValidationError
from engramdb.models import Memory
from engramdb.storage._bookkeeping import write_deferred
from engramdb.storage._codecs import AUDIT_HEAD_KEY
from engramdb.storage._deferred import Deferred
from engramdb.storage._dialect import Conn
from engramdb.storage._engine import sql_store
from engramdb.storage._filters import FilterSQL
from engramdb.storage._pg_analyze import PENDING_LIST_LIMIT
from engramdb.storage._pg_copy import copy_rows
from engramdb.storage._pg_giveway import give_way
from engramdb.storage._pg_schema import LOCK_AUDIT, LOCK_BACKGROUND, LOCK_META_CLASS, LOCK_VECTOR_INDEX, migrate
from engramdb.storage._pg_search import KEYWORD_RANK_ROWS, PgSearch
from engramdb.storage._pg_sql import (
    filter_sql,
    one_of,
    pg_statement,
)
from engramdb.storage._pg_staging import OWN_LOOK, StagedMover, wait_for_room
from engramdb.storage.base import Filter, Store, Vectors

if TYPE_CHECKING:
    from engramdb.config import Settings

__all__ = [
    "EXACT_SEARCH_BELOW",
    "KEYWORD_RANK_ROWS",
    "PgSearch",
    "PostgresBackend",
    "open_postgres",
    "redact_url",
]

Raw = psycopg.Connection[tuple[Any, ...]]

log = logging.getLogger(__name__)

#: Meta keys the store maintains itself (meta.set refuses them).
_INTERNAL_META: Final = frozenset({AUDIT_HEAD_KEY})
# Memories whose keyword postings (``memory_terms``, kept by triggers) disagree with their words: postings without
# their memory or under another agent, or not one a lexeme with the lexemes' counts and the memory's length (a memory
# without words has none). Per memory, not per posting: one pass over the postings (~50 a memory) and one over
# ``memories``, no join of each posting to its lexeme.
_POSTINGS_DRIFT: Final = (
    "SELECT count(DISTINCT coalesce(m.rid, p.rid)) FROM memories m FULL JOIN (SELECT p.rid, p.agent, count(*) AS n, "
    "sum(p.tf) AS tf, min(p.dl) AS dl, max(p.dl) AS dl_max FROM memory_terms p GROUP BY p.rid, p.agent) p "
    "ON p.rid = m.rid WHERE m.rid IS NULL OR (p.rid IS NULL AND length(m.tsv) > 0) OR (p.rid IS NOT NULL AND "
    "(p.agent, p.n, p.tf, p.dl, p.dl_max) IS DISTINCT FROM (m.agent, length(m.tsv)::bigint, "
    "engram_doc_length(m.tsv)::bigint, engram_doc_length(m.tsv), engram_doc_length(m.tsv)))"
)
#: Below this many vectors (planner estimate) searches scan exactly instead of using the HNSW index.
EXACT_SEARCH_BELOW: Final = 20_000
#: Connections one hybrid search holds at once (the vector channel, and the keyword channel's two statements on
#: its worker threads): the pool opens this many (at most its size) at the open's warm-up, not in the first searches.
SEARCH_CONNECTIONS: Final = 3
#: Share of the server's ``shared_buffers`` the open's warm-up reads the search's hottest relations into, where the
#: server has the ``pg_prewarm`` extension (see :func:`_prewarm`).
PREWARM_SHARE: Final = 0.25
# The relations a search reads most, hottest first: the HNSW graphs' partitions (most of a search's buffers), the
# keyword postings' index, the memories by row number, the memories, the vectors' partitions. Each is
# read whole while their running total fits the budget (one parameter, bytes).
_PREWARM_SQL: Final = (
    f"{OWN_LOOK}WITH rels AS ("
    "SELECT p.relid AS rel, 1 AS rank FROM vector_indexes v "
    "CROSS JOIN LATERAL pg_partition_tree(to_regclass(v.index_name)) p WHERE p.isleaf "
    "UNION ALL SELECT to_regclass('memory_terms_pkey'), 2 UNION ALL SELECT to_regclass('memories_pkey'), 3 "
    "UNION ALL SELECT to_regclass('memories'), 4 "
    "UNION ALL SELECT p.relid, 5 FROM pg_partition_tree(to_regclass('vectors')) p WHERE p.isleaf), "
    "sized AS (SELECT rel, sum(pg_relation_size(rel)) OVER (ORDER BY rank, rel) AS upto FROM rels "
    "WHERE rel IS NOT NULL) "
    "SELECT coalesce(sum({prewarm}(rel::regclass)), 0) FROM sized WHERE upto <= %s"
)
_PREWARM_SCHEMA_SQL: Final = (
    f"{OWN_LOOK}SELECT n.nspname, (SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings "
    "WHERE name = 'shared_buffers') FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
    "WHERE e.extname = 'pg_prewarm'"
)


def _prewarm(conn: Raw) -> int:
    """Read the search's hottest relations into the server's shared buffers, up to :data:`PREWARM_SHARE` of them,
    when the server has ``pg_prewarm`` (a superuser's ``CREATE EXTENSION pg_prewarm``); the blocks read (0 without).

    A server that just started has empty shared buffers: each of its first searches then copies the pages it reads
    from the OS cache, at a multiple of a later search's server CPU (bench/RESULTS.md, issue 26, ninth round). Pages
    already cached cost a lookup each, so every open may do it.
    """
    found = conn.execute(_PREWARM_SCHEMA_SQL).fetchone()
    if found is None or found[1] is None:
        return 0
    statement = sql.SQL(_PREWARM_SQL).format(prewarm=sql.Identifier(str(found[0]), "pg_prewarm"))
    row = conn.execute(statement, (int(int(found[1]) * PREWARM_SHARE),)).fetchone()
    return int(row[0]) if row is not None else 0


# Planned once on each new connection, by the pool's worker: a new server process reads the catalog entries of every
# relation a search plans with (the 16 partitions of ``vectors`` and their indexes, the postings, the staged rows),
# which the first searches on the connection otherwise read on their way. EXPLAIN only: nothing runs.
_CATALOG_WARM: Final = (
    f"{OWN_LOOK}EXPLAIN SELECT 1 FROM vectors v JOIN memories m ON m.id = v.memory_id",
    f"{OWN_LOOK}EXPLAIN SELECT 1 FROM memory_terms p JOIN memories m ON m.rid = p.rid",
    f"{OWN_LOOK}EXPLAIN SELECT 1 FROM vectors_staged s JOIN shares x ON x.memory_id = s.memory_id "
    "JOIN meta k ON k.key = s.agent",
)


def redact_url(location: str) -> str:
    """``location`` without its password (store locations show up in messages and logs)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", location)


def open_postgres(
    location: str,
    *,
    settings: Settings | None = None,
    pool_size: int = 4,
    exact_search_below: int = EXACT_SEARCH_BELOW,
    keyword_rank_rows: int = KEYWORD_RANK_ROWS,
) -> Store:
    """The store in the PostgreSQL database at ``location`` (``postgresql://user:password@host/db``).

    Raises :class:`~engramdb.errors.StorageError` when the server cannot be reached or pgvector is
    missing, :class:`~engramdb.errors.NotAStoreError` for a database holding other tables of the
    same names, and :class:`~engramdb.errors.SchemaVersionError` for a store written by a newer engramdb.
    """
    return sql_store(
        PostgresBackend(
            location,
            settings=settings,
            pool_size=pool_size,
            exact_search_below=exact_search_below,
            keyword_rank_rows=keyword_rank_rows,
        )
    )


class _PgConn:
    """A psycopg connection running the shared ``?`` SQL (:class:`~engramdb.storage._dialect.Conn`)."""

    __slots__ = ("raw",)

    def __init__(self, raw: Raw) -> None:
        self.raw = raw

    def execute(self, statement: str, params: Sequence[Any] = (), /) -> psycopg.Cursor[tuple[Any, ...]]:
        return self.raw.execute(pg_statement(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]], /) -> None:
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(pg_statement(statement), rows)


def _configure(conn: Raw) -> None:
    """Set up a new pooled connection (pgvector's types come with the pool's adapters): a plan made for each
    execution's values.

    psycopg prepares a statement on its fifth run, and PostgreSQL then switches to a generic plan
    once that looks no costlier. For the store's parameter-sensitive predicates the generic plan
    scans: the dimension check of every vector write (``dim < ? OR dim > ?``, empty for the real
    values) became a sequential scan of ``vectors`` (seconds per write at 1M memories, bench/scale_pg.py).
    Planning each execution costs well under a millisecond.

    Its writes merge the keyword indexes' pending lists once they pass
    :data:`~engramdb.storage._pg_analyze.PENDING_LIST_LIMIT`: the writers clean what they add, not the searching
    processes (see :mod:`engramdb.storage._pg_analyze`).
    """
    conn.execute(f"{OWN_LOOK}SET plan_cache_mode = force_custom_plan")
    conn.execute(f"{OWN_LOOK}SET gin_pending_list_limit = '{PENDING_LIST_LIMIT}'")
    try:
        with conn.pipeline():
            for statement in _CATALOG_WARM:
                conn.execute(statement)
    except psycopg.Error:
        pass  # best effort: a store missing a relation (an older schema) plans it in its first search instead


class PostgresBackend:
    """The PostgreSQL :class:`~engramdb.storage._dialect.Dialect`: a connection pool, transactions, pgvector."""

    # Not FOR UPDATE: the vector mover holds its memories' key-share lock for a batch (the foreign key of the rows it
    # inserts), which a read-modify-write of other columns need not wait for; writers still queue on each other.
    for_update: Final = " FOR NO KEY UPDATE"
    concurrent_reads: Final = True
    internal_meta: Final = _INTERNAL_META
    vector_column: Final = "embedding"
    #: Schema step 5: ``vectors`` is partitioned by agent (each agent's search reads one HNSW graph).
    vectors_by_agent: Final = True
    #: Its vectors are counted by an index on (model_id, dim) (``vectors_model``), its checks planned on it.
    vector_counts: Final = False
    #: Schema step 6: new vectors are staged, then folded into ``vectors`` by one mover (``_pg_staging``).
    vector_tables: Final = ("vectors_staged", "vectors")

    def __init__(
        self,
        location: str,
        *,
        settings: Settings | None = None,
        pool_size: int = 4,
        exact_search_below: int = EXACT_SEARCH_BELOW,
        keyword_rank_rows: int = KEYWORD_RANK_ROWS,
    ) -> None:
        self.location: str = redact_url(location)
        self._local = threading.local()
        self.deferred = Deferred()
        timeout = settings.busy_timeout if settings is not None else 30.0
        self._timeout = max(1.0, timeout)
        try:
            with psycopg.connect(location, autocommit=True, connect_timeout=int(self._timeout)) as conn:
                migrate(conn, location=self.location)
                # pgvector's types, looked up once: every pooled connection starts from these adapters
                # (register_vector on each new connection asked the catalog four times).
                register_vector(conn)
                adapters = AdaptersMap(conn.adapters)
        except (StorageError, ValidationError):
            raise
        except psycopg.Error as exc:
            raise self._translate(exc) from exc
        self.search = PgSearch(self, exact_search_below=exact_search_below, keyword_rank_rows=keyword_rank_rows)
        self._pool: ConnectionPool[Raw] | None = ConnectionPool(
            location,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "context": adapters},
            configure=_configure,
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
        self._pool_size = max(1, pool_size)
        #: The open's warm-up (:meth:`_warm`), stopped and joined by close().
        self._background = Background()
        if settings is None or settings.warm:
            self._background.start(f"{THREAD_PREFIX}-pg-warm", self._warm)
        mover = settings.pg_vector_mover if settings is not None else True
        #: Share of a bulk write's previous time it waits for searches at work (:mod:`._pg_giveway`).
        self._yield_share = settings.pg_writes_yield if settings is not None else WRITES_YIELD
        # When this process's bulk writes last saw a search at work (``time.monotonic()``; None: never).
        self._reads_seen: float | None = None
        self._mover = StagedMover(self._mover_connection) if mover else None

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Close every pooled connection (idempotent); further calls raise StorageError.

        A mover's batch under way is rolled back (its vectors stay staged for the next mover); a statistics
        thread under way is waited for (bounded).
        """
        self._background.stop()
        mover, self._mover = self._mover, None
        if mover is not None:
            mover.close()
        # Before the pool closes: an ANALYZE or a lexeme sample under way ends on its own connection, not on a
        # closed one after the store is gone (see engramdb._threads).
        self.search.statistics.wait(JOIN_SECONDS)
        self.search.lexemes.wait(JOIN_SECONDS)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _warm(self) -> None:
        """What a process's first searches would otherwise do on their way, done at the open on this thread: the
        pool's connections for a search opened (each plans the store's relations once, see :func:`_configure`), the
        first look at the statistics (:meth:`PgSearch.warm`), the hottest relations read into the server's buffers
        (:func:`_prewarm`, where the server has ``pg_prewarm``). Best effort."""
        try:
            pool = self._pool
            if pool is not None:
                pool.resize(min(self._pool_size, SEARCH_CONNECTIONS), self._pool_size)
            if not self._background.stopping:
                with self.reading() as conn:
                    self.search.warm(conn)
            if not self._background.stopping:
                with self.reading() as conn:
                    _prewarm(conn)
        except Exception as exc:  # noqa: BLE001 - a background thread: report, never raise
            log.debug("engramdb: the PostgreSQL store's warm-up stopped (%s)", exc)

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

    def _require_pool(self) -> ConnectionPool[Raw]:
        if self._pool is None:
            raise StorageError(f"{self.location}: the store is closed")
        return self._pool

    @contextmanager
    def reading(self, *, snapshot: bool = False) -> Iterator[Raw]:
        """A connection for reads: the thread's open write transaction if any (reads see its writes)."""
        pinned: Raw | None = getattr(self._local, "conn", None)
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
    def _mover_connection(self) -> Iterator[Raw]:
        """A pooled connection for a batch of the vector mover (its thread never holds a write of the store's)."""
        with self._require_pool().connection() as conn:
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[Raw]:
        """One transaction on a pooled connection pinned to this thread; re-entrant (joins an open one)."""
        pinned: Raw | None = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        pool = self._require_pool()
        pending = self.deferred.take()
        try:
            with pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    # Bookkeeping of reads that met a full disk lands with this write (or stays pending).
                    write_deferred(self, _PgConn(conn), pending)
                    yield conn
                finally:
                    self._local.conn = None
        except (PoolTimeout, psycopg.Error) as exc:
            self.deferred.restore(pending)
            raise self._translate(exc) from exc
        except BaseException:
            self.deferred.restore(pending)
            raise

    @contextmanager
    def transaction(self) -> Iterator[Raw]:
        """A write transaction on a raw psycopg connection, for engramdb modules adding their own tables."""
        with self._writing() as conn:
            yield conn

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def _pinned(self) -> Raw:
        pinned: Raw | None = getattr(self._local, "conn", None)
        if pinned is None:
            raise StorageError("a write hook ran outside a write transaction")
        return pinned

    # -- the Dialect: connections -----------------------------------------------------------
    @contextmanager
    def read(self) -> Iterator[Conn]:
        """See :meth:`Dialect.read`."""
        with self.reading() as raw:
            yield _PgConn(raw)

    def read_apart(self) -> AbstractContextManager[Conn]:
        """See :meth:`Dialect.read_apart`: a read, on a pooled connection as every read."""
        return self.read()

    @contextmanager
    def write(self) -> Iterator[Conn]:
        """See :meth:`Dialect.write`."""
        with self._writing() as raw:
            yield _PgConn(raw)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Group writes: every write of this store on this thread inside the block commits together or not at all.

        Re-entrant. Other threads keep their own connections (they do not see the block's
        writes until it commits). Raise to roll everything back; do not search inside.
        """
        with self._writing():
            yield

    def relax_commit(self) -> None:
        """See :meth:`Dialect.relax_commit`: ``synchronous_commit = off`` for the open transaction only."""
        conn: Raw | None = getattr(self._local, "conn", None)
        if conn is None:
            raise StorageError("relax_commit() needs an open atomic() block")
        try:
            conn.execute("SET LOCAL synchronous_commit = off")
        except psycopg.Error as exc:
            raise self._translate(exc) from exc

    def background_turn(self) -> None:
        """See :meth:`Dialect.background_turn`: an advisory lock held until the commit.

        One background vector write at a time per store, and (schema step 6) only while the staged vectors are
        fewer than :data:`~engramdb.storage._pg_staging.AGENT_CAP` for every agent (and
        :data:`~engramdb.storage._pg_staging.STAGED_CAP` in all): a search scans its agent's exactly, so its cost
        stays bounded while the mover catches up; the worker's queue grows meanwhile and its next batch takes more
        at once (memories waiting there are stored and keyword-searchable). Without a mover at work the wait ends
        after :data:`~engramdb.storage._pg_staging.ROOM_WAIT` seconds.
        """
        conn: Raw | None = getattr(self._local, "conn", None)
        if conn is None:
            raise StorageError("background_turn() needs an open atomic() block")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_BACKGROUND,))
            wait_for_room(conn)
        except psycopg.Error as exc:
            raise self._translate(exc) from exc

    def give_way(self, seconds: float) -> float:
        """See :meth:`Dialect.give_way`: :func:`~engramdb.storage._pg_giveway.give_way` for ``pg_writes_yield`` of
        ``seconds``; never inside an open transaction (it may hold locks the searches or other writers wait for)."""
        budget = self._yield_share * seconds
        if budget <= 0 or self.in_write():
            return 0.0
        try:
            with self._require_pool().connection() as conn:
                waited, self._reads_seen = give_way(conn, budget=budget, seen=self._reads_seen)
                return waited
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._translate(exc) from exc

    def in_write(self) -> bool:
        """See :meth:`Dialect.in_write`."""
        return getattr(self._local, "conn", None) is not None

    # -- the Dialect: spelling --------------------------------------------------------------
    @staticmethod
    def one_of(column: str, values: Sequence[str]) -> tuple[str, Any]:
        """See :meth:`Dialect.one_of`."""
        return one_of(column, values)

    @staticmethod
    def order_bytes(column: str) -> str:
        """See :meth:`Dialect.order_bytes`."""
        return f'{column} COLLATE "C"'

    @staticmethod
    def filter_sql(flt: Filter | None, *, visit_all: bool = False) -> FilterSQL:
        """See :meth:`Dialect.filter_sql` (``visit_all``: the form the planner can answer from indexes)."""
        return filter_sql(flt, indexed=visit_all)

    @staticmethod
    def encode_vector(vector: Vectors) -> Any:
        """A vector as pgvector's parameter (the registered adapter takes numpy arrays)."""
        return vector

    @staticmethod
    def decode_vector(value: Any) -> npt.ArrayLike:
        """pgvector >= 0.3 loads a Vector object, older releases a numpy array."""
        numbers: npt.ArrayLike = value.to_numpy() if hasattr(value, "to_numpy") else value
        return numbers

    def fetch_vectors(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """See :meth:`Dialect.fetch_vectors`: binary results. In text, the server prints every float of a vector
        and pgvector parses it back, about ten times the binary transfer (bench/RESULTS.md, issue 26, fourth
        round)."""
        with self.reading() as conn:
            return conn.execute(pg_statement(statement), params, binary=True).fetchall()

    # -- the Dialect: hooks inside a write --------------------------------------------------
    def insert_new(self, conn: Conn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """COPY in a savepoint: a concurrent insert of the same id is bad input, not a broken transaction."""
        raw = self._pinned()
        try:
            with raw.transaction():
                self.insert_rows(conn, table, columns, rows)
        except psycopg.errors.UniqueViolation as exc:
            raise ValidationError("a memory with one of these ids already exists") from exc

    def insert_rows(self, conn: Conn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """See :meth:`Dialect.insert_rows`: one ``COPY`` (:func:`~engramdb.storage._pg_copy.copy_rows`)."""
        copy_rows(self._pinned(), table, columns, rows)

    def prepare_vectors(self, model_id: str, dim: int) -> None:
        """Create the model's HNSW index if it does not exist yet (see :meth:`_ensure_vector_index`)."""
        self._ensure_vector_index(self._pinned(), model_id, dim)

    def vectors_written(self, memories: Sequence[Memory], unit: npt.NDArray[np.float32], *, model_id: str) -> None:
        """Nothing to keep in step (searches run in the database); the mover looks for the staged rows soon."""
        if self._mover is not None:
            self._mover.nudge()

    def vector_removed(self, memory_id: str) -> None:
        """Nothing to keep in step: searches run in the database."""

    def attributes_changed(self, memory_id: str, *, kind: str, visibility: str) -> None:
        """A staged vector's ``open`` flag follows its memory's visibility (searches of other agents read it)."""
        self._pinned().execute(
            "UPDATE vectors_staged SET open = %s WHERE memory_id = %s AND open <> %s",
            (visibility != "private", memory_id, visibility != "private"),
        )

    def forgotten(self) -> None:
        """Nothing beyond the SQL: the row and its ``tsvector`` are gone; (auto)vacuum reclaims the space."""

    def lock_audit(self, conn: Conn) -> None:
        """Held until commit: concurrent appenders (threads or processes) queue here, so each reads the
        head the previous one wrote and the chain stays one line."""
        conn.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_AUDIT,))

    def lock_meta(self, conn: Conn, key: str) -> None:
        """Held until commit, keyed by ``key``: ``SELECT ... FOR UPDATE`` locks a row that exists, this also
        queues the first writers of a key that has none yet (two ``keys create`` on an empty store)."""
        conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (LOCK_META_CLASS, key))

    def out_of_space(self, exc: BaseException) -> bool:
        """See :meth:`Dialect.out_of_space`: SQLSTATE class 53 (insufficient resources) or 58030 (I/O error)."""
        cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
        state = cause.sqlstate if isinstance(cause, psycopg.Error) else None
        return state is not None and (state.startswith("53") or state == "58030")

    # -- the Dialect: health checks ---------------------------------------------------------
    def database_problems(self, *, quick: bool) -> list[str] | None:
        """None: PostgreSQL checks its own pages (checksums, amcheck) outside engramdb."""
        return None

    def keyword_index_problems(self) -> list[str]:
        """Rows whose stored ``tsvector`` differs from their content and tags (it is generated: none expected)."""
        with self.reading() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories WHERE tsv IS DISTINCT FROM "
                "to_tsvector('english'::regconfig, content || ' ' || tags)"
            ).fetchone()
            copy = conn.execute(_POSTINGS_DRIFT).fetchone()
        stale = int(row[0]) if row is not None else 0
        drift = int(copy[0]) if copy is not None else 0
        return [
            *([f"{stale} memories have keyword index entries out of step with their text"] if stale else []),
            *([f"{drift} memories have keyword postings (memory_terms) out of step"] if drift else []),
        ]

    def _ensure_vector_index(self, conn: Raw, model_id: str, dim: int) -> None:
        """Create the HNSW index of ``model_id``'s ``dim``-dimensional vectors if it does not exist yet.

        pgvector's HNSW needs a fixed dimension while the column holds any, so the index is a
        partial expression index per (model, dimension): ``embedding::halfvec(dim)`` (half precision, schema
        step 9) over the rows of that model. It is created in the writer's transaction (DDL is transactional)
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
                    "CREATE INDEX {name} ON vectors USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops) "
                    "WHERE model_id = {model} AND dim = {dim}"
                ).format(name=sql.Identifier(name), dim=sql.Literal(dim), model=sql.Literal(model_id))
            )
            conn.execute(
                "INSERT INTO vector_indexes (model_id, dim, index_name) VALUES (%s, %s, %s)", (model_id, dim, name)
            )

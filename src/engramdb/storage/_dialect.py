"""What a SQL backend hands the shared engine (:mod:`engramdb.storage._engine`): the :class:`Dialect`.

The engine writes every orchestration once (add, update, delete, share, unshare, shares
listing, history import, vectors, audit append) in SQL with ``?`` placeholders that runs
on both backends. A dialect supplies only what is truly its own:

* connections and transactions (``read``/``write``/``atomic``), translating driver errors;
* spelling: id lists (``one_of``), row locking (``for_update``), byte-order sorting,
  the vector column and its encoding, the visibility filter's form;
* hooks the engine calls inside a write: SQLite keeps its in-memory vector cache in step
  and purges its keyword index on forget (then truncates its log after the outermost
  commit); PostgreSQL creates its per-model HNSW index and takes advisory locks;
* searching: FTS5 vs ``tsvector``, the numpy vector index vs pgvector.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import npt
    from engramdb.storage.base import Vectors

from engramdb.models import Memory
from engramdb.storage._filters import FilterSQL

if TYPE_CHECKING:
    from engramdb.storage._deferred import Deferred
from engramdb.storage.base import CandidateSource, Filter

__all__ = ["Conn", "Dialect", "Result"]


class Result(Protocol):
    """What a statement returns (a DB-API cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Conn(Protocol):
    """A connection running SQL written with ``?`` placeholders."""

    def execute(self, statement: str, params: Sequence[Any] = (), /) -> Result: ...

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]], /) -> object: ...


class Dialect(Protocol):
    """One SQL backend, as the engine uses it (see the module docstring)."""

    @property
    def location(self) -> str:
        """The location the store was opened from, without secrets."""
        ...

    @property
    def for_update(self) -> str:
        """``" FOR UPDATE"`` where writers lock the rows they read-modify-write, else ``""``."""
        ...

    @property
    def internal_meta(self) -> frozenset[str]:
        """Meta keys the store maintains itself (``meta.set`` refuses them)."""
        ...

    @property
    def concurrent_reads(self) -> bool:
        """Whether reads from several threads run at once (:attr:`~engramdb.storage.base.Store.concurrent_reads`)."""
        ...

    @property
    def vector_column(self) -> str:
        """The ``vectors`` column holding the embedding."""
        ...

    @property
    def vectors_by_agent(self) -> bool:
        """Whether ``vectors`` rows carry their memory's ``agent`` (the table is partitioned by it)."""
        ...

    @property
    def vector_counts(self) -> bool:
        """Whether triggers keep ``vector_counts`` (rows per model and dimension): counts and the dimension check
        read it instead of every vector row."""
        ...

    @property
    def vector_tables(self) -> tuple[str, ...]:
        """The tables holding vectors, each memory's in one of them: new ones go into the first. PostgreSQL stages new
        vectors in a small table a mover folds into ``vectors`` (:mod:`engramdb.storage._pg_staging`)."""
        ...

    @property
    def search(self) -> CandidateSource:
        """Candidate retrieval (keyword and vector channels)."""
        ...

    # -- connections and transactions -----------------------------------------------------------
    def read(self) -> AbstractContextManager[Conn]:
        """A connection for reads: the thread's open write transaction if any (reads see its writes)."""
        ...

    def read_apart(self) -> AbstractContextManager[Conn]:
        """A connection for a long read that need not see a write still open on another thread (a count over every
        memory at open): on SQLite one of its own, so the store's lock, and every search, does not wait for it."""
        ...

    def write(self) -> AbstractContextManager[Conn]:
        """A write transaction; re-entrant (a write inside an open one on this thread joins it)."""
        ...

    def atomic(self) -> AbstractContextManager[None]:
        """:meth:`write` without the connection: :meth:`~engramdb.storage.base.Store.atomic`."""
        ...

    def close(self) -> None: ...

    def relax_commit(self) -> None:
        """:meth:`~engramdb.storage.base.Store.relax_commit`: the open write's commit need not wait for the disk."""
        ...

    def background_turn(self) -> None:
        """:meth:`~engramdb.storage.base.Store.background_turn`: wait for the store's other background writes."""
        ...

    def give_way(self, seconds: float) -> float:
        """:meth:`~engramdb.storage.base.Store.give_way`: a bulk write waits a bounded time for searches at work."""
        ...

    @property
    def deferred(self) -> Deferred:
        """Read bookkeeping waiting for the next write transaction, which writes it first (full disk)."""
        ...

    def out_of_space(self, exc: BaseException) -> bool:
        """Whether a translated error came from a full disk or an I/O error (read bookkeeping can wait)."""
        ...

    def in_write(self) -> bool:
        """Whether this thread has a write transaction open (reads inside it lock what they return)."""
        ...

    # -- spelling -------------------------------------------------------------------------------
    def one_of(self, column: str, values: Sequence[str]) -> tuple[str, Any]:
        """SQL testing ``column`` against a list of strings (one placeholder) and that list's parameter."""
        ...

    def order_bytes(self, column: str) -> str:
        """``column`` in an ORDER BY so text sorts by code point on every backend."""
        ...

    def filter_sql(self, flt: Filter | None, *, visit_all: bool = False) -> FilterSQL:
        """The visibility filter (``visit_all``: a form suited to reading every matching row)."""
        ...

    def encode_vector(self, vector: Vectors) -> Any:
        """A unit vector as the vector column's parameter."""
        ...

    def decode_vector(self, value: Any) -> npt.ArrayLike:
        """A vector column value as numbers."""
        ...

    def fetch_vectors(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of a read returning vector columns (``?`` SQL), in the backend's cheapest form to decode."""
        ...

    # -- hooks called inside a write ------------------------------------------------------------
    def insert_new(self, conn: Conn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert rows of new memories; a duplicate id is a ValidationError, not a broken transaction."""
        ...

    def insert_rows(self, conn: Conn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (values of ``columns``, in order) into ``table`` in one go, inside an open write."""
        ...

    def prepare_vectors(self, model_id: str, dim: int) -> None:
        """Before vectors of ``model_id`` with ``dim`` dimensions are written (and before any row of an add)."""
        ...

    def vectors_written(self, memories: Sequence[Memory], unit: _F32, *, model_id: str) -> None:
        """After the vectors of ``memories`` were inserted or replaced."""
        ...

    def vector_removed(self, memory_id: str) -> None:
        """After a memory's vector was deleted."""
        ...

    def attributes_changed(self, memory_id: str, *, kind: str, visibility: str) -> None:
        """After a memory's kind or visibility changed."""
        ...

    def forgotten(self) -> None:
        """After a memory was forgotten (the backend purges what the SQL delete leaves behind)."""
        ...

    def lock_audit(self, conn: Conn) -> None:
        """Serialise audit appenders until the commit (beyond what the write transaction already does)."""
        ...

    def lock_meta(self, conn: Conn, key: str) -> None:
        """Serialise read-modify-writes of meta ``key`` until the commit, even while it has no row yet."""
        ...

    # -- health checks (``store.checks``) -------------------------------------------------------
    def database_problems(self, *, quick: bool) -> list[str] | None:
        """What the database's own consistency check reports (empty: fine; None: it has none to run)."""
        ...

    def keyword_index_problems(self) -> list[str]:
        """Whether the keyword index is in step with the memories table (empty: it is)."""
        ...

"""The embedded store: one SQLite file (WAL mode) with FTS5 keywords and numpy vector search.

A store is a directory holding ``engram.db`` (plus SQLite's ``-wal``/``-shm`` files),
or ``":memory:"``: ``open_sqlite("dir")``. One :class:`SQLiteBackend` owns one connection
guarded by a re-entrant lock, so a store can be shared across threads; several processes
can open the same directory at once (SQLite serialises their writes, and each writer
waits up to ``busy_timeout`` seconds for the lock).

The roles of the store are the shared SQL engine (:mod:`engramdb.storage._engine`); this
module supplies what is SQLite's own: the connection, ``BEGIN IMMEDIATE`` write transactions
(all or nothing, re-entrant), the in-memory vector cache kept in step after each commit, and
forgetting down to the bytes: ``secure_delete`` zeroes freed pages, the keyword index is
merged before the commit (so no term lingers in old segments) and the write-ahead log is
truncated after the outermost commit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import npt
    from engramdb.storage.base import Vectors

from engramdb.errors import CorruptStoreError, NotAStoreError, StorageError, ValidationError
from engramdb.models import Memory
from engramdb.storage._ann import sidecar_dir
from engramdb.storage._bookkeeping import write_deferred
from engramdb.storage._btree_pages import LeafMap, PageHints
from engramdb.storage._codecs import AUDIT_HEAD_KEY
from engramdb.storage._deferred import Deferred
from engramdb.storage._dialect import Conn
from engramdb.storage._engine import sql_store
from engramdb.storage._filters import FilterSQL
from engramdb.storage._kw_persist import postings_path
from engramdb.storage._readahead import READAHEAD_BUDGET, Pace, read_ahead, read_ahead_open, sidecar_files
from engramdb.storage._sqlite_files import check_present, connect_read_only, create_atomically, ensure_marker
from engramdb.storage._sqlite_schema import APPLICATION_ID, check_header, migrate
from engramdb.storage._sqlite_search import SQLiteSearch, sync_state
from engramdb.storage._sqlite_sql import filter_sql, ids_json, insert_statement, one_of
from engramdb.storage._tenant_persist import drop_tenants, tenants_path
from engramdb.storage._vector_index import (
    ANN_DEFAULT_THRESHOLD,
    IndexOp,
    SyncState,
    VectorIndex,
    attrs_op,
    put_op,
    remove_op,
)
from engramdb.storage.base import Filter, Store

__all__ = ["DB_FILENAME", "SYNCHRONOUS", "SQLiteBackend", "open_sqlite"]

#: The database file inside a store directory.
DB_FILENAME: Final = "engram.db"

#: Meta keys the store maintains itself (meta.set refuses them).
_INTERNAL_META: Final = frozenset({"vec_epoch", "share_epoch", AUDIT_HEAD_KEY})
_PAGE_SIZE: Final = 8192
#: The durability levels ``open_sqlite(synchronous=...)`` accepts (SQLite's ``PRAGMA synchronous`` in WAL mode).
SYNCHRONOUS: Final = ("NORMAL", "FULL")
#: SQLite primary result codes meaning the disk is full or failing (read bookkeeping can wait).
_SQLITE_IOERR: Final = 10
_SQLITE_FULL: Final = 13


def open_sqlite(
    location: str | os.PathLike[str],
    *,
    busy_timeout: float = 30.0,
    synchronous: str = "NORMAL",
    ann_threshold: int | None = ANN_DEFAULT_THRESHOLD,
    warm: bool = True,
) -> Store:
    """The SQLite store at directory ``location`` (created if missing) or ``":memory:"``.

    Past ``ann_threshold`` vectors (None or 0: never) a file store answers vector searches from an
    HNSW index persisted beside the database in ``engram.db.ann/`` (see
    :mod:`engramdb.storage._ann`; deleting it loses nothing, it is rebuilt).

    ``synchronous`` is the durability level (see :data:`SYNCHRONOUS`): ``"NORMAL"`` (default)
    never corrupts the store, but an operating-system crash or power loss may roll back the
    last commits; ``"FULL"`` syncs the log at every commit, so a commit that returned survives
    those too (each write costs an fsync). ``warm`` brings a file store's search caches up on a thread
    at once (else the first search does).

    Raises :class:`~engramdb.errors.NotAStoreError` for a path that holds something else,
    :class:`~engramdb.errors.CorruptStoreError` for a damaged, emptied or vanished database file and
    :class:`~engramdb.errors.SchemaVersionError` for a store written by a newer engramdb.
    """
    return sql_store(
        SQLiteBackend(
            location, busy_timeout=busy_timeout, synchronous=synchronous, ann_threshold=ann_threshold, warm=warm
        )
    )


@dataclass(slots=True)
class _Write:
    """An open write transaction, the vector-cache changes to apply once it commits, and what runs after."""

    conn: sqlite3.Connection
    before: SyncState | None
    ops: list[IndexOp] = field(default_factory=list)
    #: Something was forgotten: purge the keyword index before the commit.
    forgot: bool = False
    #: Run once after the outermost commit (e.g. truncating the log after a forget).
    after_commit: dict[str, Callable[[], None]] = field(default_factory=dict)


class SQLiteBackend:
    """The SQLite :class:`~engramdb.storage._dialect.Dialect`: connection, transactions, vector cache, search."""

    for_update: Final = ""
    concurrent_reads: Final = False
    internal_meta: Final = _INTERNAL_META
    vector_column: Final = "vec"
    vectors_by_agent: Final = False
    #: Schema step 7.
    vector_counts: Final = True
    vector_tables: Final = ("vectors",)

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "NORMAL",
        ann_threshold: int | None = ANN_DEFAULT_THRESHOLD,
        warm: bool = True,
    ) -> None:
        level = synchronous.upper() if isinstance(synchronous, str) else ""
        if level not in SYNCHRONOUS:
            raise ValidationError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {synchronous!r}")
        if ann_threshold is not None and ann_threshold < 0:
            raise ValidationError(f"ann_threshold must not be negative, not {ann_threshold}")
        self.location: str = os.fspath(location)
        self._synchronous = level
        self.deferred = Deferred()
        self._busy_ms = max(0, int(busy_timeout * 1000))
        self._lock = threading.RLock()
        self._open_write: _Write | None = None
        self._index = VectorIndex(None, ann_threshold=None)
        self.search = SQLiteSearch(self._reading, self._index)
        self.path: Path | None = None
        self._conn: sqlite3.Connection | None = self._connect(busy_timeout)
        #: Where a file store's rows lie in it (read at open): a search asks for the pages it reads together.
        self._pages = PageHints(self.path) if self.path is not None else None
        if self._pages is not None:
            self.search = SQLiteSearch(self._reading, self._index, pages=self._pages)
        if self.path is not None and ann_threshold:
            # Only a file store persists an ANN index; it lives beside the database file.
            self._index = VectorIndex(
                sidecar_dir(self.path), database=self.path, ann_threshold=ann_threshold, pages=self._pages
            )
            self.search = SQLiteSearch(self._reading, self._index, pages=self._pages)
        if self.path is not None and warm:
            # A file store may be large: its caches come up now, not in the first searches (issue 27).
            self.search.background.start("engramdb-warm", self._warm)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def _warm(self) -> None:
        background = self.search.background
        # A close interrupts the warm-up's reads on the store's connection (the close then waits for no long read).
        with background.interruptible(self._interrupt):
            if self.path is not None:
                if background.stopping:
                    return
                # The keyword postings first: their thread takes no lock and maps the saved file in milliseconds.
                self.search.warm_keywords(self.path)
                # The pages beside the warm-up below, paced so that its rehearsal and the first searches go first.
                background.start("engramdb-readahead", self._read_ahead)
            self.search.warm(self.path)

    def _read_ahead(self) -> None:
        """Read the store's pages ahead, in the order searches need them (issue 27, cold first searches): where the
        rows lie, the vector sidecar and the postings, the id indexes every search looks rows up in, the memory
        rows, then the rest of the database from the front, within ``READAHEAD_BUDGET`` bytes."""
        path, pages, background = self.path, self._pages, self.search.background
        if path is None:
            return
        # Not at a lower CPU priority (yield_cpu): its loop runs Python between the calls, and a thread holding the
        # interpreter's lock while a busy machine leaves it waiting for a core would hold up the searches' threads.
        pace = Pace(stopping=lambda: background.stopping, busy=pages.busy if pages is not None else Pace().busy)
        # Where the rows lie first (a few hundred pages: the rehearsal's and the first searches' reads then go side
        # by side), then the sidecar and the postings, which the warm-up's vector load and rehearsal read (cold,
        # both took twice as long when the id indexes came before them: bench/RESULTS.md, issue 27, eighth round).
        indexes: list[LeafMap] = pages.load() if pages is not None else []
        left = READAHEAD_BUDGET
        left -= read_ahead([*sidecar_files(sidecar_dir(path)), postings_path(str(path))], budget=left, pace=pace)
        if pages is not None:
            for index in indexes:
                left -= pages.read_ahead(index, budget=left, pace=pace)
        memories = pages.table("memories") if pages is not None else None
        if memories is not None and pages is not None:
            left -= pages.read_ahead(memories, budget=left, pace=pace)
        read_ahead_open([path, path.with_name(path.name + "-wal")], budget=max(0, left), pace=pace)

    def _interrupt(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.interrupt()

    # -- lifecycle --------------------------------------------------------------------------
    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        if self.location == ":memory:":
            target = ":memory:"
        else:
            directory = Path(self.location).expanduser()
            try:  # exists() raises for a name the file system refuses (e.g. a part over 255 bytes)
                if directory.exists() and not directory.is_dir():
                    raise NotAStoreError(f"{directory} is a file, not an engramdb store directory")
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create store directory {directory}: {exc.strerror or exc}") from exc
            except ValueError as exc:  # a NUL character: no file system takes it
                raise ValidationError(f"store path {str(directory)!r} is not usable: {exc}") from None
            self.path = directory / DB_FILENAME
            check_header(self.path)
            if not check_present(self.path):
                create_atomically(self.path, self._initialise)
            target = str(self.path)
        try:
            conn = sqlite3.connect(target, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        try:
            self._initialise(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise self._translate(exc) from exc
        except BaseException:
            conn.close()
            raise
        if self.path is not None:
            ensure_marker(self.path.parent)
        return conn

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """Set up a connection: the new database's page size, WAL, durability, and the schema."""
        if self._check_marker(conn):
            # Must precede the first table. 8 KiB pages hold five 384-d float32 vectors
            # (95% full) where 4 KiB pages hold two (75%).
            conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL is safe in WAL mode (no corruption on power loss; the last commits may roll back);
        # FULL also syncs the log at each commit, so a returned commit survives an OS crash.
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Zero deleted content instead of leaving it in free pages: forget means gone.
        conn.execute("PRAGMA secure_delete = ON")
        migrate(conn, location=self.location)

    def _check_marker(self, conn: sqlite3.Connection) -> bool:
        """Refuse a SQLite database that is neither empty nor marked as ours, before any write.

        Returns True for an empty (new) database.
        """
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        if app_id == APPLICATION_ID:
            return False
        objects = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        if app_id != 0 or objects:
            raise NotAStoreError(f"{self.path} is a SQLite database but not an engramdb store")
        return True

    def close(self) -> None:
        """Stop and join the warm-up, close the connection (idempotent); further calls raise StorageError."""
        if self._pages is not None:
            self._pages.close()  # a warm-up reading where rows lie stops at the next tree
        # Outside the lock: a warm-up waiting for it could not end, and the close would wait for it.
        self.search.background.stop()
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                finally:
                    self._conn = None
                    self._index.close()  # also stops a background index build
                    self.search.clear()

    # -- transactions -----------------------------------------------------------------------
    def _translate(self, exc: sqlite3.Error) -> StorageError:
        msg = str(exc)
        low = msg.lower()
        if "not a database" in low or "malformed" in low or "corrupt" in low:
            return CorruptStoreError(f"{self.location}: the database file is damaged ({msg})")
        if "locked" in low or "busy" in low:
            return StorageError(f"{self.location}: the store is locked by another process ({msg})")
        return StorageError(f"{self.location}: {msg}")

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError(f"{self.location}: the store is closed")
        return self._conn

    @contextmanager
    def _reading(self, *, snapshot: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; ``snapshot`` wraps the reads in one read transaction.

        Inside an open write (see :meth:`atomic`) reads see that write's changes; a snapshot
        read is refused there, because the vector cache must only ever follow committed data.
        """
        with self._lock:
            conn = self._require_open()
            if snapshot and self._open_write is not None:
                raise StorageError("searches cannot run inside an atomic() block")
            try:
                if snapshot:
                    conn.execute("BEGIN")
                yield conn
                if snapshot:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if snapshot:  # never end an enclosing write transaction from a read
                    self._rollback(conn)
                raise self._translate(exc) from exc
            except BaseException:
                if snapshot:
                    self._rollback(conn)
                raise

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            # If ROLLBACK fails, SQLite has already rolled back (e.g. after a full disk).
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    @contextmanager
    def _writing(self) -> Iterator[_Write]:
        """One ``BEGIN IMMEDIATE`` transaction; the vector cache follows only once it commits.

        Re-entrant: a write started inside another on the same thread (see :meth:`atomic`)
        joins the open transaction, and the outermost one commits everything or nothing,
        then runs the write's after-commit hooks.
        """
        with self._lock:
            if self._open_write is not None:
                # The lock is re-entrant, so only this thread can be inside the open write.
                yield self._open_write
                return
            conn = self._require_open()
            pending = self.deferred.take()
            try:
                conn.execute("BEGIN IMMEDIATE")
                write = _Write(conn, sync_state(conn) if self._index.state is not None else None)
                # Bookkeeping of reads that met a full disk lands with this write (or stays pending).
                write_deferred(self, conn, pending)
                self._open_write = write
                try:
                    yield write
                finally:
                    self._open_write = None
                if write.forgot:
                    # FTS5 (before SQLite 3.42's secure-delete option) only marks a deleted document;
                    # its terms stay in older index segments until they are merged. Merging everything
                    # drops them for good: about 0.2 s per 100k memories, paid once per transaction,
                    # so forgetting many memories inside one atomic() block costs one merge.
                    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
                after = sync_state(conn) if write.before is not None else None
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                self.deferred.restore(pending)
                raise self._translate(exc) from exc
            except BaseException:
                self._rollback(conn)
                self.deferred.restore(pending)
                raise
            self._after_commit(write, after)
            for hook in write.after_commit.values():
                hook()

    def _after_commit(self, write: _Write, after: SyncState | None) -> None:
        index = self._index
        if write.before is None or after is None or index.state is None:
            return
        if after.model_id != write.before.model_id:
            index.invalidate()
            return
        if index.state != write.before:
            return  # the cache was already behind another process: the next search catches up
        try:
            for op in write.ops:
                op(index, after.model_id)
        except (ValueError, StorageError):
            index.invalidate()  # the write is committed; the cache just reloads on the next search
            return
        index.state = after

    def _current(self) -> _Write:
        if self._open_write is None:
            raise StorageError("a write hook ran outside a write transaction")
        return self._open_write

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the raw connection, for engramdb modules that add their own tables.

        Everything inside commits together or not at all (and joins an open ``atomic()`` block).
        Do not touch the ``vectors`` table here: the vector cache only follows the store's roles.
        """
        with self._writing() as write:
            yield write.conn

    # -- the Dialect: connections -----------------------------------------------------------
    @contextmanager
    def read(self) -> Iterator[Conn]:
        """See :meth:`Dialect.read`."""
        with self._reading() as conn:
            yield conn

    @contextmanager
    def read_apart(self) -> Iterator[Conn]:
        """See :meth:`Dialect.read_apart`: a read-only connection of its own, so the store's lock is not held while it
        reads (the open's count of stale vectors reads every vector row: seconds at 1M memories, during which every
        search waited for the lock). Inside this thread's own write, or in memory, the store's connection."""
        mine = self._lock.acquire(blocking=False)  # re-entrant: succeeds on the thread holding it
        try:
            inside = mine and self._open_write is not None
        finally:
            if mine:
                self._lock.release()
        if self.path is None or inside:
            with self.read() as conn:
                yield conn
            return
        self._require_open()
        try:
            apart = connect_read_only(self.path, timeout=self._busy_ms / 1000)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        try:
            yield apart
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        finally:
            apart.close()

    @contextmanager
    def write(self) -> Iterator[Conn]:
        """See :meth:`Dialect.write`."""
        with self._writing() as w:
            yield w.conn

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Group writes: every write of this store inside the block commits together or not at all.

        The block holds the store's write lock (other threads wait). Raise to roll
        everything back; do not run searches inside (they need their own snapshot).
        """
        with self._writing():
            yield

    def relax_commit(self) -> None:
        """See :meth:`Dialect.relax_commit`: nothing, the connection's ``synchronous`` setting decides."""

    def background_turn(self) -> None:
        """See :meth:`Dialect.background_turn`: nothing, the store's write lock serialises writes already."""

    def give_way(self, seconds: float) -> float:
        """See :meth:`Dialect.give_way`: no wait (one process's writes and reads take turns at the store's lock)."""
        return 0.0

    def in_write(self) -> bool:
        """See :meth:`Dialect.in_write` (under the store's lock, only the writing thread gets here)."""
        with self._lock:
            return self._open_write is not None

    # -- the Dialect: spelling --------------------------------------------------------------
    @staticmethod
    def one_of(column: str, values: Sequence[str]) -> tuple[str, Any]:
        """See :meth:`Dialect.one_of`."""
        return one_of(column, values)

    @staticmethod
    def order_bytes(column: str) -> str:
        """See :meth:`Dialect.order_bytes` (SQLite's default collation compares bytes)."""
        return column

    @staticmethod
    def filter_sql(flt: Filter | None, *, visit_all: bool = False) -> FilterSQL:
        """See :meth:`Dialect.filter_sql`."""
        return filter_sql(flt, visit_all=visit_all)

    @staticmethod
    def encode_vector(vector: Vectors) -> bytes:
        """A vector as a float32 blob."""
        return vector.astype(np.float32, copy=False).tobytes()

    @staticmethod
    def decode_vector(value: Any) -> npt.ArrayLike:
        """A float32 blob as numbers."""
        return np.frombuffer(value, dtype=np.float32)

    def fetch_vectors(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """See :meth:`Dialect.fetch_vectors` (blobs already are)."""
        with self.read() as conn:
            return list(conn.execute(statement, params).fetchall())

    # -- the Dialect: hooks inside a write --------------------------------------------------
    @staticmethod
    def insert_new(conn: Conn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """See :meth:`Dialect.insert_new` (writers are serialised: the clash check before it suffices)."""
        conn.executemany(insert_statement(table, columns), rows)

    @staticmethod
    def insert_rows(conn: Conn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """See :meth:`Dialect.insert_rows`: one prepared statement, executed per row (in process: no round trips)."""
        conn.executemany(insert_statement(table, columns), rows)

    def prepare_vectors(self, model_id: str, dim: int) -> None:
        """Nothing to prepare: the vector cache indexes whatever is committed."""

    def vectors_written(self, memories: Sequence[Memory], unit: _F32, *, model_id: str) -> None:
        """Queue the new vectors for the cache (applied once the write commits)."""
        w = self._current()
        if w.before is None:
            return  # no cache loaded: nothing to keep in step
        ids = [m.id for m in memories]
        rids = dict(
            w.conn.execute(
                "SELECT id, rid FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids_json(ids),)
            ).fetchall()
        )
        for n, m in enumerate(memories):
            if m.valid_until is not None:
                continue  # a superseded value: the cache holds current rows only (see _sqlite_search)
            row = (m.id, int(rids[m.id]), m.agent, m.kind, m.visibility, self.encode_vector(unit[n]))
            w.ops.append(put_op(row, model_id))

    def vector_removed(self, memory_id: str) -> None:
        """Queue dropping the memory's row from the cache."""
        self._current().ops.append(remove_op(memory_id))

    def attributes_changed(self, memory_id: str, *, kind: str, visibility: str) -> None:
        """Queue the memory's new filter data for the cache."""
        self._current().ops.append(attrs_op(memory_id, kind, visibility))

    def forgotten(self) -> None:
        """Purge the keyword index before the commit and truncate the log after the outermost one."""
        w = self._current()
        w.forgot = True
        w.after_commit["truncate_wal"] = self._truncate_wal
        if self.path is not None:
            # The keyword postings saved beside the database name the forgotten memory's terms.
            w.after_commit["drop_saved_postings"] = functools.partial(self.search.keyword_index.drop_saved, self.path)
            # The tenants' saved sets name its agent and user (written anew by the next open's prefill).
            w.after_commit["drop_saved_tenants"] = functools.partial(drop_tenants, tenants_path(str(self.path)))

    def lock_audit(self, conn: Conn) -> None:
        """Nothing beyond ``BEGIN IMMEDIATE``, which already serialises every writer."""

    def lock_meta(self, conn: Conn, key: str) -> None:
        """Nothing beyond ``BEGIN IMMEDIATE``, which already serialises every writer."""

    def out_of_space(self, exc: BaseException) -> bool:
        """See :meth:`Dialect.out_of_space`: SQLITE_FULL or SQLITE_IOERR (any extended code) behind ``exc``."""
        cause = exc if isinstance(exc, sqlite3.Error) else exc.__cause__
        code = getattr(cause, "sqlite_errorcode", None) if isinstance(cause, sqlite3.Error) else None
        if isinstance(code, int):
            return code & 0xFF in (_SQLITE_FULL, _SQLITE_IOERR)
        text = str(cause).lower() if cause is not None else ""
        return "disk is full" in text or "disk i/o error" in text

    # -- the Dialect: health checks ---------------------------------------------------------
    def database_problems(self, *, quick: bool) -> list[str] | None:
        """See :meth:`Dialect.database_problems`: ``PRAGMA integrity_check`` (or ``quick_check``), all rows."""
        pragma = "quick_check" if quick else "integrity_check"
        try:
            with self._reading() as conn:
                rows = conn.execute(f"PRAGMA {pragma}").fetchall()
                broken_keys = conn.execute("PRAGMA foreign_key_check").fetchall()
        except CorruptStoreError as exc:
            return [str(exc)]
        problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
        problems += [f"{r[0]} row {r[1]} refers to a missing {r[2]} row" for r in broken_keys]
        return problems

    def keyword_index_problems(self) -> list[str]:
        """See :meth:`Dialect.keyword_index_problems`: FTS5 ``integrity-check`` against the memories table."""
        try:
            with self._reading() as conn:
                # rank = 1 also compares the index with the content table (external content).
                conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")
        except StorageError as exc:
            return [str(exc)]
        return []

    def _truncate_wal(self) -> None:
        """Checkpoint and empty the write-ahead log so no old page image keeps forgotten content.

        Best effort: with a short timeout, because another process's reader may hold the log;
        its frames are then overwritten as the log is reused.
        """
        if self.path is None:
            return
        with self._lock:
            conn = self._require_open()
            try:
                conn.execute("PRAGMA busy_timeout = 200")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError:
                pass  # busy: see the docstring
            finally:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

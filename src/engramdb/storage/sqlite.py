"""The embedded store: one SQLite file (WAL mode) with FTS5 keywords and numpy vector search.

A store is a directory holding ``engram.db`` (plus SQLite's ``-wal``/``-shm`` files),
or ``":memory:"``. One :class:`SQLiteStore` owns one connection guarded by a
re-entrant lock, so an instance can be shared across threads; several processes
can open the same directory at once (SQLite serialises their writes, and each
writer waits up to ``busy_timeout`` seconds for the lock).

Writes run in ``BEGIN IMMEDIATE`` transactions: all or nothing. Forgetting a
memory removes it from the table, the keyword index (merged so no term lingers
in old index segments), the vectors and every earlier history entry, with
``secure_delete`` on so freed pages are zeroed, then truncates the write-ahead log.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from engramdb.errors import CorruptStoreError, NotAStoreError, StorageError, ValidationError
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
from engramdb.storage._sqlite_audit import AuditMixin
from engramdb.storage._sqlite_schema import APPLICATION_ID, check_header, migrate
from engramdb.storage._sqlite_sharing import SharingMixin
from engramdb.storage._sqlite_sql import INSERT_HISTORY, filter_sql, fts_query, ids_json
from engramdb.storage._sqlite_transfer import TransferMixin
from engramdb.storage._vector_index import IndexOp, SyncState, VectorIndex, attrs_op, put_op, remove_op
from engramdb.storage.base import MODEL_META_KEY, Candidate, Filter, Vectors

__all__ = ["DB_FILENAME", "SQLiteStore"]

#: The database file inside a store directory.
DB_FILENAME: Final = "engram.db"

#: Keyword search ranks this many times ``limit`` matches before it applies the filter (see keyword_candidates).
_KEYWORD_HEAD_FACTOR: Final = 4

#: Meta keys the store maintains itself (set_meta refuses them).
_INTERNAL_META: Final = frozenset({"vec_epoch", "share_epoch", AUDIT_HEAD_KEY})
_SHARED_CACHE_AGENTS: Final = 256
_PAGE_SIZE: Final = 8192


@dataclass(slots=True)
class _Write:
    """An open write transaction and the vector-cache changes to apply once it commits."""

    conn: sqlite3.Connection
    before: SyncState | None
    ops: list[IndexOp] = field(default_factory=list)
    #: Something was forgotten: purge the keyword index before the commit, empty the log after.
    forgot: bool = False


class SQLiteStore(SharingMixin, TransferMixin, AuditMixin, StoreBase):
    """An engramdb store in a SQLite file: ``SQLiteStore("dir")`` or ``SQLiteStore(":memory:")``.

    Implements :class:`~engramdb.storage.base.Store`. Raises
    :class:`~engramdb.errors.NotAStoreError` for a path that holds something else,
    :class:`~engramdb.errors.CorruptStoreError` for a damaged file and
    :class:`~engramdb.errors.SchemaVersionError` for a store written by a newer engramdb.
    """

    def __init__(self, location: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.location: str = os.fspath(location)
        self._busy_ms = max(0, int(busy_timeout * 1000))
        self._lock = threading.RLock()
        self._open_write: _Write | None = None
        self._index = VectorIndex()
        # Keys of memories shared with each agent (for the vector filter), valid for one share epoch.
        self._shared: dict[str, npt.NDArray[np.int64]] = {}
        self._share_epoch = -1
        self.path: Path | None = None
        self._conn: sqlite3.Connection | None = self._connect(busy_timeout)

    # -- lifecycle --------------------------------------------------------------------------
    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        if self.location == ":memory:":
            target = ":memory:"
        else:
            directory = Path(self.location).expanduser()
            if directory.exists() and not directory.is_dir():
                raise NotAStoreError(f"{directory} is a file, not an engramdb store directory")
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create store directory {directory}: {exc.strerror or exc}") from exc
            self.path = directory / DB_FILENAME
            check_header(self.path)
            target = str(self.path)
        try:
            conn = sqlite3.connect(target, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        try:
            if self._check_marker(conn):
                # Must precede the first table. 8 KiB pages hold five 384-d float32 vectors
                # (95% full) where 4 KiB pages hold two (75%).
                conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL is safe in WAL mode (no corruption on power loss; the last commits may roll back).
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            # Zero deleted content instead of leaving it in free pages: forget means gone.
            conn.execute("PRAGMA secure_delete = ON")
            migrate(conn, location=self.location)
        except sqlite3.Error as exc:
            conn.close()
            raise self._translate(exc) from exc
        except BaseException:
            conn.close()
            raise
        return conn

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
        """Close the connection (idempotent); further calls raise StorageError."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                finally:
                    self._conn = None
                    self._index.invalidate()
                    self._shared.clear()

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
        joins the open transaction, and the outermost one commits everything or nothing.
        """
        with self._lock:
            if self._open_write is not None:
                # The lock is re-entrant, so only this thread can be inside the open write.
                yield self._open_write
                return
            conn = self._require_open()
            try:
                conn.execute("BEGIN IMMEDIATE")
                write = _Write(conn, self._sync_state(conn) if self._index.state is not None else None)
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
                after = self._sync_state(conn) if write.before is not None else None
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise self._translate(exc) from exc
            except BaseException:
                self._rollback(conn)
                raise
            self._after_commit(write, after)
            if write.forgot:
                self._truncate_wal()

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

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the raw connection, for engramdb modules that add their own tables.

        Everything inside commits together or not at all. Do not touch the
        ``vectors`` table here: the vector cache only follows this class's own methods.
        """
        with self._writing() as write:
            yield write.conn

    # -- metadata ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """See :meth:`Store.get_meta`."""
        with self._reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """See :meth:`Store.set_meta`."""
        check_meta(key, value, internal=_INTERNAL_META)
        with self._writing() as w:
            w.conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
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
        with self._writing() as w:
            conn = w.conn
            clash = conn.execute(
                "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1", (ids_json(ids),)
            ).fetchone()
            if clash is not None:
                raise ValidationError(f"a memory with id {clash[0]!r} already exists")
            conn.executemany(
                "INSERT INTO memories (id, agent, kind, content, tags, metadata, created_at, updated_at, "
                "last_accessed, access_count, confidence, successes, attempts, visibility, redacted) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany(
                "INSERT OR IGNORE INTO memory_tags (memory_id, tag) VALUES (?, ?)",
                [row for m in memories for row in tag_rows(m.id, m.tags)],
            )
            conn.executemany(INSERT_HISTORY, history)
            if unit is not None:
                self._write_vectors(w, memories, unit, model_id=model_id)

    def _write_vectors(
        self, w: _Write, memories: Sequence[Memory], unit: npt.NDArray[np.float32], *, model_id: str
    ) -> None:
        """Insert or replace vectors of existing memories inside ``w`` (dimension checked)."""
        conn = w.conn
        dim = int(unit.shape[1])
        ids = [m.id for m in memories]
        other = conn.execute(
            "SELECT dim FROM vectors WHERE model_id = ? AND memory_id NOT IN (SELECT value FROM json_each(?)) LIMIT 1",
            (model_id, ids_json(ids)),
        ).fetchone()
        if other is not None and int(other[0]) != dim:
            raise ValidationError(f"model {model_id!r} vectors have dimension {other[0]} in this store, not {dim}")
        # The first vectors written name the model that searches use.
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (MODEL_META_KEY, model_id))
        blobs = [unit[i].tobytes() for i in range(len(ids))]
        conn.executemany(
            "INSERT INTO vectors (memory_id, model_id, dim, vec) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (memory_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
            "vec = excluded.vec",
            [(i, model_id, dim, blob) for i, blob in zip(ids, blobs, strict=True)],
        )
        if w.before is None:
            return  # no cache loaded: nothing to keep in step
        rids = dict(
            conn.execute(
                "SELECT id, rid FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids_json(ids),)
            ).fetchall()
        )
        for m, blob in zip(memories, blobs, strict=True):
            w.ops.append(put_op((m.id, int(rids[m.id]), m.agent, m.kind, m.visibility, blob), model_id))

    def _fetch(self, conn: sqlite3.Connection, memory_id: str) -> Memory:
        row = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)).fetchone()
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
        with self._writing() as w:
            conn = w.conn
            plan = plan_update(self._fetch(conn, memory_id), changes, action=action, actor=actor, at=at)
            after = plan.after
            if after:
                assignments = ", ".join(f"{name} = ?" for name in plan.columns)
                conn.execute(f"UPDATE memories SET {assignments} WHERE id = ?", (*plan.columns.values(), memory_id))
                if plan.withdraws_shares:
                    conn.execute("DELETE FROM shares WHERE memory_id = ?", (memory_id,))
                if plan.new_tag_rows is not None:
                    conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (memory_id,))
                    conn.executemany(
                        "INSERT OR IGNORE INTO memory_tags (memory_id, tag) VALUES (?, ?)", plan.new_tag_rows
                    )
                conn.execute(INSERT_HISTORY, plan.history)
            result = self._fetch(conn, memory_id)
            if unit is not None:
                self._write_vectors(w, [result], unit, model_id=model_id)
            elif "content" in after:
                conn.execute("DELETE FROM vectors WHERE memory_id = ?", (memory_id,))
                w.ops.append(remove_op(memory_id))
            if "kind" in after or "visibility" in after:
                w.ops.append(attrs_op(memory_id, result.kind, result.visibility))
        return result

    def delete(self, memory_id: str, *, actor: str, at: datetime) -> None:
        """Forget a memory: its row, keyword terms, vector, tags, shares and history contents.

        A ``forget`` tombstone without content stays in the history. Forgetting many
        memories is much cheaper inside one :meth:`atomic` block: the keyword index is
        merged (so no term of a forgotten memory lingers) once per transaction.
        """
        with self._writing() as w:
            conn = w.conn
            self._fetch(conn, memory_id)
            for table in ("vectors", "memory_tags", "shares"):
                conn.execute(f"DELETE FROM {table} WHERE memory_id = ?", (memory_id,))
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            conn.execute("UPDATE history SET before = NULL, after = NULL WHERE memory_id = ?", (memory_id,))
            conn.execute(INSERT_HISTORY, tombstone(memory_id, at=at, actor=actor))
            w.ops.append(remove_op(memory_id))
            w.forgot = True  # the keyword index is purged when the transaction commits

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

    def touch(self, memory_ids: Sequence[str], *, at: datetime) -> None:
        """Record a retrieval: ``last_accessed = at`` and ``access_count + 1``, in one statement."""
        if not memory_ids:
            return
        with self._writing() as w:
            w.conn.execute(
                "UPDATE memories SET last_accessed = ?, access_count = access_count + 1 "
                "WHERE id IN (SELECT DISTINCT value FROM json_each(?))",
                (ts(at), ids_json(memory_ids)),
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
                f"WHERE m.id IN (SELECT value FROM json_each(?)) AND {f.where}",
                (*f.shared_by_params, *f.shared_at_params, ids_json(memory_ids), *f.params),
            ).fetchall()
        return in_order(memory_ids, map(shared_row_to_memory, rows))

    def list(self, flt: Filter, *, limit: int = 100, offset: int = 0) -> list[Memory]:
        """See :meth:`Store.list`."""
        check_page(limit, offset)
        f = filter_sql(flt)
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS} FROM memories m WHERE {f.where} "
                "ORDER BY m.created_at DESC, m.rid DESC LIMIT ? OFFSET ?",
                (*f.shared_by_params, *f.shared_at_params, *f.params, limit, offset),
            ).fetchall()
        return [shared_row_to_memory(row) for row in rows]

    def count(self, flt: Filter) -> int:
        """See :meth:`Store.count`."""
        f = filter_sql(flt, visit_all=True)
        with self._reading() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {f.where}", f.params).fetchone()[0])

    def history(self, memory_id: str) -> builtins.list[Change]:
        """See :meth:`Store.history`."""
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT seq, memory_id, action, at, actor, before, after FROM history WHERE memory_id = ? ORDER BY seq",
                (memory_id,),
            ).fetchall()
        return [row_to_change(row) for row in rows]

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> builtins.list[Candidate]:
        """FTS5 candidates matching any of ``terms``, best BM25 first (score = -bm25, higher is better)."""
        query = fts_query(terms)
        if query is None or limit <= 0:
            return []
        f = filter_sql(flt)
        # Two phases. Ranking every match is inherent to BM25, but joining every match with the
        # filter is not: first the best `head` matches of the whole index, then the filter on those.
        # If at least `limit` of them pass, they are exactly the filtered top `limit` (anything
        # outside the head ranks below all of them); only otherwise (a selective filter) does
        # the query run again with the filter applied to every match.
        head = limit * _KEYWORD_HEAD_FACTOR
        with self._reading() as conn:
            rows = conn.execute(
                "WITH top AS (SELECT rowid AS rid, bm25(memories_fts) AS rank FROM memories_fts "
                "WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?) "
                f"SELECT m.id, top.rank FROM top JOIN memories m ON m.rid = top.rid WHERE {f.where} "
                "ORDER BY top.rank LIMIT ?",
                (query, head, *f.params, limit),
            ).fetchall()
            if len(rows) < limit:
                rows = conn.execute(
                    "SELECT m.id, bm25(memories_fts) AS rank FROM memories_fts "
                    "JOIN memories m ON m.rid = memories_fts.rowid "
                    f"WHERE memories_fts MATCH ? AND {f.where} ORDER BY rank LIMIT ?",
                    (query, *f.params, limit),
                ).fetchall()
        return [Candidate(memory_id, -float(rank)) for memory_id, rank in rows]

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> builtins.list[Candidate]:
        """Exact cosine candidates among the current model's vectors, best first."""
        query = as_unit_rows(vector, rows=1)[0]
        if limit <= 0:
            return []
        with self._reading(snapshot=True) as conn:
            self._sync_index(conn)
            also = self._shared_rids(conn, flt.agent) if flt.agent is not None and flt.include_shared else None
            only = self._restricted_rids(conn, flt)
        # The scan runs under the index's own lock, not the connection's: a keyword query of
        # another thread (the same search's, see retrieval.hybrid) proceeds meanwhile.
        found = self._index.search(
            query,
            limit=limit,
            agent=flt.agent,
            include_public=flt.include_shared,
            also_rids=also,
            kinds=flt.kinds,
            only_rids=only,
        )
        return [Candidate(memory_id, score) for memory_id, score in found]

    @staticmethod
    def _rids(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> npt.NDArray[np.int64]:
        return np.fromiter((r[0] for r in conn.execute(sql, params)), dtype=np.int64)

    def _shared_rids(self, conn: sqlite3.Connection, agent: str) -> npt.NDArray[np.int64]:
        """Keys of memories shared with ``agent`` or everyone, cached until any share changes."""
        epoch = int(conn.execute("SELECT value FROM meta WHERE key = 'share_epoch'").fetchone()[0])
        if epoch != self._share_epoch:
            self._shared.clear()
            self._share_epoch = epoch
        rids = self._shared.get(agent)
        if rids is None:
            if len(self._shared) >= _SHARED_CACHE_AGENTS:
                self._shared.clear()
            rids = self._shared[agent] = self._rids(
                conn,
                "SELECT m.rid FROM shares s JOIN memories m ON m.id = s.memory_id WHERE s.to_agent IN (?, '*')",
                (agent,),
            )
        return rids

    def _restricted_rids(self, conn: sqlite3.Connection, flt: Filter) -> npt.NDArray[np.int64] | None:
        """Keys allowed by the ``tags``/``ids`` parts of ``flt`` (None: no such restriction)."""
        if flt.ids is not None:
            f = filter_sql(Filter(agent=None, tags=flt.tags, ids=flt.ids))
            return self._rids(conn, f"SELECT m.rid FROM memories m WHERE {f.where}", f.params)
        if not flt.tags:
            return None
        # Driven from the first tag's index entries rather than a scan of every memory.
        first, *rest = dict.fromkeys(flt.tags)
        f = filter_sql(Filter(agent=None, tags=tuple(rest)))
        return self._rids(
            conn,
            f"SELECT m.rid FROM memory_tags t0 JOIN memories m ON m.id = t0.memory_id WHERE t0.tag = ? AND {f.where}",
            (first, *f.params),
        )

    # -- vector cache -----------------------------------------------------------------------
    @staticmethod
    def _sync_state(conn: sqlite3.Connection) -> SyncState:
        model, epoch, max_seq = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM meta WHERE key = 'vec_epoch'), "
            "(SELECT max(seq) FROM vectors)",
            (MODEL_META_KEY,),
        ).fetchone()
        return SyncState(model, int(epoch or 0), int(max_seq or 0))

    def _sync_index(self, conn: sqlite3.Connection) -> None:
        """Bring the vector cache up to the database (inside a read snapshot)."""
        state = self._sync_state(conn)
        cached = self._index.state
        if cached == state:
            return
        select = (
            "SELECT v.memory_id, m.rid, m.agent, m.kind, m.visibility, v.vec FROM vectors v "
            "JOIN memories m ON m.id = v.memory_id WHERE v.model_id = ?"
        )
        if (
            cached is not None
            and (cached.model_id, cached.epoch) == (state.model_id, state.epoch)
            and state.max_seq > cached.max_seq
        ):
            # Only appends happened since the cache was filled: load just the new rows.
            rows = conn.execute(f"{select} AND v.seq > ? ORDER BY v.seq", (state.model_id, cached.max_seq))
            self._index.append(rows)
            self._index.state = state
        else:
            self._index.load(conn.execute(f"{select} ORDER BY v.seq", (state.model_id,)), state)

    # -- embedding maintenance --------------------------------------------------------------
    def count_vectors_not_from(self, model_id: str) -> int:
        """See :meth:`Store.count_vectors_not_from`."""
        with self._reading() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories m LEFT JOIN vectors v ON v.memory_id = m.id "
                "WHERE v.memory_id IS NULL OR v.model_id != ?",
                (model_id,),
            ).fetchone()
        return int(row[0])

    def iter_missing_vectors(self, model_id: str, *, batch: int = 256) -> Iterator[builtins.list[tuple[str, str]]]:
        """See :meth:`Store.iter_missing_vectors` (batching: :func:`~engramdb.storage._common.keyset_batches`)."""

        def fetch(after: int, size: int) -> builtins.list[Any]:
            with self._reading() as conn:
                return conn.execute(
                    "SELECT m.rid, m.id, m.content FROM memories m LEFT JOIN vectors v ON v.memory_id = m.id "
                    "WHERE m.rid > ? AND (v.memory_id IS NULL OR v.model_id != ?) ORDER BY m.rid LIMIT ?",
                    (after, model_id, size),
                ).fetchall()

        yield from keyset_batches(batch, fetch)

    def set_vectors(self, memory_ids: Sequence[str], vectors: Vectors, *, model_id: str) -> None:
        """See :meth:`Store.set_vectors`."""
        check_distinct(memory_ids)
        unit = as_unit_rows(vectors, rows=len(memory_ids))
        if not memory_ids:
            return
        with self._writing() as w:
            found = self.get_many(memory_ids)
            require_found(memory_ids, found)
            self._write_vectors(w, [found[i] for i in memory_ids], unit, model_id=model_id)

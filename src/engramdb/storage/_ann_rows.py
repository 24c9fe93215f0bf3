"""The float32 vectors the HNSW index re-scores with, read from the store's own ``vectors`` table.

The sidecar (:mod:`engramdb.storage._ann`) keeps the graph over 8-bit codes and, per row, the ``seq`` of the
vector it was built from; the one float32 copy of each vector is SQLite's row. A search re-scores its head
(64-150 rows) by ``seq``, the table's integer key (about half the time of a read by memory id: bench/RESULTS.md,
issue 27, fourth round). A row whose seq is gone (forgotten,
re-embedded since) is reported missing, never guessed.

Reads go through a connection of their own, under a lock of their own: the store's connection may be
serving the keyword channel of the same search meanwhile, and in WAL mode readers do not wait for writers.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import Bool as _Bool
    from engramdb.storage._arrays import npt

from engramdb.errors import StorageError

if TYPE_CHECKING:
    from engramdb.storage._btree_pages import PageHints

__all__ = ["SQLiteVectors", "VectorSource"]

#: Keys per statement (one JSON array each).
_CHUNK: Final = 20_000
#: Looking up more ids than this reads every (memory id, seq) of the model once instead.
_STREAM_IDS: Final = 50_000


class VectorSource(Protocol):
    """Where the index reads the float32 vectors of its rows (the store's table; an array in tests)."""

    def vectors(self, seqs: _I64, dim: int) -> tuple[_F32, _Bool]:
        """The vectors of ``seqs`` (distinct) in that order, and which were found (rows not found are zeros)."""
        ...

    def seqs_of(self, model_id: str | None, ids: npt.NDArray[np.bytes_]) -> _I64:
        """The vector seq of each memory id (distinct) under ``model_id`` (-1 where it has none)."""
        ...

    def ahead(self, rids: _I64) -> None:
        """A hint: the memory rows of keys ``rids`` are about to be read (a search's candidates)."""
        ...


class SQLiteVectors:
    """:class:`VectorSource` over a SQLite store's ``vectors`` table (a connection of its own, opened on use)."""

    def __init__(self, database: Path, *, pages: PageHints | None = None) -> None:
        self._database = database
        #: Where the rows lie in the file: a search asks for their pages together before reading them (cold disk).
        self._pages = pages
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._utf8 = False

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(str(self._database), timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            self._utf8 = str(conn.execute("PRAGMA encoding").fetchone()[0]).upper() == "UTF-8"
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Close the connection (it is opened again on the next read)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def vectors(self, seqs: _I64, dim: int) -> tuple[_F32, _Bool]:
        out = np.zeros((seqs.size, dim), dtype=np.float32)
        found = np.zeros(seqs.size, dtype=np.bool_)
        if not seqs.size:
            return out, found
        order = np.argsort(seqs, kind="stable")
        ordered = seqs[order]
        if self._pages is not None:
            self._pages.ahead("vectors", ordered[ordered >= 0])
        try:
            with self._lock:
                conn = self._connection()
                for start in range(0, seqs.size, _CHUNK):
                    part = ordered[start : start + _CHUNK]
                    got, matrix = self._read(conn, json.dumps(part[part >= 0].tolist()), dim)
                    if got.size:
                        at = order[start + np.searchsorted(part, got)]
                        out[at] = matrix
                        found[at] = True
        except sqlite3.Error as exc:
            raise StorageError(f"{self._database}: cannot read vectors ({exc})") from exc
        return out, found

    def _read(self, conn: sqlite3.Connection, keys: str, dim: int) -> tuple[_I64, _F32]:
        """The rows of the seqs in ``keys`` (a JSON array) whose vector has ``dim`` dimensions: seqs, vectors.

        One row of two aggregates where the database's text is UTF-8 (its bytes pass through unchanged): a
        Python object per row costs over twice the CPU (bench/RESULTS.md, "Figures moved out of the source"). Both
        aggregates read the same rows in the same order, so the i-th seq goes with the i-th vector.
        """
        width = 4 * dim
        if self._utf8:
            keys_text, blob = conn.execute(
                "SELECT group_concat(seq), CAST(group_concat(vec, '') AS BLOB) FROM vectors "
                "WHERE seq IN (SELECT value FROM json_each(?)) AND length(vec) = ?",
                (keys, width),
            ).fetchone()
            if keys_text is None:
                return np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.float32)
            got = np.array(keys_text.split(","), dtype=np.int64)
            if len(blob) == got.size * width:
                return got, np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
        rows = conn.execute(
            "SELECT seq, vec FROM vectors WHERE seq IN (SELECT value FROM json_each(?)) AND length(vec) = ?",
            (keys, width),
        ).fetchall()
        got = np.fromiter((seq for seq, _ in rows), dtype=np.int64, count=len(rows))
        return got, np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(-1, dim)

    def ahead(self, rids: _I64) -> None:
        if self._pages is not None:
            self._pages.ahead("memories", rids)

    def seqs_of(self, model_id: str | None, ids: npt.NDArray[np.bytes_]) -> _I64:
        seqs = np.full(ids.size, -1, dtype=np.int64)
        if not ids.size:
            return seqs
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        try:
            with self._lock:
                conn = self._connection()
                if ids.size > _STREAM_IDS:
                    # From the memory_id index alone (no model test: that would read every vector's page). A memory
                    # has one vector row; the index holds it under its current model unless it changed since,
                    # which the caller's epoch check or the build's changed rows catch.
                    cursor = conn.execute("SELECT memory_id, seq FROM vectors")
                    while batch := cursor.fetchmany(_CHUNK):
                        self._place(batch, ordered, order, seqs)
                    return seqs
                for start in range(0, ids.size, _CHUNK):
                    part = [bytes(i).decode() for i in ordered[start : start + _CHUNK]]
                    batch = conn.execute(
                        "SELECT memory_id, seq FROM vectors WHERE model_id = ? "
                        "AND memory_id IN (SELECT value FROM json_each(?))",
                        (model_id, json.dumps(part)),
                    ).fetchall()
                    self._place(batch, ordered, order, seqs)
        except sqlite3.Error as exc:
            raise StorageError(f"{self._database}: cannot read vector keys ({exc})") from exc
        return seqs

    @staticmethod
    def _place(batch: list[tuple[str, int]], ordered: npt.NDArray[np.bytes_], order: _I64, seqs: _I64) -> None:
        """Write each (memory id, seq) of ``batch`` at its id's place (ids not asked for are skipped)."""
        keys = np.array([memory_id.encode() for memory_id, _ in batch], dtype=np.bytes_)
        at = np.minimum(np.searchsorted(ordered, keys), ordered.size - 1)
        hit = ordered[at] == keys
        seqs[order[at[hit]]] = np.fromiter((seq for _, seq in batch), dtype=np.int64, count=len(batch))[hit]

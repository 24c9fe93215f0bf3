"""The files of a SQLite store directory: refusing an emptied or vanished database, creating one atomically.

A new store's database is built under a temporary name and linked into place only once its
schema is complete, so ``engram.db`` is never legitimately empty: a 0-byte ``engram.db`` means
the data was lost (a truncated copy, a full disk during a restore, ...) and the store refuses
to open rather than silently start over. Beside it, the marker file :data:`MARKER_FILENAME`
records that the directory holds a store; a directory with the marker (or with SQLite's log
files) but no database lost its database, and is refused the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

from engramdb.errors import CorruptStoreError, StorageError

__all__ = ["MARKER_FILENAME", "begin_log", "check_present", "connect_read_only", "create_atomically", "ensure_marker"]

#: Written beside the database once the store exists: "this directory holds an engramdb store".
MARKER_FILENAME: Final = "engram.store"
_MARKER_TEXT: Final = json.dumps({"engramdb": "store", "database": "engram.db"}) + "\n"


def connect_read_only(path: str | Path, *, timeout: float = 5.0) -> sqlite3.Connection:
    """A read-only connection of its own to the database file ``path`` (autocommit), for reads beside the store's.

    Opened as a ``file:`` URI, so a path's "?" or "#" is escaped rather than read as the URI's query; made absolute
    first, as a URI must be (a store opened by a relative path).
    """
    return sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=timeout, isolation_level=None)


def begin_log(path: str | Path) -> bool:
    """Have the database's write-ahead log begun, by a write that changes nothing (the schema version set to itself,
    read in the same transaction); whether it wrote.

    The last connection's close removes the log, and the next write makes it anew: its header written, the log
    and its directory synced (5-15 ms of waiting). Done at open, on the warm-up thread, it is not the first search's
    (its audit entry was that write: bench/RESULTS.md, issue 27, seventh round). Never waits: a store another
    writer holds (whose log then exists) or one that cannot be written is left as it is.
    """
    try:
        # mode=rw: never creates a database (a store's file removed meanwhile stays removed).
        conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=rw", uri=True, timeout=0.0, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        # Version 0: not a store's database. An emptied file above all: a write transaction begun on it writes a
        # fresh header, and the next open would no longer see that the data is gone (CorruptStoreError).
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) == 0:
            return False
        conn.execute("PRAGMA synchronous = NORMAL")  # nothing changes: the commit need not wait for the disk
        conn.execute("BEGIN IMMEDIATE")
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            conn.execute(f"PRAGMA user_version = {int(version)}")
        finally:
            conn.execute("COMMIT")
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _recover(directory: Path) -> str:
    return f"restore it from a backup, or delete the directory {directory} to start a new, empty store"


def check_present(db: Path) -> bool:
    """Whether ``db`` exists; CorruptStoreError if it is empty, or missing from a directory that held a store."""
    directory = db.parent
    try:
        size = db.stat().st_size
    except FileNotFoundError:
        leftovers = [
            name for name in (MARKER_FILENAME, f"{db.name}-wal", f"{db.name}-shm") if (directory / name).exists()
        ]
        if leftovers:
            raise CorruptStoreError(
                f"{directory}: the database file {db.name} is missing but the directory held a store "
                f"({', '.join(leftovers)} still there): {_recover(directory)}"
            ) from None
        return False
    except OSError as exc:
        raise StorageError(f"cannot read {db}: {exc.strerror or exc}") from exc
    if size == 0:
        raise CorruptStoreError(f"{db} is empty (0 bytes): the store's data is gone; {_recover(directory)}")
    return True


def create_atomically(db: Path, init: Callable[[sqlite3.Connection], None]) -> None:
    """Build a new database with ``init`` under a temporary name and link it into place as ``db``.

    If another process created ``db`` meanwhile, its database is kept and this one discarded.
    """
    tmp = db.with_name(f".{db.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            init(conn)
        finally:
            conn.close()
        try:
            os.link(tmp, db)
        except FileExistsError:
            pass  # another process won the race: open its store
        except OSError:
            # No hard links on this file system: a rename, which (unlike a link) could replace a
            # database created in the same instant, so only when there still is none.
            if not db.exists():
                os.replace(tmp, db)
        _fsync_directory(db.parent)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot create the store database {db}: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"cannot create the store database {db}: {exc.strerror or exc}") from exc
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def ensure_marker(directory: Path) -> None:
    """Write the marker file if it is missing (best effort: a full disk must not stop a store from opening)."""
    marker = directory / MARKER_FILENAME
    if marker.exists():
        return
    tmp = directory / f".{MARKER_FILENAME}.{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.write_text(_MARKER_TEXT, encoding="utf-8")
        os.replace(tmp, marker)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _fsync_directory(directory: Path) -> None:
    """Make the new directory entry durable (best effort; not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

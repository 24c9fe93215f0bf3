"""Storage backends and :func:`open_store`, which picks one from a location string.

* a directory path (created if missing), ``~`` expanded, or ``":memory:"``: the SQLite backend
  (:func:`~engramdb.storage.sqlite.open_sqlite`);
* ``postgresql://...`` / ``postgres://...``: the PostgreSQL backend, imported only when asked for
  (psycopg and pgvector are optional extras).

Every backend returns the same :class:`~engramdb.storage.base.Store` bundle of role objects.
A new backend registers an opener for its URL scheme with :func:`register_backend`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engramdb.config import LIBRARY_PG_POOL_SIZE, Settings
from engramdb.errors import NotFound, StorageError
from engramdb.storage.base import (
    MODEL_META_KEY,
    AuditRepo,
    Candidate,
    CandidateSource,
    Filter,
    MemoryRepo,
    MetaRepo,
    ShareRepo,
    Store,
    VectorRepo,
)

if TYPE_CHECKING:
    from engramdb.storage.base import Vectors

__all__ = [
    "MODEL_META_KEY",
    "AuditRepo",
    "Candidate",
    "CandidateSource",
    "Filter",
    "MemoryRepo",
    "MetaRepo",
    "Opener",
    "ShareRepo",
    "Store",
    "VectorRepo",
    "Vectors",
    "open_store",
    "register_backend",
    "require_store",
]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        # ``Vectors`` needs numpy: made when asked for (see engramdb.storage.base), not when the package is imported.
        if name == "Vectors":
            from engramdb.storage import base

            return base.Vectors
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Opens the store at a location with the given settings.
Opener = Callable[[str, Settings], Store]


def _open_sqlite(location: str, settings: Settings) -> Store:
    from engramdb.storage.sqlite import open_sqlite

    return open_sqlite(
        location,
        busy_timeout=settings.busy_timeout,
        synchronous=settings.synchronous,
        ann_threshold=settings.ann_threshold or None,
        warm=settings.warm,
    )


def _open_postgres(location: str, settings: Settings) -> Store:
    # Optional: psycopg and pgvector are extras, so nothing is imported until a URL asks for them.
    try:
        module = importlib.import_module("engramdb.storage.postgres")
    except ImportError as exc:
        raise StorageError(
            f"postgres backend not installed/available ({exc}); install engramdb with the 'postgres' extra"
        ) from exc
    pool_size = settings.pg_pool_size or LIBRARY_PG_POOL_SIZE
    store: Store = module.open_postgres(location, settings=settings, pool_size=pool_size)
    return store


#: URL scheme -> opener. A location without ``scheme://`` is a SQLite store path.
_BACKENDS: dict[str, Opener] = {
    "postgresql": _open_postgres,
    "postgres": _open_postgres,
}


def register_backend(scheme: str, opener: Opener) -> None:
    """Open locations ``<scheme>://...`` with ``opener`` (which should import its driver lazily)."""
    if not scheme or not scheme.isidentifier():
        raise ValueError(f"invalid URL scheme {scheme!r}")
    _BACKENDS[scheme.lower()] = opener


def open_store(location: str, *, settings: Settings) -> Store:
    """Open the store at ``location`` (see the module docstring); raises StorageError subclasses."""
    scheme, sep, _ = location.partition("://")
    if not sep:
        return _open_sqlite(location, settings)
    opener = _BACKENDS.get(scheme.lower())
    if opener is None:
        known = ", ".join(f"{s}://" for s in sorted(_BACKENDS))
        raise StorageError(
            f"unsupported store URL {location.rsplit('@', maxsplit=1)[-1]!r}: use a directory or {known}"
        )
    return opener(location, settings)


def require_store(location: str) -> None:
    """NotFound, naming the path, unless ``location`` holds a store or is not a folder path.

    A database URL or ``":memory:"`` passes (the server or the process holds it), and so does
    a path that exists but is no store folder: opening it then says what is wrong with it.
    """
    from engramdb.storage._sqlite_files import MARKER_FILENAME
    from engramdb.storage.sqlite import DB_FILENAME

    if location == ":memory:" or "://" in location:
        return
    folder = Path(location).expanduser()
    try:
        if folder.exists() and not folder.is_dir():
            return
        if (folder / DB_FILENAME).exists() or (folder / MARKER_FILENAME).exists():
            return  # a marker without its database: opening it reports the lost database
    except OSError:
        pass  # a name the file system refuses (e.g. a part over 255 bytes): no store can be there
    where = str(folder.absolute())
    raise NotFound(
        # A control character in the path is escaped: the error stays one line.
        f"no engramdb store at {where if where.isprintable() else repr(where)}: check the path (--store, "
        "$ENGRAM_HOME); a store is created by the first command that writes to it, such as 'engram memory record'"
    )

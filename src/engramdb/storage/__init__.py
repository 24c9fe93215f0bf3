"""Storage backends and :func:`open_store`, which picks one from a location string.

* a directory path (created if missing), ``~`` expanded: :class:`~engramdb.storage.sqlite.SQLiteStore`
* ``":memory:"``: an ephemeral SQLite store
* ``postgresql://...`` / ``postgres://...``: the PostgreSQL backend, imported only when asked for
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final

from engramdb.config import Settings
from engramdb.errors import StorageError
from engramdb.storage.base import MODEL_META_KEY, Candidate, Filter, Store, Vectors

__all__ = ["MODEL_META_KEY", "Candidate", "Filter", "Store", "Vectors", "open_store"]

_Opener = Callable[[str, Settings], Store]


def _open_sqlite(location: str, settings: Settings) -> Store:
    from engramdb.storage.sqlite import SQLiteStore

    return SQLiteStore(location, busy_timeout=settings.busy_timeout)


def _open_postgres(location: str, settings: Settings) -> Store:
    # Optional: psycopg and pgvector are extras, so nothing is imported until a URL asks for them.
    try:
        module = importlib.import_module("engramdb.storage.postgres")
    except ImportError as exc:
        raise StorageError(
            f"postgres backend not installed/available ({exc}); install engramdb with the 'postgres' extra"
        ) from exc
    store: Store = module.PostgresStore(location, settings=settings)
    return store


#: URL schemes of the server backends; anything without a scheme is a SQLite store path.
_SCHEMES: Final[dict[str, _Opener]] = {
    "postgresql": _open_postgres,
    "postgres": _open_postgres,
}


def open_store(location: str, *, settings: Settings) -> Store:
    """Open the store at ``location`` (see the module docstring); raises StorageError subclasses."""
    scheme, sep, _ = location.partition("://")
    if sep:
        opener = _SCHEMES.get(scheme.lower())
        if opener is None:
            known = ", ".join(f"{s}://" for s in sorted(_SCHEMES))
            raise StorageError(
                f"unsupported store URL {location.rsplit('@', maxsplit=1)[-1]!r}: use a directory or {known}"
            )
        return opener(location, settings)
    return _open_sqlite(location, settings)

"""A caching wrapper for any embedder: repeated texts are embedded once.

Vectors are keyed by (model id, sha256 of the text), kept in an in-process LRU and,
optionally, in a SQLite file that survives the process (benchmarks use it to avoid
re-embedding the same corpus on every run). Only the misses of a call reach the
wrapped embedder, in one batched call.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

from engramdb.embeddings._common import check_texts
from engramdb.embeddings.base import Embedder
from engramdb.embeddings.profile import FusionProfile, profile_of
from engramdb.errors import ConfigError, EmbeddingError

__all__ = ["CacheInfo", "CachedEmbedder"]

# SQLite's default limit on host parameters is 999 on old builds; stay well below it.
_SQL_CHUNK: Final = 500

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS embedding_cache (
    model_id TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model_id, text_sha256)
) WITHOUT ROWID
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheInfo:
    """Counters of a :class:`CachedEmbedder`, like :func:`functools.lru_cache`'s ``cache_info()``."""

    #: Texts answered from memory or from the cache file.
    hits: int
    #: Texts that had to be embedded by the wrapped embedder.
    misses: int
    #: Vectors held in memory now.
    size: int
    #: Most vectors held in memory.
    maxsize: int


class CachedEmbedder:
    """Wraps an :class:`~engramdb.embeddings.base.Embedder` with an LRU cache of its vectors.

    Same ``model_id`` and ``dim`` as the wrapped embedder, same results. ``size`` is
    how many vectors stay in memory (0: none). ``path``, if given, is a SQLite file
    that also keeps every vector across processes; close it with :meth:`close` (or
    use the embedder as a context manager). Thread-safe; the wrapped embedder runs
    outside the lock, so concurrent callers do not queue behind one inference.
    """

    def __init__(self, inner: Embedder, *, size: int = 4096, path: str | os.PathLike[str] | None = None) -> None:
        if size < 0:
            raise ConfigError("cache size must not be negative")
        self.inner = inner
        self.size = size
        self.path = Path(path) if path is not None else None
        self._memory: OrderedDict[bytes, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._db = _open_db(self.path)

    # model_id and dim always reflect the wrapped embedder (an OpenAI-compatible one learns
    # its dim from the first response); settable so the class meets the Embedder protocol.
    @property
    def model_id(self) -> str:
        """The wrapped embedder's model id."""
        return self.inner.model_id

    @model_id.setter
    def model_id(self, value: str) -> None:
        self.inner.model_id = value

    @property
    def dim(self) -> int:
        """The wrapped embedder's vector dimension."""
        return self.inner.dim

    @dim.setter
    def dim(self, value: int) -> None:
        self.inner.dim = value

    @property
    def profile(self) -> FusionProfile:
        """The wrapped embedder's fusion constants and relevance calibration (:mod:`engramdb.embeddings.profile`)."""
        return profile_of(self.inner)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, size={self.size}, path={self.path!r})"

    def cache_info(self) -> CacheInfo:
        """Hits, misses and memory use so far."""
        with self._lock:
            return CacheInfo(hits=self._hits, misses=self._misses, size=len(self._memory), maxsize=self.size)

    def cache_clear(self) -> None:
        """Forget the in-memory vectors and reset the counters (the cache file is kept)."""
        with self._lock:
            self._memory.clear()
            self._hits = self._misses = 0

    def prime(self, texts: Sequence[str], vectors: npt.ArrayLike) -> int:
        """Seed the in-memory cache with known vectors of ``texts`` from this same model (an import reusing
        vectors it checked, see :func:`engramdb.integrations.chroma.import_chroma`), row for row.

        Rows are normalised to unit length; nothing goes to the cache file (the vectors were not computed
        here). Returns how many stay cached: at most ``size`` (the newest ones).
        """
        items = check_texts(texts)
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(items) or (items and rows.shape[1] != self.inner.dim):
            raise EmbeddingError(f"cannot prime {len(items)} texts with vectors of shape {rows.shape}")
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        unit = rows / np.where(norms > 0, norms, 1.0)
        with self._lock:
            for text, row in zip(items, unit, strict=True):
                self._remember(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), _frozen(row))
        return min(len(items), self.size)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: cached vectors where known, the rest in one call to the wrapped embedder."""
        items = check_texts(texts)
        model_id = self.inner.model_id
        keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() for text in items]
        found: dict[bytes, npt.NDArray[np.float32]] = {}
        with self._lock:
            for key in keys:
                vector = self._memory.get(key)
                if vector is not None:
                    self._memory.move_to_end(key)
                    found[key] = vector
        # Each distinct missing text once, in first-seen order.
        missing = {key: text for key, text in zip(keys, items, strict=True) if key not in found}
        if missing and self._db is not None:
            stored = self._db_get(model_id, missing)
            found.update(stored)
            for key in stored:
                del missing[key]
        if missing:
            computed = self.inner.embed(list(missing.values()))
            if computed.ndim != 2 or computed.shape[0] != len(missing):
                raise EmbeddingError(f"{self.inner!r} returned shape {computed.shape} for {len(missing)} texts")
            fresh = {key: _frozen(computed[i]) for i, key in enumerate(missing)}
            found.update(fresh)
            if self._db is not None:
                self._db_put(model_id, fresh.items())
        else:
            fresh = {}
        with self._lock:
            self._hits += len(keys) - len(fresh)
            self._misses += len(fresh)
            # Newly computed and file-loaded vectors enter the LRU; hits were refreshed above.
            for key, vector in found.items():
                self._remember(key, vector)
        if not keys:
            return np.empty((0, self.inner.dim), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def _remember(self, key: bytes, vector: npt.NDArray[np.float32]) -> None:
        if self.size == 0:
            return
        self._memory[key] = vector
        self._memory.move_to_end(key)
        while len(self._memory) > self.size:
            self._memory.popitem(last=False)

    # -- the cache file ---------------------------------------------------------------------
    def _db_get(self, model_id: str, missing: dict[bytes, str]) -> dict[bytes, npt.NDArray[np.float32]]:
        assert self._db is not None
        keys = list(missing)
        result: dict[bytes, npt.NDArray[np.float32]] = {}
        try:
            with self._lock:
                for start in range(0, len(keys), _SQL_CHUNK):
                    chunk = keys[start : start + _SQL_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        "SELECT text_sha256, vector FROM embedding_cache "
                        f"WHERE model_id = ? AND text_sha256 IN ({marks})",
                        (model_id, *chunk),
                    ).fetchall()
                    for key, blob in rows:
                        result[bytes(key)] = _frozen(np.frombuffer(blob, dtype="<f4"))
        except sqlite3.Error as exc:
            raise EmbeddingError(f"embedding cache {self.path}: {exc}") from exc
        return result

    def _db_put(self, model_id: str, items: Iterable[tuple[bytes, npt.NDArray[np.float32]]]) -> None:
        assert self._db is not None
        rows = [(model_id, key, vector.astype("<f4").tobytes()) for key, vector in items]
        try:
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?)", rows)
        except sqlite3.Error as exc:
            raise EmbeddingError(f"embedding cache {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the cache file, if any. The in-memory cache keeps working."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> CachedEmbedder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _open_db(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # check_same_thread=False: every use is serialised by the embedder's lock.
        db = sqlite3.connect(path, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=30000")
        db.execute(_SCHEMA)
    except (OSError, sqlite3.Error) as exc:
        raise EmbeddingError(f"cannot open embedding cache {path}: {exc}") from exc
    return db


def _frozen(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    # Cached vectors are shared between callers: make them read-only so nobody edits one in place.
    vector = np.array(vector, dtype=np.float32)
    vector.setflags(write=False)
    return vector

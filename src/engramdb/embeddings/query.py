"""An in-memory LRU of query vectors: a repeated search string skips the model.

Separate from :class:`~engramdb.embeddings.cache.CachedEmbedder`, whose LRU also takes
every stored text: a burst of writes would evict the queries an agent keeps asking,
and queries would pay the write path's hashing. Here the key is the query string
itself with the model id (so a model change never serves a stale vector), the
bound is a count of entries, and a miss runs the model outside the lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

from engramdb.embeddings.base import Embedder
from engramdb.embeddings.cache import CacheInfo
from engramdb.errors import ConfigError, EmbeddingError, ValidationError

__all__ = ["DEFAULT_QUERY_CACHE_SIZE", "QueryCache"]

#: Entries kept by default: 1,024 vectors of 384 floats are 1.5 MB.
DEFAULT_QUERY_CACHE_SIZE: Final = 1024
#: Longer queries are embedded but not kept: a pasted document is rarely asked twice, and
#: the bound is a count of entries, so each must stay small.
MAX_CACHED_CHARS: Final = 2048


class QueryCache:
    """Embeds search queries through ``embedder``, remembering the last ``size`` of them.

    Thread-safe. Two threads missing the same query at once both run the model (no
    waiting on each other); both get the same vector. ``size=0`` caches nothing.
    """

    def __init__(self, embedder: Embedder, *, size: int = DEFAULT_QUERY_CACHE_SIZE) -> None:
        if size < 0:
            raise ConfigError("query cache size must not be negative")
        self.embedder = embedder
        self.size = size
        self._entries: OrderedDict[tuple[str, str], npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        return f"QueryCache({self.embedder!r}, size={self.size})"

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """The query's unit vector, shape ``(dim,)``, read-only (it may be shared with other callers)."""
        if not isinstance(query, str):
            raise ValidationError(f"a query must be a string, not {type(query).__name__}")
        key = (self.embedder.model_id, query)
        with self._lock:
            vector = self._entries.get(key)
            if vector is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return vector
            self._misses += 1
        computed = self.embedder.embed([query])
        if computed.ndim != 2 or computed.shape[0] != 1:
            raise EmbeddingError(f"{self.embedder!r} returned shape {computed.shape} for one query")
        vector = np.array(computed[0], dtype=np.float32)
        vector.setflags(write=False)
        if self.size and len(query) <= MAX_CACHED_CHARS:
            with self._lock:
                self._entries[key] = vector
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
        return vector

    def cache_info(self) -> CacheInfo:
        """Hits, misses and entries so far."""
        with self._lock:
            return CacheInfo(hits=self._hits, misses=self._misses, size=len(self._entries), maxsize=self.size)

    def cache_clear(self) -> None:
        """Forget every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._hits = self._misses = 0

"""Where one memory ranks in a real search by a :class:`HybridSearcher` with some of its settings changed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engramdb import Engram
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights
from engramdb.storage.base import Filter


def rank_of(
    mem: Engram, query: str, content: str, *, weights: RankingWeights | None = None, **settings: Any
) -> int | None:
    """The 1-based rank of the memory holding ``content`` among agent ``a``'s top 10 (None: not there)."""
    searcher = HybridSearcher(mem.store, mem.embedder, weights=weights)  # type: ignore[arg-type]
    for name, value in settings.items():
        assert hasattr(searcher, name), name
        setattr(searcher, name, value)
    try:
        hits = searcher.search(query, Filter(agent="a"), limit=10, now=datetime.now(UTC), touch=False)
    finally:
        searcher.close()
    contents = [h.memory.content for h in hits]
    return contents.index(content) + 1 if content in contents else None

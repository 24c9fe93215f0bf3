"""Hybrid search: keyword and vector candidates from the store, fused and ranked once here."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from engramdb.embeddings.base import Embedder
from engramdb.models import Hit
from engramdb.retrieval.ranking import RankingWeights, fuse, rank
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter, Store

__all__ = ["HybridSearcher"]

#: Candidates fetched per channel, per requested result: fusion needs depth to re-order.
_DEPTH_FACTOR = 5
_MIN_DEPTH = 50


class HybridSearcher:
    """Runs one search: candidates from both channels, fusion, boosts, access bookkeeping."""

    def __init__(self, store: Store, embedder: Embedder, *, weights: RankingWeights | None = None) -> None:
        self._store = store
        self._embedder = embedder
        self.weights = weights if weights is not None else RankingWeights()

    def search(
        self,
        query: str,
        flt: Filter,
        *,
        limit: int,
        now: datetime,
        touch: bool = True,
        vector: Sequence[float] | None = None,
    ) -> list[Hit]:
        """The ``limit`` best memories for ``query`` under ``flt``, best first.

        Returned memories already reflect this retrieval (``access_count`` + 1,
        ``last_accessed`` = ``now``) when ``touch`` is true.
        """
        depth = max(_MIN_DEPTH, limit * _DEPTH_FACTOR)
        terms = query_terms(query)
        keyword = self._store.keyword_candidates(terms, flt, limit=depth) if terms else []
        qvec = self._embedder.embed([query])[0] if vector is None else vector
        vec = self._store.vector_candidates(np.asarray(qvec, dtype=np.float32), flt, limit=depth)
        fused = fuse(keyword, vec, keyword_weight=self.weights.keyword)
        # Boosts can reorder only within reach of the top, so fetch a bounded slice.
        head = fused[: max(limit * 3, limit + 20)]
        memories = self._store.get_many([f.id for f in head], flt)
        ranked = rank(head, memories, now=now, weights=self.weights)[:limit]
        if touch and ranked:
            self._store.touch([m.id for _, m, _ in ranked], at=now)
        hits = []
        for f, m, score in ranked:
            shown = dataclasses.replace(m, access_count=m.access_count + 1, last_accessed=now) if touch else m
            hits.append(Hit(shown, score, f.keyword_score, f.vector_score))
        return hits

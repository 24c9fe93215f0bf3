"""A second granularity for the vector channel, for ``bench/recall.py --variant clause_head=N`` (issue 21, models,
third round): each of the vector channel's ``N`` best candidates scores the higher of its whole text's cosine and
its best clause's (a memory "X happened because Y; we now do Z" split at sentence ends, semicolons and "because"
/ "since" / "so"), the clauses embedded by the run's embedder. Measured, not in the engine: a store would have to
keep a vector per clause."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from engramdb.storage.base import Candidate, Filter

_SPLIT = re.compile(r"(?<=[.;!?])\s+|;\s*|,\s+(?:because|since|so|until|while)\s+")


def clauses(text: str) -> list[str]:
    """``text``'s clauses of three words or more; the text itself if it has fewer than two."""
    parts = [p.strip() for p in _SPLIT.split(text) if len(p.strip().split()) >= 3]
    return parts if len(parts) > 1 else []


class ClauseSearch:
    """A store's candidate source whose vector channel re-scores its head by best clause."""

    def __init__(self, inner: Any, text_of: Callable[[str], str], embed: Callable[[list[str]], Any], head: int) -> None:
        self._inner, self._text_of, self._embed, self._head = inner, text_of, embed, head

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def vector_candidates(self, vector: Any, flt: Filter, *, limit: int) -> list[Candidate]:
        found = self._inner.vector_candidates(vector, flt, limit=limit)
        q = np.asarray(vector, dtype=np.float32)
        out = []
        for i, cand in enumerate(found):
            parts = clauses(self._text_of(cand.id)) if i < self._head else []
            best = float(np.max(np.asarray(self._embed(parts), dtype=np.float32) @ q)) if parts else cand.score
            out.append(replace(cand, score=max(cand.score, best)))
        out.sort(key=lambda c: -c.score)
        return out


class ClauseStore:
    """``store`` with :class:`ClauseSearch` as its ``search``; everything else passed through."""

    def __init__(self, store: Any, search: ClauseSearch) -> None:
        self._store, self.search = store, search

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def clause_store(store: Any, text_of: Callable[[str], str], embed: Callable[[Sequence[str]], Any], head: int) -> Any:
    return ClauseStore(store, ClauseSearch(store.search, text_of, embed, head))

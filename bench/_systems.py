"""Baselines, fusion rules and measures for ``bench/retrieval.py``. Pure helpers, no engramdb I/O.

Baselines:
- BM25: ``rank_bm25.BM25Okapi`` with its default parameters (k1=1.5, b=0.75, epsilon=0.25) over
  :func:`tokenize` tokens: lowercase ``\\w+`` runs, no stopwords, no stemming.
- Vector-only: an exact cosine scan (``matrix @ query``) over the same embedder's unit vectors.

Fusion rules (for the fusion study) all take two best-first candidate lists of ``(id, score)``
and return ids best first; an id missing from a channel gets that channel's worst contribution.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "BM25Index",
    "FTS5Replica",
    "Ranked",
    "VectorIndex",
    "fuse_convex",
    "fuse_rrf",
    "fused_scores",
    "paired_bootstrap",
    "percentile",
    "recall_at_k",
    "session_recall_at_k",
    "session_variant",
    "spread_variant",
    "tokenize",
]

Vectors = npt.NDArray[np.float32]
#: A best-first list of (doc id, channel score).
Ranked = list[tuple[str, float]]

_WORD = re.compile(r"\w+", re.UNICODE)


def contextual_key(content: str, previous: str | None) -> str:
    """The text to index for a turn in the rejected "contextual keys" option: the turn it follows, then the turn."""
    return f"{previous}\n{content}" if previous else content


def tokenize(text: str) -> list[str]:
    """BM25 tokens: lowercase ``\\w+`` runs (no stopwords, no stemming)."""
    return _WORD.findall(text.lower())


class BM25Index:
    """rank_bm25's BM25Okapi (default parameters) over one corpus."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = list(ids)
        self._bm25 = BM25Okapi([tokenize(t) for t in texts])

    def search(self, query: str, depth: int) -> Ranked:
        """The ``depth`` best documents, best first (ties keep corpus order)."""
        scores = np.asarray(self._bm25.get_scores(tokenize(query)), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[:depth]
        return [(self.ids[i], float(scores[i])) for i in order]


class VectorIndex:
    """Exact cosine similarity by a plain numpy scan over unit vectors."""

    def __init__(self, ids: Sequence[str], matrix: Vectors) -> None:
        self.ids = list(ids)
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)

    def search(self, query: Vectors, depth: int) -> Ranked:
        """The ``depth`` most similar documents, best first."""
        sims = self.matrix @ np.asarray(query, dtype=np.float32)
        depth = min(depth, len(self.ids))
        top = np.argpartition(-sims, depth - 1)[:depth] if depth < len(self.ids) else np.arange(len(self.ids))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.ids[i], float(sims[i])) for i in top]


# -- fusion rules --------------------------------------------------------------------------------


def fuse_rrf(keyword: Ranked, vector: Ranked, *, keyword_weight: float = 0.5, k: float = 60.0) -> list[str]:
    """Reciprocal-rank fusion, ``w / (k + rank)`` per channel (rank from 1), weights summing to 1."""
    scores: dict[str, float] = {}
    for weight, ranked in ((keyword_weight, keyword), (1.0 - keyword_weight, vector)):
        for rank, (doc, _) in enumerate(ranked, start=1):
            scores[doc] = scores.get(doc, 0.0) + weight / (k + rank)
    return _order(scores)


def _minmax(ranked: Ranked) -> dict[str, float]:
    if not ranked:
        return {}
    values = [s for _, s in ranked]
    lo, hi = min(values), max(values)
    span = hi - lo
    return {d: (s - lo) / span if span > 1e-12 else 1.0 for d, s in ranked}


def _zscore(ranked: Ranked) -> dict[str, float]:
    if not ranked:
        return {}
    values = [s for _, s in ranked]
    mean = statistics.fmean(values)
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    return {d: (s - mean) / sd if sd > 1e-12 else 0.0 for d, s in ranked}


def _dbsf(ranked: Ranked) -> dict[str, float]:
    """Distribution-based score fusion: scale by mean +- 3 sd of this channel's candidates."""
    if not ranked:
        return {}
    values = [s for _, s in ranked]
    mean = statistics.fmean(values)
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    if sd <= 1e-12:
        return dict.fromkeys((d for d, _ in ranked), 1.0)
    lo, hi = mean - 3 * sd, mean + 3 * sd
    return {d: min(1.0, max(0.0, (s - lo) / (hi - lo))) for d, s in ranked}


_NORMALISERS: dict[str, Callable[[Ranked], dict[str, float]]] = {
    "minmax": _minmax,
    "zscore": _zscore,
    "dbsf": _dbsf,
}


def fuse_convex(keyword: Ranked, vector: Ranked, *, keyword_weight: float, norm: str) -> list[str]:
    """Normalise each channel's scores over its candidates, then ``w * kw + (1 - w) * vec``.

    A document missing from a channel gets that channel's lowest normalised value
    (0 for min-max and DBSF, the minimum z-score for z-score).
    """
    normalise = _NORMALISERS[norm]
    kw, vec = normalise(keyword), normalise(vector)
    kw_floor = min(kw.values(), default=0.0)
    vec_floor = min(vec.values(), default=0.0)
    scores = {
        doc: keyword_weight * kw.get(doc, kw_floor) + (1.0 - keyword_weight) * vec.get(doc, vec_floor)
        for doc in kw.keys() | vec.keys()
    }
    return _order(scores)


def _order(scores: Mapping[str, float]) -> list[str]:
    return [d for d, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


# -- measures ------------------------------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Fraction of ``gold`` ids among the first ``k`` of ``ranked``."""
    gold_set = set(gold)
    if not gold_set:
        return math.nan
    return len(gold_set.intersection(ranked[:k])) / len(gold_set)


def session_recall_at_k(
    ranked: Sequence[str], session_of: Mapping[str, str], gold_sessions: Iterable[str], k: int
) -> float:
    """Fraction of gold sessions among the first ``k`` *distinct* sessions of a turn ranking.

    This is LongMemEval's turn-to-session convention (its ``evaluate_retrieval_turn2session``
    walks down the turn ranking until it has seen ``k`` distinct sessions).
    """
    gold_set = set(gold_sessions)
    if not gold_set:
        return math.nan
    seen: list[str] = []
    for doc in ranked:
        session = session_of[doc]
        if session not in seen:
            seen.append(session)
            if len(seen) == k:
                break
    return len(gold_set.intersection(seen)) / len(gold_set)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Mean of ``a - b`` over paired per-question values, with a 95% percentile bootstrap interval.

    Questions are resampled with replacement (pairs kept together); pairs with a NaN are left out.
    """
    pairs = np.asarray([(x, y) for x, y in zip(a, b, strict=True) if not (math.isnan(x) or math.isnan(y))])
    if len(pairs) == 0:
        return {"mean_diff": math.nan, "ci95_low": math.nan, "ci95_high": math.nan, "n": 0}
    diffs = pairs[:, 0] - pairs[:, 1]
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(resamples, len(diffs)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean_diff": float(diffs.mean()), "ci95_low": float(low), "ci95_high": float(high), "n": len(diffs)}


# -- context study (bench/retrieval.py): neighbours, sessions, contextual keys ----------------------


class FTS5Replica:
    """An in-memory SQLite FTS5 table built like the store's (``porter unicode61``, content + tags columns).

    Lets the study index *other* text for the same turns (a turn with its neighbour or date) and
    query it exactly as ``store.search.keyword_candidates`` does (OR of quoted terms, best BM25 first).
    """

    def __init__(self, texts: Sequence[str]) -> None:
        import sqlite3

        self._conn = sqlite3.connect(":memory:")
        self._conn.execute("CREATE VIRTUAL TABLE f USING fts5(content, tags, tokenize = 'porter unicode61')")
        self._conn.executemany("INSERT INTO f (rowid, content, tags) VALUES (?, ?, '')", enumerate(texts))

    def search(self, terms: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """(row index, -bm25) best first."""
        quoted = ['"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms) if t.strip()]
        if not quoted:
            return []
        rows = self._conn.execute(
            "SELECT rowid, bm25(f) FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (" OR ".join(quoted), depth)
        ).fetchall()
        return [(int(r), -float(s)) for r, s in rows]


def fused_scores(keyword: Ranked, vector: Ranked, *, keyword_weight: float = 0.5) -> dict[str, float]:
    """Min-max convex fusion as the engine does it, as ``{doc: relevance}``."""
    kw, vec = _minmax(keyword), _minmax(vector)
    if not keyword:
        keyword_weight = 0.0
    elif not vector:
        keyword_weight = 1.0
    return {
        d: keyword_weight * kw.get(d, 0.0) + (1.0 - keyword_weight) * vec.get(d, 0.0) for d in kw.keys() | vec.keys()
    }


def spread_variant(
    scores: Mapping[str, float],
    prev: Mapping[str, str],
    nxt: Mapping[str, str],
    lengths: Mapping[str, int],
    *,
    weight: float,
    short: int | None,
    direction: str = "both",
) -> list[str]:
    """Neighbour spreading variants (the engine's rule is ``direction="both"`` with ``short=200``).

    ``short=None``: every turn gets the full weight; ``direction``: "both", "from previous" (a
    turn is helped by the one before it only) or "from next".
    """
    out: dict[str, float] = {}
    for doc, own in scores.items():
        sources = []
        if direction in ("both", "from previous") and doc in prev:
            sources.append(scores.get(prev[doc], 0.0))
        if direction in ("both", "from next") and doc in nxt:
            sources.append(scores.get(nxt[doc], 0.0))
        w = weight if short is None else weight * min(1.0, short / max(lengths.get(doc, 1), 1))
        out[doc] = (own + w * max(sources, default=0.0)) / (1.0 + weight)
    return _order(out)


def session_variant(scores: Mapping[str, float], session_of: Mapping[str, str], *, weight: float) -> list[str]:
    """Session aggregation: each turn also gets ``weight`` times the best relevance in its session."""
    best: dict[str, float] = {}
    for doc, s in scores.items():
        best[session_of[doc]] = max(best.get(session_of[doc], 0.0), s)
    return _order({doc: s + weight * best[session_of[doc]] for doc, s in scores.items()})

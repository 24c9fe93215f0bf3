"""The embedded store beside PostgreSQL in ``bench/scale_pg.py``: the same memories, vectors and questions.

One SQLite store grows through the same sizes from the same generator (``make_batch`` with the same seed), so
row ``i`` has the same text, agent, kind, time and vector in both stores; only the ids differ. Written through
``store.memories.add`` in batches, the HNSW sidecar built once per size (``wait_for_index``), then the same
three timings as the PostgreSQL side: the vector channel and the keyword channel at depth 50 under the query's
agent filter, and ``Engram.search`` (limit 10, the query vector precomputed: embedding excluded).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _report import pct
from engramdb import Engram
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite

Vec = npt.NDArray[np.float32]
DEPTH = 50


def settle(search: Any) -> None:
    """Wait for the keyword channel's lexeme sample of a fresh PostgreSQL store (taken on a worker thread at its first
    keyword search, ~1-3 s): timings then measure the settled store, not the sample being taken beside them."""
    lexemes = getattr(getattr(search, "_inner", search), "lexemes", None)
    if lexemes is not None:
        lexemes.wait(120)


def engram_search_of(mem: Engram) -> Any:
    """The candidate source behind ``mem`` (to settle it)."""
    return mem._recall._searcher._store.search


def _vector_index(mem: Engram) -> Any:
    """The store's vector index (its HNSW sidecar builds in the background), under the vector queue's wrapper."""
    search = mem.store.search
    return getattr(getattr(search, "_inner", search), "_index", None)


class EmbeddedSide:
    """A SQLite store in ``directory`` grown to each size in turn and measured like the PostgreSQL one."""

    def __init__(
        self,
        directory: Path,
        make_batch: Callable[..., tuple[list[Any], Vec]],
        model_id: str,
        advance: Callable[[np.random.Generator, int, int], None],
    ) -> None:
        self.directory = directory
        self._make_batch = make_batch
        self._model_id = model_id
        self._rng = np.random.default_rng(1)  # the PostgreSQL side's seed: the same vectors row for row
        self.loaded = 0
        db = directory / "engram.db"
        if db.exists():
            # A kept store (--embedded-dir): go on from its rows, with the generator where the last run left it.
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                self.loaded = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
            advance(self._rng, 0, self.loaded)

    def grow(self, size: int, texts: list[str], base: Vec, args: Any, embedder: Any, warm_up: str) -> dict[str, Any]:
        """Add rows ``loaded .. size`` and build the vector index; seconds for each."""
        t0 = time.perf_counter()
        store = open_sqlite(self.directory)
        try:
            while self.loaded < size:
                n = min(args.batch, size - self.loaded)
                memories, vecs = self._make_batch(texts, base, self.loaded, n, args.agents, self._rng, args)
                store.memories.add(memories, vecs, model_id=self._model_id, actor="bench")
                self.loaded += n
        finally:
            store.close()
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        with Engram(self.directory, embedder=embedder) as mem:
            mem.search(warm_up, agent="agent-0", limit=10)
            index = _vector_index(mem)
            if index is not None:
                index.wait_for_index()
        return {"load_s": round(load_s, 1), "index_build_s": round(time.perf_counter() - t1, 1)}

    def measure(
        self,
        queries: list[str],
        qvecs: dict[str, Vec],
        agents: int,
        latency: Callable[[list[Callable[[], Any]]], dict[str, float]],
        embedder: Any,
    ) -> dict[str, Any]:
        """The vector and keyword channels (depth 50) and ``Engram.search`` (limit 10) under each query's agent."""
        mem = Engram(self.directory, embedder=embedder)
        try:
            index = _vector_index(mem)
            mem.search(queries[0], agent="agent-0", limit=10)
            if index is not None:
                index.wait_for_index()
            search = mem.store.search

            def agent(i: int) -> Filter:
                return Filter(agent=f"agent-{i % agents}")

            # Warm: the keyword postings and the vector cache are built by the first searches after an open
            # (25-50 ms each, bench/RESULTS.md issue 27); PostgreSQL's server is warm from its own earlier passes.
            for i, q in enumerate(queries):
                search.keyword_candidates(query_terms(q), agent(i), limit=DEPTH)
                mem.search(q, agent=f"agent-{i % agents}", limit=10)

            return {
                "vector_ms": latency(
                    [
                        (lambda q=q, i=i: search.vector_candidates(qvecs[q], agent(i), limit=DEPTH))
                        for i, q in enumerate(queries)
                    ]
                ),
                "keyword_ms": latency(
                    [
                        (lambda q=q, i=i: search.keyword_candidates(query_terms(q), agent(i), limit=DEPTH))
                        for i, q in enumerate(queries)
                    ]
                ),
                "engram_search_ms": latency(
                    [
                        (lambda q=q, i=i: mem.search(q, agent=f"agent-{i % agents}", limit=10))
                        for i, q in enumerate(queries)
                    ]
                ),
                "uses_ann": bool(getattr(index, "uses_ann", False)),
            }
        finally:
            mem.close()


def interleaved(
    pg_url: str, directory: Path, queries: list[str], agents: int, embedder: Any, rounds: int = 2
) -> dict[str, Any]:
    """``Engram.search`` on both stores, query by query in turn (order swapped each round): the same load for both.

    The sequential timings above run minutes apart on a shared machine whose load moves; here each PostgreSQL
    search has an embedded one beside it, so their ratio holds whatever the load did.
    """
    import statistics

    pg, emb = Engram(pg_url, embedder=embedder), Engram(directory, embedder=embedder)
    ms: dict[str, list[float]] = {"postgres": [], "embedded": []}
    try:
        for mem in (pg, emb):  # warm both
            for i, q in enumerate(queries):
                mem.search(q, agent=f"agent-{i % agents}", limit=10)
                if i == 0 and mem is pg:
                    settle(engram_search_of(pg))
        for r in range(rounds):
            for i, q in enumerate(queries):
                pair = [("postgres", pg), ("embedded", emb)]
                for name, mem in pair if (i + r) % 2 == 0 else pair[::-1]:
                    t = time.perf_counter()
                    mem.search(q, agent=f"agent-{i % agents}", limit=10)
                    ms[name].append((time.perf_counter() - t) * 1000)
    finally:
        pg.close()
        emb.close()
    out: dict[str, Any] = {
        k: {
            "p50_ms": round(statistics.median(v), 2),
            "p95_ms": round(pct(v, 0.95), 2),
            "n": len(v),
        }
        for k, v in ms.items()
    }
    out["pg_over_embedded_p50"] = round(out["postgres"]["p50_ms"] / out["embedded"]["p50_ms"], 2)
    out["pg_over_embedded_p95"] = round(out["postgres"]["p95_ms"] / out["embedded"]["p95_ms"], 2)
    return out

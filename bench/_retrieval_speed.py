"""Speed and scale parts of ``bench/retrieval.py``: batched ingest rate, search latency, 10k/100k scale.

Moved out of ``bench/retrieval.py`` (which re-exports the names other bench scripts import from it:
``AGENT``, ``_latency``, ``_load``, ``_ms``, ``_scale_texts``). Every timing records the load average beside it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from _data import load_locomo, load_longmemeval
from _systems import percentile
from engramdb import Engram
from engramdb.embeddings import CachedEmbedder
from engramdb.retrieval.context import FOLLOWS_KEY
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter

AGENT = "bench"
console = Console(width=None if sys.stdout.isatty() else 150)

# -- speed -----------------------------------------------------------------------------------------


def _ms(fn: Callable[[], object]) -> float:
    """Wall time of one call, in milliseconds."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def _latency(ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95), "mean_ms": statistics.fmean(ms)}


def _load() -> list[float]:
    """1/5/15-minute load averages: other engineers share the 2 cores, so each timing records them."""
    return [round(x, 2) for x in os.getloadavg()]


def _search_latency(mem: Engram, embedder: CachedEmbedder, questions: Sequence[str]) -> dict[str, Any]:
    """Interleaved per query: a search that embeds the query, then the same search with the vector cached.

    Interleaving exposes both variants to the same background load; their difference is
    the query embedding.
    """
    for q in questions[:10]:
        mem.search(q, agent=AGENT, limit=10)  # warm-up: model, page cache, vector matrix
    with_embed, without = [], []
    for q in questions:
        embedder.cache_clear()
        with_embed.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
        without.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
    return {
        "search_with_query_embedding": _latency(with_embed),
        "search_without_query_embedding": _latency(without),
    }


#: Ingest variants: (label, texts, kind, memories per remember_many call; 0 = all in one call).
#: "conversation" memories are never merged; "knowledge" (the default kind) runs the near-duplicate check.
#: "turns" are LoCoMo turns as indexed above; "sentences" their first sentences (one-line memories), because
#: the model's cost grows with text length and both lengths occur in agent memory.
INGEST_VARIANTS = (
    ("turns, one call, kind=conversation", "turns", "conversation", 0),
    ("turns, one call, kind=knowledge (dedupe on)", "turns", "knowledge", 0),
    ("turns, calls of 100, kind=knowledge (dedupe on)", "turns", "knowledge", 100),
    ("first sentences, one call, kind=knowledge (dedupe on)", "sentences", "knowledge", 0),
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def first_sentence(turn: str) -> str:
    """``"speaker: first sentence"`` of a LoCoMo turn."""
    return _SENTENCE_END.split(turn, maxsplit=1)[0]


def run_speed(args: argparse.Namespace, make_raw: Callable[[], CachedEmbedder]) -> dict[str, Any]:
    """Batched ingest of short texts into fresh on-disk stores; search latency on one of them."""
    conversations = load_locomo()
    turns = [d.content for c in conversations for d in c.docs][: args.ingest_count]
    texts = {"turns": turns, "sentences": [first_sentence(t) for t in turns]}
    questions = [q.text for c in conversations for q in c.questions][: args.latency_queries]
    out: dict[str, Any] = {
        "ingest_texts": len(turns),
        "mean_chars": {name: statistics.fmean(len(t) for t in group) for name, group in texts.items()},
        "load_before": _load(),
        "ingest": {},
        "embedding_only": {},
    }
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        # Every measurement gets a fresh embedder (empty cache), so every text is embedded for real.
        for name, group in texts.items():
            raw = make_raw()
            raw.embed(["warm up the model"])
            t0 = time.perf_counter()
            raw.embed(group)  # one call, as remember_many makes it
            embed_s = time.perf_counter() - t0
            out["embedding_only"][name] = {"seconds": embed_s, "texts_per_s": len(group) / embed_s}
        for n, (label, text_set, kind, per_call) in enumerate(INGEST_VARIANTS):
            items = [{"content": t, "agent": AGENT, "kind": kind} for t in texts[text_set]]
            chunk = per_call or len(items)
            embedder = make_raw()
            embedder.embed(["warm up the model"])
            with Engram(Path(tmp) / f"store{n}", embedder=embedder) as mem:
                t0 = time.perf_counter()
                for start in range(0, len(items), chunk):
                    mem.remember_many(items[start : start + chunk])
                seconds = time.perf_counter() - t0
                out["ingest"][label] = {
                    "seconds": seconds,
                    "memories_per_s": len(items) / seconds,
                    "stored": mem.count(agent=AGENT),
                }
                if n == 0:
                    out["search_store_size"] = mem.count(agent=AGENT)
                    out.update(_search_latency(mem, embedder, questions))
    out["neighbour_spreading_cost"] = _spreading_cost(make_raw, questions, args.ingest_count)
    out["load_after"] = _load()
    return out


def _spreading_cost(make_raw: Callable[[], CachedEmbedder], questions: Sequence[str], count: int) -> dict[str, Any]:
    """Search latency with and without neighbour spreading on linked LoCoMo turns (query vectors precomputed).

    Interleaved per query, read-only (no access bookkeeping), so both see the same load.
    """
    docs = [d for c in load_locomo() for d in c.docs][:count]
    embedder = make_raw()
    qvecs = embedder.embed(list(questions))
    flt = Filter(agent=AGENT)
    with Engram(":memory:", embedder=embedder) as mem:
        stored = mem.remember_many([{"content": d.content, "agent": AGENT, "kind": "conversation"} for d in docs])
        for (a, ma), (b, mb) in itertools.pairwise(zip(docs, stored, strict=True)):
            if a.session == b.session:
                mem.update(mb.id, metadata={FOLLOWS_KEY: ma.id})
        plain = HybridSearcher(mem.store, embedder, neighbour_weight=0.0)
        spread = HybridSearcher(mem.store, embedder)
        try:
            now = datetime.now(UTC)
            for q, v in list(zip(questions, qvecs, strict=True))[:10]:  # warm-up
                plain.search(q, flt, limit=10, now=now, touch=False, vector=v)
            load_before = _load()
            off, on = [], []
            for q, v in zip(questions, qvecs, strict=True):
                off.append(_ms(lambda q=q, v=v: plain.search(q, flt, limit=10, now=now, touch=False, vector=v)))
                on.append(_ms(lambda q=q, v=v: spread.search(q, flt, limit=10, now=now, touch=False, vector=v)))
        finally:
            plain.close()
            spread.close()
    return {
        "memories": len(docs),
        "search_spreading_off": _latency(off),
        "search_spreading_on": _latency(on),
        "load_before": load_before,
        "load_after": _load(),
    }


# -- scale -----------------------------------------------------------------------------------------


def _scale_texts(n: int, rng: np.random.Generator) -> list[str]:
    """Realistic short texts for the keyword index: LoCoMo turns and LongMemEval user turns, reused, shuffled."""
    pool = [d.content for c in load_locomo() for d in c.docs]
    for item in load_longmemeval(limit=20):
        pool.extend(d.content[:400] for d in item.docs if d.content.startswith("user: "))
    picks = rng.integers(0, len(pool), size=n)
    return [pool[i] for i in picks]


def _numpy_top(matrix: np.ndarray, vector: np.ndarray, k: int) -> np.ndarray:
    """The reference: a plain exact scan of the same matrix, top k best first."""
    sims = matrix @ vector
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top])]


def run_scale(args: argparse.Namespace, make_raw: Callable[[], CachedEmbedder]) -> dict[str, Any]:
    """Search latency at scale: store vector scan and full search against a plain numpy scan, same vectors.

    Memories go in through ``store.memories.add`` with synthetic unit vectors (embedding 100k texts would
    take minutes and does not change the cost of a scan); their texts are real turns, so the
    keyword channel of the full search has realistic postings.
    """
    from engramdb._util import new_id, utcnow
    from engramdb.models import Memory

    rng = np.random.default_rng(0)
    embedder = make_raw()
    questions = [q.text for c in load_locomo() for q in c.questions][: args.latency_queries]
    qvecs = embedder.embed(questions)
    results: dict[str, Any] = {
        "vectors": "synthetic unit vectors (Gaussian, normalised) added with store.memories.add; texts are real turns",
        "queries": len(questions),
        "candidates": 50,
    }
    flt = Filter(agent=AGENT)
    with (
        tempfile.TemporaryDirectory(prefix="engram-scale-") as tmp,
        Engram(Path(tmp) / "store", embedder=embedder) as mem,
    ):
        matrix = np.zeros((0, embedder.dim), dtype=np.float32)
        for size in args.scale_sizes:
            grow = size - matrix.shape[0]
            texts = _scale_texts(grow, rng)
            vecs = rng.standard_normal((grow, embedder.dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            t0 = time.perf_counter()
            for start in range(0, grow, 5000):
                now = utcnow()
                batch = [
                    Memory(id=new_id(), agent=AGENT, kind="conversation", content=t, created_at=now, updated_at=now)
                    for t in texts[start : start + 5000]
                ]
                mem.store.memories.add(batch, vecs[start : start + 5000], model_id=embedder.model_id, actor=AGENT)
            insert_s = time.perf_counter() - t0
            matrix = np.concatenate([matrix, vecs])
            console.log(f"scale: {size} memories ({grow} inserted in {insert_s:.1f} s)")
            load_before = _load()
            for v in qvecs[:10]:  # warm-up: the first search loads the store's vector matrix
                mem.store.search.vector_candidates(v, flt, limit=50)
                _numpy_top(matrix, v, 50)
            npy, vc, kw = [], [], []
            # Interleaved, so all see the same background load.
            for q, v in zip(questions, qvecs, strict=True):
                npy.append(_ms(lambda v=v, m=matrix: _numpy_top(m, v, 50)))
                vc.append(_ms(lambda v=v: mem.store.search.vector_candidates(v, flt, limit=50)))
                kw.append(_ms(lambda q=q: mem.store.search.keyword_candidates(query_terms(q), flt, limit=50)))
            results[str(size)] = {
                "insert_seconds": insert_s,
                "numpy_scan_top50": _latency(npy),
                "store_vector_candidates_top50": _latency(vc),
                "vector_candidates_over_numpy_p50": percentile(vc, 50) / percentile(npy, 50),
                "store_keyword_candidates_top50": _latency(kw),
                **_search_latency(mem, embedder, questions),
                "load_before": load_before,
                "load_after": _load(),
            }
    return results

"""The embedded store at 10k / 100k / 1M memories: search latency, memory, open time, size; keyword recall.

Two parts:

* **curve** -- stores of growing size (real LoCoMo/LongMemEval turn texts drawn with repetition,
  synthetic unit vectors, as ``bench/retrieval.py --scale`` builds them). Each size is measured
  in a fresh child process, so open time and resident memory are those of a process that only
  opened the store and searched: open (``Engram(...)``), first search (loads the vector cache),
  vector and keyword channel p50/p95, the keyword channel without the postings budget beside it
  (the previous behaviour, same run), full ``search`` p50/p95 with and without the query
  embedding, RSS, database size, build time. The 1-minute load average is written beside each.
* **keyword recall** (``--keyword-recall``) -- does the keyword channel's postings budget lose
  evidence? Every LoCoMo dev conversation in one store with LongMemEval user turns as
  distractors up to ``--recall-size`` memories; keyword recall@50 of each question's evidence
  for several budgets, compared on the channel's candidate lists directly.

    python bench/scale.py                                   # 10k, 100k
    nice -n 5 python bench/scale.py --sizes 1000000 --merge # add the 1M point to the JSON
    python bench/scale.py --skip-curve --keyword-recall
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _data import load_locomo, load_longmemeval
from engramdb import Engram
from engramdb._util import new_id, utcnow
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.models import Memory
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite
from retrieval import AGENT, RESULTS_DIR, _latency, _load, _ms, _scale_texts, machine

OUT = RESULTS_DIR / "scale.json"
PREVIOUS = RESULTS_DIR / "retrieval_scale.json"
BUDGETS = (5_000, 10_000, 20_000, 40_000, None)
_BATCH = 5000


def _embedder() -> CachedEmbedder:
    emb = make_embedder(load_settings())
    assert isinstance(emb, CachedEmbedder)
    return emb


def _add(store: Any, texts: Sequence[str], rng: np.random.Generator, model_id: str, dim: int, agent: str) -> None:
    for start in range(0, len(texts), _BATCH):
        chunk = texts[start : start + _BATCH]
        vecs = rng.standard_normal((len(chunk), dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        now = utcnow()
        batch = [
            Memory(id=new_id(), agent=agent, kind="conversation", content=t, created_at=now, updated_at=now)
            for t in chunk
        ]
        store.memories.add(batch, vecs, model_id=model_id, actor=agent)


def build(directory: Path, grow: int, rng: np.random.Generator) -> float:
    """Add ``grow`` memories to the store in ``directory``; seconds taken."""
    emb = _embedder()
    texts = _scale_texts(grow, rng)
    store = open_sqlite(directory)
    try:
        t0 = time.perf_counter()
        _add(store, texts, rng, emb.model_id, emb.dim, AGENT)
        return time.perf_counter() - t0
    finally:
        store.close()


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def measure(directory: Path, queries: int) -> dict[str, Any]:
    """Open the store in this (fresh) process and time its channels and searches."""
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    qvecs = emb.embed(questions)
    emb.embed(["warm up the model"])
    rss_before = _rss_mb()
    load_before = _load()
    t0 = time.perf_counter()
    mem = Engram(directory, embedder=emb)
    open_s = time.perf_counter() - t0
    flt = Filter(agent=AGENT)
    # The store's own channels (Engram may wrap them to wait for its background vector queue).
    search = getattr(mem.store.search, "_inner", mem.store.search)
    t0 = time.perf_counter()
    search.vector_candidates(qvecs[0], flt, limit=50)
    first_vector_s = time.perf_counter() - t0
    for q in questions[:10]:  # warm-up: the model, the page cache, the term counts
        mem.search(q, agent=AGENT, limit=10)
    budget = search.postings_budget
    vec, kw, kw_unbounded, with_embed, without = [], [], [], [], []
    for q, v in zip(questions, qvecs, strict=True):  # interleaved: every variant sees the same load
        terms = query_terms(q)
        vec.append(_ms(lambda v=v: search.vector_candidates(v, flt, limit=50)))
        kw.append(_ms(lambda t=terms: search.keyword_candidates(t, flt, limit=50)))
        search.postings_budget = None
        kw_unbounded.append(_ms(lambda t=terms: search.keyword_candidates(t, flt, limit=50)))
        search.postings_budget = budget
        emb.cache_clear()
        with_embed.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
        without.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
    out = {
        "memories": mem.count(agent=AGENT),
        "open_seconds": open_s,
        "first_vector_search_seconds": first_vector_s,
        "vector_channel_top50": _latency(vec),
        "keyword_channel_top50": _latency(kw),
        "keyword_channel_top50_unbounded": _latency(kw_unbounded),
        "search_without_query_embedding": _latency(without),
        "search_with_query_embedding": _latency(with_embed),
        "rss_mb": _rss_mb(),
        "rss_store_mb": _rss_mb() - rss_before,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
        "postings_budget": budget,
        "load_before": load_before,
        "load_after": _load(),
    }
    mem.close()
    return out


def run_curve(sizes: Sequence[int], queries: int, keep: Path | None) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="engram-scale-") as tmp:
        directory = keep if keep is not None else Path(tmp) / "store"
        have = 0
        if directory.exists():
            with Engram(directory, embedder=_embedder()) as mem:
                have = mem.count(agent=AGENT)
        build_s = 0.0
        for size in sorted(sizes):
            if size > have:
                build_s = build(directory, size - have, rng)
                have = size
            print(f"scale: {size} memories (built {build_s:.1f} s); measuring", file=sys.stderr)
            child = subprocess.run(
                [sys.executable, __file__, "--measure", str(directory), "--queries", str(queries)],
                check=True,
                capture_output=True,
                text=True,
            )
            point = json.loads(child.stdout)
            point["build_seconds"] = build_s
            point["database_mb"] = (directory / "engram.db").stat().st_size / 1e6
            results[str(size)] = point
            print(json.dumps({size: point}, indent=1), file=sys.stderr)
    return results


def _recall(found: Sequence[str], gold: Sequence[str]) -> float:
    return len(set(found) & set(gold)) / len(gold)


def run_keyword_recall(size: int) -> dict[str, Any]:
    """Keyword recall@50 of evidence, LoCoMo conversations among distractors, per postings budget."""
    emb = _embedder()
    rng = np.random.default_rng(1)
    conversations = load_locomo()
    pool = [d.content[:400] for item in load_longmemeval(limit=40) for d in item.docs if d.content.startswith("user: ")]
    with tempfile.TemporaryDirectory(prefix="engram-kwrecall-") as tmp:
        store = open_sqlite(Path(tmp) / "store")
        doc_of: dict[str, tuple[str, str]] = {}
        for conv in conversations:
            ids = [new_id() for _ in conv.docs]
            now = utcnow()
            batch = [
                Memory(id=i, agent=AGENT, kind="conversation", content=d.content, created_at=now, updated_at=now)
                for i, d in zip(ids, conv.docs, strict=True)
            ]
            vecs = rng.standard_normal((len(batch), emb.dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            store.memories.add(batch, vecs, model_id=emb.model_id, actor=AGENT)
            doc_of.update({i: (conv.sample_id, d.id) for i, d in zip(ids, conv.docs, strict=True)})
        distractors = size - len(doc_of)
        _add(store, [pool[i] for i in rng.integers(0, len(pool), size=distractors)], rng, emb.model_id, emb.dim, AGENT)
        search = store.search
        flt = Filter(agent=AGENT)
        out: dict[str, Any] = {"memories": size, "distractors": distractors, "load_before": _load(), "budgets": {}}
        per_budget: dict[str, list[float]] = {str(b): [] for b in BUDGETS}
        ms: dict[str, list[float]] = {str(b): [] for b in BUDGETS}
        for conv in conversations:
            for q in conv.questions:
                if not q.evidence:
                    continue
                terms = query_terms(q.text)
                gold = [(conv.sample_id, e) for e in q.evidence]
                for b in BUDGETS:
                    search.postings_budget = b
                    t0 = time.perf_counter()
                    found = search.keyword_candidates(terms, flt, limit=50) if terms else []
                    ms[str(b)].append((time.perf_counter() - t0) * 1000)
                    per_budget[str(b)].append(_recall([doc_of.get(c.id, ("", "")) for c in found], gold))
        for b in BUDGETS:
            values = per_budget[str(b)]
            out["budgets"][str(b)] = {
                "keyword_recall_at_50": float(np.mean(values)),
                "questions": len(values),
                "latency": _latency(ms[str(b)]),
            }
        out["load_after"] = _load()
        store.close()
    return out


def _previous() -> dict[str, Any]:
    try:
        data = json.loads(PREVIOUS.read_text())
    except (OSError, ValueError):
        return {}
    prev: dict[str, Any] = {"source": str(PREVIOUS.name), "date": data.get("date")}
    for size, point in data.get("scale", {}).items():
        if isinstance(point, dict):
            prev[size] = {
                "vector_channel_p50_ms": point["store_vector_candidates_top50"]["p50_ms"],
                "keyword_channel_p50_ms": point["store_keyword_candidates_top50"]["p50_ms"],
                "search_without_query_embedding": point["search_without_query_embedding"],
                "search_with_query_embedding": point["search_with_query_embedding"],
            }
    return prev


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--queries", type=int, default=210, help="LoCoMo questions timed per size")
    parser.add_argument("--keep", type=Path, default=None, help="build (or grow) the store here and keep it")
    parser.add_argument("--skip-curve", action="store_true")
    parser.add_argument("--keyword-recall", action="store_true", help="also the keyword-budget recall study")
    parser.add_argument("--recall-size", type=int, default=100_000, help="memories in the recall study's store")
    parser.add_argument("--merge", action="store_true", help="add to the existing JSON instead of replacing it")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.queries)))
        return 0
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.merge and args.out.exists() else {}
    results.update({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()})
    results.setdefault("curve", {})
    if not args.skip_curve:
        results["vectors"] = "synthetic unit vectors (Gaussian, normalised); texts are real turns drawn with repetition"
        results["curve"].update(run_curve([int(s) for s in args.sizes.split(",")], args.queries, args.keep))
        results["previous"] = _previous()
    if args.keyword_recall:
        results["keyword_recall"] = run_keyword_recall(args.recall_size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

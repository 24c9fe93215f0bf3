"""Issue 27: embedded search with the memories spread over 1, 50 and 1,000 tenants (agents), side by side.

Builds one store per spread (``--memories`` LoCoMo/LongMemEval turns as text, vectors from the ``static``
embedder, row ``i`` owned by agent ``t{i % tenants}``), cached under ``~/.cache/engramdb-bench/tenants``.
Then, in one process and interleaved per question (every spread sees the same load), each LoCoMo question
is asked by one tenant (``t{q % tenants}``) of every store: the whole ``Engram.search`` (limit 10; the query
vector is already in the embedder's cache, so the query embedding is excluded), and each channel alone
(``vector_candidates`` / ``keyword_candidates``, limit 50). Prints p50/p95 in ms and writes JSON.

    python bench/tenants.py --memories 100000 --questions 150
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _data import load_locomo
from _report import write_json
from _retrieval_speed import _scale_texts
from engramdb import Engram
from engramdb._util import new_id, utcnow
from engramdb.models import Memory
from engramdb.recall import read_filter
from engramdb.retrieval.text import query_terms
from engramdb.storage.sqlite import open_sqlite

CACHE = Path.home() / ".cache" / "engramdb-bench" / "tenants"
_BATCH = 5000


def _dir(memories: int, tenants: int) -> Path:
    return CACHE / f"{memories}-{tenants}"


def build(memories: int, spreads: list[int]) -> None:
    """Every missing store, from the same texts and vectors."""
    missing = [n for n in spreads if not (_dir(memories, n) / "done").exists()]
    if not missing:
        return
    texts = _scale_texts(memories, np.random.default_rng(7))
    with Engram(CACHE / "embedder", embedder="static", vectors="sync") as mem:
        emb = mem.embedder
        start = time.perf_counter()
        vecs = np.asarray(emb.embed(texts), dtype=np.float32)
        print(f"embedded {memories} texts in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        model_id = emb.model_id
    for n in missing:
        start = time.perf_counter()
        directory = _dir(memories, n)
        store = open_sqlite(directory)
        try:
            for lo in range(0, memories, _BATCH):
                now = utcnow()
                batch = [
                    Memory(id=new_id(), agent=f"t{i % n}", kind="conversation", content=texts[i], created_at=now,
                           updated_at=now)
                    for i in range(lo, min(lo + _BATCH, memories))
                ]  # fmt: skip
                store.memories.add(batch, vecs[lo : lo + len(batch)], model_id=model_id, actor="bench")
        finally:
            store.close()
        with Engram(directory, embedder="static", vectors="sync") as mem:  # the HNSW sidecar, built once
            mem.search("warm up", agent="t0", limit=10)
            search = mem.store.search
            search._index.wait_for_index()
        (directory / "done").touch()
        print(f"built {memories} memories over {n} tenants in {time.perf_counter() - start:.1f} s", file=sys.stderr)


def _p(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p95": float(np.percentile(values, 95)), "n": len(values)}


def measure(memories: int, spreads: list[int], questions: int) -> dict[str, Any]:
    texts = [q.text for c in load_locomo() for q in c.questions][:questions]
    opened = {n: Engram(_dir(memories, n), embedder="static", vectors="sync") for n in spreads}
    first: dict[int, list[float]] = {}
    try:
        qvecs = opened[spreads[0]].embedder.embed(texts)
        for n, mem in opened.items():
            mem.embedder.embed(texts)  # each store's own cache: the query embedding is excluded below
            for q in texts[:5]:  # the first searches after opening, before the keyword cache is built
                t0 = time.perf_counter()
                mem.search(q, agent="t0", limit=10)
                first.setdefault(n, []).append(1000 * (time.perf_counter() - t0))
            mem.store.search.keyword_index.wait()
            for q in texts[5:15]:
                mem.search(q, agent="t0", limit=10)
        times: dict[str, list[float]] = {}
        for i, (q, v) in enumerate(zip(texts, qvecs, strict=True)):
            terms = query_terms(q)
            for n, mem in opened.items():
                agent = f"t{i % n}"
                flt = read_filter(agent, None, None)
                search = mem.store.search
                t0 = time.perf_counter()
                mem.search(q, agent=agent, limit=10)
                t1 = time.perf_counter()
                search.vector_candidates(np.asarray(v, dtype=np.float32), flt, limit=50)
                t2 = time.perf_counter()
                search.keyword_candidates(terms, flt, limit=50)
                t3 = time.perf_counter()
                times.setdefault(f"{n}/search", []).append(1000 * (t1 - t0))
                times.setdefault(f"{n}/vector", []).append(1000 * (t2 - t1))
                times.setdefault(f"{n}/keyword", []).append(1000 * (t3 - t2))
    finally:
        for mem in opened.values():
            mem.close()
    out: dict[str, Any] = {k: _p(v) for k, v in times.items()}
    out.update({f"{n}/first5": _p(v) for n, v in first.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--tenants", default="1,50,1000")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--label", default="now")
    args = parser.parse_args()
    spreads = [int(x) for x in args.tenants.split(",")]
    build(args.memories, spreads)
    load = os.getloadavg()[0]
    results = measure(args.memories, spreads, args.questions)
    print(f"{args.memories} memories, {args.questions} questions, load {load:.1f}-{os.getloadavg()[0]:.1f}")
    print("| tenants | search p50 / p95 | vector p50 / p95 | keyword p50 / p95 | first 5 searches p50 |")
    print("|---:|---:|---:|---:|---:|")
    for n in spreads:
        s, v, k, f = (results[f"{n}/{part}"] for part in ("search", "vector", "keyword", "first5"))
        print(
            f"| {n} | {s['p50']:.2f} / {s['p95']:.2f} | {v['p50']:.2f} / {v['p95']:.2f} | "
            f"{k['p50']:.2f} / {k['p95']:.2f} | {f['p50']:.1f} |"
        )
    write_json(
        Path(__file__).parent / "results" / f"tenants_{args.label}.json",
        {"args": vars(args), "load": [load, os.getloadavg()[0]], "results": results},
    )


if __name__ == "__main__":
    main()

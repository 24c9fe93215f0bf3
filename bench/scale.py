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

* **exact scan against the HNSW index** (``--ann SIZE=DIR,...``, on copies of curve stores) -- each step a
  fresh process: the sidecar build from nothing (exact load, build seconds, size), open + first vector
  search + RSS after 20 searches for the exact scan (``ann_threshold=0``) and the index, alternating,
  and both stores open in one process with every query interleaved: vector channel and whole search
  latency, recall@10/@50 of the index's vector channel against the exact channel. ``--ann-structured N``
  adds the index alone on N real-structured vectors (MiniLM turn vectors from the bench's embedding
  cache, then mixtures), since the curve's Gaussian vectors have no neighbourhoods for a graph to use.

    python bench/scale.py                                   # 10k, 100k
    nice -n 5 python bench/scale.py --sizes 1000000 --merge # add the 1M point to the JSON
    python bench/scale.py --skip-curve --keyword-recall
    python bench/scale.py --ann 100000=/tmp/s100k,1000000=/tmp/s1m --ann-structured 100000

* **flat graph against 8-bit graph** (``--ann-pair SIZE=FLAT_DIR:SQ_DIR --ann-flat-src SRC``) -- the same store
  twice, one with a format-1 sidecar (``IndexHNSWFlat``, answered by the engramdb source tree ``SRC``, e.g.
  ``git archive`` of the previous commit) and one with the current format (8-bit ``IndexHNSWSQ`` + exactly
  re-ranked head). Fresh processes alternate flat / 8-bit for ``--ann-rounds`` rounds; each opens, searches
  once, then ``--queries`` times (vector channel and whole search per query), with resident memory after 20
  and after all searches. Missing sidecars are built first (each by its own code), timed.

    python bench/scale.py --ann-pair 1000000=/tmp/flat1m:/tmp/sq1m --ann-flat-src /tmp/old/src --queries 200
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _data import load_locomo, load_longmemeval
from engramdb import Engram
from engramdb._util import new_id, utcnow
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.models import Memory
from engramdb.retrieval.text import query_terms
from engramdb.storage._ann import read_meta, sidecar_dir
from engramdb.storage._vector_index import SyncState, VectorIndex
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


def _open_engram(directory: Path, emb: CachedEmbedder, ann_threshold: int | None) -> Engram:
    """The store without the background-vector wrapper (``vectors="sync"``), so ``mem.store`` is the store itself."""
    extra = {} if ann_threshold is None else {"ann_threshold": ann_threshold}
    return Engram(directory, embedder=emb, vectors="sync", **extra)


def measure(directory: Path, queries: int, ann_threshold: int | None = None) -> dict[str, Any]:
    """Open the store in this (fresh) process and time its channels and searches."""
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    qvecs = emb.embed(questions)
    emb.embed(["warm up the model"])
    rss_before = _rss_mb()
    load_before = _load()
    t0 = time.perf_counter()
    mem = _open_engram(directory, emb, ann_threshold)
    open_s = time.perf_counter() - t0
    flt = Filter(agent=AGENT)
    search = mem.store.search
    t0 = time.perf_counter()
    search.vector_candidates(qvecs[0], flt, limit=50)
    first_vector_s = time.perf_counter() - t0
    for q in questions[:10]:  # warm-up: the model, the page cache, the term counts
        mem.search(q, agent=AGENT, limit=10)
    _unwrapped(search).keyword_index.wait()  # the steady state: the keyword index built (FTS5's bm25() until then)
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
        "uses_ann": bool(getattr(getattr(search, "_index", None), "uses_ann", False)),
    }
    mem.close()
    return out


def _in_child(*argv: str, src: Path | None = None) -> dict[str, Any]:
    """Run this script with ``argv`` in a fresh process and return the JSON it prints (``src``: a source tree
    whose engramdb shadows the installed one, to measure older code)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, __file__, *argv], check=True, capture_output=True, text=True, env=env)
    return dict(json.loads(done.stdout))


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
            point = _in_child("--measure", str(directory), "--queries", str(queries))
            point["build_seconds"] = build_s
            point["database_mb"] = (directory / "engram.db").stat().st_size / 1e6
            results[str(size)] = point
            print(json.dumps({size: point}, indent=1), file=sys.stderr)
    return results


def _recall(found: Sequence[str], gold: Sequence[str]) -> float:
    return len(set(found) & set(gold)) / len(gold)


def fill_recall_store(store: Any, size: int, rng: np.random.Generator) -> dict[str, tuple[str, str]]:
    """Every LoCoMo dev conversation among LongMemEval user turns, ``size`` memories with synthetic vectors;
    memory id -> (conversation, LoCoMo dialogue id) of the LoCoMo turns."""
    emb = _embedder()
    pool = [d.content[:400] for item in load_longmemeval(limit=40) for d in item.docs if d.content.startswith("user: ")]
    doc_of: dict[str, tuple[str, str]] = {}
    for conv in load_locomo():
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
    return doc_of


def run_keyword_recall(size: int) -> dict[str, Any]:
    """Keyword recall@50 of evidence, LoCoMo conversations among distractors, per postings budget."""
    rng = np.random.default_rng(1)
    conversations = load_locomo()
    with tempfile.TemporaryDirectory(prefix="engram-kwrecall-") as tmp:
        store = open_sqlite(Path(tmp) / "store")
        doc_of = fill_recall_store(store, size, rng)
        search = store.search
        flt = Filter(agent=AGENT)
        distractors = size - len(doc_of)
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
    parser.add_argument("--ann-threshold", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--ann",
        default=None,
        help="exact scan against the HNSW index on existing stores: SIZE=DIR,... (copies of curve stores)",
    )
    parser.add_argument("--ann-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ann-pair", default=None, help="flat against 8-bit graph: SIZE=FLAT_DIR:SQ_DIR,...")
    parser.add_argument("--ann-flat-src", type=Path, default=None, help="with --ann-pair: source tree of the flat code")
    parser.add_argument("--ann-rounds", type=int, default=2, help="with --ann-pair: alternating rounds")
    parser.add_argument(
        "--ann-graphs", default=None, help="FLAT_DIR:SQ_DIR: the two graphs alone in one process, per query interleaved"
    )
    parser.add_argument(
        "--cold", default=None, help="SIZE=DIR,...: new questions from a fresh open, during and after the keyword build"
    )
    parser.add_argument("--cold-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ann-opens", type=int, default=2, help="with --ann: fresh-process opens per mode")
    parser.add_argument("--ann-open-modes", default="exact,ann", help="with --ann: which modes to open")
    parser.add_argument("--ann-skip-ab", action="store_true", help="with --ann: no interleaved exact/ANN run")
    parser.add_argument(
        "--ann-structured", type=int, default=0, help="with --ann: also the index alone on N real-structured vectors"
    )
    args = parser.parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.queries, args.ann_threshold)))
        return 0
    if args.cold_child is not None:
        print(json.dumps(_cold_child(Path(args.cold_child))))
        return 0
    if args.ann_child is not None:
        print(json.dumps(_ann_child(args.ann_child, args.queries)))
        return 0
    if args.ann is not None:
        return run_ann(args)
    if args.ann_pair is not None:
        return run_ann_pair(args)
    if args.ann_graphs is not None:
        print(json.dumps(run_ann_graphs(args.ann_graphs, args.queries), indent=2))
        return 0
    if args.cold is not None:
        return run_cold(args.cold)
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


ANN_OUT = RESULTS_DIR / "scale_ann.json"


def _vm_rss_mb(field: str = "VmRSS") -> float:
    """Resident memory from /proc/self/status: VmRSS, or its parts RssAnon (private) and RssFile (mapped files)."""
    with open("/proc/self/status", encoding="utf-8") as fh:
        line = next(x for x in fh if x.startswith(f"{field}:"))
    return int(line.split()[1]) / 1e3


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6 if path.exists() else 0.0


def _ann_child(spec: str, queries: int) -> dict[str, Any]:
    """One fresh process: ``open:<mode>:DIR`` (open, first search, 20 searches, RSS), ``build:DIR``
    (the sidecar build from nothing) or ``ab:DIR`` (exact and ANN stores in one process, interleaved)."""
    kind, _, rest = spec.partition(":")
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    qvecs = emb.embed(questions)
    flt = Filter(agent=AGENT)
    if kind == "run":
        return _ann_run(Path(rest), emb, questions, qvecs)
    if kind == "open":
        mode, _, where = rest.partition(":")
        directory = Path(where)
        rss0, load0 = _vm_rss_mb(), _load()
        t0 = time.perf_counter()
        # The default (background vectors) Engram: what a user's open costs.
        mem = Engram(directory, embedder=emb, **({"ann_threshold": 0} if mode == "exact" else {}))
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        mem.store.search.vector_candidates(qvecs[0], flt, limit=50)
        first_s = time.perf_counter() - t0
        for q in questions[:20]:
            mem.search(q, agent=AGENT, limit=10)
        out = {
            "mode": mode,
            "open_seconds": open_s,
            "first_vector_search_seconds": first_s,
            "rss_mb_after_open_and_20_searches": _vm_rss_mb(),
            # Mapped sidecar pages are clean page cache (the kernel maps 64 KB around each touched page).
            "rss_anon_mb": _vm_rss_mb("RssAnon"),
            "rss_file_mb": _vm_rss_mb("RssFile"),
            "rss_mb_before_open": rss0,
            "sidecar_present": read_meta(sidecar_dir(directory / "engram.db")) is not None,
            "load_before": load0,
            "load_after": _load(),
        }
        mem.close()
        return out
    if kind == "build":
        directory = Path(rest)
        side = sidecar_dir(directory / "engram.db")
        load0 = _load()
        mem = _open_engram(directory, emb, None)
        t0 = time.perf_counter()
        mem.store.search.vector_candidates(qvecs[0], flt, limit=50)  # loads exactly, starts the build
        load_s = time.perf_counter() - t0
        index = mem.store.search._index  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        index.wait_for_index()
        build_s = time.perf_counter() - t0
        out = {"exact_load_seconds": load_s, "build_seconds": build_s, "uses_ann": index.uses_ann}
        out |= {"sidecar_mb": _dir_mb(side), "load_before": load0, "load_after": _load()}
        mem.close()
        return out
    directory = Path(rest)
    exact = _open_engram(directory, emb, 0)
    ann = _open_engram(directory, emb, None)
    for q, v in zip(questions[:10], qvecs, strict=False):  # warm-up both: caches, page cache, term counts
        for mem in (exact, ann):
            mem.store.search.vector_candidates(v, flt, limit=50)
            mem.search(q, agent=AGENT, limit=10)
    for mem in (exact, ann):  # the steady state: each store's keyword index built (FTS5's bm25() until then)
        _unwrapped(mem.store.search).keyword_index.wait()
    vec: dict[str, list[float]] = {"exact": [], "ann": []}
    whole: dict[str, list[float]] = {"exact": [], "ann": []}
    r10, r50 = [], []
    for q, v in zip(questions, qvecs, strict=True):  # interleaved: both see the same load
        found: dict[str, list[str]] = {}
        for name, mem in (("exact", exact), ("ann", ann)):
            t0 = time.perf_counter()
            cands = mem.store.search.vector_candidates(v, flt, limit=50)
            vec[name].append((time.perf_counter() - t0) * 1000)
            found[name] = [c.id for c in cands]
            whole[name].append(_ms(lambda q=q, mem=mem: mem.search(q, agent=AGENT, limit=10)))
        truth = found["exact"]
        r10.append(len(set(found["ann"][:10]) & set(truth[:10])) / max(1, len(truth[:10])))
        r50.append(len(set(found["ann"]) & set(truth)) / max(1, len(truth)))
    out = {
        "uses_ann": bool(ann.store.search._index.uses_ann),  # type: ignore[attr-defined]
        "vector_channel_top50": {k: _latency(v) for k, v in vec.items()},
        "search_without_query_embedding": {k: _latency(v) for k, v in whole.items()},
        "vector_recall_at_10_vs_exact": float(np.mean(r10)),
        "vector_recall_at_50_vs_exact": float(np.mean(r50)),
        "queries": len(questions),
        "load_before": None,
        "load_after": _load(),
        "sidecar_mb": _dir_mb(sidecar_dir(directory / "engram.db")),
    }
    exact.close()
    ann.close()
    return out


def _rss_parts() -> dict[str, float]:
    return {"total_mb": _vm_rss_mb(), "private_mb": _vm_rss_mb("RssAnon"), "mapped_mb": _vm_rss_mb("RssFile")}


def _unwrapped(search: Any) -> Any:
    """The store's own search role (the default Engram wraps it for background vectors)."""
    while not hasattr(search, "_index") and hasattr(search, "_inner"):
        search = search._inner
    return search


def _vector_index_of(search: Any) -> Any:
    """The VectorIndex under the search."""
    return _unwrapped(search)._index


def _ann_run(directory: Path, emb: CachedEmbedder, questions: Sequence[str], qvecs: Any) -> dict[str, Any]:
    """Open the store (default Engram), one first search, then every question: vector channel and whole search."""
    from engramdb.storage import _ann

    flt = Filter(agent=AGENT)
    load0 = _load()
    t0 = time.perf_counter()
    mem = Engram(directory, embedder=emb)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem.store.search.vector_candidates(qvecs[0], flt, limit=50)
    first_s = time.perf_counter() - t0
    # The first search starts the keyword index's build; until it is ready the keyword channel is FTS5's
    # bm25() (30-140 ms at 100k): timed on its own, not mixed into the steady state below.
    t0 = time.perf_counter()
    mem.search(questions[0], agent=AGENT, limit=10)
    kw_ready = _unwrapped(mem.store.search).keyword_index.wait()
    kw_s = time.perf_counter() - t0
    vec: list[float] = []
    whole: list[float] = []
    rss20: dict[str, float] = {}
    for i, (q, v) in enumerate(zip(questions, qvecs, strict=True)):
        t0 = time.perf_counter()
        mem.store.search.vector_candidates(v, flt, limit=50)
        vec.append((time.perf_counter() - t0) * 1000)
        whole.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
        if i == 19:
            rss20 = _rss_parts()
    out = {
        "format": getattr(_ann, "_FORMAT", None),
        "uses_ann": bool(_vector_index_of(mem.store.search).uses_ann),
        "open_seconds": open_s,
        "first_vector_search_seconds": first_s,
        "keyword_index_ready_seconds": kw_s,
        "keyword_index_ready": kw_ready,
        "vector_channel_top50": _latency(vec),
        "search_without_query_embedding": _latency(whole),
        "queries": len(questions),
        "rss_after_open_and_20_searches": rss20,
        f"rss_after_{len(questions)}_searches": _rss_parts(),
        "sidecar_mb": _dir_mb(sidecar_dir(directory / "engram.db")),
        "load_before": load0,
        "load_after": _load(),
    }
    mem.close()
    return out


def _cold_child(directory: Path) -> dict[str, Any]:
    """From a fresh open: each LoCoMo question searched once (never repeated), split by whether the keyword
    index was ready, until 100 ran after it (the other protocols search each question after a warm-up)."""
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions]
    emb.embed(questions)  # the query vectors come from the cache: the query embedding is excluded
    load0 = _load()
    mem = Engram(directory, embedder=emb)
    index = _unwrapped(mem.store.search).keyword_index
    during: list[float] = []
    after: list[float] = []
    start = time.perf_counter()
    ready_s = None
    for q in questions:
        ready = index.ready()
        if ready and ready_s is None:
            ready_s = time.perf_counter() - start
        (after if ready else during).append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
        if len(after) >= 100:
            break
    mem.close()
    return {
        "first_search_ms": (during or after)[0],
        "during_keyword_build": (_latency(during[1:]) if len(during) > 1 else {}) | {"n": max(0, len(during) - 1)},
        "after_keyword_build": _latency(after) | {"n": len(after)},
        "keyword_index_ready_seconds": ready_s,
        "load_before": load0,
        "load_after": _load(),
    }


def run_cold(spec: str) -> int:
    """``--cold``: each store twice, in fresh processes (the second finds the page cache warm)."""
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}
    for item in filter(None, spec.split(",")):
        size, _, directory = item.partition("=")
        runs = []
        for _ in range(2):
            runs.append(_in_child("--cold-child", directory))
            print(json.dumps({size: runs[-1]}), file=sys.stderr, flush=True)
        results[size] = runs
    out = RESULTS_DIR / "scale_cold.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def run_ann_graphs(spec: str, queries: int) -> dict[str, Any]:
    """The vector channel's graph step alone, flat against 8-bit, both in this process, alternating per query.

    Flat: ``IndexHNSWFlat`` of a format-1 sidecar read with faiss directly (memory-mapped, as that code
    did), top 64 at ef 128 (its scores are exact). 8-bit: the current ``AnnBase.search`` (top 64 on codes,
    re-ranked on float32 rows read with pread). Resident memory needs separate processes (``--ann-pair``).
    """
    import faiss

    from engramdb.storage._ann_base import AnnBase
    from engramdb.storage._ann_rows import SQLiteVectors

    flat_dir, _, sq_dir = spec.partition(":")
    flat_root = sidecar_dir(Path(flat_dir) / "engram.db")
    current = json.loads((flat_root / "CURRENT").read_text(encoding="utf-8"))
    flat = faiss.read_index(str(flat_root / current["generation"] / "hnsw.faiss"), faiss.IO_FLAG_MMAP_IFC)
    root = sidecar_dir(Path(sq_dir) / "engram.db")
    meta = read_meta(root)
    assert meta is not None, "the 8-bit store has no current-format sidecar"
    base = AnnBase(root, meta, SQLiteVectors(Path(sq_dir) / "engram.db"))
    emb = _embedder()
    qvecs = emb.embed([q.text for c in load_locomo() for q in c.questions][:queries])
    params = faiss.SearchParametersHNSW(efSearch=128)
    ms: dict[str, list[float]] = {"flat": [], "sq8": []}
    same10 = []
    loads = [_load()[0]]
    for i, v in enumerate(qvecs):
        got: dict[str, list[int]] = {}
        for name in ("flat", "sq8") if i % 2 == 0 else ("sq8", "flat"):
            t0 = time.perf_counter()
            if name == "flat":
                _, rows = flat.search(v.reshape(1, -1), 64, params=params)
                got[name] = rows[0][:10].tolist()
            else:
                got[name] = base.search(v, 64, None, base.n)[0][:10].tolist()
            ms[name].append((time.perf_counter() - t0) * 1000)
        same10.append(len(set(got["flat"]) & set(got["sq8"])) / 10)
        if i % 50 == 49:
            loads.append(_load()[0])
    return {
        "rows": base.n,
        "graph_top64_ms": {k: _latency(v) for k, v in ms.items()},
        "top10_overlap_sq8_vs_flat": float(np.mean(same10)),
        "queries": len(qvecs),
        "load_1min_start_and_every_50": loads,
    }


def run_ann_pair(args: argparse.Namespace) -> int:
    """Flat graph (the code in ``--ann-flat-src``) against the 8-bit graph, alternating fresh processes."""
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.merge and args.out.exists() else {}
    results.update({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()})

    def child(spec: str, src: Path | None) -> dict[str, Any]:
        return _in_child("--ann-child", spec, "--queries", str(args.queries), src=src)  # src: the flat code

    for item in filter(None, args.ann_pair.split(",")):
        size, _, dirs = item.partition("=")
        flat_dir, _, sq_dir = dirs.partition(":")
        variants = {"flat": (Path(flat_dir), args.ann_flat_src), "sq8": (Path(sq_dir), None)}
        point: dict[str, Any] = results.setdefault(size, {})
        for name, (directory, src) in variants.items():
            side = sidecar_dir(directory / "engram.db")
            # read_meta knows only the current format: a flat sidecar is judged by its CURRENT file.
            if (read_meta(side) is None) if name == "sq8" else not (side / "CURRENT").exists():
                point[f"build_{name}"] = child(f"build:{directory}", src)
        runs: dict[str, list[Any]] = {name: [] for name in variants}
        for r in range(args.ann_rounds):
            for name in list(variants) if r % 2 == 0 else list(reversed(variants)):
                directory, src = variants[name]
                runs[name].append(child(f"run:{directory}", src))
                print(json.dumps({size: {name: runs[name][-1]}}), file=sys.stderr, flush=True)
        point["runs"] = runs
    out = args.out if args.out != OUT else RESULTS_DIR / "scale_ann_sq.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


EMBED_CACHE = Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"


def _structured_vectors(size: int, model_id: str, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """Real MiniLM turn vectors from the bench's embedding cache, then mixtures of two of them plus noise
    (the curve stores hold Gaussian vectors, which have no neighbourhood structure for a graph to follow)."""
    with contextlib.closing(sqlite3.connect(f"file:{EMBED_CACHE}?mode=ro", uri=True)) as conn:
        blobs = [b for (b,) in conn.execute("SELECT vector FROM embedding_cache WHERE model_id = ?", (model_id,))]
    real = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
    extra = max(0, size - len(real))
    mix = real[rng.integers(0, len(real), extra)] + 0.5 * real[rng.integers(0, len(real), extra)]
    mix += 0.02 * rng.standard_normal(mix.shape).astype(np.float32)
    mix /= np.linalg.norm(mix, axis=1, keepdims=True)
    return np.vstack([real, mix]).astype(np.float32)[:size]


def run_ann_structured(size: int, queries: int) -> dict[str, Any]:
    """Vector channel recall of the HNSW index against the exact scan on real-structured vectors (the index alone)."""
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    qvecs = emb.embed(questions)
    vecs = _structured_vectors(size, emb.model_id, np.random.default_rng(2))
    rows = [(f"m{i}", i + 1, AGENT, "conversation", "private", vecs[i].tobytes()) for i in range(len(vecs))]
    state = SyncState(emb.model_id, 0, len(rows))
    with tempfile.TemporaryDirectory(prefix="engram-ann-") as tmp:
        exact, ann = VectorIndex(), VectorIndex(Path(tmp) / "engram.db.ann")
        exact.load(rows, state)
        ann.load(rows, state)
        load0 = _load()
        ann.search(qvecs[0], limit=50, agent=AGENT, include_public=False)  # starts the build
        t0 = time.perf_counter()
        ann.wait_for_index()
        build_s = time.perf_counter() - t0
        ms: dict[str, list[float]] = {"exact": [], "ann": []}
        r10, r50 = [], []
        for v in qvecs:  # interleaved
            found = {}
            for name, index in (("exact", exact), ("ann", ann)):
                t0 = time.perf_counter()
                found[name] = [i for i, _ in index.search(v, limit=50, agent=AGENT, include_public=False)]
                ms[name].append((time.perf_counter() - t0) * 1000)
            r10.append(len(set(found["ann"][:10]) & set(found["exact"][:10])) / 10)
            r50.append(len(set(found["ann"]) & set(found["exact"])) / 50)
        return {
            "vectors": len(rows),
            "uses_ann": ann.uses_ann,
            "build_seconds": build_s,
            "vector_channel_top50": {k: _latency(v) for k, v in ms.items()},
            "vector_recall_at_10_vs_exact": float(np.mean(r10)),
            "vector_recall_at_50_vs_exact": float(np.mean(r50)),
            "sidecar_mb": _dir_mb(Path(tmp) / "engram.db.ann"),
            "queries": len(qvecs),
            "load_before": load0,
            "load_after": _load(),
        }


def run_ann(args: argparse.Namespace) -> int:
    """Exact scan against HNSW index on existing stores (``--ann 100000=DIR,...``), each step a fresh process."""
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.merge and args.out.exists() else {}
    results.update({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()})

    def child(spec: str) -> dict[str, Any]:
        return _in_child("--ann-child", spec, "--queries", str(args.queries))

    for item in filter(None, args.ann.split(",")):
        size, _, where = item.partition("=")
        directory = Path(where)
        point: dict[str, Any] = results.setdefault(size, {})
        if read_meta(sidecar_dir(directory / "engram.db")) is None:
            point["build"] = child(f"build:{directory}")
        # Open in fresh processes, each mode twice, alternating (one-shot times: the pairs show the spread).
        modes = args.ann_open_modes.split(",")
        point["open"] = [child(f"open:{mode}:{directory}") for _ in range(args.ann_opens) for mode in modes]
        point["sidecar_mb"] = _dir_mb(sidecar_dir(directory / "engram.db"))
        point["database_mb"] = (directory / "engram.db").stat().st_size / 1e6
        if not args.ann_skip_ab:
            point["ab"] = child(f"ab:{directory}")
        print(json.dumps({size: point}, indent=1), file=sys.stderr)
    if args.ann_structured:
        results["structured"] = run_ann_structured(args.ann_structured, args.queries)
        print(json.dumps(results["structured"], indent=1), file=sys.stderr)
    out = args.out if args.out != OUT else ANN_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

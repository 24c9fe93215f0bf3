"""End-to-end recall of the HNSW vector index on REAL vectors, past its threshold.

One agent's store holds every LoCoMo dev turn (ingested as bench/retrieval.py ingests a conversation:
``remember_many``, then ``metadata["follows"]`` links between neighbouring turns) plus LongMemEval_S dev
turns as distractors -- only those whose MiniLM vector the bench's embedding cache already holds, so
nothing is embedded at scale -- about 26k memories, above the default ``ann_threshold`` (20,000).

The store is built once and copied, so the exact scan (``ann_threshold=0``) and the index (default)
each answer from their own copy: ``Engram.search`` counts returned memories as accessed, and the
copies keep that bookkeeping apart (it feeds the ranking). Every LoCoMo dev question is asked of both
with ``limit=5`` and ``limit=10``, interleaved per question (which copy goes first alternates), and the
vector channel's top 50 of both is compared (recall of the index against the exact scan).

    python bench/scale_recall.py                       # build in a temporary directory, measure, write JSON
    python bench/scale_recall.py --keep /tmp/sr        # keep (or reuse) the built stores there
    python bench/scale_recall.py --questions 100       # quick: first 100 questions only
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _data import LOCOMO_CATEGORIES, LocomoConversation, iter_longmemeval, load_locomo
from _systems import paired_bootstrap, recall_at_k
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.retrieval.context import FOLLOWS_KEY
from engramdb.storage._ann import sidecar_dir
from engramdb.storage.base import Filter
from retrieval import AGENT, RESULTS_DIR, _latency, _load, machine

OUT = RESULTS_DIR / "scale_recall.json"
EMBED_CACHE = Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"
KS = (5, 10)
#: The second agent of the ``split`` layout (half the distractors: the bench agent's searches filter).
OTHER = "other"
#: The index threshold of the ``delta`` layout: below the distractors alone, so the index is built before
#: LoCoMo is written (the distractors the cache holds are fewer than the default 20,000).
DELTA_THRESHOLD = 15_000
#: HNSW search breadths compared on the graph alone (the store uses 128, engramdb.storage._ann.EF_SEARCH).
EF_SWEEP = (128, 192, 256, 512)
#: Distractors written per remember_many call.
_BATCH = 2_000


def _embedder() -> CachedEmbedder:
    """The default model behind the bench's persistent embedding cache (as bench/retrieval.py uses it)."""
    base = make_embedder(load_settings())
    assert isinstance(base, CachedEmbedder)
    return CachedEmbedder(base, size=200_000, path=EMBED_CACHE)


def cached_distractors(model_id: str, limit: int) -> tuple[list[str], int]:
    """Distinct LongMemEval_S dev turn texts whose vector the cache holds (first ``limit``); also how many missed."""
    texts: dict[bytes, str] = {}
    for question in iter_longmemeval():
        for doc in question.docs:
            texts.setdefault(hashlib.sha256(doc.content.encode("utf-8", "surrogatepass")).digest(), doc.content)
    keys = list(texts)
    held: set[bytes] = set()
    with contextlib.closing(sqlite3.connect(f"file:{EMBED_CACHE}?mode=ro", uri=True)) as conn:
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT text_sha256 FROM embedding_cache WHERE model_id = ? AND text_sha256 IN ({marks})"
            held.update(bytes(k) for (k,) in conn.execute(sql, (model_id, *chunk)))
    found = [texts[k] for k in keys if k in held]
    return found[:limit], len(keys) - len(held)


def _write_locomo(mem: Engram, conversations: Sequence[LocomoConversation]) -> None:
    """Every turn, then the links bench/retrieval.py's Corpus adds (turn -> the turn before it in its session)."""
    for conv in conversations:
        items = [
            {
                "content": d.content,
                "agent": AGENT,
                "kind": "conversation",
                "metadata": {"turn": d.id, "session": d.session, "date": d.date, "conversation": conv.sample_id},
            }
            for d in conv.docs
        ]
        stored = mem.remember_many(items)
        memory_of_doc = {str(m.metadata["turn"]): m for m in stored}
        for a, b in itertools.pairwise(conv.docs):
            if a.session == b.session:
                m = memory_of_doc[b.id]
                mem.update(m.id, metadata={**m.metadata, FOLLOWS_KEY: memory_of_doc[a.id].id})


def _write_distractors(mem: Engram, texts: Sequence[str], *, split: bool) -> None:
    """Distractors in the bench agent (``split``: every other one in another agent, so a search filters)."""
    for start in range(0, len(texts), _BATCH):
        chunk = texts[start : start + _BATCH]
        mem.remember_many(
            [
                {
                    "content": t,
                    "agent": OTHER if split and (start + i) % 2 else AGENT,
                    "kind": "conversation",
                    "metadata": {"source": "longmemeval"},
                }
                for i, t in enumerate(chunk)
            ]
        )


def build(directory: Path, emb: CachedEmbedder, max_memories: int, layout: str) -> dict[str, Any]:
    """The base store of ``layout`` in ``directory`` (exact mode: no index built while writing).

    ``one-agent`` and ``split``: LoCoMo, then the distractors. ``delta``: the distractors only (LoCoMo is
    written later, after the index copy built its index, see :func:`prepare_delta`).
    """
    t0 = time.perf_counter()
    conversations = load_locomo()
    locomo_turns = sum(len(c.docs) for c in conversations)
    distractors, missed = cached_distractors(emb.model_id, max_memories - locomo_turns)
    misses0 = emb.cache_info().misses
    mem = Engram(directory, embedder=emb, vectors="sync", ann_threshold=0)
    try:
        if layout != "delta":
            _write_locomo(mem, conversations)
        _write_distractors(mem, distractors, split=layout == "split")
        count = sum(mem.count(agent=a) for a in (AGENT, OTHER))
    finally:
        mem.close()
    return {
        "layout": layout,
        "locomo_turns": locomo_turns,
        "distractors": len(distractors),
        "distractor_texts_without_cached_vector": missed,
        "texts_embedded_now": emb.cache_info().misses - misses0,
        "memories_before_locomo" if layout == "delta" else "memories": count,
        "seconds": time.perf_counter() - t0,
    }


def prepare_delta(exact_dir: Path, index_dir: Path, emb: CachedEmbedder) -> dict[str, Any]:
    """Build the index over the distractors (threshold DELTA_THRESHOLD), then write LoCoMo into both copies.

    In the index copy the LoCoMo turns land in the delta (scanned exactly and merged with the graph's
    answer); closing persists them as the sidecar's overlay, which the measuring open adopts.
    """
    conversations = load_locomo()
    ann = Engram(index_dir, embedder=emb, vectors="sync", ann_threshold=DELTA_THRESHOLD)
    t0 = time.perf_counter()
    ann.store.search.vector_candidates(emb.embed(["warm up"])[0], Filter(agent=AGENT), limit=10)
    _index_of(ann).wait_for_index()
    build_s = time.perf_counter() - t0
    uses = bool(_index_of(ann).uses_ann)
    _write_locomo(ann, conversations)
    ann.close()
    exact = Engram(exact_dir, embedder=emb, vectors="sync", ann_threshold=0)
    _write_locomo(exact, conversations)
    exact.close()
    return {"index_build_seconds_before_locomo": build_s, "uses_ann_before_locomo": uses}


def _index_of(mem: Engram) -> Any:
    return mem.store.search._index  # type: ignore[attr-defined]


def _turns(hits: Sequence[Any]) -> list[str]:
    """Hits as "<conversation>/<turn>" (distractors have no turn: they can never be gold)."""
    out = []
    for h in hits:
        md = h.memory.metadata
        out.append(f"{md['conversation']}/{md['turn']}" if "turn" in md else f"x/{h.memory.id}")
    return out


def ef_sweep(base: Any, qvecs: npt.NDArray[np.float32]) -> dict[str, Any]:
    """The graph alone (no filter, no delta) at several search breadths: recall against an exact scan of
    the same rows, and the time of one top-100 search (what a limit-50 vector channel fetches), interleaved."""
    import faiss  # only here: the rest of the bench runs without faiss

    truth = np.argsort(-(qvecs @ np.asarray(base.vectors).T), axis=1)[:, :50]
    found: dict[int, list[set[int]]] = {ef: [] for ef in EF_SWEEP}
    ms: dict[int, list[float]] = {ef: [] for ef in EF_SWEEP}
    for v in qvecs:
        for ef in EF_SWEEP:
            params = faiss.SearchParametersHNSW(efSearch=max(ef, 100))  # type: ignore[attr-defined]
            t = time.perf_counter()
            _, rows = base._index.search(v.reshape(1, -1), 100, params=params)
            ms[ef].append((time.perf_counter() - t) * 1000)
            found[ef].append({int(r) for r in rows[0]})
    out: dict[str, Any] = {"load_1min": _load()[0]}
    for ef in EF_SWEEP:
        r10 = [len(f & set(t[:10].tolist())) / 10 for f, t in zip(found[ef], truth, strict=True)]
        absent = sum(len(set(t[:10].tolist()) - f) for f, t in zip(found[ef], truth, strict=True))
        out[f"ef={ef}"] = {
            "recall_at_10_in_top100": float(np.mean(r10)),
            "true_top10_rows_absent_from_top100": absent,
            "search_ms": _latency(ms[ef]),
        }
    return out


def _turn_keys(mem: Engram) -> dict[str, str]:
    """Memory id -> "<conversation>/<turn>" of every LoCoMo turn."""
    out: dict[str, str] = {}
    offset, page_size = 0, 10_000  # list() returns at most 10,000 at a time
    while True:
        page = mem.list(agent=AGENT, limit=page_size, offset=offset)
        out |= {m.id: f"{m.metadata['conversation']}/{m.metadata['turn']}" for m in page if "turn" in m.metadata}
        if len(page) < page_size:
            return out
        offset += page_size


def measure(
    exact_dir: Path, index_dir: Path, emb: CachedEmbedder, limit: int | None, ann_threshold: int | None = None
) -> dict[str, Any]:
    """Every LoCoMo dev question against both copies, interleaved; recall, differences, latency."""
    questions = [(c.sample_id, q) for c in load_locomo() for q in c.questions][:limit]
    qvecs = emb.embed([q.text for _, q in questions])  # now cached: searches below skip the model
    flt = Filter(agent=AGENT)
    exact = Engram(exact_dir, embedder=emb, vectors="sync", ann_threshold=0)
    extra: dict[str, Any] = {} if ann_threshold is None else {"ann_threshold": ann_threshold}
    ann = Engram(index_dir, embedder=emb, vectors="sync", **extra)
    # LoCoMo turns by "<conversation>/<turn>" in each copy (in the delta layout each copy wrote its own ids).
    key_of = {name: _turn_keys(mem) for name, mem in (("exact", exact), ("index", ann))}
    load0 = _load()
    t0 = time.perf_counter()
    ann.store.search.vector_candidates(qvecs[0], flt, limit=50)  # loads, starts the background build
    index = _index_of(ann)
    index.wait_for_index()
    build_s = time.perf_counter() - t0
    ann.store.search.vector_candidates(qvecs[0], flt, limit=50)
    if not index.uses_ann or _index_of(exact).uses_ann:
        raise RuntimeError("the index copy must answer from the HNSW index and the exact copy must not")
    for v in qvecs[:10]:  # warm-up without touching: page cache, keyword index
        for mem in (exact, ann):
            mem.store.search.vector_candidates(v, flt, limit=50)
    systems = {"exact": exact, "index": ann}
    recall: dict[str, dict[int, list[float]]] = {s: {k: [] for k in KS} for s in systems}
    ms: dict[str, list[float]] = {s: [] for s in systems}
    vec_ms: dict[str, list[float]] = {s: [] for s in systems}
    r10, r50, same_top10, same_vec50 = [], [], 0, 0
    differing: list[dict[str, Any]] = []
    loads = [_load()[0]]
    for i, ((sample, q), v) in enumerate(zip(questions, qvecs, strict=True)):
        gold = [f"{sample}/{e}" for e in q.evidence]
        order = list(systems) if i % 2 == 0 else list(reversed(systems))
        top: dict[str, dict[int, list[str]]] = {}
        for name in order:
            mem = systems[name]
            top[name] = {}
            for k in KS:
                t = time.perf_counter()
                hits = mem.search(q.text, agent=AGENT, limit=k)
                ms[name].append((time.perf_counter() - t) * 1000)
                ranked = _turns(hits)
                recall[name][k].append(recall_at_k(ranked, gold, k))
                top[name][k] = ranked
        same_top10 += top["exact"][10] == top["index"][10]
        cands: dict[str, list[str]] = {}
        for name in order:
            t = time.perf_counter()
            found = systems[name].store.search.vector_candidates(v, flt, limit=50)
            cands[name] = [key_of[name].get(c.id, c.id) for c in found]  # distractor ids match across copies
            vec_ms[name].append((time.perf_counter() - t) * 1000)
        truth = cands["exact"]
        r10.append(len(set(cands["index"][:10]) & set(truth[:10])) / max(1, len(truth[:10])))
        r50.append(len(set(cands["index"]) & set(truth)) / max(1, len(truth)))
        same_vec50 += cands["exact"] == cands["index"]
        if any(recall["exact"][k][-1] != recall["index"][k][-1] for k in KS):
            # Where the gold turns sit in each copy's vector top 50 (None: not there), to tell why.
            differing.append(
                {
                    "question": q.text,
                    "category": LOCOMO_CATEGORIES[q.category],
                    "gold": gold,
                    **{f"{s}_recall@{k}": recall[s][k][-1] for s in systems for k in KS},
                    **{f"{s}_top10": top[s][10] for s in systems},
                    **{
                        f"{s}_vector_rank_of_gold": [cands[s].index(g) if g in cands[s] else None for g in gold]
                        for s in systems
                    },
                }
            )
        if i % 100 == 99:
            loads.append(_load()[0])
    cats = [q.category for _, q in questions]
    out: dict[str, Any] = {
        "questions": len(questions),
        "build_seconds": build_s,
        "uses_ann_after": bool(index.uses_ann),
        "delta_rows_after": len(index._exact),  # rows answered by the exact scan beside the graph
        "recall": {},
        "paired_difference_index_minus_exact": {},
        "questions_with_identical_top10": same_top10,
        "questions_where_recall_differs": differing,
        "vector_channel": {
            "recall_at_10_vs_exact": float(np.mean(r10)),
            "recall_at_50_vs_exact": float(np.mean(r50)),
            "questions_with_identical_top50": same_vec50,
            "top50_ms": {s: _latency(v) for s, v in vec_ms.items()},
        },
        "search_ms_without_query_embedding": {s: _latency(v) for s, v in ms.items()},
        "load_1min_start_and_every_100_questions": loads,
        "load_before": load0,
        "load_after": _load(),
    }
    for name in systems:
        per: dict[str, Any] = {}
        for k in KS:
            by_cat: dict[str, list[float]] = defaultdict(list)
            for c, r in zip(cats, recall[name][k], strict=True):
                by_cat[LOCOMO_CATEGORIES[c]].append(r)
            per[f"recall@{k}"] = {
                "overall": float(np.mean(recall[name][k])),
                **{cat: float(np.mean(v)) for cat, v in sorted(by_cat.items())},
            }
        out["recall"][name] = per
    for k in KS:
        out["paired_difference_index_minus_exact"][f"recall@{k}"] = paired_bootstrap(
            recall["index"][k], recall["exact"][k]
        )
    if len(index._exact) == 0:  # the graph holds every row: the sweep's exact truth is the whole store
        out["ef_sweep_graph_alone"] = ef_sweep(index._base, qvecs)
    exact.close()
    ann.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the stores in this directory")
    parser.add_argument("--layouts", default="one-agent", help="comma-separated: one-agent, split, delta")
    parser.add_argument("--max-memories", type=int, default=35_000, help="LoCoMo turns + distractors, at most")
    parser.add_argument("--questions", type=int, default=None, help="first N LoCoMo dev questions (default: all)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    emb = _embedder()
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}
    results["embedder"] = emb.model_id
    with tempfile.TemporaryDirectory(prefix="engram-scale-recall-") as tmp:
        for layout in filter(None, args.layouts.split(",")):
            root = (args.keep or Path(tmp)) / layout
            base, exact_dir, index_dir = root / "build", root / "exact", root / "index"
            part: dict[str, Any] = results.setdefault(layout, {})
            if not (root / "build.json").exists():
                shutil.rmtree(root, ignore_errors=True)
                root.mkdir(parents=True)
                part["store"] = build(base, emb, args.max_memories, layout)
                (root / "build.json").write_text(json.dumps(part["store"]) + "\n")
            else:
                part["store"] = json.loads((root / "build.json").read_text())
            # Fresh copies every run, so access bookkeeping of an earlier run does not carry over.
            for d in (exact_dir, index_dir):
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(base, d)
            shutil.rmtree(sidecar_dir(index_dir / "engram.db"), ignore_errors=True)
            threshold = None
            if layout == "delta":
                part["prepare"] = prepare_delta(exact_dir, index_dir, emb)
                threshold = DELTA_THRESHOLD
            part["measure"] = measure(exact_dir, index_dir, emb, args.questions, threshold)
            print(json.dumps({layout: part}, indent=1), flush=True)
    emb.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"load now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The search path at 100k memories, old against new, interleaved per query in one run.

Two parts, on copies of existing stores (opening may write, so never the originals):

* **latency** -- the 100k curve store of ``bench/scale.py`` (LoCoMo/LongMemEval turn texts,
  ``--store``): per LoCoMo dev question, the keyword channel through FTS5's ``bm25()`` (old) and
  through the cached-postings index (new, :mod:`engramdb.storage._kw_index`), then a whole
  ``Engram.search`` without the query embedding in the old and new configuration, each pair
  back to back so both see the same load; the 1-minute load average is written beside each.
  Also: do the two keyword paths return the same candidates (ids, order, scores)?
* **recall** -- keyword recall@50 of each question's evidence, every LoCoMo dev conversation
  among LongMemEval distractors up to 100k memories (the store ``bench/scale.py
  --keyword-recall`` builds; built once into ``--recall-store`` if missing), old and new.

* **whole search** (``--whole``, a copy of the 100k store with its HNSW sidecar) -- ``Engram.search``
  without the query embedding, per question interleaved: the keyword channel overlapped on the
  worker thread (the default), on the calling thread, and overlapped without the bookkeeping write,
  for new and then repeated questions, with CPU time beside wall time; the phases alone (each
  channel, fusion + fetch + ranking, the bookkeeping write); the same hits in both placements;
  and where the p95 tail comes from (searches made while the keyword index is still building, as
  in ``bench/scale.py --ann``'s loop, which does not wait for it).

* **query embedding** (``--query-embedding``) -- one short query through the default ``local`` embedder,
  batch 1, per LoCoMo question interleaved: the default (one onnxruntime run over both cores, ``workers=1``)
  against one single-threaded run per core (``workers=threads``), wall and CPU time
  with the load beside them; the vectors must be bit-identical. Also the batch rate on LoCoMo turns (64 per
  call, and 8 per call as a background queue's small batches), so a faster query is not paid on ingest.

* **access counts batched** (``--access-pair DIR``, the 100k store with its HNSW sidecar; copied once per
  variant beside ``--scratch``) -- one fresh process per variant, each on its own copy, the parent rotating
  which searches first for each LoCoMo question: ``old`` (the source tree ``--old-src``, bookkeeping written
  at return), ``sync`` (``access_flush_seconds = 0``), ``batched`` (the default, 1 s) and ``no_bookkeeping``
  (no write at all: the floor). Hits compared first (``touch=False``, one ``now``, before any count moves).

    python bench/search_path.py --store /tmp/h_kw/store --recall-store /tmp/h_kw/recall
    python bench/search_path.py --whole /tmp/copy_of_s100k
    python bench/search_path.py --query-embedding
    python bench/search_path.py --access-pair /tmp/s100k --old-src /tmp/old/src --scratch /tmp/ab --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from _data import load_locomo
from _report import write_json
from engramdb import Engram
from engramdb._util import utcnow
from engramdb.retrieval.ranking import fuse, rank
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite
from retrieval import AGENT, RESULTS_DIR, _latency, _load, _ms, machine
from scale import _embedder, _open_engram, _recall, _rss_mb, fill_recall_store

OUT = RESULTS_DIR / "search_path.json"
WHOLE_OUT = RESULTS_DIR / "search_path_whole.json"


def _search_of(mem: Any) -> Any:
    # The store's own channels (Engram may wrap them to wait for its background vector queue).
    return getattr(mem.store.search, "_inner", mem.store.search)


def _two_commits(recall: Any) -> Callable[..., None]:
    """The bookkeeping as it was: the access counts and the audit entry in two write transactions."""

    def bookkeep(ids: list[str], *, now: Any, agent: str | None, kinds: Any) -> None:
        recall._store.memories.touch(ids, at=now)
        recall._read("search", agent=agent, ids=ids, kinds=kinds)

    return bookkeep


@contextmanager
def _old(search: Any, recall: Any) -> Iterator[None]:
    """The search path as it was: FTS5 bm25() for keywords, two commits for the bookkeeping."""
    index, minimum = search.keyword_index, search.keyword_index.min_memories
    index.min_memories = None
    recall._bookkeep = _two_commits(recall)
    try:
        yield
    finally:
        index.min_memories = minimum
        del recall._bookkeep


#: Whole-search variants: as before; as now; now without any bookkeeping write (the ceiling of deferring
#: it); now but with the bookkeeping in two commits.
_VARIANTS = ("old", "new", "new_without_bookkeeping", "new_but_two_commits")


@contextmanager
def _variant(name: str, search: Any, recall: Any) -> Iterator[None]:
    if name == "old":
        with _old(search, recall):
            yield
        return
    if name == "new_without_bookkeeping":
        recall._bookkeep = lambda *a, **k: None
    elif name == "new_but_two_commits":
        recall._bookkeep = _two_commits(recall)
    try:
        yield
    finally:
        recall.__dict__.pop("_bookkeep", None)


def _bookkeeping(mem: Any, rounds: int = 300) -> dict[str, Any]:
    """A search's bookkeeping alone (10 ids' access counts and one audit entry): one commit against two, alternating."""
    recall = mem._recall
    ids = [m.id for m in mem.list(agent=AGENT, limit=200)]
    variants = {"one_commit": recall._bookkeep, "two_commits": _two_commits(recall)}
    ms: dict[str, list[float]] = {name: [] for name in variants}
    load_before = _load()
    for i in range(rounds):
        batch = ids[(i * 10) % 190 : (i * 10) % 190 + 10]
        now = utcnow()
        for name in sorted(variants, reverse=bool(i % 2)):
            ms[name].append(_ms(lambda n=name, b=batch, t=now: variants[n](b, now=t, agent=AGENT, kinds=None)))
    return {**{name: _latency(v) for name, v in ms.items()}, "load_before": load_before, "load_after": _load()}


def _wait_index(search: Any, probe: Callable[[], object]) -> float:
    """Trigger the keyword index build and wait for it; seconds taken."""
    t0 = time.perf_counter()
    probe()
    search.keyword_index.wait()
    probe()
    return time.perf_counter() - t0


def run_latency(store: Path, queries: int) -> dict[str, Any]:
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    mem = Engram(store, embedder=emb)
    search = _search_of(mem)
    recall = mem._recall  # the bench toggles its old/new path
    flt = Filter(agent=AGENT)
    first = query_terms(questions[0])
    build_s = _wait_index(search, lambda: search.keyword_candidates(first, flt, limit=50))
    for q in questions[:10]:  # warm-up: the model, the page cache, the query cache
        mem.search(q, agent=AGENT, limit=10)
    old_kw, new_kw, loads = [], [], []
    whole: dict[str, list[float]] = {name: [] for name in _VARIANTS}
    same_ids = same_order = 0
    max_score_diff = 0.0
    for i, q in enumerate(questions):
        terms = query_terms(q)
        emb.cache_clear()
        mem.search(q, agent=AGENT, limit=10)  # caches the query vector: every variant skips the model
        with _old(search, recall):
            t0 = time.perf_counter()
            before = search.keyword_candidates(terms, flt, limit=50)
            old_kw.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        after = search.keyword_candidates(terms, flt, limit=50)
        new_kw.append((time.perf_counter() - t0) * 1000)
        # Whole searches: every variant once per question, in a rotating order (none always runs first).
        for k in range(len(_VARIANTS)):
            name = _VARIANTS[(i + k) % len(_VARIANTS)]
            with _variant(name, search, recall):
                whole[name].append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
        same_ids += {c.id for c in before} == {c.id for c in after}
        same_order += [c.id for c in before] == [c.id for c in after]
        if before and after and len(before) == len(after):
            max_score_diff = max(max_score_diff, *(abs(a.score - b.score) for a, b in zip(before, after, strict=True)))
        if i % 50 == 0:
            loads.append(_load()[0])
    out = {
        "memories": mem.count(agent=AGENT),
        "queries": len(questions),
        "index_build_seconds": build_s,
        "keyword_old_fts5": _latency(old_kw),
        "keyword_new_index": _latency(new_kw),
        **{f"search_{name}": _latency(ms) for name, ms in whole.items()},
        "same_candidate_set": same_ids / len(questions),
        "same_candidate_order": same_order / len(questions),
        "max_score_difference": max_score_diff,
        "load_1min_samples": loads,
        "bookkeeping_alone": _bookkeeping(mem),
    }
    mem.close()
    return out


def run_keyword(store: Path, queries: int) -> dict[str, Any]:
    """The keyword channel alone on a (large) store, old against new: no Engram, so no vector matrix in memory."""
    questions = [query_terms(q.text) for c in load_locomo() for q in c.questions][:queries]
    rss = _rss_mb()
    db = open_sqlite(store)
    search = db.search
    flt = Filter(agent=AGENT)
    build_s = _wait_index(search, lambda: search.keyword_candidates(questions[0], flt, limit=50))
    rss_index = _rss_mb() - rss
    old_ms, new_ms, loads = [], [], []
    same = same_scores = 0
    for i, terms in enumerate(questions):
        minimum = search.keyword_index.min_memories
        search.keyword_index.min_memories = None
        t0 = time.perf_counter()
        before = search.keyword_candidates(terms, flt, limit=50)
        old_ms.append((time.perf_counter() - t0) * 1000)
        search.keyword_index.min_memories = minimum
        t0 = time.perf_counter()
        after = search.keyword_candidates(terms, flt, limit=50)
        new_ms.append((time.perf_counter() - t0) * 1000)
        same += [c.id for c in before] == [c.id for c in after]
        # Ties (identical texts score alike) may be cut or ordered differently: compare scores rank by rank.
        same_scores += len(before) == len(after) and all(
            abs(a.score - b.score) <= 1e-9 for a, b in zip(before, after, strict=True)
        )
        if i % 50 == 0:
            loads.append(_load()[0])
    memories = db.memories.count(Filter(agent=None))
    db.close()
    return {
        "memories": memories,
        "queries": len(questions),
        "index_build_seconds": build_s,
        "rss_after_build_mb": rss_index,
        "keyword_old_fts5": _latency(old_ms),
        "keyword_new_index": _latency(new_ms),
        "same_candidate_order": same / len(questions),
        "same_scores_rank_by_rank": same_scores / len(questions),
        "load_1min_samples": loads,
    }


def _build_recall_store(directory: Path) -> dict[str, tuple[str, str]]:
    """LoCoMo dev conversations among LongMemEval distractors, 100k memories (as bench/scale.py builds it)."""
    store = open_sqlite(directory)
    doc_of = fill_recall_store(store, 100_000, np.random.default_rng(1))
    store.close()
    (directory / "doc_of.json").write_text(json.dumps(doc_of))
    return doc_of


def run_recall(directory: Path) -> dict[str, Any]:
    if (directory / "doc_of.json").exists():
        doc_of = {k: tuple(v) for k, v in json.loads((directory / "doc_of.json").read_text()).items()}
    else:
        doc_of = _build_recall_store(directory)
    store = open_sqlite(directory)
    search = store.search
    flt = Filter(agent=AGENT)
    build_s = _wait_index(search, lambda: search.keyword_candidates(["caroline"], flt, limit=50))
    old, new, old_ms, new_ms = [], [], [], []
    load_before = _load()
    for conv in load_locomo():
        for q in conv.questions:
            if not q.evidence:
                continue
            terms = query_terms(q.text)
            gold = [(conv.sample_id, e) for e in q.evidence]
            minimum = search.keyword_index.min_memories
            search.keyword_index.min_memories = None
            t0 = time.perf_counter()
            before = search.keyword_candidates(terms, flt, limit=50) if terms else []
            old_ms.append((time.perf_counter() - t0) * 1000)
            search.keyword_index.min_memories = minimum
            t0 = time.perf_counter()
            after = search.keyword_candidates(terms, flt, limit=50) if terms else []
            new_ms.append((time.perf_counter() - t0) * 1000)
            old.append(_recall([doc_of.get(c.id, ("", "")) for c in before], gold))
            new.append(_recall([doc_of.get(c.id, ("", "")) for c in after], gold))
    store.close()
    return {
        "memories": 100_000,
        "questions": len(old),
        "index_build_seconds": build_s,
        "keyword_recall_at_50_old": float(np.mean(old)) * 100,
        "keyword_recall_at_50_new": float(np.mean(new)) * 100,
        "keyword_old_fts5": _latency(old_ms),
        "keyword_new_index": _latency(new_ms),
        "load_before": load_before,
        "load_after": _load(),
    }


#: Where the keyword channel runs (``HybridSearcher.overlap_keyword``); and the default without its bookkeeping write
#: (the ceiling of taking that write off the search's path).
_PLACEMENTS: dict[str, bool] = {"overlapped": True, "caller": False, "overlapped_no_bookkeeping": True}


def _phases(mem: Any, questions: Sequence[str], qvecs: Any) -> dict[str, Any]:
    """Each part of a search alone, per question: the two channels, then fusion + fetch + ranking on their output."""
    search, flt = mem.store.search, Filter(agent=AGENT)
    weights, now = mem._recall.weights, utcnow()
    ms: dict[str, list[float]] = {"keyword_channel": [], "vector_channel": [], "fusion_fetch_rank": []}
    for q, v in zip(questions, qvecs, strict=True):
        t0 = time.perf_counter()
        kw = search.keyword_candidates(query_terms(q), flt, limit=50)
        t1 = time.perf_counter()
        vec = search.vector_candidates(v, flt, limit=50)
        t2 = time.perf_counter()
        head = fuse(kw, vec, keyword_weight=weights.keyword)[:30]
        rank(head, mem.store.memories.get_many([f.id for f in head], flt), now=now, weights=weights)
        t3 = time.perf_counter()
        for name, (a, b) in zip(ms, ((t0, t1), (t1, t2), (t2, t3)), strict=True):
            ms[name].append((b - a) * 1000)
    return {name: _latency(v) for name, v in ms.items()}


def _tail(directory: Path, emb: Any, questions: Sequence[str]) -> dict[str, Any]:
    """A fresh open timed as bench/scale.py's --ann loop does (no wait for the keyword index): the slow searches."""
    mem = _open_engram(directory, emb, None)
    for q in questions[:10]:
        mem.search(q, agent=AGENT, limit=10)
    ready, ms = [], []
    for q in questions:
        ready.append(mem.store.search.keyword_index.ready())
        ms.append(_ms(lambda q=q: mem.search(q, agent=AGENT, limit=10)))
    mem.close()
    building = [m for m, r in zip(ms, ready, strict=True) if not r]
    built = [m for m, r in zip(ms, ready, strict=True) if r]
    slowest = sorted(range(len(ms)), key=lambda i: -ms[i])[: max(1, len(ms) // 20)]
    return {
        "all": _latency(ms),
        "while_the_keyword_index_builds": {"searches": len(building), **(_latency(building) if building else {})},
        "index_built": _latency(built),
        "slowest_5pct_while_building": sum(not ready[i] for i in slowest) / len(slowest),
    }


def run_whole(directory: Path, queries: int, rounds: int = 2) -> dict[str, Any]:
    """Whole searches at 100k (HNSW + keyword index ready), the keyword channel's placements interleaved."""
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    qvecs = emb.embed(questions)  # every search below finds its vector in the embedder's cache
    mem = _open_engram(directory, emb, None)
    search, recall, flt = mem.store.search, mem._recall, Filter(agent=AGENT)
    searcher = recall._searcher
    search.vector_candidates(qvecs[0], flt, limit=50)
    build_s = _wait_index(search, lambda: search.keyword_candidates(query_terms(questions[0]), flt, limit=50))
    for q in questions[:10]:
        mem.search(q, agent=AGENT, limit=10)
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    loads = [_load()[0]]
    names = list(_PLACEMENTS)
    for r in range(rounds):
        kind = "new" if r == 0 else "repeated"
        for i, q in enumerate(questions):
            for k in range(len(names)):  # a rotating order: no placement always runs first
                name = names[(i + k) % len(names)]
                searcher.overlap_keyword = _PLACEMENTS[name]
                if name.endswith("no_bookkeeping"):
                    recall._bookkeep = lambda *a, **k: None
                t0, c0 = time.perf_counter(), time.process_time()
                mem.search(q, agent=AGENT, limit=10)
                wall.setdefault(f"{kind}.{name}", []).append((time.perf_counter() - t0) * 1000)
                cpu.setdefault(f"{kind}.{name}", []).append((time.process_time() - c0) * 1000)
                recall.__dict__.pop("_bookkeep", None)
        loads.append(_load()[0])
    searcher.overlap_keyword = True
    # The same hits wherever the keyword channel runs (no bookkeeping between them: same access counts).
    same = 0
    now = utcnow()
    for q in questions:
        found = []
        for placement in (True, False):
            searcher.overlap_keyword = placement
            hits = searcher.search(q, flt, limit=10, now=now, touch=False)
            found.append([(h.memory.id, h.score, h.keyword_score, h.vector_score) for h in hits])
        same += found[0] == found[1]
    searcher.overlap_keyword = True
    out = {
        "memories": mem.count(agent=AGENT),
        "queries": len(questions),
        "keyword_index_build_seconds": build_s,
        "uses_ann": bool(getattr(getattr(search, "_index", None), "uses_ann", False)),
        "search_without_query_embedding": {
            k: {**_latency(v), "cpu_p50_ms": _latency(cpu[k])["p50_ms"]} for k, v in wall.items()
        },
        "phases": _phases(mem, questions, qvecs),
        "bookkeeping_alone": _bookkeeping(mem),
        "same_hits_every_placement": same / len(questions),
        "load_1min_samples": [*loads, _load()[0]],
    }
    mem.close()
    out["tail_fresh_open_no_wait"] = {**_tail(directory, emb, questions), "load_after": _load()[0]}
    return out


QUERY_OUT = RESULTS_DIR / "search_path_query_embedding.json"


def run_query_embedding(queries: int, rounds: int = 6) -> dict[str, Any]:
    """Batch-1 query embedding and batch rate: the default thread settings against one thread per run, interleaved."""
    from engramdb.embeddings.local import LocalEmbedder, _default_threads

    conversations = load_locomo()
    questions = [q.text for c in conversations for q in c.questions][:queries]
    turns = [d.content for c in conversations for d in c.docs]
    variants = {
        "default_one_run_over_all_cores": LocalEmbedder(),
        "one_single_threaded_run_per_core": LocalEmbedder(workers=_default_threads()),
    }
    reference = variants["default_one_run_over_all_cores"].embed(questions)
    identical = {name: bool((e.embed(questions[:50]) == reference[:50]).all()) for name, e in variants.items()}
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    same = 0
    loads = [_load()[0]]
    for i, q in enumerate(questions):
        for name in sorted(variants, reverse=bool(i % 2)):  # alternate which runs first
            t0, c0 = time.perf_counter(), time.process_time()
            vec = variants[name].embed([q])
            wall[name].append((time.perf_counter() - t0) * 1000)
            cpu[name].append((time.process_time() - c0) * 1000)
            same += name.startswith("one_single") and bool((vec[0] == reference[i]).all())
    loads.append(_load()[0])
    rate: dict[str, list[float]] = {}
    for r in range(rounds):
        for per_call in (64, 8):
            chunk = turns[r * 256 : (r + 1) * 256]
            for name in sorted(variants, reverse=bool(r % 2)):
                t0 = time.perf_counter()
                for start in range(0, len(chunk), per_call):
                    variants[name].embed(chunk[start : start + per_call])
                rate.setdefault(f"{name}.batches_of_{per_call}", []).append(len(chunk) / (time.perf_counter() - t0))
    loads.append(_load()[0])
    return {
        "questions": len(questions),
        "single_query": {n: {**_latency(v), "cpu_p50_ms": _latency(cpu[n])["p50_ms"]} for n, v in wall.items()},
        "single_query_vectors_bit_identical": f"{same}/{len(questions)}",
        "batch_vectors_bit_identical": identical,
        "turns_per_second_median": {k: float(np.median(v)) for k, v in rate.items()},
        "load_1min_samples": [*loads, _load()[0]],
    }


ACCESS_OUT = RESULTS_DIR / "search_path_access_s5.json"
#: variant -> settings of its Engram (None: the bookkeeping write removed).
_ACCESS_VARIANTS: dict[str, dict[str, float] | None] = {
    "old": {},
    "sync": {"access_flush_seconds": 0.0},
    "batched": {},
    "no_bookkeeping": None,
}


def access_child(directory: Path, variant: str) -> None:
    """One variant's process: JSON commands on stdin (warm, hits, search, close), one JSON answer a line."""
    emb = _embedder()
    questions = [q.text for c in load_locomo() for q in c.questions]
    extra = _ACCESS_VARIANTS[variant]
    mem = Engram(directory, embedder=emb, vectors="sync", **(extra or {}))
    recall, flt = mem._recall, Filter(agent=AGENT)
    if extra is None:
        recall._bookkeep = lambda *a, **k: None  # type: ignore[method-assign]
    for line in sys.stdin:
        cmd = json.loads(line)
        answer: Any = {}
        if cmd["op"] == "warm":  # without bookkeeping: every copy's counts stay as they were
            emb.embed(questions[: cmd["n"]])
            now = utcnow()
            for q in questions[:20]:
                recall._searcher.search(q, flt, limit=10, now=now, touch=False)
            mem.store.search.keyword_index.wait()  # type: ignore[attr-defined]
            for q in questions[:40]:
                recall._searcher.search(q, flt, limit=10, now=now, touch=False)
        elif cmd["op"] == "hits":
            hits = recall._searcher.search(cmd["q"], flt, limit=10, now=datetime.fromisoformat(cmd["now"]), touch=False)
            answer = [[h.memory.id, round(h.score, 9)] for h in hits]
        elif cmd["op"] == "search":
            t0, c0 = time.perf_counter(), time.process_time()
            mem.search(cmd["q"], agent=AGENT, limit=10)
            answer = {"wall": (time.perf_counter() - t0) * 1000, "cpu": (time.process_time() - c0) * 1000}
        else:
            t0 = time.perf_counter()
            mem.close()
            answer = {"close_ms": (time.perf_counter() - t0) * 1000}
        print(json.dumps(answer), flush=True)
        if cmd["op"] == "close":
            return


def run_access_pair(source: Path, scratch: Path, old_src: Path, queries: int, rounds: int) -> dict[str, Any]:
    """The variants of :data:`_ACCESS_VARIANTS`, each in its own process on its own copy, interleaved."""
    questions = [q.text for c in load_locomo() for q in c.questions][:queries]
    procs: dict[str, subprocess.Popen[str]] = {}
    here = Path(__file__).resolve().parent
    for name in _ACCESS_VARIANTS:
        copy = scratch / name
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy)
        src = old_src if name == "old" else here.parent / "src"
        env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{here}"}
        command = [sys.executable, __file__, "--access-child", f"{copy}={name}"]
        procs[name] = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(name: str, cmd: dict[str, Any]) -> Any:
        proc = procs[name]
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(json.dumps(cmd) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    names = list(procs)
    for name in names:
        ask(name, {"op": "warm", "n": queries})
    now = utcnow().isoformat()
    same = sum(len({json.dumps(ask(n, {"op": "hits", "q": q, "now": now})) for n in names}) == 1 for q in questions)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    loads = [_load()[0]]
    for r in range(rounds):
        for i, q in enumerate(questions):
            k = (i + r) % len(names)  # a rotating order: no variant always searches first
            for name in names[k:] + names[:k]:
                answer = ask(name, {"op": "search", "q": q})
                wall[name].append(answer["wall"])
                cpu[name].append(answer["cpu"])
        loads.append(_load()[0])
    closes = {n: ask(n, {"op": "close"})["close_ms"] for n in names}
    for proc in procs.values():
        proc.wait()
    for name in names:
        shutil.rmtree(scratch / name, ignore_errors=True)
    per = len(questions)
    return {
        "queries": per,
        "rounds": rounds,
        "same_hits_every_variant": f"{same}/{per}",
        "load_1min_samples": loads,
        "close_ms": closes,
        "search_without_query_embedding": {
            n: {
                **_latency(wall[n]),
                "cpu_p50_ms": statistics.median(cpu[n]),
                "cpu_mean_ms": statistics.fmean(cpu[n]),
                "p50_ms_per_round": [statistics.median(wall[n][r * per : (r + 1) * per]) for r in range(rounds)],
            }
            for n in names
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, default=None, help="a COPY of the 100k curve store directory")
    parser.add_argument("--recall-store", type=Path, default=None, help="the 100k keyword-recall store (built once)")
    parser.add_argument("--queries", type=int, default=300, help="LoCoMo questions timed")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--keyword-store", type=Path, default=None, help="a COPY of a large store: keywords only")
    parser.add_argument("--whole", type=Path, default=None, help="a COPY of the 100k store with its HNSW sidecar")
    parser.add_argument("--query-embedding", action="store_true", help="batch-1 query embedding, thread settings")
    parser.add_argument("--access-pair", type=Path, default=None, help="the 100k store: access counts batched")
    parser.add_argument("--old-src", type=Path, default=None, help="with --access-pair: the previous source tree")
    parser.add_argument("--scratch", type=Path, default=None, help="with --access-pair: where the copies go")
    parser.add_argument("--rounds", type=int, default=3, help="with --access-pair: passes over the questions")
    parser.add_argument("--access-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--out", type=Path, default=None, help="where the results go (default: the file of the mode run)"
    )
    args = parser.parse_args(argv)
    if args.access_child is not None:
        where, _, variant = args.access_child.rpartition("=")
        access_child(Path(where), variant)
        return 0
    if args.access_pair is not None:
        if args.old_src is None or args.scratch is None:
            parser.error("--access-pair needs --old-src and --scratch")
        found = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        found |= run_access_pair(args.access_pair, args.scratch, args.old_src, min(args.queries, 250), args.rounds)
        print(json.dumps(found, indent=1), file=sys.stderr)
        write_json(args.out or ACCESS_OUT, found)
        return 0
    if args.query_embedding:
        found = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        found |= run_query_embedding(args.queries)
        print(json.dumps(found, indent=1), file=sys.stderr)
        write_json(args.out or QUERY_OUT, found)
        return 0
    if args.whole is not None:
        whole = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        whole |= run_whole(args.whole, min(args.queries, 210))
        print(json.dumps(whole, indent=1), file=sys.stderr)
        write_json(args.out or WHOLE_OUT, whole)
        if args.store is None and args.keyword_store is None and args.recall_store is None:
            return 0
    results: dict[str, Any] = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if args.store is not None and not args.skip_latency:
        results["latency"] = run_latency(args.store, args.queries)
        print(json.dumps(results["latency"], indent=1), file=sys.stderr)
    if args.keyword_store is not None:
        results["keyword_only"] = run_keyword(args.keyword_store, args.queries)
        print(json.dumps(results["keyword_only"], indent=1), file=sys.stderr)
    if args.recall_store is not None:
        results["recall"] = run_recall(args.recall_store)
        print(json.dumps(results["recall"], indent=1), file=sys.stderr)
    write_json(args.out or OUT, results)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())

"""Issue 27: embedded search with the memories spread over 1, 50 and 1,000 tenants (agents or users), side by side.

Builds one store per size and spread (``--memories`` LoCoMo/LongMemEval turns as text, vectors from the
``static`` embedder; row ``i`` owned by agent ``t{i % N}``, or, for the user scope, by agent ``a`` with user
``u{i % N}``), cached under ``~/.cache/engramdb-bench/tenants``, and (``--others``) one ChromaDB collection and
one LanceDB table per size holding the same rows with a metadata column per spread (bench/_tenants_others.py).
Then, in one process and interleaved per question (every store sees the same load), each LoCoMo question is
asked by one tenant (``t{q % N}`` / ``u{q % N}``) of every store: the whole ``Engram.search`` (limit 10; the
query vector is already in the embedder's cache, so the query embedding is excluded), each channel alone
(``vector_candidates`` / ``keyword_candidates``, limit 50), and Chroma's and Lance's vector search with the
same tenant as their metadata filter (limit 10). Recall@10 of every vector search is against the exact top 10
among the tenant's rows, by score (a hit counts when its cosine reaches the exact 10th's: the texts repeat, and
identical texts have identical vectors, so ties among copies count as found). ``search_cpu`` is the process's CPU
time over the search (every thread of it: the keyword channel runs on a worker), a measure the machine's load
does not inflate as it does wall time. The first 5 searches after opening each store are timed apart (``first5``:
from the moment the store's query embeddings are cached, ~0.2 s after ``Engram(...)`` returns, before the next store
opens; the single first, the slowest of the five and their median), with ``Engram(...)``'s own time (``open_s``) and
when each open-time piece was ready, counted from the open's start (``ready_s``: the keyword postings, the vector
cache, the tenants' key sets); ``--evict`` first drops the stores' files from the page cache
(``posix_fadvise(DONTNEED)``, these files only), as after a reboot or when other programs pushed them out.
Prints tables, writes JSON.

``--corpus distinct`` builds the stores from texts that never repeat (LoCoMo turns and every LongMemEval_S dev turn
cut at 300 characters, de-duplicated: 170k texts), so every vector is distinct and none shares a graph node or
its disk: the stores are ``distinct-N-T``, the vectors ``vectors-distinct-N.npy``.

    python bench/tenants.py --memories 10000,100000 --scopes agent,user --others chroma,lance
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _data import iter_longmemeval, load_locomo
from _report import write_json
from _retrieval_speed import _scale_texts
from _tenants_others import Chroma, Lance, column, disk_bytes, owner
from engramdb import Engram
from engramdb._util import new_id, utcnow
from engramdb.models import Memory
from engramdb.recall import read_filter
from engramdb.retrieval.text import query_terms
from engramdb.storage.sqlite import open_sqlite

CACHE = Path.home() / ".cache" / "engramdb-bench" / "tenants"
_BATCH = 5000
_K = 10
Spread = tuple[str, int]


PREFIX = ""  # "distinct-" with --corpus distinct
#: How the measured stores are opened (--vectors): "sync" checks for memories without a vector before the open
#: returns (a count over every vector row: seconds to minutes at 1M), "background" (the default of Engram) after.
VECTORS = "sync"


def _dir(memories: int, scope: str, n: int) -> Path:
    return CACHE / (f"{PREFIX}{memories}-{n}" if scope == "agent" else f"{PREFIX}{memories}-u{n}")


def _distinct_texts(memories: int) -> list[str]:
    """``memories`` texts none of which repeats: LoCoMo turns and LongMemEval_S turns in 300-character pieces."""
    pool = dict.fromkeys(d.content for c in load_locomo() for d in c.docs)
    for item in iter_longmemeval():
        for doc in item.docs:
            for piece in textwrap.wrap(doc.content, 300):
                pool.setdefault(piece)
    texts = list(pool)
    if len(texts) < memories:
        raise SystemExit(f"only {len(texts)} distinct texts for {memories} memories")
    picks = np.random.default_rng(7).permutation(len(texts))[:memories]
    return [texts[i] for i in picks]


def corpus(memories: int) -> tuple[list[str], npt.NDArray[np.float32], str]:
    """The texts, their unit vectors (``static``) and the model id; the vectors cached beside the stores."""
    texts = _distinct_texts(memories) if PREFIX else _scale_texts(memories, np.random.default_rng(7))
    cached = CACHE / f"vectors-{PREFIX}{memories}.npy"
    with Engram(CACHE / "embedder", embedder="static", vectors="sync") as mem:
        model_id = mem.embedder.model_id
        if cached.exists():
            vecs = np.load(cached)
        else:
            vecs = np.asarray(mem.embedder.embed(texts), dtype=np.float32)
            np.save(cached, vecs)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return texts, vecs, model_id


def build(memories: int, spreads: list[Spread], texts: list[str], vecs: npt.NDArray[np.float32], model_id: str) -> None:
    """Every missing store, from the same texts and vectors."""
    for scope, n in spreads:
        directory = _dir(memories, scope, n)
        if (directory / "done").exists():
            continue
        start = time.perf_counter()
        if memories >= _DERIVE_FROM and _derive(memories, scope, n):
            print(f"derived {memories} over {n} {scope}s in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            continue
        store = open_sqlite(directory)
        try:
            for lo in range(0, memories, _BATCH):
                now = utcnow()
                batch = [
                    Memory(id=new_id(), agent=owner(scope, n, i) if scope == "agent" else "a",
                           user=None if scope == "agent" else owner(scope, n, i), kind="conversation",
                           content=texts[i], created_at=now, updated_at=now)
                    for i in range(lo, min(lo + _BATCH, memories))
                ]  # fmt: skip
                store.memories.add(batch, vecs[lo : lo + len(batch)], model_id=model_id, actor="bench")
        finally:
            store.close()
        with Engram(directory, embedder="static", vectors="sync") as mem:  # the HNSW sidecar, built once
            mem.search("warm up", agent="a", limit=10)
            mem.store.search._index.wait_for_index()
        (directory / "done").touch()
        print(f"built {memories} over {n} {scope}s in {time.perf_counter() - start:.1f} s", file=sys.stderr)


#: From this size a user store is derived from the 1-agent store instead of built (a 1M build: ~50 minutes).
_DERIVE_FROM = 1_000_000


def _derive(memories: int, scope: str, n: int) -> bool:
    """A user store made from the same size's 1-agent store: copied, every row re-owned in SQL (agent ``a``, user
    ``u{(rid - 1) % n}``: row ``i`` has rid ``i + 1``, as `build` writes them), the HNSW sidecar's agent name and
    epoch set to match. Same texts, vectors, graph and keyword postings as a build would give. False: no source."""
    source, directory = _dir(memories, "agent", 1), _dir(memories, scope, n)
    if scope != "user" or not (source / "done").exists():
        return False
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial)
    (partial / "done").unlink()
    conn = sqlite3.connect(partial / "engram.db", isolation_level=None)
    try:
        (rows, top) = conn.execute("SELECT count(*), max(rid) FROM memories").fetchone()
        if rows != memories or top != memories:
            raise SystemExit(f"{source}: rids are not 1..{memories}")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE memories SET agent = 'a', user_id = 'u' || ((rid - 1) % ?)", (n,))
        (epoch,) = conn.execute("SELECT value FROM meta WHERE key = 'vec_epoch'").fetchone()
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    current = partial / "engram.db.ann" / "CURRENT"
    meta = json.loads(current.read_text())
    if meta["agents"] != ["t0"]:
        raise SystemExit(f"{source}: sidecar agents {meta['agents']}")
    current.write_text(json.dumps({**meta, "agents": ["a"], "epoch": int(epoch)}))
    with Engram(partial, embedder="static", vectors="sync") as mem:  # migrations; postings in today's format
        mem.search("warm up", agent="a", user="u0", limit=10)
        mem.store.search.keyword_index.wait()
    partial.rename(directory)
    (directory / "done").touch()
    return True


def _p(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p95": float(np.percentile(values, 95)), "n": len(values)}


def _recall(scores: list[float], exact_kth: float) -> float:
    """Share of the top ``_K`` whose cosine reaches the exact ``_K``-th (ties by score count as found)."""
    return sum(1 for s in scores[:_K] if s >= exact_kth - 1e-4) / _K


def evict(directory: Path) -> None:
    """Drop ``directory``'s files from the page cache (clean pages only: written ones stay until flushed)."""
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _plain(mem: Engram) -> Any:
    """The SQLite store's own candidate source (with background vectors ``mem.store.search`` wraps it)."""
    return mem._plain_store.search


def _ask(mem: Engram, scope: str, tenant: str, query: str) -> None:
    if scope == "agent":
        mem.search(query, agent=tenant, limit=_K)
    else:
        mem.search(query, agent="a", user=tenant, limit=_K)


def measure(
    memories: int, spreads: list[Spread], questions: int, others: list[str], vecs: npt.NDArray[np.float32],
    texts: list[str],
) -> dict[str, Any]:  # fmt: skip
    qtexts = [q.text for c in load_locomo() for q in c.questions][:questions]
    opened: dict[Spread, Engram] = {}
    out: dict[str, Any] = {}
    first: dict[str, list[float]] = {}
    started: dict[str, float] = {}
    for spread in spreads:  # open each store and time its first searches before the next opens
        key = f"{spread[0]}{spread[1]}"
        started[key] = time.monotonic()
        mem = opened[spread] = Engram(_dir(memories, *spread), embedder="static", vectors=VECTORS)
        out[f"{key}/open_s"] = time.monotonic() - started[key]
        mem.embedder.embed(qtexts)  # each store's own cache: the query embedding is excluded below
        for i, q in enumerate(qtexts[:5]):
            c0, t0 = time.process_time(), time.perf_counter()
            _ask(mem, spread[0], owner(spread[0], spread[1], i), q)
            first.setdefault(key, []).append(1000 * (time.perf_counter() - t0))
            # The process's CPU meanwhile: the search's own and what the open's threads did beside it.
            first.setdefault(f"{key}/cpu", []).append(1000 * (time.process_time() - c0))
        out[f"{key}/first_at_s"] = time.monotonic() - started[key] - sum(first[key]) / 1000
        out[f"{key}/first5_cpu"] = first.pop(f"{key}/cpu")
    systems: list[Any] = []
    for name in others:
        cls = {"chroma": Chroma, "lance": Lance}[name]
        t0 = time.perf_counter()
        systems.append(cls(CACHE / f"{name}-{PREFIX}{memories}", texts, vecs, spreads))
        out[f"{name}/open_or_build_s"] = time.perf_counter() - t0
    times: dict[str, list[float]] = {}
    recalls: dict[str, list[float]] = {}
    try:
        qvecs = np.asarray(opened[spreads[0]].embedder.embed(qtexts), dtype=np.float32)
        qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
        for (scope, n), mem in opened.items():  # warm: the keyword postings and the index are in place
            _plain(mem).keyword_index.wait()
            for i, q in enumerate(qtexts[5:15]):
                _ask(mem, scope, owner(scope, n, i), q)
        # The exact answers come first: a matrix product just before a timed search leaves OpenBLAS's
        # threads spinning on the second core through it (~7 ms of CPU a search at 100k).
        rows = np.arange(memories)
        kths: dict[tuple[int, int], float] = {}
        for i, v in enumerate(qvecs):
            sims = vecs @ v
            for n in {n for _, n in opened}:  # agents and users of one count own the same rows
                mine = sims[rows % n == i % n]
                kths[i, n] = float(-np.partition(-mine, _K - 1)[_K - 1]) if mine.size >= _K else -1.0
        time.sleep(1.0)
        for i, (q, v) in enumerate(zip(qtexts, qvecs, strict=True)):
            terms = query_terms(q)
            for (scope, n), mem in opened.items():
                key = f"{scope}{n}"
                tenant = owner(scope, n, i)
                flt = read_filter(tenant, None, None) if scope == "agent" else read_filter("a", None, None, user=tenant)
                search = mem.store.search
                c0, t0 = time.process_time(), time.perf_counter()
                _ask(mem, scope, tenant, q)
                t1, c1 = time.perf_counter(), time.process_time()
                v0 = time.thread_time()
                found = search.vector_candidates(v, flt, limit=50)
                t2, v1 = time.perf_counter(), time.thread_time()
                search.keyword_candidates(terms, flt, limit=50)
                t3, v2 = time.perf_counter(), time.thread_time()
                times.setdefault(f"{key}/vector_cpu", []).append(1000 * (v1 - v0))
                times.setdefault(f"{key}/keyword_cpu", []).append(1000 * (v2 - v1))
                times.setdefault(f"{key}/search", []).append(1000 * (t1 - t0))
                times.setdefault(f"{key}/search_cpu", []).append(1000 * (c1 - c0))
                times.setdefault(f"{key}/vector", []).append(1000 * (t2 - t1))
                times.setdefault(f"{key}/keyword", []).append(1000 * (t3 - t2))
                kth = kths[i, n]
                recalls.setdefault(f"{key}/engramdb", []).append(_recall([c.score for c in found], kth))
                for system in systems:
                    t4 = time.perf_counter()
                    hits = system.search(v, column(scope, n), tenant, _K)
                    times.setdefault(f"{key}/{system.name}", []).append(1000 * (time.perf_counter() - t4))
                    exact = [float(np.einsum("j,j->", vecs[h], v)) for h in hits]
                    recalls.setdefault(f"{key}/{system.name}", []).append(_recall(exact, kth))
        for (scope, n), mem in opened.items():  # when each open-time piece was ready, from the open's start
            search = _plain(mem)
            # getattr: the same bench measures code from before these were recorded.
            at = {"keywords": getattr(search.keyword_index, "ready_at", None), **getattr(search, "warmed", {})}
            out[f"{scope}{n}/ready_s"] = {k: None if v is None else v - started[f"{scope}{n}"] for k, v in at.items()}
    finally:
        for mem in opened.values():
            mem.close()
        for system in systems:
            system.close()
    out.update({k: _p(v) for k, v in times.items()})
    out.update({f"{k}/first5": {**_p(v), "first": v[0], "max": max(v), "all": v} for k, v in first.items()})
    out.update({f"{k}/recall@10": statistics.fmean(v) for k, v in recalls.items()})
    for spread in spreads:
        directory = _dir(memories, *spread)
        sidecar = directory / "engram.db.ann"
        vec_files = sum(f.stat().st_size for f in sidecar.rglob("vectors.npy"))
        out[f"{spread[0]}{spread[1]}/disk"] = {
            "total": disk_bytes(directory),
            "database": sum(f.stat().st_size for f in directory.glob("engram.db*") if f.is_file()),
            "sidecar": disk_bytes(sidecar) if sidecar.exists() else 0,
            "sidecar_vectors": vec_files,
        }
    for name in others:
        out[f"{name}/disk"] = disk_bytes(CACHE / f"{name}-{PREFIX}{memories}")
    return out


def report(memories: int, spreads: list[Spread], others: list[str], res: dict[str, Any], load: str) -> None:
    print(f"\n{memories} memories, load {load}")
    head = "| tenants | search p50 / p95 | search CPU p50 | first (x warm) | max of first 5 | first 5 p50 |"
    head += " vector p50 / p95, R@10 |"
    head += " keyword p50 / p95 | vector / keyword CPU p50 |"
    print(head + "".join(f" {o} vector p50 / p95, R@10 |" for o in others))
    print("|---" * (9 + len(others)) + "|")
    for scope, n in spreads:
        key = f"{scope}{n}"
        s, c, f, v, k = (res[f"{key}/{part}"] for part in ("search", "search_cpu", "first5", "vector", "keyword"))
        line = (
            f"| {n} {scope}s | {s['p50']:.2f} / {s['p95']:.2f} | {c['p50']:.2f} | "
            f"{f['first']:.1f} ({f['first'] / s['p50']:.1f}x) | {f['max']:.1f} ({f['max'] / s['p50']:.1f}x) | "
            f"{f['p50']:.1f} ({f['p50'] / s['p50']:.1f}x) | "
            f"{v['p50']:.2f} / {v['p95']:.2f}, {res[f'{key}/engramdb/recall@10']:.3f} | "
            f"{k['p50']:.2f} / {k['p95']:.2f} | "
            f"{res[f'{key}/vector_cpu']['p50']:.2f} / {res[f'{key}/keyword_cpu']['p50']:.2f} |"
        )
        for o in others:
            t = res[f"{key}/{o}"]
            line += f" {t['p50']:.2f} / {t['p95']:.2f}, {res[f'{key}/{o}/recall@10']:.3f} |"
        print(line)
    for scope, n in spreads:
        key = f"{scope}{n}"
        ready = ", ".join(f"{k} {v:.2f}" for k, v in res[f"{key}/ready_s"].items() if v is not None)
        cpu = " / ".join(f"{c:.1f}" for c in res[f"{key}/first5_cpu"])
        print(f"{n} {scope}s: open {res[f'{key}/open_s']:.2f} s, first search at {res[f'{key}/first_at_s']:.2f} s; "
              f"ready (s from the open's start): {ready}; first five's process CPU ms {cpu}")  # fmt: skip
    disks = [f"{k.split('/')[0]} {v['total'] / 1e6:.0f} MB (sidecar vectors {v['sidecar_vectors'] / 1e6:.0f})"
             for k, v in res.items() if k.endswith("/disk") and isinstance(v, dict)]  # fmt: skip
    disks += [f"{o} {res[f'{o}/disk'] / 1e6:.0f} MB" for o in others]
    print("on disk: " + "; ".join(disks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", default="100000", help="sizes, comma-separated")
    parser.add_argument("--tenants", default="1,50,1000")
    parser.add_argument("--scopes", default="agent", help="agent, user or agent,user")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--others", default="", help="chroma, lance or chroma,lance: side by side")
    parser.add_argument("--label", default="now")
    parser.add_argument("--evict", action="store_true", help="drop the stores' pages from the page cache first")
    parser.add_argument("--corpus", choices=("repeated", "distinct"), default="repeated")
    parser.add_argument("--vectors", choices=("sync", "background"), default="sync", help="how the stores open")
    args = parser.parse_args()
    global PREFIX, VECTORS  # noqa: PLW0603 - one corpus and open mode per run
    PREFIX = "distinct-" if args.corpus == "distinct" else ""
    VECTORS = args.vectors
    spreads = [(s, int(n)) for s in args.scopes.split(",") for n in args.tenants.split(",")]
    others = [o for o in args.others.split(",") if o]
    results: dict[str, Any] = {}
    for memories in (int(m) for m in args.memories.split(",")):
        texts, vecs, model_id = corpus(memories)
        build(memories, spreads, texts, vecs, model_id)
        if args.evict:
            for spread in spreads:
                evict(_dir(memories, *spread))
        load = os.getloadavg()[0]
        res = measure(memories, spreads, args.questions, others, vecs, texts)
        span = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
        report(memories, spreads, others, res, span)
        results[str(memories)] = {"load": span, **res}
    write_json(
        Path(__file__).parent / "results" / f"tenants_{args.label}.json", {"args": vars(args), "results": results}
    )


if __name__ == "__main__":
    main()

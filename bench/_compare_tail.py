"""compare.py's 100k search tail, old against new in one run (``python bench/compare.py --tail-ab``).

The scale scenario of compare.py exactly (the same rows: LoCoMo turns and their perturbed copies, the same
``remember_many`` calls of 5,000, the background indexes built and waited for, 5 warm-up searches, then the
LoCoMo questions with ``limit=10`` and precomputed query vectors), for engramdb alone, five stores side by side:

- ``old``: the HNSW graph as faiss builds it (no island links) and the exact fallback that gathers every row first;
- ``new``: the graph with its islands linked (engramdb.storage._ann_links) and the in-place fallback scan;
- ``shuffle``: as ``new``, the rows added to the graph in a random order (engramdb.storage._ann._insertion_chunks)
  instead of store order;
- ``fill``: as ``shuffle``, and the sparse nodes' free level-0 slots filled with their nearest rows first
  (engramdb.storage._ann_fill; the store's build as it is now);
- ``exact``: no HNSW index at all (``ann_threshold`` above the store's size), the reference for the hits.

Per question the five search in a rotating order, so all see the same load; the 1-minute load average is
written beside every figure. Per search: wall time, the vector channel's time, the bookkeeping write's time,
whether the graph walk came back short (the exact fallback ran), and whether the access-count flusher's
transaction overlapped it. Hits: each variant's top 10 against the exact store's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import engramdb.storage._ann as ann
from _report import pct
from engramdb.embeddings import CachedEmbedder

VARIANTS = ("old", "new", "shuffle", "fill", "exact")
SLOW_MS = 20.0
#: The variants with a graph, each compared with ``exact``.
_GRAPHS = ("old", "new", "shuffle", "fill")


def _in_store_order(n: int) -> list[Any]:
    """The build's chunks before the random insertion order: rows in store order."""
    return [np.arange(start, min(start + ann._ADD_CHUNK, n)) for start in range(0, n, ann._ADD_CHUNK)]


def _old_scan(base: Any, query: Any, mask: Any, limit: int) -> tuple[Any, Any]:
    """The fallback scan before this change: every row gathered (copied) first, then scored."""
    rows = np.flatnonzero(mask) if mask is not None else np.arange(base.n)
    scores = np.einsum("ij,j->i", base.vectors[rows], query)
    k = min(limit, scores.size)
    top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    top = top[np.argsort(-scores[top], kind="stable")]
    return rows[top].astype(np.int64), scores[top]


class _Probe:
    """Per-search phase times of one engramdb store (wrapped methods; the search itself is unchanged)."""

    def __init__(self, mem: Any, *, old: bool) -> None:
        self.phase: dict[str, float] = {}
        self.flushes: list[tuple[float, float]] = []
        search = mem.store.search
        inner = getattr(search, "_inner", search)
        index = inner._index
        scan = _old_scan if old else type(index)._scan

        def counted_scan(base: Any, query: Any, mask: Any, limit: int) -> tuple[Any, Any]:
            self.phase["fallback"] = self.phase.get("fallback", 0.0) + 1.0
            return scan(base, query, mask, limit)

        index._scan = counted_scan  # an instance attribute: the static method it shadows takes the same arguments
        self._wrap(inner, "vector_candidates", "vector_ms")
        self._wrap(mem._recall, "_bookkeep", "bookkeep_ms")
        batch = mem._recall._accesses
        if batch is not None:
            commit = batch._commit

            def timed_commit(chunk: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return commit(chunk)
                finally:
                    self.flushes.append((t0, time.perf_counter()))

            batch._commit = timed_commit

    def _wrap(self, obj: Any, name: str, label: str) -> None:
        fn = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.phase[label] = self.phase.get(label, 0.0) + (time.perf_counter() - t0) * 1000.0

        setattr(obj, name, timed)


def run_tail_ab(
    compare: Any, tmp: Path, table: dict[str, Any], make_raw: Callable[[], CachedEmbedder], size: int, queries: int
) -> dict[str, Any]:
    """Build the five stores in compare's scale scenario and time the questions interleaved."""
    rng = np.random.default_rng(size)
    conversations = compare.load_locomo()
    pool = list(dict.fromkeys(d.content for c in conversations for d in c.docs))
    corpus = compare.scale_corpus(size, pool, table, rng)
    scale_table = dict(zip(corpus.texts, corpus.vectors, strict=True))
    asked = [(c, q) for c in conversations for q in c.questions]
    asked = asked[:: max(1, len(asked) // queries)][:queries]
    questions = [q.text for _, q in asked]
    # The evidence turns' texts: a row (``m<i>``) is the pool's turn i % len(pool) or a copy of it.
    gold = [{d.content for d in c.docs if d.id in set(q.evidence)} for c, q in asked]
    scale_table.update((q, table[q]) for q in questions)
    lookup = compare.Lookup(make_raw(), scale_table)
    embedder = CachedEmbedder(lookup, size=0)
    out: dict[str, Any] = {"memories": size, "questions": len(questions), "build": {}}
    systems: dict[str, Any] = {}
    probes: dict[str, _Probe] = {}
    linker, filler, chunks = ann.link_islands, ann.fill_sparse, ann._insertion_chunks
    for name in VARIANTS:
        system = compare.EngramSystem(tmp / f"tail_{name}", embedder)
        if name == "exact":
            system.overrides = {"ann_threshold": 10 * size}
        before = compare.load()
        t0 = time.perf_counter()
        system.add(corpus, None)
        ingest = time.perf_counter() - t0
        ann.link_islands = (lambda *_: 0) if name == "old" else linker  # type: ignore[assignment]
        ann.fill_sparse = filler if name == "fill" else (lambda *_: 0)  # type: ignore[assignment]
        if name in ("old", "new"):  # store order, as before
            ann._insertion_chunks = _in_store_order
        try:
            built = system.build_indexes(corpus) if name != "exact" else {}
        finally:
            ann.link_islands, ann.fill_sparse, ann._insertion_chunks = linker, filler, chunks
        out["build"][name] = {"ingest_s": ingest, **built, "load_before": before, "load_after": compare.load()}
        compare.log(f"tail A/B: {name} store ready ({out['build'][name]})")
        systems[name] = system
        probes[name] = _Probe(system.stores[corpus.name], old=name == "old")
    # Hits first, before any timed search moves an access count: the vector channel (top 50) and the whole
    # search (top 10) with the same ``now`` and no bookkeeping, per store.
    out["hits"] = _untouched_hits(systems, corpus.name, questions, table, compare.AGENT, pool, gold)
    for q in questions[: compare.WARMUP]:
        for name in VARIANTS:
            systems[name].search(corpus.name, "search", q, table[q], 10)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    hits: dict[str, list[list[str]]] = {name: [] for name in VARIANTS}
    loads = [compare.load()]
    for i, q in enumerate(questions):
        order = VARIANTS[i % len(VARIANTS) :] + VARIANTS[: i % len(VARIANTS)]
        for name in order:
            probe = probes[name]
            probe.phase = {}
            t0 = time.perf_counter()
            found = systems[name].search(corpus.name, "search", q, table[q], 10)
            t1 = time.perf_counter()
            overlap = any(a < t1 and b > t0 for a, b in probe.flushes)
            rows[name].append({"i": i, "ms": (t1 - t0) * 1000.0, **probe.phase, "flush_overlap": overlap})
            hits[name].append(found)
        if i % 50 == 49:
            loads.append(compare.load())
    out["load"] = {"min": min(loads), "max": max(loads), "samples": loads}
    out["search"] = {name: _summary(rows[name]) for name in VARIANTS}
    # The timed searches' hits also depend on each store's access counts (a ranking signal that the
    # searches themselves move, and that the background flush writes at its own moments): indicative only.
    out["timed_hits_vs_exact"] = {name: _agreement(hits[name], hits["exact"]) for name in _GRAPHS}
    out["rows"] = rows
    for system in systems.values():
        system.close()
    return out


def _untouched_hits(
    systems: dict[str, Any],
    corpus: str,
    questions: Sequence[str],
    table: dict[str, Any],
    agent: str,
    pool: Sequence[str],
    gold: Sequence[set[str]],
) -> dict[str, Any]:
    """Per store, each question's vector candidates and whole-search hits, without touching a count; and the
    search's recall@10 of the question's evidence turns (a copy of an evidence turn counts as finding it)."""
    from engramdb.storage.base import Filter

    now = datetime.now(UTC)
    flt = Filter(agent=agent)
    lists: dict[str, dict[str, list[list[str]]]] = {name: {"vector50": [], "search10": []} for name in VARIANTS}
    for q in questions:
        vec = np.asarray(table[q], dtype=np.float32)
        for name in VARIANTS:
            mem = systems[name].stores[corpus]
            search = mem.store.search
            inner = getattr(search, "_inner", search)
            # Memory ids differ between the stores: compare the turns (``metadata["turn"]``, the row's id).
            ids = [c.id for c in inner.vector_candidates(vec, flt, limit=50)]
            rows = mem.store.memories.get_many(ids)
            lists[name]["vector50"].append([str(rows[i].metadata["turn"]) for i in ids])
            found = mem._recall._searcher.search(q, flt, limit=10, now=now, touch=False, vector=vec)
            lists[name]["search10"].append([str(h.memory.metadata["turn"]) for h in found])
    recall = {}
    for name in VARIANTS:
        per = []
        for found, want in zip(lists[name]["search10"], gold, strict=True):
            if want:
                texts = {pool[int(turn[1:]) % len(pool)] for turn in found}
                per.append(len(texts & want) / len(want))
        recall[name] = statistics.fmean(per)
    return {
        f"{name}_vs_exact": {what: _agreement(lists[name][what], lists["exact"][what]) for what in lists[name]}
        for name in _GRAPHS
    } | {
        "new_vs_old": {what: _agreement(lists["new"][what], lists["old"][what]) for what in lists["new"]},
        "fill_vs_shuffle": {what: _agreement(lists["fill"][what], lists["shuffle"][what]) for what in lists["new"]},
        "evidence_recall_at_10": recall,
    }


def _summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ms = [r["ms"] for r in rows]
    slow = [r for r in rows if r["ms"] > SLOW_MS]
    return {
        "p50_ms": statistics.median(ms),
        "p95_ms": pct(ms, 0.95),
        "mean_ms": statistics.fmean(ms),
        "vector_p50_ms": statistics.median(r.get("vector_ms", 0.0) for r in rows),
        "fallback_scans": sum(1 for r in rows if r.get("fallback")),
        f"slow_over_{SLOW_MS:.0f}ms": len(slow),
        "slow_with_fallback": sum(1 for r in slow if r.get("fallback")),
        "slow_with_flush_overlap": sum(1 for r in slow if r["flush_overlap"]),
        "slow_in_bookkeeping": sum(1 for r in slow if r.get("bookkeep_ms", 0.0) > SLOW_MS / 2),
    }


def _agreement(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]) -> dict[str, float]:
    """How often list ``a`` equals reference ``b`` (ids in order), and the mean share of ``b`` that ``a`` holds."""
    same = sum(1 for x, y in zip(a, b, strict=True) if list(x) == list(y))
    overlap = [len(set(x) & set(y)) / max(1, len(y)) for x, y in zip(a, b, strict=True)]
    return {"identical": same, "of": len(a), "overlap": statistics.fmean(overlap)}


def markdown(res: dict[str, Any]) -> str:
    """The A/B table of :func:`run_tail_ab`."""
    load = res["load"]
    lines = [
        f"| compare.py 100k scenario, {res['questions']} questions (load {load['min']}-{load['max']}) "
        "| p50 / p95 / mean ms | vector channel p50 ms | exact fallback scans | searches > 20 ms "
        "(fallback / flush overlap / bookkeeping) |",
        "|---|---:|---:|---:|---|",
    ]
    for name in VARIANTS:
        s = res["search"][name]
        lines.append(
            f"| {name} | {s['p50_ms']:.2f} / {s['p95_ms']:.2f} / {s['mean_ms']:.2f} | {s['vector_p50_ms']:.2f} "
            f"| {s['fallback_scans']} | {s['slow_over_20ms']} ({s['slow_with_fallback']} / "
            f"{s['slow_with_flush_overlap']} / {s['slow_in_bookkeeping']}) |"
        )
    lines.append("")
    lines.append(
        "| hits, same questions, no bookkeeping | vector channel top 50: identical / overlap "
        "| search top 10: identical / overlap |"
    )
    lines.append("|---|---:|---:|")
    for key, label in (
        ("old_vs_exact", "old vs exact"),
        ("new_vs_exact", "new vs exact"),
        ("shuffle_vs_exact", "shuffle vs exact"),
        ("fill_vs_exact", "fill vs exact"),
        ("new_vs_old", "new vs old"),
        ("fill_vs_shuffle", "fill vs shuffle"),
    ):
        h = res["hits"][key]
        v, t = h["vector50"], h["search10"]
        lines.append(
            f"| {label} | {v['identical']}/{v['of']} / {v['overlap']:.3f} "
            f"| {t['identical']}/{t['of']} / {t['overlap']:.3f} |"
        )
    rec = res["hits"]["evidence_recall_at_10"]
    lines.append(
        "\nrecall@10 of the questions' evidence turns (a copy counts): "
        + ", ".join(f"{name} {100 * rec[name]:.1f}" for name in VARIANTS)
    )
    return "\n".join(lines)

"""Ingest benchmark: background vectors against sync vectors, side by side in one run.

Per mode (setting ``vectors``: "background", "sync"), on a fresh on-disk SQLite store with the
real local model and no embedding cache (the same texts go through both modes):

* ``remember_conversation``: ``remember`` latency per call (p50/p95), kind="conversation";
* ``remember_default``: the same with the default kind (checked for near-duplicates: embeds first);
* ``remember_many``: acknowledged items/s in batches, and items/s until flushed;
* ``remember_then_search``: one remember then a search of its text (read-your-writes cost);
* ``end_to_end``: every LoCoMo dev turn remembered one call at a time, then ``flush()``: turns/s
  into a store searchable by meaning.

The 1-minute load average is written beside every timing (the machine is shared).

    python bench/ingest.py                      # full run -> bench/results/ingest.json
    python bench/ingest.py --quick              # fewer texts, for a smoke run
    python bench/ingest.py --embedders local,static --rounds 3 --out bench/results/ingest_static.json

``--storage-path`` measures the storage path alone instead (vectors known in advance, as
``bench/compare.py`` does), optionally A/B across source trees: see ``bench/_ingest_storage.py``.

    python bench/ingest.py --storage-path --trees before=/tmp/old/src,after=src --rounds 3 \
        --out bench/results/ingest_storage.json

``--embedders`` compares embedders instead (each an ``embedder`` setting): only the end-to-end sections
(one ``remember`` per turn, and ``remember_many`` in calls of ``--batch``, each then ``flush()``), on fresh
stores, interleaved embedder by embedder over ``--rounds`` rounds so the load hits them alike. A derived
embedder's first use (the static table) is timed apart, before the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _ingest_storage as storage
from _data import iter_longmemeval, load_locomo
from _report import pct
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder

MODES = ("background", "sync")
RESULTS = Path(__file__).parent / "results" / "ingest.json"
SRC = Path(__file__).resolve().parents[1] / "src"


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def latencies(samples_ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(samples_ms, 0.50), 3),
        "p95_ms": round(pct(samples_ms, 0.95), 3),
        "mean_ms": round(statistics.fmean(samples_ms), 3),
        "n": len(samples_ms),
    }


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def per_call(mem: Engram, texts: Sequence[str], **kwargs: Any) -> dict[str, Any]:
    load = load1()
    samples = [timed(lambda t=t: mem.remember(t, agent="bench", force=False, **kwargs)) for t in texts]
    flush_ms = timed(mem.flush)
    return {**latencies(samples), "flush_after_ms": round(flush_ms, 1), "load1": load}


def batched(mem: Engram, texts: Sequence[str], *, size: int) -> dict[str, Any]:
    load = load1()
    start = time.perf_counter()
    for i in range(0, len(texts), size):
        mem.remember_many([{"content": t, "agent": "bench", "kind": "conversation"} for t in texts[i : i + size]])
    acked = time.perf_counter() - start
    mem.flush()
    flushed = time.perf_counter() - start
    return {
        "items": len(texts),
        "batch": size,
        "acknowledged_per_s": round(len(texts) / acked, 1),
        "flushed_per_s": round(len(texts) / flushed, 1),
        "load1": load,
    }


def read_your_writes(mem: Engram, texts: Sequence[str]) -> dict[str, Any]:
    load = load1()
    pairs: list[float] = []
    found = 0
    for t in texts:
        start = time.perf_counter()
        m = mem.remember(t, agent="ryw", kind="conversation")
        hits = mem.search(t, agent="ryw", limit=1)
        pairs.append((time.perf_counter() - start) * 1e3)
        found += bool(hits) and hits[0].memory.id == m.id
    return {**latencies(pairs), "found_first": found, "load1": load}


def end_to_end(mem: Engram, texts: Sequence[str]) -> dict[str, Any]:
    load = load1()
    start = time.perf_counter()
    for t in texts:
        mem.remember(t, agent="e2e", kind="conversation")
    acked = time.perf_counter() - start
    mem.flush()
    total = time.perf_counter() - start
    pending = mem.store.vectors.count_stale(mem.embedder.model_id)
    return {
        "turns": len(texts),
        "acknowledged_s": round(acked, 2),
        "searchable_s": round(total, 2),
        "turns_per_s": round(len(texts) / total, 1),
        "pending_after_flush": pending,
        "load1_start": load,
        "load1_end": load1(),
    }


def run_mode(mode: str, embedder: Embedder, turns: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    n = args.per_call
    # Distinct slices for each section so no near-duplicate merge or cache makes one cheaper.
    conv, default, many, ryw = turns[:n], turns[n : 2 * n], turns[2 * n : 2 * n + args.many], turns[:100]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        with Engram(Path(tmp) / "s", embedder=embedder, vectors=mode) as mem:
            mem.remember("warm up", agent="bench", kind="conversation")
            mem.flush()
            out["remember_conversation"] = per_call(mem, conv, kind="conversation")
            print(f"{mode}: conversation {out['remember_conversation']}", file=sys.stderr, flush=True)
            out["remember_default"] = per_call(mem, default)
            print(f"{mode}: default kind {out['remember_default']}", file=sys.stderr, flush=True)
            out["remember_many"] = batched(mem, many, size=args.batch)
            print(f"{mode}: remember_many {out['remember_many']}", file=sys.stderr, flush=True)
            out["remember_then_search"] = read_your_writes(mem, [f"{t} (again)" for t in ryw])
            print(f"{mode}: remember then search {out['remember_then_search']}", file=sys.stderr, flush=True)
        with Engram(Path(tmp) / "e2e", embedder=embedder, vectors=mode) as mem:
            out["end_to_end"] = end_to_end(mem, turns)
            print(f"{mode}: end to end {out['end_to_end']}", file=sys.stderr, flush=True)
    return out


def compare_embedders(names: Sequence[str], turns: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    embedders: dict[str, Embedder] = {}
    first_use: dict[str, Any] = {}
    for name in names:
        embedders[name] = make_embedder(load_settings(embedder=name, embed_cache_size=0))
        load, start = load1(), time.perf_counter()
        embedders[name].embed(["warm the model up"])
        inner = getattr(embedders[name], "inner", None)
        first_use[name] = {
            "seconds": round(time.perf_counter() - start, 2),
            "derive_seconds": getattr(inner, "derive_seconds", None),
            "load1": load,
        }
        print(f"{name}: first use {first_use[name]}", file=sys.stderr, flush=True)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {m: [] for m in MODES} for n in names}
    for rnd in range(args.rounds):
        for mode in MODES:
            for name in names:
                with tempfile.TemporaryDirectory() as tmp:
                    with Engram(Path(tmp) / "e2e", embedder=embedders[name], vectors=mode) as mem:
                        one = end_to_end(mem, turns)
                    with Engram(Path(tmp) / "many", embedder=embedders[name], vectors=mode) as mem:
                        many = batched(mem, turns, size=args.batch)
                runs[name][mode].append({"one_call_per_turn": one, "remember_many": many})
                print(
                    f"round {rnd + 1} {mode} {name}: {one['turns_per_s']} turns/s one call each, "
                    f"{many['flushed_per_s']} with remember_many (load {one['load1_start']})",
                    file=sys.stderr,
                    flush=True,
                )
    summary = {
        name: {
            mode: {
                "one_call_per_turn_median": statistics.median(r["one_call_per_turn"]["turns_per_s"] for r in rs),
                "remember_many_flushed_median": statistics.median(r["remember_many"]["flushed_per_s"] for r in rs),
                "remember_many_acknowledged_median": statistics.median(
                    r["remember_many"]["acknowledged_per_s"] for r in rs
                ),
                "load1": [r["one_call_per_turn"]["load1_start"] for r in rs],
            }
            for mode, rs in by_mode.items()
        }
        for name, by_mode in runs.items()
    }
    return {
        "models": {n: e.model_id for n, e in embedders.items()},
        "first_use": first_use,
        "summary": summary,
        "runs": runs,
    }


def _turns(source: str) -> list[str]:
    """The texts to ingest: LoCoMo's dev turns, or the first N distinct LongMemEval_S dev turns."""
    if source == "locomo":
        return [d.content for c in load_locomo() for d in c.docs]
    name, _, count = source.partition(":")
    if name != "longmemeval" or not count.isdigit():
        raise SystemExit(f"--turns: expected 'locomo' or 'longmemeval:N', not {source!r}")
    seen: dict[str, None] = {}
    for question in iter_longmemeval():
        for doc in question.docs:
            seen.setdefault(doc.content)
            if len(seen) >= int(count):
                return list(seen)
    return list(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer texts (smoke run)")
    parser.add_argument("--per-call", type=int, default=300, help="single remember calls per kind")
    parser.add_argument("--many", type=int, default=1000, help="items for remember_many")
    parser.add_argument("--batch", type=int, default=100, help="remember_many batch size")
    parser.add_argument("--embedders", default="", help="compare these embedder settings end to end (comma-separated)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of --embedders")
    parser.add_argument(
        "--turns",
        default="locomo",
        help="with --embedders: 'locomo' (every dev turn) or 'longmemeval:N' (the first N distinct dev turns, long)",
    )
    parser.add_argument("--storage-path", action="store_true", help="the storage path alone (vectors known)")
    parser.add_argument("--trees", default="", help="with --storage-path: name=SRC,... source trees to compare")
    parser.add_argument("--storage-child", default="", help=argparse.SUPPRESS)  # one run, in a child process
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.storage_child:
        print(json.dumps(storage.run_once(args.storage_child)))
        return
    if args.storage_path:
        pairs = [t.split("=", 1) for t in args.trees.split(",") if t] or [["working tree", str(SRC)]]
        trees = {name: str(Path(path).resolve()) for name, path in pairs}
        measured = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "what": "remember_many(kind='conversation') + flush(), every LoCoMo turn, vectors known in advance",
            **storage.compare_trees(trees, args.rounds),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(measured, indent=2) + "\n")
        print(json.dumps(measured["summary"], indent=2))
        return
    if args.quick:
        args.per_call, args.many = 60, 200
    turns = _turns(args.turns)
    if args.quick:
        turns = turns[:600]
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    if names:
        compared: dict[str, Any] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "turns": args.turns,
            "texts": len(turns),
            "mean_characters": round(statistics.fmean(len(t) for t in turns), 1),
            "batch": args.batch,
            "load1_start": load1(),
            **compare_embedders(names, turns, args),
            "load1_end": load1(),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(compared, indent=2) + "\n")
        print(json.dumps(compared["summary"], indent=2))
        return
    # No embedding cache: both modes embed every text (the sections reuse texts across modes).
    embedder = make_embedder(load_settings(embed_cache_size=0))
    embedder.embed(["warm the model up"])
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "model": embedder.model_id,
        "locomo_dev_turns": len(turns),
        "load1_start": load1(),
        "settings": {
            "per_call": args.per_call,
            "many": args.many,
            "batch": args.batch,
            "vector_batch_size": load_settings().vector_batch_size,
        },
        "modes": {mode: run_mode(mode, embedder, turns, args) for mode in MODES},
    }
    results["load1_end"] = load1()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

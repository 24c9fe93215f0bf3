"""What user/session scopes and ``as_of`` cost a search (issue 23), SQLite store, one run, interleaved.

Builds a store of ``--memories`` memories of one agent: ``--own`` of them the agent's own (no user), the
rest spread over ``--users`` users with ``--sessions`` threads each, plus superseded values of one keyed
fact per user. Then, per query (interleaved, so every variant sees the same load), the vector channel
(``store.search.vector_candidates``, the query embedding excluded) and the keyword channel under: no scope,
``user=U``, ``user=U, session=S`` and ``user=U, as_of=T``. Prints p50/p90 in ms and writes JSON.

    python bench/scopes.py --memories 100000 --users 1000 --own 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from _report import write_json
from engramdb import Engram
from engramdb._util import new_id
from engramdb.models import Memory
from engramdb.recall import read_filter

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = [
    "deploy", "freeze", "release", "billing", "token", "cache", "catalog",
    "latency", "spam", "reset", "password", "trip", "hotel", "flight",
]  # fmt: skip


def _memory(n: int, rng: np.random.Generator, *, user: str | None, session: str | None) -> Memory:
    words = " ".join(rng.choice(WORDS, size=6))
    at = T0 + timedelta(minutes=n)
    return Memory(
        id=new_id(),
        agent="bot",
        kind="episode",
        content=f"{words} {n}",
        created_at=at,
        updated_at=at,
        user=user,
        session=session,
        occurred_at=at,
    )


def build(location: Path, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    with Engram(location, embedder="static", vectors="sync") as mem:
        dim, model = mem.embedder.dim, mem.embedder.model_id
        batch: list[Memory] = []
        for n in range(args.memories):
            if n < args.own:
                m = _memory(n, rng, user=None, session=None)
            else:
                u = int(rng.integers(args.users))
                m = _memory(n, rng, user=f"u{u}", session=f"u{u}-s{int(rng.integers(args.sessions))}")
            batch.append(m)
            if len(batch) == 5000 or n == args.memories - 1:
                vecs = rng.standard_normal((len(batch), dim)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                mem.store.memories.add(batch, vecs, model_id=model, actor="bench")
                batch = []
        # One keyed fact per user that changed once: its old value is superseded.
        for u in range(args.users):
            mem.remember(f"u{u} lives in Lisbon", agent="bot", user=f"u{u}", key="home", at=T0)
            mem.remember(f"u{u} lives in Berlin", agent="bot", user=f"u{u}", key="home", at=T0 + timedelta(days=9))


def measure(location: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(11)
    out: dict[str, list[float]] = {}
    with Engram(location, embedder="static", vectors="sync") as mem:
        variants = {
            "no scope": {},
            "user": {"user": "u1"},
            "user+session": {"user": "u1", "session": "u1-s0"},
            "user+as_of": {"user": "u1", "as_of": (T0 + timedelta(days=3)).isoformat()},
        }
        dim = mem.embedder.dim
        for _ in range(3):  # warm the caches (vector matrix, keyword postings)
            q = rng.standard_normal(dim).astype(np.float32)
            mem.store.search.vector_candidates(q / np.linalg.norm(q), read_filter("bot", None, None), limit=50)
        # Measure the steady state: the HNSW sidecar and the keyword postings built (both build in the background).
        search: Any = mem.store.search
        search.keyword_candidates(["deploy"], read_filter("bot", None, None), limit=5)
        search.keyword_index.wait(timeout=600)
        search._index.wait_for_index(timeout=600)
        for _ in range(args.queries):
            q = rng.standard_normal(dim).astype(np.float32)
            q /= np.linalg.norm(q)
            terms = list(rng.choice(WORDS, size=2))
            for name, scope in variants.items():
                flt = read_filter("bot", None, None, **scope)
                start = time.perf_counter()
                mem.store.search.vector_candidates(q, flt, limit=50)
                out.setdefault(f"vector, {name}", []).append(1000 * (time.perf_counter() - start))
                start = time.perf_counter()
                mem.store.search.keyword_candidates(terms, flt, limit=50)
                out.setdefault(f"keyword, {name}", []).append(1000 * (time.perf_counter() - start))
    return {k: {"p50": statistics.median(v), "p90": float(np.percentile(v, 90)), "n": len(v)} for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--own", type=int, default=2_000, help="memories of the agent itself (no user)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="engram-scopes-"))
    location = root / "store"
    if not location.exists():
        start = time.perf_counter()
        build(location, args)
        print(f"built {args.memories} memories in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    results = measure(location, args)
    load = os.getloadavg()[0]
    print(f"{args.memories} memories, {args.users} users, {args.own} of the agent's own; 1-min load {load:.1f}")
    print("| channel, scope | p50 ms | p90 ms |\n|---|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['p50']:.2f} | {r['p90']:.2f} |")
    write_json(
        Path(__file__).parent / "results" / "scopes.json",
        {"args": {k: str(v) for k, v in vars(args).items()}, "load": load, "results": results},
    )


if __name__ == "__main__":
    main()

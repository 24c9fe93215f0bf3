"""Whole ``Engram.search`` latency on an existing store, the query embedding excluded.

Each question is asked once first (its vector then sits in the embedder's cache, and the caches of the store
are warm), then ``--rounds`` times per agent; prints p50 / p95 per agent and writes JSON. Meant for a store
another bench built (e.g. ``bench/scale_pg.py``'s embedded side, 100k LoCoMo turns over 10 agents):

    python bench/search_idle.py /path/to/store --agents agent-3,agent-7
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _report import pct, write_json
from engramdb import Engram

QUESTIONS = (
    "when did she move to the new apartment",
    "what does he like to cook",
    "trip to paris last summer",
    "adopted a dog",
    "job interview at the bank",
    "painting class on weekends",
    "her sister's wedding",
    "running a marathon",
    "learning to play guitar",
    "volunteering at the shelter",
    "what books does she read",
    "camping with the kids",
    "new car purchase",
    "birthday party plans",
    "moving to another city",
    "pottery workshop",
    "charity run for cancer",
    "favorite band concert",
    "support group meeting",
    "school project",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--agents", default="agent-3,agent-7")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--label", default="now")
    args = parser.parse_args()
    agents = [a for a in args.agents.split(",") if a]
    results: dict[str, dict[str, float]] = {}
    with Engram(args.store, create=False) as mem:
        for q in QUESTIONS:
            for agent in agents:
                mem.search(q, agent=agent, limit=10)
        for agent in agents:
            times: list[float] = []
            for _ in range(args.rounds):
                for q in QUESTIONS:
                    start = time.perf_counter()
                    mem.search(q, agent=agent, limit=10)
                    times.append((time.perf_counter() - start) * 1000)
            results[agent] = {
                "n": len(times),
                "p50_ms": round(statistics.median(times), 2),
                "p95_ms": round(pct(times, 0.95), 2),
            }
            print(f"{agent}: n {len(times)}, p50 {results[agent]['p50_ms']} ms, p95 {results[agent]['p95_ms']} ms")
    load = os.getloadavg()[0]
    out = Path(__file__).parent / "results" / f"search_idle_{args.label}.json"
    print(write_json(out, {"store": str(args.store), "load": load, "agents": results}))


if __name__ == "__main__":
    main()

"""Learning per user (issue 23): what ``user=`` costs ``mem.learning.suggest``, and what it is worth.

Builds one agent's outcome records: ``--users`` users, each with ``--per-user`` decisions over a few task
families, where each user has a best action of their own per family (it succeeds 85% of the time for them,
the others 35%), plus ``--own`` decisions of the agent itself (no user, every action at 50%). Records are
written as ``mem.learning.record`` writes them (a ``decision`` memory with its action and outcome in the
metadata), batched through ``remember_many``. Then, per query (interleaved, same load): ``suggest`` without
a user (the agent's learning, every user's outcomes) and ``suggest(user=U)``. Prints p50/p90 in ms and how
often the top option is U's own best action, and writes JSON.

    python bench/learning_users.py --users 200 --per-user 80 --own 200 --queries 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from _report import write_json
from engramdb import Engram

ACTIONS = ("retry", "rollback", "restart", "scale-out")
FAMILIES = (
    "the nightly deploy of the {s} service failed",
    "the {s} service answers slowly at peak time",
    "the {s} database ran out of connections",
    "a customer of the {s} team cannot log in",
)
SERVICES = ("billing", "search", "checkout", "catalog", "inventory", "payments", "shipping", "profile")


def _decision(text: str, action: str, worked: bool, user: str | None) -> dict[str, Any]:
    outcome = "success" if worked else "failure"
    meta = {"action": action, "outcome": outcome, "success": 1.0 if worked else 0.0, "alternatives": []}
    return {
        "content": text,
        "agent": "assistant",
        "kind": "decision",
        "tags": [f"action:{action}"],
        "metadata": meta,
        "user": user,
    }


def build(mem: Engram, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, list[str]]:
    best: dict[str, list[str]] = {}
    items: list[dict[str, Any]] = []
    for u in range(args.users):
        user = f"user{u}"
        best[user] = [str(a) for a in rng.choice(ACTIONS, size=len(FAMILIES))]
        for _ in range(args.per_user):
            f = int(rng.integers(len(FAMILIES)))
            action = str(rng.choice(ACTIONS))
            rate = 0.85 if action == best[user][f] else 0.35
            text = FAMILIES[f].format(s=rng.choice(SERVICES))
            items.append(_decision(text, action, bool(rng.random() < rate), user))
    for _ in range(args.own):
        f = int(rng.integers(len(FAMILIES)))
        items.append(
            _decision(
                FAMILIES[f].format(s=rng.choice(SERVICES)), str(rng.choice(ACTIONS)), bool(rng.random() < 0.5), None
            )
        )
    order = rng.permutation(len(items))
    for start in range(0, len(items), 2000):
        mem.remember_many([items[i] for i in order[start : start + 2000]])
    mem.flush()
    return best


def _pcts(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=10)
    return {"p50": round(statistics.median(values), 2), "p90": round(q[-1], 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory(prefix="learning-users-") as tmp:
        location = Path(tmp) / "store"
        with Engram(location, embedder="static", vectors="sync") as mem:
            t0 = time.perf_counter()
            best = build(mem, args, rng)
            built = time.perf_counter() - t0
            times: dict[str, list[float]] = {"agent": [], "user": []}
            hits = {"agent": 0, "user": 0}
            users = list(best)
            for q in range(args.queries):
                user = users[int(rng.integers(len(users)))]
                f = q % len(FAMILIES)
                context = FAMILIES[f].format(s=rng.choice(SERVICES))
                for variant in ("agent", "user"):
                    scope = user if variant == "user" else None
                    t = time.perf_counter()
                    s = mem.learning.suggest(context, agent="assistant", user=scope, options=list(ACTIONS))
                    times[variant].append((time.perf_counter() - t) * 1000)
                    if s.options and s.options[0].action == best[user][f]:
                        hits[variant] += 1
    rows = {v: {**_pcts(times[v]), "top_is_users_best": round(hits[v] / args.queries, 3)} for v in ("agent", "user")}
    return {
        "decisions": args.users * args.per_user + args.own,
        "users": args.users,
        "build_s": round(built, 1),
        "queries": args.queries,
        "load": round(os.getloadavg()[0], 1),
        "suggest": rows,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--per-user", type=int, default=80)
    p.add_argument("--own", type=int, default=200)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="20 users, 80 each, 40 own, 40 queries")
    args = p.parse_args(argv)
    if args.quick:
        args.users, args.per_user, args.own, args.queries = 20, 80, 40, 40
    out = run(args)
    print(f"{out['decisions']} decisions, {out['users']} users, built in {out['build_s']} s, load {out['load']}")
    print("| suggest | p50 ms | p90 ms | top option is the user's own best |")
    print("|---|---:|---:|---:|")
    for variant, label in (("agent", "no user (the agent's learning)"), ("user", "`user=U`")):
        r = out["suggest"][variant]
        print(f"| {label} | {r['p50']} | {r['p90']} | {r['top_is_users_best']:.1%} |")
    write_json(Path(__file__).parent / "results" / "learning_users.json", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

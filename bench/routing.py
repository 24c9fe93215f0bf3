"""Learned LLM routing benchmark: ``mem.routing`` against the seed's fixed table, always-strongest and the oracle.

A simulation with hidden truth. Four models with a cost per call (relative units: the
frontier model's call costs 1) and, per task type, a hidden probability of doing the
task well. The truth departs from the seed's table where real deployments do: a local
code model is nearly as good as the frontier one at code and free; the small local
model is too weak for classification and extraction, where a cheap cloud model is right;
for summarization and chat the local model is fine. Tasks arrive in random order, with
descriptions drawn from templates per type; every policy sees the same tasks and the
same random outcome draws (common random numbers: draw ``u`` per task, success when
``u < p``).

Policies:

* ``table``: the seed's routing table (strong model for reasoning and code generation,
  local model otherwise);
* ``strongest``: always the frontier model;
* ``learned``: ``RoutingService.route`` on a real store (the table as prior, recorded
  outcomes as evidence, Thompson sampling with the default exploration), with
  ``RoutingService.record`` after each task;
* ``oracle``: knows the hidden probabilities, picks the best expected utility.

Every policy is scored by the same utility the router optimises, ``success -
cost_weight * cost / max cost`` (cost weight 0.2: the frontier model must be 20 points
likelier to succeed than a free one to be worth it), with success rate and total cost
side by side, and the regret against the oracle. Several seeds; mean shown.

    python bench/routing.py                   # prints the table, writes bench/results/routing.json
    python bench/routing.py --tasks 300 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS_DIR = Path(__file__).resolve().parent / "results"
COST_WEIGHT = 0.2

#: name -> (tier, cost per call, latency ms)
MODELS: dict[str, tuple[str, float, float]] = {
    "frontier": ("strong", 1.0, 3000.0),
    "mid-cloud": ("medium", 0.15, 1200.0),
    "local-8b": ("local", 0.0, 700.0),
    "coder-local": ("local", 0.0, 900.0),
}
#: Hidden success probability per task type and model.
TRUTH: dict[str, dict[str, float]] = {
    "reasoning": {"frontier": 0.90, "mid-cloud": 0.70, "local-8b": 0.40, "coder-local": 0.45},
    "code_generation": {"frontier": 0.88, "mid-cloud": 0.80, "local-8b": 0.45, "coder-local": 0.84},
    "classification": {"frontier": 0.95, "mid-cloud": 0.93, "local-8b": 0.60, "coder-local": 0.55},
    "summarization": {"frontier": 0.92, "mid-cloud": 0.90, "local-8b": 0.86, "coder-local": 0.70},
    "extraction": {"frontier": 0.93, "mid-cloud": 0.91, "local-8b": 0.55, "coder-local": 0.75},
    "chat": {"frontier": 0.90, "mid-cloud": 0.88, "local-8b": 0.83, "coder-local": 0.60},
}
TEMPLATES: dict[str, list[str]] = {
    "reasoning": [
        "work out why the {x} scheduler deadlocks under load",
        "plan the migration of the {x} service to the new cluster",
        "decide whether to shard the {x} table, weighing the trade-offs",
        "find the flaw in this proof about {x} ordering",
    ],
    "code_generation": [
        "write a Python function that parses {x} log lines",
        "implement a retry decorator for the {x} client",
        "add pagination to the {x} REST endpoint",
        "write unit tests for the {x} module",
    ],
    "classification": [
        "label this {x} ticket as bug, feature or question",
        "classify the sentiment of this {x} review",
        "is this {x} email spam? answer yes or no",
        "tag this {x} commit with its component",
    ],
    "summarization": [
        "summarise the {x} incident report in three bullets",
        "write a short summary of the {x} meeting notes",
        "condense the {x} design doc into one paragraph",
    ],
    "extraction": [
        "extract the invoice number and total from this {x} PDF text",
        "pull the dates and amounts out of the {x} contract",
        "list the email addresses mentioned in the {x} thread",
    ],
    "chat": [
        "answer the user's question about {x} opening hours",
        "reply politely to the {x} customer asking for a refund",
        "greet the new {x} user and explain the next step",
    ],
}
FILLERS = ["billing", "auth", "payments", "search", "inventory", "orders", "analytics", "shipping", "profile"]
#: The seed's table (engramdb.services.routing.ROUTING_TABLE) on these models: strong -> frontier, local -> local-8b.
TABLE = {"reasoning": "frontier", "code_generation": "frontier"}


def utility(model: str, success: float) -> float:
    top = max(c for _, c, _ in MODELS.values())
    return success - COST_WEIGHT * MODELS[model][1] / top


def oracle_pick(task_type: str) -> str:
    return max(MODELS, key=lambda m: utility(m, TRUTH[task_type][m]))


def make_tasks(n: int, seed: int) -> list[tuple[str, str, float]]:
    rng = random.Random(seed)
    types = list(TRUTH)
    out = []
    for i in range(n):
        t = types[i % len(types)]
        text = rng.choice(TEMPLATES[t]).format(x=rng.choice(FILLERS))
        out.append((t, text, rng.random()))
    rng.shuffle(out)
    return out


def run_fixed(tasks: list[tuple[str, str, float]], pick: Callable[[str], str]) -> dict[str, Any]:
    picks = [pick(t) for t, _, _ in tasks]
    return _score(tasks, picks)


def run_learned(tasks: list[tuple[str, str, float]], embedder: Any, seed: int) -> dict[str, Any]:
    from engramdb import Engram
    from engramdb.models import ModelSpec
    from engramdb.services.routing import RoutingService

    specs = [ModelSpec(name=n, tier=tier, cost=cost, latency_ms=lat) for n, (tier, cost, lat) in MODELS.items()]  # type: ignore[arg-type]
    picks: list[str] = []
    route_ms: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        Engram(Path(tmp) / "store", embedder=embedder, learning_seed=seed) as mem,
    ):
        router = RoutingService(mem._services, learning=mem.learning)
        for t, text, u in tasks:
            start = time.perf_counter()
            choice = router.decide(text, task_type=t, models=specs, cost_weight=COST_WEIGHT)
            route_ms.append((time.perf_counter() - start) * 1000)
            model = choice.model
            picks.append(model)
            ok = u < TRUTH[t][model]
            router.record(text, model, ok, task_type=t, cost=MODELS[model][1], latency_ms=MODELS[model][2])
    result = _score(tasks, picks)
    route_ms.sort()
    result["route_ms_median"] = route_ms[len(route_ms) // 2]
    result["route_ms_p95"] = route_ms[int(len(route_ms) * 0.95)]
    return result


def _score(tasks: list[tuple[str, str, float]], picks: list[str]) -> dict[str, Any]:
    n = len(tasks)
    succ = [u < TRUTH[t][m] for (t, _, u), m in zip(tasks, picks, strict=True)]
    expected = [utility(m, TRUTH[t][m]) for (t, _, _), m in zip(tasks, picks, strict=True)]
    oracle = [utility(oracle_pick(t), TRUTH[t][oracle_pick(t)]) for t, _, _ in tasks]
    half = n // 2
    per_type: dict[str, dict[str, int]] = {}
    for (t, _, _), m in zip(tasks[half:], picks[half:], strict=True):
        per_type.setdefault(t, {}).setdefault(m, 0)
        per_type[t][m] += 1
    return {
        "success_rate": sum(succ) / n,
        "cost": sum(MODELS[m][1] for m in picks),
        "utility": sum(expected) / n,
        "regret": (sum(oracle) - sum(expected)) / n,
        "regret_second_half": (sum(oracle[half:]) - sum(expected[half:])) / (n - half),
        "oracle_agreement_second_half": sum(
            m == oracle_pick(t) for (t, _, _), m in zip(tasks[half:], picks[half:], strict=True)
        )
        / (n - half),
        "picks_second_half": per_type,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from engramdb.config import load_settings
    from engramdb.embeddings import make_embedder

    embedder = make_embedder(load_settings({}))
    runs: dict[str, list[dict[str, Any]]] = {"table": [], "strongest": [], "learned": [], "oracle": []}
    start = time.perf_counter()
    for seed in range(args.seeds):
        tasks = make_tasks(args.tasks, seed)
        runs["table"].append(run_fixed(tasks, lambda t: TABLE.get(t, "local-8b")))
        runs["strongest"].append(run_fixed(tasks, lambda t: "frontier"))
        runs["oracle"].append(run_fixed(tasks, oracle_pick))
        runs["learned"].append(run_learned(tasks, embedder, seed))
    elapsed = time.perf_counter() - start

    def mean(policy: str, key: str) -> float:
        return float(sum(r[key] for r in runs[policy])) / len(runs[policy])

    table = Table(
        title=f"LLM routing: {args.tasks} tasks x {args.seeds} seeds, 6 task types, 4 models, cost weight {COST_WEIGHT}"
    )
    for col in ("policy", "success", "cost / task", "utility", "regret", "regret 2nd half", "= oracle 2nd half"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    summary: dict[str, dict[str, float]] = {}
    for policy in ("table", "strongest", "learned", "oracle"):
        summary[policy] = {
            k: mean(policy, k)
            for k in ("success_rate", "cost", "utility", "regret", "regret_second_half", "oracle_agreement_second_half")
        }
        s = summary[policy]
        table.add_row(
            policy,
            f"{s['success_rate']:.1%}",
            f"{s['cost'] / args.tasks:.3f}",
            f"{s['utility']:.3f}",
            f"{s['regret']:.3f}",
            f"{s['regret_second_half']:.3f}",
            f"{s['oracle_agreement_second_half']:.0%}",
        )
    console = Console(width=130)
    console.print(table)
    learned = runs["learned"]
    med = sum(r["route_ms_median"] for r in learned) / len(learned)
    p95 = sum(r["route_ms_p95"] for r in learned) / len(learned)
    console.print(f"route(): median {med:.1f} ms, p95 {p95:.1f} ms per call on a real store; run took {elapsed:.0f} s")
    console.print("learned picks in the second half of seed 0:", json.dumps(learned[0]["picks_second_half"]))
    console.print("oracle picks:", json.dumps({t: oracle_pick(t) for t in TRUTH}))
    RESULTS_DIR.mkdir(exist_ok=True)
    out = {
        "benchmark": "routing",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "tasks": args.tasks,
        "seeds": args.seeds,
        "cost_weight": COST_WEIGHT,
        "models": MODELS,
        "truth": TRUTH,
        "summary": summary,
        "route_ms_median": med,
        "route_ms_p95": p95,
        "runs": runs,
    }
    (RESULTS_DIR / "routing.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

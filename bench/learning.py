"""Learning benchmark: engramdb's outcome learning against simple learners, on the same simulated streams.

Decisions: situations (bench/_learning_data.py) recur in varied words; in each, the agent
picks one of four actions whose success probabilities are hidden; midway the best action
of every situation changes. Every system sees the same stream, and the same random draw
decides each step's outcome for every system (common random numbers). Systems:

* ``engramdb``: ``mem.learning.choose`` then ``mem.learning.record`` on a real store with the real model;
* ``exact-count``: success counts per action for each exact context string (untried first);
* ``q-learning``: epsilon-greedy Q-learning keyed on the exact context string
  (epsilon 0.2, learning rate 0.1, reward +1/-1), the design documents' approach;
* ``random``; ``oracle`` (always the currently best action);
* two references that see what no learner from text does, for scale: Thompson sampling on the true situation
  label (discounted), and the same also told when the world changes (it forgets everything then).

Measured: success rate over the stream; recovery (success rate in the quarter of the
stream right after the change); top-1 recommendation accuracy on held-out descriptions
never seen while learning (before the change and at the end).

Failures: recurring errors whose messages vary in paths, numbers, ids, hosts and quoted
values. The agent asks ``mem.failures.solutions`` and tries the top fix first, then others
until one works, and records the occurrence with ``mem.failures.record``. Measured: first-try
fix rate on recurrences, and recurring patterns identified by ``mem.failures.patterns``
(one found pattern holding exactly the occurrences of one true pattern). Baselines: the
last working fix per exact message, and per exception type (the text before the first colon).

``--calibrate`` runs the same decision streams through the pure recommend module (no store, bench/_learning_rec.py):
it fits the calibration tables on the *dev* streams (seeds 100...) and scores the rules on the *test* streams
(seeds 0...): right recommendations at the benchmark's points, precision over the whole stream, stated confidence
against the share right (bench/results/learning_calibration.json; ``--dump`` keeps every answer). The store run
(seeds 0...) reports, side by side with the baselines: success, recovery after the change and success before it;
the recommendation rate and precision on held-out descriptions (every system; engramdb's ``suggest`` also with
H-REC session 2's rule, 0.7 and no ahead check, with the third session's rule, ahead margin 0.025, and with the
rule before H-REC, on the same questions, same store,
same moment) and its stated confidence against the share right; the recurring failures; the multi-step episodes.
The change rule's option of issue 12's fourth session runs on its own store (recovery A/B). A run split into
one-seed processes (``--first-seed k --seeds 1 --output part-k.json``) is joined with ``--merge part-*.json``.

    python bench/learning.py                 # 3 seeds, full streams
    python bench/learning.py --quick         # 1 seed, short streams
    python bench/learning.py --scale         # also: suggest latency over 10k decisions
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from _learning_data import ERRORS, FIX_POOL, SITUATIONS, ErrorKind, Situation, Step, fill, held_out_queries, make_stream
from _learning_multi import MULTI_SYSTEMS, run_multistep
from _learning_rec import (
    BEFORE_RULE,
    OPTION_CHANGE,
    OPTION_CHANGE_RULE,
    PREVIOUS_RULE,
    RULE_FIELDS,
    THIRD_RULE,
    _mean_of,
    _pct,
    _rates,
    calibrate_main,
    held_out_table,
    merge_results,
    stated_vs_right,
)
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.learning.recommend import CALIBRATION_LEARNED, CALIBRATION_LEARNED_POOLED
from engramdb.learning.stats import ChangeRule, RunLengths

AGENT = "bench"

RESULTS_DIR = Path(__file__).resolve().parent / "results"
console = Console(width=None if sys.stdout.isatty() else 150)


# -- the decision policies ---------------------------------------------------------------------------------


class Policy(Protocol):
    name: str

    def choose(self, step: Step) -> str: ...
    def update(self, step: Step, action: str, success: bool) -> None: ...
    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None: ...


class Ours:
    """engramdb: ``mem.learning.choose`` then ``.record``; held-out questions go to ``mem.learning.suggest``."""

    def __init__(
        self,
        embedder: Embedder,
        folder: str,
        seed: int,
        *,
        exploration: float | None = None,
        name: str | None = None,
        **config: Any,
    ) -> None:
        settings: dict[str, Any] = {"learning_seed": seed}
        if exploration is not None:
            settings["exploration"] = exploration
        self.name = name or ("engramdb" if exploration is None else f"engramdb (exploration={exploration:g})")
        self.mem = Engram(folder, embedder=embedder, **settings)
        if config:
            self.mem.learning.recommend = replace(self.mem.learning.recommend, **config)
        #: (recommended or None, top option, confidence, right answer) per held-out question.
        self.answers: list[tuple[str | None, str, float, str]] = []
        #: The same questions answered by the older rules (same store, same moment): the rule before H-REC, and
        #: H-REC session 2's (0.7, no ahead check).
        self.answers_before: list[tuple[str | None, str, float, str]] = []
        self.answers_previous: list[tuple[str | None, str, float, str]] = []
        #: And the third session's rule (ahead margin 0.025), shipped until issue 12's fifth session.
        self.answers_third: list[tuple[str | None, str, float, str]] = []

    def choose(self, step: Step) -> str:
        return self.mem.learning.choose(step.context, step.situation.options, agent=AGENT)

    def update(self, step: Step, action: str, success: bool) -> None:
        self.mem.learning.record(step.context, action, success, agent=AGENT, alternatives=step.situation.options)

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        s = self.mem.learning.suggest(text, agent=AGENT, options=situation.options)
        self.answers.append((s.recommended, s.options[0].action, s.confidence, situation.best(changed)))
        current = self.mem.learning.recommend
        for rule, answers in (
            (BEFORE_RULE, self.answers_before),
            (PREVIOUS_RULE, self.answers_previous),
            (THIRD_RULE, self.answers_third),
        ):
            self.mem.learning.recommend = replace(current, **{k: getattr(rule, k) for k in RULE_FIELDS})
            try:
                old = self.mem.learning.suggest(text, agent=AGENT, options=situation.options)
            finally:
                self.mem.learning.recommend = current
            answers.append((old.recommended, old.options[0].action, old.confidence, situation.best(changed)))
        return s.options[0].action

    def close(self) -> None:
        self.mem.close()


class ExactCount:
    """Success counts per action for each exact context string; untried actions first, then the best ratio."""

    name = "exact-count"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.table: dict[str, dict[str, list[int]]] = defaultdict(dict)

    def _pick(self, context: str, options: Sequence[str]) -> str | None:
        counts = self.table.get(context, {})
        untried = [a for a in options if a not in counts]
        if untried:
            return None if len(untried) == len(options) else self.rng.choice(untried)
        return max(options, key=lambda a: (counts[a][0] / counts[a][1], self.rng.random()))

    def choose(self, step: Step) -> str:
        return self._pick(step.context, step.situation.options) or self.rng.choice(step.situation.options)

    def update(self, step: Step, action: str, success: bool) -> None:
        c = self.table[step.context].setdefault(action, [0, 0])
        c[0] += int(success)
        c[1] += 1

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        counts = self.table.get(text, {})
        if not counts:
            return self.rng.choice(situation.options)  # never seen: a guess
        return max(counts, key=lambda a: (counts[a][0] / counts[a][1], counts[a][1]))


class QLearning:
    """Epsilon-greedy Q-learning keyed on the exact context string (single-step episodes)."""

    name = "q-learning"

    def __init__(self, seed: int, *, epsilon: float = 0.2, lr: float = 0.1) -> None:
        self.rng = random.Random(seed)
        self.epsilon, self.lr = epsilon, lr
        self.q: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def _greedy(self, context: str, options: Sequence[str]) -> str:
        values = self.q.get(context)
        if not values:
            return self.rng.choice(options)
        return max(options, key=lambda a: (values.get(a, 0.0), self.rng.random()))

    def choose(self, step: Step) -> str:
        if self.rng.random() < self.epsilon:
            return self.rng.choice(step.situation.options)
        return self._greedy(step.context, step.situation.options)

    def update(self, step: Step, action: str, success: bool) -> None:
        reward = 1.0 if success else -1.0
        q = self.q[step.context]
        q[action] += self.lr * (reward - q[action])

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        return self._greedy(text, situation.options)


class RandomPolicy:
    name = "random"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, step: Step) -> str:
        return self.rng.choice(step.situation.options)

    def update(self, step: Step, action: str, success: bool) -> None:
        pass

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        return self.rng.choice(situation.options)


class Oracle:
    name = "oracle"

    def choose(self, step: Step) -> str:
        return step.situation.best(step.changed)

    def update(self, step: Step, action: str, success: bool) -> None:
        pass

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        return situation.best(changed)


class SituationThompson:
    """A reference, not a competitor: Thompson sampling on the *true situation label*, which no learner from text
    sees; each outcome of a situation discounts its older ones by ``gamma``. With ``knows_change`` it also forgets
    everything at the change, a moment no learner is told. Its recovery is about what learning from outcomes alone
    can reach on these streams; the oracle also knows the new best action. ``scale`` narrows the draws as
    engramdb's ``exploration`` does; both settings were the best of a small grid on dev seeds 100-105."""

    def __init__(self, seed: int, *, gamma: float, scale: float, knows_change: bool = False) -> None:
        self.rng = random.Random(seed)
        self.gamma, self.scale, self.knows_change = gamma, scale, knows_change
        self.stats: dict[str, dict[str, list[float]]] = defaultdict(dict)
        self.forgot = False
        self.name = (
            f"reference: knows the situation and the change (Thompson, scale {scale:g})"
            if knows_change
            else f"reference: knows the situation (discounted Thompson, gamma {gamma:g}, scale {scale:g})"
        )

    def choose(self, step: Step) -> str:
        if self.knows_change and step.changed and not self.forgot:
            self.stats.clear()
            self.forgot = True
        counts = self.stats[step.situation.name]

        def draw(action: str) -> float:
            s, f = counts.get(action, [0.0, 0.0])
            mean = self._mean(counts, action)
            return mean + self.scale * (self.rng.betavariate(1.0 + s, 1.0 + f) - mean)

        return max(step.situation.options, key=draw)

    @staticmethod
    def _mean(counts: dict[str, list[float]], action: str) -> float:
        s, f = counts.get(action, [0.0, 0.0])
        return (1.0 + s) / (2.0 + s + f)

    def update(self, step: Step, action: str, success: bool) -> None:
        counts = self.stats[step.situation.name]
        for c in counts.values():
            c[0] *= self.gamma
            c[1] *= self.gamma
        counts.setdefault(action, [0.0, 0.0])[0 if success else 1] += 1.0

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        counts = self.stats.get(situation.name, {})
        return max(situation.options, key=lambda a: self._mean(counts, a))


@dataclass
class DecisionResult:
    successes: list[bool] = field(default_factory=list)
    accuracy_before: float = 0.0
    accuracy_after: float = 0.0
    #: For engramdb: how often suggest recommends (not None) on held-out questions, and how often it is right then.
    coverage: float | None = None
    precision: float | None = None
    right_recommendations: float | None = None
    mean_confidence: float | None = None
    #: The rule before H-REC on the same questions (coverage, precision, right, mean_confidence), and H-REC
    #: session 2's rule (0.7, no ahead check).
    before_rule: dict[str, float | None] = field(default_factory=dict)
    previous_rule: dict[str, float | None] = field(default_factory=dict)
    third_rule: dict[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self, steps: int) -> dict[str, float | None]:
        half, window = steps // 2, steps // 4
        return {
            "success_rate": statistics.fmean(self.successes),
            "before_change": statistics.fmean(self.successes[:half]),
            "recovery": statistics.fmean(self.successes[half : half + window]),
            "after_change": statistics.fmean(self.successes[half:]),
            "top1_unseen_before": self.accuracy_before,
            "top1_unseen_after": self.accuracy_after,
            "recommend_coverage": self.coverage,
            "recommend_precision": self.precision,
            "recommend_right": self.right_recommendations,
            "recommend_mean_confidence": self.mean_confidence,
            **{f"before_rule_{k}": v for k, v in self.before_rule.items()},
            **{f"previous_rule_{k}": v for k, v in self.previous_rule.items()},
            **{f"third_rule_{k}": v for k, v in self.third_rule.items()},
            "ms_per_step": 1000 * self.seconds / steps,
        }


def _accuracy(policy: Policy, queries: Sequence[tuple[Situation, str]], *, changed: bool) -> float:
    hits = [policy.recommend(s, text, changed=changed) == s.best(changed) for s, text in queries]
    return statistics.fmean(hits)


def run_decisions(policy: Policy, stream: Sequence[Step], queries: Sequence[tuple[Situation, str]]) -> DecisionResult:
    result = DecisionResult()
    start = time.perf_counter()
    half = len(stream) // 2
    for i, step in enumerate(stream):
        if i == half:
            paused = time.perf_counter()
            result.accuracy_before = _accuracy(policy, queries, changed=False)
            start += time.perf_counter() - paused
        action = policy.choose(step)
        probs = step.situation.after if step.changed else step.situation.before
        success = step.draw < probs[action]
        result.successes.append(success)
        policy.update(step, action, success)
    result.seconds = time.perf_counter() - start
    result.accuracy_after = _accuracy(policy, queries, changed=True)
    if isinstance(policy, Ours):
        result.coverage, result.precision, result.right_recommendations, result.mean_confidence = _rates(policy.answers)
        keys = ("coverage", "precision", "right", "mean_confidence")
        result.before_rule = dict(zip(keys, _rates(policy.answers_before), strict=True))
        result.previous_rule = dict(zip(keys, _rates(policy.answers_previous), strict=True))
        result.third_rule = dict(zip(keys, _rates(policy.answers_third), strict=True))
    return result


# -- recurring failures ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    kind: ErrorKind
    message: str
    order: list[str]  # the order in which an agent with no knowledge would try fixes


def make_failures(seed: int, count: int) -> list[Occurrence]:
    rng = random.Random(seed + 20_000)
    # Zipf-like frequencies: a few errors are common, most recur a handful of times.
    weights = [1.0 / (r + 1) ** 0.8 for r in range(len(ERRORS))]
    kinds = rng.sample(list(ERRORS), len(ERRORS))
    out = []
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        order = rng.sample(list(FIX_POOL), len(FIX_POOL))
        out.append(Occurrence(kind, fill(kind.template, rng), order))
    return out


def _try_fixes(first: str | None, occ: Occurrence) -> tuple[bool, list[str]]:
    """Try ``first`` (if any), then the rest in the occurrence's order; return (first worked, failed fixes)."""
    tried: list[str] = []
    for fix in ([first] if first else []) + [f for f in occ.order if f != first]:
        if fix == occ.kind.fix:
            return (not tried and first is not None), tried
        tried.append(fix)
    raise AssertionError("the right fix is always in the pool")


@dataclass
class FailureResult:
    first_try: list[bool] = field(default_factory=list)
    identified: float | None = None
    true_recurring: int = 0
    found_recurring: int | None = None
    missed: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "first_try_fix_rate": statistics.fmean(self.first_try) if self.first_try else None,
            "recurrences": len(self.first_try),
            "patterns_identified": self.identified,
            "true_recurring_patterns": self.true_recurring,
            "found_recurring_patterns": self.found_recurring,
            "ms_per_occurrence": 1000 * self.seconds / max(1, len(self.first_try)),
            "missed": self.missed,
        }


def run_failures_ours(embedder: Embedder, folder: str, occurrences: Sequence[Occurrence]) -> FailureResult:
    result = FailureResult()
    with Engram(folder, embedder=embedder) as mem:
        seen: set[str] = set()
        start = time.perf_counter()
        for occ in occurrences:
            sols = mem.failures.solutions(occ.message, agent=AGENT)
            first = sols[0].solution if sols else None
            worked, failed = _try_fixes(first, occ)
            if occ.kind.name in seen:
                result.first_try.append(worked)
            seen.add(occ.kind.name)
            mem.failures.record(occ.message, agent=AGENT, solution=occ.kind.fix, failed_solutions=failed)
        result.seconds = time.perf_counter() - start
        found = mem.failures.patterns(agent=AGENT, recurring=True)
    counts: dict[str, int] = defaultdict(int)
    for occ in occurrences:
        counts[occ.kind.name] += 1
    recurring = {k for k, n in counts.items() if n >= 2}
    kind_of_example = _kind_matcher()
    identified = set()
    pieces: dict[str, list[int]] = defaultdict(list)
    for p in found:
        kind = kind_of_example(p.example)
        pieces[str(kind)].append(p.occurrences)
        if kind in recurring and p.occurrences == counts[kind]:
            identified.add(kind)
    # For diagnosis: the true count and the found patterns' counts of every error that was not identified.
    result.missed = {k: {"true": counts[k], "found": pieces.get(k, [])} for k in sorted(recurring - identified)}
    result.true_recurring = len(recurring)
    result.found_recurring = len(found)
    result.identified = len(identified) / len(recurring) if recurring else None
    return result


def _kind_matcher() -> Callable[[str], str | None]:
    """Which error template produced a message (by its fixed words)."""
    import re

    patterns = []
    for kind in ERRORS:
        parts = re.split(r"\{[a-z0-9]+\}", kind.template)
        regex = ".+?".join(re.escape(p) for p in parts)
        patterns.append((kind.name, re.compile(f"^{regex}$", re.DOTALL)))

    def match(text: str) -> str | None:
        for name, rx in patterns:
            if rx.match(text):
                return name
        return None

    return match


def run_failures_keyed(occurrences: Sequence[Occurrence], key: Callable[[str], str]) -> FailureResult:
    result = FailureResult()
    fixes: dict[str, str] = {}
    seen: set[str] = set()
    start = time.perf_counter()
    for occ in occurrences:
        worked, _ = _try_fixes(fixes.get(key(occ.message)), occ)
        if occ.kind.name in seen:
            result.first_try.append(worked)
        seen.add(occ.kind.name)
        fixes[key(occ.message)] = occ.kind.fix
    result.seconds = time.perf_counter() - start
    return result


# -- scale -------------------------------------------------------------------------------------------------------


def run_scale(embedder: Embedder, folder: str, n: int = 10_000, repeats: int = 50) -> dict[str, float]:
    rng = random.Random(5)
    items = []
    for _ in range(n):
        s = rng.choice(SITUATIONS)
        action = rng.choice(s.options)
        items.append(
            {
                "content": fill(rng.choice(s.train), rng),
                "agent": AGENT,
                "kind": "decision",
                "metadata": {"action": action, "outcome": "success", "success": float(rng.random() < 0.5)},
            }
        )
    with Engram(folder, embedder=embedder) as mem:
        for i in range(0, n, 1000):
            mem.remember_many(items[i : i + 1000])
        query = "The billing API returned 401 Unauthorized after the access token expired"
        mem.learning.suggest(query, agent=AGENT)  # warm: the query's vector is cached from here on
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            mem.learning.suggest(query, agent=AGENT)
            times.append(time.perf_counter() - t)
        choose_times = []
        for _ in range(repeats):
            t = time.perf_counter()
            mem.learning.choose(query, SITUATIONS[0].options, agent=AGENT)
            choose_times.append(time.perf_counter() - t)
    return {
        "decisions": n,
        "load_average_1m": os.getloadavg()[0],
        "suggest_p50_ms": 1000 * statistics.median(times),
        "suggest_p95_ms": 1000 * sorted(times)[int(0.95 * len(times)) - 1],
        "choose_p50_ms": 1000 * statistics.median(choose_times),
    }


# -- main --------------------------------------------------------------------------------------------------------

REFERENCE_LABEL = SituationThompson(0, gamma=0.95, scale=0.5).name
REFERENCE_CHANGE = SituationThompson(0, gamma=1.0, scale=0.3, knows_change=True).name
DECISION_SYSTEMS = (
    "engramdb",
    OPTION_CHANGE,
    "engramdb (exploration=1)",
    "exact-count",
    "q-learning",
    "random",
    REFERENCE_LABEL,
    REFERENCE_CHANGE,
    "oracle",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed ... (to split a run)")
    parser.add_argument("--steps", type=int, default=1600, help="decision steps per stream (the change is midway)")
    parser.add_argument("--failures", type=int, default=300, help="error occurrences per stream")
    parser.add_argument("--quick", action="store_true", help="1 seed, 800 steps, 150 failures")
    parser.add_argument("--scale", action="store_true", help="also time suggest over 10k decisions")
    parser.add_argument("--skip-decisions", action="store_true")
    parser.add_argument("--skip-failures", action="store_true")
    parser.add_argument("--skip-multistep", action="store_true")
    parser.add_argument("--only-ours", action="store_true", help="decisions: the shipped-exploration policy alone")
    parser.add_argument("--episodes", type=int, default=400, help="multi-step episodes per seed")
    parser.add_argument("--config", default="", help="RecommendConfig overrides, e.g. 'similarity_floor=0.4'")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "learning.json")
    parser.add_argument("--dump", type=Path, default=None, help="--calibrate: keep every answer in this pickle")
    parser.add_argument("--store-seeding", action="store_true", help="--calibrate: test streams as the store run's")
    parser.add_argument(
        "--calibrate", action="store_true", help="pure simulation only: success, recovery and the calibration table"
    )
    parser.add_argument("--merge", type=Path, nargs="+", default=None, help="join one-seed runs' JSON into --output")
    args = parser.parse_args(argv)
    if args.merge:
        merged = merge_results([json.loads(p.read_text(encoding="utf-8")) for p in args.merge])
        args.output.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
        console.print(f"merged {len(args.merge)} runs (seeds {merged['seeds']}) into {args.output}")
        return 0
    if args.calibrate:
        return calibrate_main(args)
    if args.quick:
        args.seeds, args.steps, args.failures, args.episodes = 1, 800, 150, 200
    items = [kv.split("=") if "=" in kv else (kv, "") for kv in args.config.split(",") if kv]
    # rl, rl_scope=all, rl_hazards=0.01:0.1: the run-length change model (seventh round) instead of the change rule
    runs: dict[str, Any] = {
        k[3:]: v if k == "rl_scope" else v == "1" if k == "rl_recent" else tuple(map(float, v.split(":")))
        for k, v in items
        if k[:3] == "rl_"
    }
    overrides: dict[str, Any] = {
        # learned_horizons=25:10:60: a tuple; calibration=learned: the learned horizon's tables (sixth round)
        k: tuple(map(float, v.split(":")))
        if ":" in v
        else v
        if k in ("calibration", "change_scope", "change_clock")
        else float(v)
        for k, v in items
        if k != "rl" and k[:3] != "rl_"
    }
    if runs or any(k == "rl" for k, _ in items):
        overrides["change"] = RunLengths(**runs)
    if overrides.pop("calibration", None) == "learned":
        overrides.update(calibration=CALIBRATION_LEARNED, pooled_calibration=CALIBRATION_LEARNED_POOLED)
    if rule := {k[7:]: overrides.pop(k) for k in list(overrides) if k.startswith("change_")}:
        overrides["change"] = ChangeRule(**rule)  # change_cusum=1.5: the change rule's fields

    embedder = make_embedder(load_settings({}))
    load_start = os.getloadavg()[0]
    decisions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    failures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    multi: dict[str, list[dict[str, Any]]] = defaultdict(list)
    held_out: dict[str, list[tuple[str | None, str, float, str]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            if not args.skip_decisions:
                stream = make_stream(seed, args.steps)
                queries = held_out_queries(seed)
                policies: list[Policy] = [
                    Ours(embedder, f"{tmp}/decisions-{seed}", seed, **overrides),
                    Ours(embedder, f"{tmp}/decisions-plain-{seed}", seed, exploration=1.0, **overrides),
                    # The change rule's option on the same stream: the recovery A/B.
                    Ours(
                        embedder,
                        f"{tmp}/decisions-newest-{seed}",
                        seed,
                        name=OPTION_CHANGE,
                        **{"change": OPTION_CHANGE_RULE, **overrides},
                    ),
                    ExactCount(seed),
                    QLearning(seed),
                    RandomPolicy(seed),
                    SituationThompson(seed, gamma=0.95, scale=0.5),
                    SituationThompson(seed, gamma=1.0, scale=0.3, knows_change=True),
                    Oracle(),
                ]
                for policy in policies[:1] if args.only_ours else policies:
                    res = run_decisions(policy, stream, queries)
                    decisions[policy.name].append(res.summary(args.steps))
                    console.print(f"seed {seed} {policy.name}: {_pct(statistics.fmean(res.successes))}% success")
                    if isinstance(policy, Ours):
                        held_out[policy.name] += policy.answers
                        policy.close()
            if not args.skip_failures:
                occurrences = make_failures(seed, args.failures)
                ours = run_failures_ours(embedder, f"{tmp}/failures-{seed}", occurrences)
                failures["engramdb"].append(ours.summary())
                failures["exact-message"].append(run_failures_keyed(occurrences, lambda m: m).summary())
                failures["exception-type"].append(
                    run_failures_keyed(occurrences, lambda m: m.split(":", 1)[0]).summary()
                )
            if not args.skip_multistep:
                for name in (*MULTI_SYSTEMS, OPTION_CHANGE):
                    option = name == OPTION_CHANGE
                    res = run_multistep(
                        "engramdb" if option else name,
                        args.episodes,
                        seed,
                        embedder,
                        f"{tmp}/multi-{'option-' if option else ''}{seed}",
                        change=OPTION_CHANGE_RULE if option else None,
                    )
                    multi[name].append(res.summary())
                    console.print(f"seed {seed} multi-step {name}: {_pct(statistics.fmean(res.successes))}% success")
        scale = run_scale(embedder, f"{tmp}/scale") if args.scale else None

    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
        "load_average_1m_start_end": [load_start, os.getloadavg()[0]],
        "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
        "steps": args.steps,
        "failure_occurrences": args.failures,
        "config_overrides": {k: v if isinstance(v, float) else repr(v) for k, v in overrides.items()},
        "decisions": {name: _mean_of(rows) for name, rows in decisions.items()},
        "failures": {name: _mean_of(rows) for name, rows in failures.items()},
        "multistep": {name: _mean_of(rows) for name, rows in multi.items()},
        "multistep_episodes": args.episodes,
        "scale": scale,
    }
    if decisions:
        table = Table(title=f"Decisions ({args.seeds} seeds x {args.steps} steps, best action changes midway)")
        for col in (
            "system",
            "success %",
            "before change %",
            "recovery %",
            "after change %",
            "top-1 unseen (before) %",
            "top-1 unseen (end) %",
            "ms/step",
        ):
            table.add_column(col, justify="right" if col != "system" else "left")
        shown_systems = [name for name in DECISION_SYSTEMS if name in results["decisions"]]
        for name in shown_systems:
            r = results["decisions"][name]
            table.add_row(
                name,
                _pct(r["success_rate"]),
                _pct(r["before_change"]),
                _pct(r["recovery"]),
                _pct(r["after_change"]),
                _pct(r["top1_unseen_before"]),
                _pct(r["top1_unseen_after"]),
                f"{r['ms_per_step']:.2f}",
            )
        console.print(table)
        console.print(held_out_table(results["decisions"], shown_systems, args.seeds, args.steps))
        buckets = stated_vs_right(held_out["engramdb"])
        results["held_out_calibration"] = buckets
        console.print(
            "engramdb's stated confidence against the share right (held-out questions, all seeds): "
            + "; ".join(
                f"{b['bucket']}: n {b['questions']}, stated {_pct(b['stated'])}, right {_pct(b['right'])}"
                for b in buckets
            )
        )
    if failures:
        table = Table(title=f"Recurring failures ({args.seeds} seeds x {args.failures} occurrences)")
        for col in ("system", "first-try fix %", "patterns identified %", "recurring (true/found)", "ms/occurrence"):
            table.add_column(col, justify="right" if col != "system" else "left")
        for name, r in results["failures"].items():
            found = r["found_recurring_patterns"]
            table.add_row(
                name,
                _pct(r["first_try_fix_rate"]),
                _pct(r["patterns_identified"]),
                f"{r['true_recurring_patterns']:.0f}/{found:.1f}" if found is not None else "-",
                f"{r['ms_per_occurrence']:.2f}",
            )
        console.print(table)
    if multi:
        table = Table(
            title=f"Multi-step episodes ({args.seeds} seeds x {args.episodes} episodes of 3 steps, reward at end)"
        )
        for col in ("system", "success %", "first half %", "last half %"):
            table.add_column(col, justify="right" if col != "system" else "left")
        for name, r in results["multistep"].items():
            table.add_row(name, _pct(r["success_rate"]), _pct(r["first_half"]), _pct(r["last_half"]))
        console.print(table)
    if scale:
        console.print(
            f"suggest over {scale['decisions']} decisions: p50 {scale['suggest_p50_ms']:.1f} ms, "
            f"p95 {scale['suggest_p95_ms']:.1f} ms; choose p50 {scale['choose_p50_ms']:.1f} ms (query vector cached; "
            f"load average {scale['load_average_1m']:.1f} on {os.cpu_count()} cores)"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Learning benchmark: engramdb's outcome learning against simple learners, on the same simulated streams.

Decisions: situations (bench/_learning_data.py) recur in varied words; in each, the agent
picks one of four actions whose success probabilities are hidden; midway the best action
of every situation changes. Every system sees the same stream, and the same random draw
decides each step's outcome for every system (common random numbers). Systems:

* ``engramdb``: ``mem.learning.choose`` then ``mem.learning.record`` on a real store with the real model;
* ``exact-count``: success counts per action for each exact context string (untried first);
* ``q-learning``: epsilon-greedy Q-learning keyed on the exact context string
  (epsilon 0.2, learning rate 0.1, reward +1/-1), the design documents' approach;
* ``random``; ``oracle`` (always the currently best action).

Measured: success rate over the stream; recovery (success rate in the quarter of the
stream right after the change); top-1 recommendation accuracy on held-out descriptions
never seen while learning (before the change and at the end).

Failures: recurring errors whose messages vary in paths, numbers, ids, hosts and quoted
values. The agent asks ``mem.failures.solutions`` and tries the top fix first, then others
until one works, and records the occurrence with ``mem.failures.record``. Measured: first-try
fix rate on recurrences, and recurring patterns identified by ``mem.failures.patterns``
(one found pattern holding exactly the occurrences of one true pattern). Baselines: the
last working fix per exact message, and per exception type (the text before the first colon).

``--calibrate`` runs the same decision streams through the pure recommend module (no store): it fits the
calibration table on the *dev* streams (seeds 100...) and scores the rules on the *test* streams (seeds 0...):
right recommendations at the benchmark's points, precision over the whole stream, stated confidence against the
share right (bench/results/learning_calibration.json). The store run answers every held-out question with the
rule before issue 12's H-REC work too (same store, same moment), and runs the old change rule on its own store.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from _learning_data import ERRORS, FIX_POOL, SITUATIONS, ErrorKind, Situation, fill
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.learning.recommend import CALIBRATION, RecommendConfig, calibrated
from engramdb.learning.stats import ChangePoints, ChangeRule

AGENT = "bench"

#: The calibration table and rule before H-REC (issue 12): the long-horizon lead of the top option, calibrated per
#: evidence band. Kept here so every run measures the old rule beside the new one on the same answers.
CALIBRATION_BEFORE: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = (
    (
        0.0,
        ((0.0, 0.0), (0.49, 0.24), (0.52, 0.36), (0.53, 0.56), (0.55, 0.62), (0.58, 0.66), (0.62, 0.76), (0.68, 0.83)),
    ),
    (1.0, ((0.0, 0.0), (0.51, 0.30), (0.55, 0.63), (0.59, 0.75), (0.61, 0.85), (0.68, 0.90), (0.71, 0.93))),
    (3.0, ((0.0, 0.0), (0.54, 0.56), (0.66, 0.74), (0.73, 0.87), (0.76, 0.91), (0.83, 0.94))),
    (
        10.0,
        (
            (0.0, 0.0),
            (0.53, 0.04),
            (0.61, 0.15),
            (0.67, 0.19),
            (0.71, 0.35),
            (0.77, 0.56),
            (0.81, 0.69),
            (0.83, 0.77),
            (0.86, 0.90),
        ),
    ),
)
BEFORE_RULE = RecommendConfig(recent_horizon=None, calibration=CALIBRATION_BEFORE, min_evidence=1.0)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
console = Console(width=None if sys.stdout.isatty() else 150)


# -- the decision stream -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    situation: Situation
    context: str
    #: One uniform draw per step: the outcome of action a is success iff draw < p(a) (common random numbers).
    draw: float
    changed: bool


def make_stream(seed: int, steps: int) -> list[Step]:
    rng = random.Random(seed)
    return [
        Step(
            situation=(s := rng.choice(SITUATIONS)),
            context=fill(rng.choice(s.train), rng),
            draw=rng.random(),
            changed=i >= steps // 2,
        )
        for i in range(steps)
    ]


def held_out_queries(seed: int, per_template: int = 6) -> list[tuple[Situation, str]]:
    rng = random.Random(seed + 10_000)
    return [(s, fill(t, rng)) for s in SITUATIONS for t in s.held_out for _ in range(per_template)]


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
        #: The same questions answered by the rule before H-REC (same store, same moment).
        self.answers_before: list[tuple[str | None, str, float, str]] = []

    def choose(self, step: Step) -> str:
        return self.mem.learning.choose(step.context, step.situation.options, agent=AGENT)

    def update(self, step: Step, action: str, success: bool) -> None:
        self.mem.learning.record(step.context, action, success, agent=AGENT, alternatives=step.situation.options)

    def recommend(self, situation: Situation, text: str, *, changed: bool) -> str | None:
        s = self.mem.learning.suggest(text, agent=AGENT, options=situation.options)
        self.answers.append((s.recommended, s.options[0].action, s.confidence, situation.best(changed)))
        current = self.mem.learning.recommend
        self.mem.learning.recommend = replace(
            current,
            recent_horizon=BEFORE_RULE.recent_horizon,
            calibration=BEFORE_RULE.calibration,
            min_evidence=BEFORE_RULE.min_evidence,
        )
        try:
            old = self.mem.learning.suggest(text, agent=AGENT, options=situation.options)
        finally:
            self.mem.learning.recommend = current
        self.answers_before.append((old.recommended, old.options[0].action, old.confidence, situation.best(changed)))
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
    #: The rule before H-REC on the same questions (coverage, precision, right, mean_confidence).
    before_rule: dict[str, float | None] = field(default_factory=dict)
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
        result.before_rule = dict(
            zip(("coverage", "precision", "right", "mean_confidence"), _rates(policy.answers_before), strict=True)
        )
    return result


def _rates(answers: Sequence[tuple[str | None, str, float, str]]) -> tuple[float, float | None, float, float | None]:
    """Coverage, precision, right recommendations (share of all questions) and mean stated confidence."""
    made = [(rec, conf, right) for rec, _, conf, right in answers if rec is not None]
    right = sum(rec == r for rec, _, r in made)
    precision = right / len(made) if made else None
    confidence = statistics.fmean(conf for _, conf, _ in made) if made else None
    return len(made) / len(answers), precision, right / len(answers), confidence


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


# -- multi-step episodes (seed 002's reinforcement learner against episode credit) --------------------------------

MULTI_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("prepare", ("build-image", "reuse-cache", "vendor-deps")),
    ("migrate", ("online-migration", "maintenance-window", "skip-migration")),
    ("release", ("canary", "blue-green", "all-at-once")),
)
#: The right option of each step given the previous step's choice (the first step: given nothing).
MULTI_RIGHT: dict[tuple[int, str | None], str] = {
    (0, None): "build-image",
    **{
        (1, p): r
        for p, r in zip(MULTI_STEPS[0][1], ("online-migration", "maintenance-window", "online-migration"), strict=True)
    },
    **{(2, p): r for p, r in zip(MULTI_STEPS[1][1], ("canary", "blue-green", "canary"), strict=True)},
}
MULTI_TEMPLATES = (
    "Deploy the {svc} service, step {k} ({name}); the previous step was {prev}",
    "Rolling out a new version of {svc}: {name} stage (step {k}), after {prev}",
    "{svc} release pipeline, {name} (step {k} of 3), previous choice: {prev}",
)


def multi_success_p(choices: Sequence[str]) -> float:
    """The episode's success probability: 0.9 with every step right, 0.45 with one wrong, 0.1 otherwise."""
    right = sum(MULTI_RIGHT[(k, choices[k - 1] if k else None)] == c for k, c in enumerate(choices))
    return {3: 0.9, 2: 0.45}.get(right, 0.1)


@dataclass
class MultiResult:
    successes: list[bool] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        half = len(self.successes) // 2
        return {
            "success_rate": statistics.fmean(self.successes),
            "last_half": statistics.fmean(self.successes[half:]),
            "first_half": statistics.fmean(self.successes[:half]),
        }


def run_multistep(
    policy: str, episodes: int, seed: int, embedder: Embedder | None = None, folder: str = ""
) -> MultiResult:
    """``policy``: engramdb, q-structured (the seed's Q-learner on the true state), q-text (on the text), random,
    oracle. Reward only at the end of each 3-step episode; one draw per episode decides it (common random numbers)."""
    rng = random.Random(seed + 30_000)
    draws = [
        (rng.random(), [rng.randrange(len(MULTI_TEMPLATES)) for _ in MULTI_STEPS], rng.choice(SITUATIONS[0].options))
        for _ in range(episodes)
    ]
    prng = random.Random(seed)
    q: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    out = MultiResult()
    mem = Engram(folder, embedder=embedder, learning_seed=seed) if policy == "engramdb" else None
    svc_rng = random.Random(seed + 40_000)
    try:
        for draw, templates, _ in draws:
            svc = svc_rng.choice(["billing", "orders", "search", "users"])
            eid = mem.episodes.start(f"deploy {svc}", agent=AGENT) if mem is not None else ""
            choices: list[str] = []
            history: list[tuple[str, str]] = []
            for k, (name, options) in enumerate(MULTI_STEPS):
                prev = choices[-1] if choices else "nothing yet"
                text = MULTI_TEMPLATES[templates[k]].format(svc=svc, k=k + 1, name=name, prev=prev)
                state = f"deploy:{k}:{prev}" if policy == "q-structured" else text
                if policy == "engramdb":
                    assert mem is not None
                    a = mem.learning.choose(text, list(options), agent=AGENT)
                    mem.learning.record(text, a, None, agent=AGENT, alternatives=options, episode=eid)
                elif policy == "oracle":
                    a = MULTI_RIGHT[(k, choices[-1] if choices else None)]
                elif policy == "random" or prng.random() < 0.2 or not q[state]:
                    a = prng.choice(options)
                else:
                    a = max(options, key=lambda o: (q[state][o], prng.random()))
                choices.append(a)
                history.append((state, a))
            success = draw < multi_success_p(choices)
            out.successes.append(success)
            if mem is not None:
                mem.episodes.end(eid, success, agent=AGENT)
            elif policy.startswith("q-"):
                # The seed's learn_from_episode: backwards, reward at the end, gamma 0.95, lr 0.1.
                for i in range(len(history) - 1, -1, -1):
                    state, a = history[i]
                    if i == len(history) - 1:
                        target = 1.0 if success else -1.0
                    else:
                        nxt = q[history[i + 1][0]]
                        target = 0.95 * (max(nxt.values()) if nxt else 0.0)
                    q[state][a] += 0.1 * (target - q[state][a])
    finally:
        if mem is not None:
            mem.close()
    return out


MULTI_SYSTEMS = ("engramdb", "q-structured", "q-text", "random", "oracle")


# -- pure simulation (tuning and calibration) ---------------------------------------------------------------------


@dataclass
class SimAnswer:
    step: int
    raw: float
    evidence: float
    top: str
    right: str
    changed: bool
    #: The raw confidence of the rule before H-REC (the long-horizon lead, no recent view), on the same evidence.
    raw_long: float = 0.0


@dataclass
class SimResult:
    successes: list[bool] = field(default_factory=list)
    answers: list[SimAnswer] = field(default_factory=list)


def _embed_all(embedder: Embedder, texts: Sequence[str]) -> dict[str, Any]:
    unique = list(dict.fromkeys(texts))
    vectors = embedder.embed(unique)
    return dict(zip(unique, vectors, strict=True))


def simulate(
    embedder: Embedder,
    stream: Sequence[Step],
    queries: Sequence[tuple[Situation, str]],
    *,
    config: RecommendConfig,
    seed: int,
    exploration: float,
    checkpoints: Sequence[int] = (),
) -> SimResult:
    """The decision stream through the pure recommend module (no store): what ``choose`` and ``suggest`` do,
    with the same similarity search (top ``candidates`` cosines above the floor), in a fraction of the time."""
    import numpy as np

    from engramdb.learning import recommend as rc
    from engramdb.models import DecisionRecord

    vec = _embed_all(embedder, [s.context for s in stream] + [t for _, t in queries])
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    records: list[DecisionRecord] = []
    matrix = np.zeros((len(stream), len(next(iter(vec.values())))), dtype=np.float32)
    out = SimResult()
    marks = set(checkpoints)

    def neighbours(text: str, n: int) -> list[rc.Neighbour]:
        if n == 0:
            return []
        cos = matrix[:n] @ vec[text]
        k = min(config.candidates, n)
        idx = np.argpartition(-cos, k - 1)[:k]
        return [rc.Neighbour(records[i], float(cos[i])) for i in idx if cos[i] > config.similarity_floor]

    long_view = replace(config, recent_horizon=None)

    def ask(i: int, now: datetime) -> None:
        # Asked before step i: the world has changed for questions after the midpoint (the benchmark asks its
        # "before the change" questions at the midpoint itself).
        changed = i > len(stream) // 2
        for sit, text in queries:
            nb = neighbours(text, i)
            s = rc.suggest(text, nb, now=now, config=config, seed=seed, options=sit.options)
            old = rc.suggest(text, nb, now=now, config=long_view, seed=seed, options=sit.options)
            out.answers.append(
                SimAnswer(
                    i, s.raw_confidence, s.evidence, s.options[0].action, sit.best(changed), changed, old.raw_confidence
                )
            )

    for i, step in enumerate(stream):
        now = t0 + timedelta(seconds=i)
        if i in marks:
            ask(i, now)
        nb = neighbours(step.context, i)
        opts = step.situation.options
        action = rc.choose(step.context, opts, nb, now=now, config=config, seed=seed + i, exploration=exploration)
        probs = step.situation.after if step.changed else step.situation.before
        success = step.draw < probs[action]
        out.successes.append(success)
        records.append(
            DecisionRecord(
                id=str(i),
                agent=AGENT,
                context=step.context,
                action=action,
                success=float(success),
                at=now,
                alternatives=tuple(opts),
            )
        )
        matrix[i] = vec[step.context]
    if len(stream) in marks:
        ask(len(stream), t0 + timedelta(seconds=len(stream)))
    return out


def _isotonic(points: Sequence[tuple[float, bool]], bins: int = 10) -> list[tuple[float, float]]:
    """Knots of a monotone map raw -> share right: equal-count bins, pooled adjacent violators."""
    pts = sorted(points)
    if not pts:
        return [(0.0, 0.0), (1.0, 1.0)]
    size = max(1, len(pts) // bins)
    blocks = [list(pts[i : i + size]) for i in range(0, len(pts), size)]
    stats = [[statistics.fmean(p[0] for p in b), sum(p[1] for p in b), len(b)] for b in blocks]
    merged: list[list[float]] = []
    for st in stats:
        merged.append(list(st))
        # Pooled on the smoothed rates, so that the knots rise after smoothing too (a tiny last bin cannot dip).
        while len(merged) > 1 and (merged[-2][1] + 1) / (merged[-2][2] + 2) > (merged[-1][1] + 1) / (merged[-1][2] + 2):
            b = merged.pop()
            a = merged.pop()
            n = a[2] + b[2]
            merged.append([(a[0] * a[2] + b[0] * b[2]) / n, a[1] + b[1], n])
    # Rates are Beta(1, 1)-smoothed so that no knot claims certainty from a finite sample.
    return [(0.0, 0.0)] + [(round(x, 3), round((s + 1) / (n + 2), 3)) for x, s, n in merged]


def calibration_points(steps: int) -> list[int]:
    """Where the simulation asks its held-out questions: early, every 50 steps, at the change and at the end."""
    return sorted({4, 8, 16, 32, *range(50, steps, 50), steps // 2, steps})


def run_simulations(
    embedder: Embedder, seeds: Sequence[int], steps: int, config: RecommendConfig
) -> tuple[list[dict[str, float]], list[SimAnswer]]:
    """The pure simulation on ``seeds``: each stream's success figures, and every held-out question's answer."""
    answers: list[SimAnswer] = []
    runs = []
    for seed in seeds:
        stream = make_stream(seed, steps)
        queries = held_out_queries(seed, per_template=2)
        res = simulate(
            embedder, stream, queries, config=config, seed=seed, exploration=0.5, checkpoints=calibration_points(steps)
        )
        answers += res.answers
        half, window = steps // 2, steps // 4
        runs.append(
            {
                "success": statistics.fmean(res.successes),
                "recovery": statistics.fmean(res.successes[half : half + window]),
                "before": statistics.fmean(res.successes[:half]),
                "settled_before": statistics.fmean(res.successes[half // 2 : half]),
                "after": statistics.fmean(res.successes[half:]),
            }
        )
    return runs, answers


def fit_calibration(answers: Sequence[SimAnswer]) -> tuple[tuple[float, tuple[tuple[float, float], ...]], ...]:
    """The calibration table (see ``CALIBRATION`` in learning/recommend.py) fitted on ``answers``."""
    bands = (0.0, 0.5, 1.0, 3.0, 10.0)
    table = []
    for lo, hi in zip(bands, (*bands[1:], float("inf")), strict=True):
        pts = [(a.raw, a.top == a.right) for a in answers if lo <= a.evidence < hi]
        if len(pts) >= 50:
            table.append((lo, tuple(_isotonic(pts))))
    return tuple(table)


def score_rule(
    answers: Sequence[SimAnswer],
    confidence: Callable[[SimAnswer], float],
    *,
    steps: int,
    min_confidence: float,
    min_evidence: float,
) -> dict[str, Any]:
    """Coverage, precision and right recommendations of a rule at the benchmark's points (the change and the end:
    settled stretches, what the issue measures), over the whole stream, and in the quarter after the change;
    and the calibration: stated confidence against the share right, by confidence bucket (whole stream)."""
    half = steps // 2
    parts = {
        "settled": lambda a: a.step in (half, steps),
        "whole": lambda a: True,
        "after_change": lambda a: half < a.step <= half + steps // 4,
    }
    out: dict[str, Any] = {}
    for name, keep in parts.items():
        rows = [a for a in answers if keep(a)]
        made = [a for a in rows if a.evidence >= min_evidence - 1e-3 and confidence(a) >= min_confidence]
        right = sum(a.top == a.right for a in made)
        out[name] = {
            "questions": len(rows),
            "coverage": len(made) / max(1, len(rows)),
            "precision": right / len(made) if made else None,
            "right": right / max(1, len(rows)),
        }
    buckets = []
    for lo, hi in ((0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)):
        rows = [a for a in answers if a.evidence >= min_evidence - 1e-3 and lo <= confidence(a) < hi]
        if rows:
            buckets.append(
                {
                    "bucket": f"{lo:.1f}-{min(hi, 1.0):.1f}",
                    "questions": len(rows),
                    "stated": statistics.fmean(confidence(a) for a in rows),
                    "right": statistics.fmean(a.top == a.right for a in rows),
                }
            )
    out["calibration"] = buckets
    return out


# -- main --------------------------------------------------------------------------------------------------------

OLD_CHANGE = "engramdb, change rule before H-REC (newest window only)"
DECISION_SYSTEMS = (
    "engramdb",
    OLD_CHANGE,
    "engramdb (exploration=1)",
    "exact-count",
    "q-learning",
    "random",
    "oracle",
)


def _mean_of(dicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Numbers averaged over seeds; anything else kept per seed."""
    out: dict[str, Any] = {}
    for key in dicts[0]:
        values = [d[key] for d in dicts if d[key] is not None]
        if values and all(isinstance(v, int | float) for v in values):
            out[key] = statistics.fmean(values)
        else:
            out[key] = values or None
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1600, help="decision steps per stream (the change is midway)")
    parser.add_argument("--failures", type=int, default=300, help="error occurrences per stream")
    parser.add_argument("--quick", action="store_true", help="1 seed, 800 steps, 150 failures")
    parser.add_argument("--scale", action="store_true", help="also time suggest over 10k decisions")
    parser.add_argument("--skip-decisions", action="store_true")
    parser.add_argument("--skip-failures", action="store_true")
    parser.add_argument("--skip-multistep", action="store_true")
    parser.add_argument("--episodes", type=int, default=400, help="multi-step episodes per seed")
    parser.add_argument("--config", default="", help="RecommendConfig overrides, e.g. 'similarity_floor=0.4'")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "learning.json")
    parser.add_argument(
        "--calibrate", action="store_true", help="pure simulation only: success, recovery and the calibration table"
    )
    args = parser.parse_args(argv)
    if args.calibrate:
        return calibrate_main(args)
    if args.quick:
        args.seeds, args.steps, args.failures, args.episodes = 1, 800, 150, 200
    overrides = {k: float(v) for k, v in (kv.split("=") for kv in args.config.split(",") if kv)}

    embedder = make_embedder(load_settings({}))
    load_start = os.getloadavg()[0]
    decisions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    failures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    multi: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        for seed in range(args.seeds):
            if not args.skip_decisions:
                stream = make_stream(seed, args.steps)
                queries = held_out_queries(seed)
                policies: list[Policy] = [
                    Ours(embedder, f"{tmp}/decisions-{seed}", seed, **overrides),
                    Ours(embedder, f"{tmp}/decisions-plain-{seed}", seed, exploration=1.0, **overrides),
                    # The change rule before H-REC (the newest window only), same stream: the recovery A/B.
                    Ours(
                        embedder,
                        f"{tmp}/decisions-newest-{seed}",
                        seed,
                        name=OLD_CHANGE,
                        **{"change": ChangeRule(scan=False), **overrides},
                    ),
                    ExactCount(seed),
                    QLearning(seed),
                    RandomPolicy(seed),
                    Oracle(),
                ]
                for policy in policies:
                    res = run_decisions(policy, stream, queries)
                    decisions[policy.name].append(res.summary(args.steps))
                    console.print(f"seed {seed} {policy.name}: {_pct(statistics.fmean(res.successes))}% success")
                    if isinstance(policy, Ours):
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
                for name in MULTI_SYSTEMS:
                    res = run_multistep(name, args.episodes, seed, embedder, f"{tmp}/multi-{seed}")
                    multi[name].append(res.summary())
                    console.print(f"seed {seed} multi-step {name}: {_pct(statistics.fmean(res.successes))}% success")
        scale = run_scale(embedder, f"{tmp}/scale") if args.scale else None

    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
        "load_average_1m_start_end": [load_start, os.getloadavg()[0]],
        "seeds": args.seeds,
        "steps": args.steps,
        "failure_occurrences": args.failures,
        "config_overrides": overrides,
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
        for name in DECISION_SYSTEMS:
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
        ours = results["decisions"]["engramdb"]
        console.print(
            f"engramdb suggest on held-out descriptions: recommends for {_pct(ours['recommend_coverage'])}% of "
            f"the questions, right for {_pct(ours['recommend_precision'])}% of those "
            f"(a right recommendation for {_pct(ours['recommend_right'])}% of all) "
            f"(mean confidence {_pct(ours['recommend_mean_confidence'])}%); the rule before H-REC on the same "
            f"questions: recommends {_pct(ours.get('before_rule_coverage'))}%, right for "
            f"{_pct(ours.get('before_rule_precision'))}% of those ({_pct(ours.get('before_rule_right'))}% of all)"
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


def calibrate_main(args: argparse.Namespace) -> int:
    """``--calibrate``: the pure simulation with the config overrides. The calibration table is fitted on the
    *dev* streams (seeds 100...), and the rules are scored on the *test* streams (seeds 0..., other descriptions
    drawn, other outcomes): the shipped rule, the table just fitted, and the rule before H-REC (long-horizon lead,
    its own table) on the same answers."""
    embedder = make_embedder(load_settings({}))
    overrides: dict[str, Any] = {}
    change: dict[str, Any] = {}
    points: dict[str, Any] = {}
    for kv in (x for x in args.config.split(",") if x):
        k, v = kv.split("=")
        if k.startswith("change_"):
            change[k[7:]] = v if k == "change_scope" else float(v)
        elif k.startswith("cp_"):  # Bayesian change points instead of the change rule
            points[k[3:]] = v if k == "cp_scope" else float(v)
        elif k == "nochange":
            overrides["change"] = None
        else:
            overrides[k] = None if v == "none" else float(v)
    cfg = RecommendConfig(calibration=None, **overrides)
    if change:
        cfg = replace(cfg, change=ChangeRule(**change))
    if points:
        cfg = replace(cfg, change=ChangePoints(**points))
    steps = args.steps
    dev_runs, dev = run_simulations(embedder, range(100, 100 + args.seeds), steps, cfg)
    table = fit_calibration(dev)
    print("dev streams:", json.dumps(_mean_of(dev_runs)), len(dev), "questions")
    for lo, knots in table:
        print(f"  evidence >= {lo:g}: " + " ".join(f"({x}, {y})" for x, y in knots))
    test_runs, test = run_simulations(embedder, range(args.seeds), steps, cfg)
    print("test streams:", json.dumps(_mean_of(test_runs)), len(test), "questions")
    shipped = RecommendConfig()
    rules: dict[str, Callable[[SimAnswer], float]] = {
        "shipped": lambda a: calibrated(a.raw, a.evidence, CALIBRATION),
        "fitted on dev": lambda a: calibrated(a.raw, a.evidence, table),
        "before H-REC": lambda a: calibrated(a.raw_long, a.evidence, CALIBRATION_BEFORE),
    }
    min_evidence = {"before H-REC": BEFORE_RULE.min_evidence}
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": args.config,
        "steps": steps,
        "dev_seeds": list(range(100, 100 + args.seeds)),
        "test_seeds": list(range(args.seeds)),
        "dev_runs": _mean_of(dev_runs),
        "test_runs": _mean_of(test_runs),
        "fitted_table": table,
        "rules": {},
    }
    for name, conf in rules.items():
        for split, answers in (("dev", dev), ("test", test)):
            res = score_rule(
                answers,
                conf,
                steps=steps,
                min_confidence=shipped.min_confidence,
                min_evidence=min_evidence.get(name, shipped.min_evidence),
            )
            report["rules"][f"{name} [{split}]"] = res
            print(
                f"{name:14s} [{split:4s}] "
                + "  ".join(
                    f"{part}: recommends {_pct(r['coverage'])}% precision {_pct(r['precision'])}% "
                    f"right {_pct(r['right'])}%"
                    for part, r in res.items()
                    if part != "calibration"
                )
            )
            if split == "test":
                print(
                    "    calibration (test, whole stream): "
                    + "; ".join(
                        f"{b['bucket']}: n {b['questions']} stated {_pct(b['stated'])} right {_pct(b['right'])}"
                        for b in res["calibration"]
                    )
                )
    out = args.output if args.output != RESULTS_DIR / "learning.json" else RESULTS_DIR / "learning_calibration.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

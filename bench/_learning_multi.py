"""Multi-step episodes for bench/learning.py: seed 002's reinforcement learner against engramdb's episode credit.

Three steps per episode (prepare, migrate, release); the right option of each step depends on the previous step's
choice, and the reward comes only at the end of the episode. One draw per episode decides it for every system
(common random numbers).
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from _learning_data import SITUATIONS
from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.learning.stats import ChangeRule

AGENT = "bench"

__all__ = ["MULTI_SYSTEMS", "MultiResult", "multi_success_p", "run_multistep"]


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
    policy: str,
    episodes: int,
    seed: int,
    embedder: Embedder | None = None,
    folder: str = "",
    *,
    change: ChangeRule | None = None,
) -> MultiResult:
    """``policy``: engramdb, q-structured (the seed's Q-learner on the true state), q-text (on the text), random,
    oracle. Reward only at the end of each 3-step episode; one draw per episode decides it (common random numbers).
    ``change``: engramdb with this change rule instead of the default (the recovery A/B)."""
    rng = random.Random(seed + 30_000)
    draws = [
        (rng.random(), [rng.randrange(len(MULTI_TEMPLATES)) for _ in MULTI_STEPS], rng.choice(SITUATIONS[0].options))
        for _ in range(episodes)
    ]
    prng = random.Random(seed)
    q: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    out = MultiResult()
    mem = Engram(folder, embedder=embedder, learning_seed=seed) if policy == "engramdb" else None
    if mem is not None and change is not None:
        mem.learning.recommend = replace(mem.learning.recommend, change=change)
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

"""Task complexity, assessed when the caller does not give it (pure: values in, values out).

The rule (``mem.learning.record_execution(..., complexity=None)`` applies it and stores the
result with ``complexity_assessed: true``) adds points for what the task's text says, for
what the caller knows about it, and for what similar past runs showed:

==========================================================  ============
from the text                                               points
==========================================================  ============
longer than 200 characters (longer than 100)                2 (1)
four or more listed parts (two or more): commas,            2 (1)
semicolons, colons, "and", "then", line breaks
building something new (implement, build, create, add,      1
design, develop, set up, support)
heavy work: migrations, schemas, databases, distribution,   2 each,
concurrency, parallelism, schedulers, payments,             at most 6
integrations, security, encryption, infrastructure,
Kubernetes, rollouts, zero downtime, idempotency, shards,
replicas, rebalancing, transactions, consistency, backfills,
monoliths, microservices, PII, GDPR, compliance, rotation
moderate work: auth, OAuth, login, tokens, APIs,            1 each,
endpoints, REST, pagination, components, forms, webhooks,   at most 2
retries, caches, queues, deploys, refactors, performance,
scaling, async, pipelines, CI
trivial edits: typo, rename, comment, README, docs,         -1 (never
formatting, lint, version bump                              below 0)
==========================================================  ============

==========================================================  ============
from the caller (seed 000's task fields, ``metadata``)      points
==========================================================  ============
category backend, database, integration, auth,              2
infrastructure or security
dependencies (a list)                                       1 each, <= 3
effort over 5 (over 2)                                      3 (1)
==========================================================  ============

==========================================================  ============
from history (at least 3 similar past runs)                 points
==========================================================  ============
more than half of them failed                               1
their median duration is over twice the agent's median     1
(over 300 s when the agent has no other runs)
==========================================================  ============

0-2 points: ``low``; 3-4: ``medium``; 5 or more: ``high``. The seed this follows scored
length, dependencies, effort and category; an agent's task usually arrives as one short
sentence without them, so the words of the sentence carry most of the weight: ten varied
tasks (a typo fix to a zero-downtime migration) must spread over the three levels
(``tests/seeds/test_seed_000_complexity.py``), where the seed's rule called them all "low".
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Final

__all__ = ["COMPLEX_CATEGORIES", "MIN_HISTORY", "assess_complexity", "complexity_points"]

_PARTS = re.compile(r"(?i)[,;:\n]|\band\b|\bthen\b")
_BUILD = re.compile(r"(?i)\b(implement|build|create|add|design|develop|set up|support)\b")
_HEAVY = re.compile(
    r"(?i)\b(migrat\w*|schema\w*|database\w*|distributed|concurren\w*|parallel\w*|scheduler\w*|payment\w*"
    r"|integrat\w*|secur\w*|encrypt\w*|infrastructure|kubernetes|rollout\w*|downtime|idempoten\w*"
    r"|shard\w*|replica\w*|rebalanc\w*|transaction\w*|consisten\w*|backfill\w*|monolith\w*|microservice\w*"
    r"|pii|gdpr|complian\w*|rotat\w*)"
)
_MODERATE = re.compile(
    r"(?i)\b(auth\w*|oauth\w*|login|tokens?|apis?|endpoints?|rest|paginat\w*|components?|forms?|webhooks?"
    r"|retr(?:y|ies)|cach\w*|queues?|deploy\w*|refactor\w*|performance|scal(?:e|ing|able)|async\w*|pipelines?"
    r"|ci(?:/cd)?|workers?)\b"
)
_TRIVIAL = re.compile(r"(?i)\b(typos?|rename\w*|comments?|readme|docs?|docstrings?|format\w*|lint\w*|bump\w*)\b")
#: Categories the seed calls complex.
COMPLEX_CATEGORIES: Final = frozenset({"backend", "database", "integration", "auth", "infrastructure", "security"})
#: Similar past runs needed before history counts.
MIN_HISTORY: Final = 3
_SLOW_SECONDS: Final = 300.0


def complexity_points(
    task: str,
    *,
    similar_success: Sequence[float] = (),
    similar_durations: Sequence[float] = (),
    typical_duration: float | None = None,
    category: str | None = None,
    dependencies: int = 0,
    effort: float | None = None,
) -> int:
    """The points of the rule in the module docstring."""
    points = 0
    n = len(task.strip())
    points += 2 if n > 200 else 1 if n > 100 else 0
    parts = len(_PARTS.findall(task))
    points += 2 if parts >= 4 else 1 if parts >= 2 else 0
    points += 1 if _BUILD.search(task) else 0
    points += min(6, 2 * len({m.lower()[:6] for m in _HEAVY.findall(task)}))
    points += min(2, len({m.lower()[:5] for m in _MODERATE.findall(task)}))
    if _TRIVIAL.search(task):
        points = max(0, points - 1)
    if category is not None and category.strip().lower() in COMPLEX_CATEGORIES:
        points += 2
    points += min(3, max(0, dependencies))
    if effort is not None:
        points += 3 if effort > 5 else 1 if effort > 2 else 0
    if len(similar_success) >= MIN_HISTORY and statistics.fmean(similar_success) < 0.5:
        points += 1
    if len(similar_durations) >= MIN_HISTORY:
        limit = 2.0 * typical_duration if typical_duration else _SLOW_SECONDS
        if statistics.median(similar_durations) > limit:
            points += 1
    return points


def assess_complexity(
    task: str,
    *,
    similar_success: Sequence[float] = (),
    similar_durations: Sequence[float] = (),
    typical_duration: float | None = None,
    category: str | None = None,
    dependencies: int = 0,
    effort: float | None = None,
) -> str:
    """``low``, ``medium`` or ``high`` by the rule in the module docstring."""
    points = complexity_points(
        task,
        similar_success=similar_success,
        similar_durations=similar_durations,
        typical_duration=typical_duration,
        category=category,
        dependencies=dependencies,
        effort=effort,
    )
    return "high" if points >= 5 else "medium" if points >= 3 else "low"

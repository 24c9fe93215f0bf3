"""Values of failure learning: a fix and its record, a failure pattern, a pre-action warning, a plan.

"Pattern" means a failure pattern: the occurrences of one failure whose messages differ only in
details (paths, numbers, ids, hosts...). See :mod:`engramdb.learning.failures`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from engramdb.models._encode import Encoded

__all__ = [
    "CheckResult",
    "FailurePattern",
    "FailureWarning",
    "PatternPlan",
    "PreventionCheck",
    "PreventionEffect",
    "SolutionStats",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreventionEffect(Encoded):
    """What a pattern's prevention checks did (seed 001's metric: failures prevented after identification).

    ``since`` is when the first check for the pattern was saved. ``expected_after`` is how many
    occurrences the rate before it (per day, over first occurrence to ``since``) predicts for the
    time since; ``prevented`` is the share of those that did not happen (0..1), None while fewer
    than one was expected (too early to tell).
    """

    since: datetime
    before: int
    after: int
    days_before: float
    days_after: float
    expected_after: float
    prevented: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SolutionStats(Encoded):
    """A fix for a failure pattern and how often it worked."""

    solution: str
    successes: float
    attempts: float
    success_rate: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FailurePattern(Encoded):
    """A recurring kind of failure: its signature, how often it happened, and what fixed it."""

    id: str
    signature: str
    example: str
    occurrences: int
    #: A readable slug (``npm-install-timeout``), unique among the agent's patterns; accepted wherever an id is.
    name: str = ""
    first_seen: datetime
    last_seen: datetime
    solutions: list[SolutionStats] = field(default_factory=list)
    prevention: list[str] = field(default_factory=list)
    #: Where it happens: the most common contexts its occurrences were recorded with (seed 001's "Occurs in").
    occurs_in: list[str] = field(default_factory=list)
    #: Occurrences before and after its first saved prevention check (None: no check saved).
    effect: PreventionEffect | None = None

    _keys: ClassVar[tuple[str, ...]] = (
        "id",
        "name",
        "signature",
        "example",
        "occurrences",
        "first_seen",
        "last_seen",
        "solutions",
        "prevention",
        "occurs_in",
        "effect",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureWarning(Encoded):
    """A known failure pattern that a planned action resembles (see ``mem.failures.preflight``)."""

    pattern: FailurePattern
    #: Cosine similarity between the planned action and the closest past occurrence, 0..1.
    similarity: float
    #: One line for the agent: what happened before and what to check first.
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PatternPlan(Encoded):
    """How to apply a known failure pattern, or a stored memory, to a task (see ``mem.failures.plan``)."""

    task: str
    pattern_id: str
    #: "failure_pattern", or the kind of the memory the id names ("code_pattern", "decision", ...).
    kind: str
    #: What the pattern is, in one line.
    title: str
    #: Cosine similarity of the task and the pattern, -1..1: low means the pattern may not fit the task.
    relevance: float
    #: What to do, in order: checks before starting, the approach or code to reuse.
    steps: list[str] = field(default_factory=list)
    #: For a failure pattern: its fixes, best first.
    fixes: list[SolutionStats] = field(default_factory=list)
    #: For a code pattern: the code to adapt.
    code: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PreventionCheck(Encoded):
    """A saved prevention check: a described condition to verify before a workflow stage, and optionally
    shell-free predicates that ``mem.failures.run_checks``
    evaluates (files that must exist, environment variables that must be set, commands that must be on
    ``PATH``, Python modules that must be importable)."""

    id: str
    agent: str
    #: What to verify, in words.
    description: str
    #: The workflow stage it runs before ("development", "ci", "deploy", ...).
    stage: str
    #: The failure pattern it prevents (its id and name), if any.
    pattern_id: str | None = None
    pattern_name: str | None = None
    files: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    created_at: datetime

    @property
    def automatic(self) -> bool:
        """True when the check has a predicate to evaluate (else it is a reminder to check by hand)."""
        return bool(self.files or self.env or self.commands or self.modules)

    _keys: ClassVar[tuple[str, ...]] = (
        "id",
        "agent",
        "description",
        "stage",
        "pattern_id",
        "pattern_name",
        "files",
        "env",
        "commands",
        "modules",
        "automatic",
        "created_at",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult(Encoded):
    """The outcome of running one prevention check."""

    check: PreventionCheck
    #: "passed", "failed", or "manual" (no predicate: verify by hand).
    status: str
    #: What is missing, one line per unmet predicate.
    problems: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True unless the check failed (a manual check does not fail)."""
        return self.status != "failed"

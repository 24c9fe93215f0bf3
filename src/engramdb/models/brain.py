"""Values of the brain layer (seed 002): reasoning, LLM routing, and the context for a prompt.

Computed by :mod:`engramdb.brain` and returned by ``mem.reason``, ``mem.routing`` and ``mem.context``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal

from engramdb.errors import ValidationError
from engramdb.models._encode import Encoded
from engramdb.models.learning import OptionStats
from engramdb.models.memory import Memory

__all__ = [
    "CONTEXT_SECTIONS",
    "MODEL_TIERS",
    "REASONING_MODES",
    "Approach",
    "Context",
    "ContextItem",
    "ContextSection",
    "DistillGroup",
    "DistillResult",
    "ModelSpec",
    "ModelStats",
    "ModelTier",
    "Reasoning",
    "ReasoningMode",
    "RouteChoice",
]

# -- context (ContextBuilder's values) -------------------------------------------------------------------------

#: The sections of a context, in the order they are rendered (and, for their first items, filled).
CONTEXT_SECTIONS: Final = ("approach", "warnings", "fixes", "preferences", "memories", "session")

#: An item cut to fit keeps at least this many words, else it is dropped.
_MIN_WORDS: Final = 4
_SPACE: Final = re.compile(r"\s+")
_NON_SPACE: Final = re.compile(r"\S")

TokenCounter = Callable[[str], int]


def _upper_bound_tokens(text: str) -> int:
    """A safe upper bound for sub-word tokenizers: every token holds at least one non-space character."""
    return len(_NON_SPACE.findall(text))


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextItem(Encoded):
    """One line of a context section; ``memory_id`` names the memory it comes from, if any."""

    text: str
    memory_id: str | None = None
    #: How relevant it is to the task (similarity or search score), when known.
    score: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSection:
    """A titled part of a context; items most useful first (or oldest first when ``chronological``)."""

    name: str
    title: str
    items: tuple[ContextItem, ...] = ()
    #: Items are in time order: rendered in that order, and the oldest are dropped first when space is short.
    chronological: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "title": self.title, "items": [i.to_dict() for i in self.items]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Approach(Encoded):
    """The recommended way to do the task, from the outcomes of similar past tasks."""

    #: The action to take; None when the evidence is too thin to recommend one.
    recommended: str | None
    #: Success rate of the recommended action in similar contexts (None without a recommendation).
    success_rate: float | None
    #: How often a recommendation made on such evidence is right, 0..1.
    confidence: float
    #: Weighted attempts behind the recommended action.
    attempts: float
    tentative: bool
    #: The other options considered, best first.
    alternatives: tuple[OptionStats, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What an agent should know before working on ``task``: sections of memories, rendered within a budget.

    :meth:`render` returns a prompt block of at most ``token_budget`` tokens (counted with
    ``count_tokens``, the bundled tokenizer when built by ``mem.context``): the first item of
    each section first, in section order, then the rest; an item that does not fit whole is
    cut at a word boundary, or left out.
    """

    task: str
    agent: str
    token_budget: int
    sections: tuple[ContextSection, ...] = ()
    approach: Approach | None = None
    count_tokens: TokenCounter = field(default=_upper_bound_tokens, compare=False, repr=False)

    def section(self, name: str) -> ContextSection | None:
        """The section called ``name`` (see :data:`CONTEXT_SECTIONS`), or None if it is empty."""
        return next((s for s in self.sections if s.name == name), None)

    @property
    def empty(self) -> bool:
        """True when no section holds anything."""
        return not any(s.items for s in self.sections)

    def render(self, token_budget: int | None = None) -> str:
        """The context as a prompt block of at most ``token_budget`` tokens (default: the context's own).

        Empty string when nothing is known (or nothing fits).
        """
        budget = self.token_budget if token_budget is None else token_budget
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise ValidationError(f"token_budget must be a non-negative integer, not {budget!r}")
        return fit_sections(self.sections, budget, self.count_tokens)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the sections, the approach, and the rendered prompt with its token count."""
        prompt = self.render()
        return {
            "task": self.task,
            "agent": self.agent,
            "token_budget": self.token_budget,
            "approach": self.approach.to_dict() if self.approach is not None else None,
            "sections": [s.to_dict() for s in self.sections],
            "prompt": prompt,
            "prompt_tokens": self.count_tokens(prompt),
        }


def _line(text: str) -> str:
    return "- " + _SPACE.sub(" ", text).strip()


def _header(section: ContextSection) -> str:
    return f"## {section.title}"


def _priority(sections: Sequence[ContextSection]) -> list[tuple[int, int]]:
    """(section, item) positions in the order they get space: each section's best item, then the rest."""
    per_section = []
    for s, section in enumerate(sections):
        idx = list(range(len(section.items)))
        per_section.append([(s, i) for i in (reversed(idx) if section.chronological else idx)])
    order = [items[0] for items in per_section if items]
    order += [key for items in per_section for key in items[1:]]
    return order


def _assemble(sections: Sequence[ContextSection], chosen: dict[tuple[int, int], str]) -> str:
    lines: list[str] = []
    for s, section in enumerate(sections):
        picked = sorted(i for (si, i) in chosen if si == s)
        if not picked:
            continue
        if lines:
            lines.append("")
        lines.append(_header(section))
        lines.extend(chosen[(s, i)] for i in picked)
    return "\n".join(lines)


def _cut(text: str, room: int, count: TokenCounter) -> str | None:
    """The longest word prefix of the item ``text`` (with an ellipsis) whose line costs at most ``room``."""
    words = _SPACE.sub(" ", text).strip().split(" ")
    lo, hi, best = _MIN_WORDS, len(words) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        line = _line(" ".join(words[:mid]) + " …")
        if count(line) <= room:
            best, lo = line, mid + 1
        else:
            hi = mid - 1
    return best


def fit_sections(sections: Sequence[ContextSection], budget: int, count: TokenCounter) -> str:
    """Render ``sections`` in at most ``budget`` tokens by ``count``, most useful items first (pure)."""
    chosen: dict[tuple[int, int], str] = {}
    headed: set[int] = set()
    used = 0
    for s, i in _priority(sections):
        # Lines are joined by newlines, which sub-word tokenizers do not count: costs add up (checked below).
        extra = 0 if s in headed else count(_header(sections[s]))
        line = _line(sections[s].items[i].text)
        cost = extra + count(line)
        if used + cost > budget:
            cut = _cut(sections[s].items[i].text, budget - used - extra, count)
            if cut is None:
                continue
            line, cost = cut, extra + count(cut)
        chosen[(s, i)] = line
        used += cost
        headed.add(s)
    text = _assemble(sections, chosen)
    # A tokenizer whose counts do not add up line by line: drop the least useful items until it fits.
    order = [key for key in _priority(sections) if key in chosen]
    while order and count(text) > budget:
        del chosen[order.pop()]
        text = _assemble(sections, chosen)
    return text if count(text) <= budget else ""


# -- distillation ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DistillGroup(Encoded):
    """Memories that say the same thing, and the distilled knowledge that stands for them."""

    #: The kind of the source memories (a group never mixes kinds).
    kind: str
    source_ids: tuple[str, ...]
    #: The source closest in meaning to all others.
    medoid_id: str
    #: The generalised statement (details that vary between sources masked as ``<n>``, ``<path>``...).
    pattern: str
    #: When it applies (the situation the sources share).
    applies_when: str
    shared_terms: tuple[str, ...]
    confidence: float
    #: What the confidence rests on: "outcomes" (decisions), "feedback" (success rates), "fixes"
    #: (failures that were fixed) or "agreement" (how alike the sources are).
    basis: str
    #: Mean cosine similarity of the sources to the medoid.
    cohesion: float
    #: "create" (a new distilled memory), "update" (the group's earlier one changed) or "unchanged".
    action: str
    #: The distilled memory (as written, or as it would be on a dry run).
    memory: Memory


@dataclass(frozen=True, slots=True, kw_only=True)
class DistillResult(Encoded):
    """What one distillation run found and wrote (nothing written when ``dry_run``)."""

    agent: str
    dry_run: bool
    #: The cosine similarity from which two memories count as saying the same thing.
    threshold: float
    #: Source memories considered (the agent's own, of the kinds asked for, not distilled ones).
    considered: int
    groups: tuple[DistillGroup, ...] = ()
    #: Sources tagged ``archived`` by this run.
    archived: int = 0

    @property
    def memories(self) -> list[Memory]:
        """The distilled memories, one per group."""
        return [g.memory for g in self.groups]

    _keys: ClassVar[tuple[str, ...]] = ("agent", "dry_run", "threshold", "considered", "archived", "groups")


# -- reasoning ---------------------------------------------------------------------------------------------

ReasoningMode = Literal["plan", "think", "decide"]
#: The modes of ``mem.reason``: decompose a goal into steps, think it through, or pick one of the options.
REASONING_MODES: tuple[ReasoningMode, ...] = ("plan", "think", "decide")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning(Encoded):
    """What ``mem.reason`` concluded: the steps, the decision and why, and the id of the recorded decision.

    ``decision_id`` is the pending ``decision`` memory; attach how it turned out with
    ``mem.learning.resolve(decision_id, outcome)`` (or ``engram learning resolve``) so the learning engine
    counts it; until then it is listed by ``mem.learning.pending()``.
    """

    goal: str
    mode: ReasoningMode
    steps: tuple[str, ...]
    decision: str | None
    rationale: str
    decision_id: str | None = None
    #: The options the decision was chosen from (``mode="decide"``).
    options: tuple[str, ...] = ()
    #: The LLM that reasoned (``provider:model``).
    model: str = ""


# -- routing -----------------------------------------------------------------------------------------------

ModelTier = Literal["strong", "medium", "local"]
#: The tiers of the seed's routing table: cloud frontier models, cheaper cloud models, local models.
MODEL_TIERS: tuple[ModelTier, ...] = ("strong", "medium", "local")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec(Encoded):
    """A model the router may pick, with what is known about it before any outcome is recorded.

    ``tier`` places it in the seed's routing table (the prior); None guesses it from the
    name. ``cost`` (any unit, e.g. dollars per call) and ``latency_ms`` are prior
    estimates that recorded outcomes replace; None: the tier's typical values.
    """

    name: str
    tier: ModelTier | None = None
    cost: float | None = None
    latency_ms: float | None = None

    def __post_init__(self) -> None:
        from engramdb.errors import ValidationError  # models import nothing of the project at module level

        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 200:
            raise ValidationError(f"model name must be a non-empty string of at most 200 characters, not {self.name!r}")
        if self.tier is not None and self.tier not in MODEL_TIERS:
            raise ValidationError(f"unknown model tier {self.tier!r} (choose from {', '.join(MODEL_TIERS)})")
        for what, value in (("cost", self.cost), ("latency_ms", self.latency_ms)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0
            ):
                raise ValidationError(f"{what} of model {self.name!r} must be a non-negative number, not {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelStats(Encoded):
    """What the router believes about one model for one task: success, cost, latency, and the utility it ranks by."""

    model: str
    tier: ModelTier
    #: Posterior mean success probability (the seed's table as prior, recorded outcomes as evidence).
    expected_success: float
    #: 95% credible interval of the success probability.
    low: float
    high: float
    #: The prior's mean (from the routing table, shaped by outcomes of similar tasks).
    prior_success: float
    #: Weighted outcomes of this task type behind the estimate (0: the prior alone).
    evidence: float
    expected_cost: float
    expected_latency_ms: float
    #: expected_success - cost_weight * cost / max cost - latency_weight * latency / max latency.
    utility: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteChoice(Encoded):
    """The model ``mem.routing.route`` picked for a task, why, and how every candidate compares (best first).

    ``str(choice)`` is the model's name.
    """

    model: str
    task: str
    task_type: str | None
    reason: str
    #: Every candidate, best expected utility first (the pick may differ while exploring).
    candidates: tuple[ModelStats, ...] = field(default_factory=tuple)
    #: True when the pick is an exploration draw rather than the best expected utility.
    explored: bool = False
    cost_weight: float = 0.0
    latency_weight: float = 0.0
    #: The model to try if the pick is unavailable (the seed's fallback tier, else the next best); None if alone.
    fallback: str | None = None
    #: What made the pick: ``table`` (seed 002's routing table, outcomes still few and not against it),
    #: ``outcomes`` (the best expected utility from recorded outcomes) or ``exploration`` (a Thompson draw).
    decided_by: str = "outcomes"
    #: The seed's routing inputs as given.
    complexity: str | None = None
    context_length: int = 0
    require_fast: bool = False
    require_cheap: bool = False

    def __str__(self) -> str:
        return self.model

    def stats(self, model: str | None = None) -> ModelStats:
        """The statistics of ``model`` (default: the picked one)."""
        name = self.model if model is None else model
        for c in self.candidates:
            if c.model == name:
                return c
        raise KeyError(name)

    _keys: ClassVar[tuple[str, ...]] = (
        "model",
        "task",
        "task_type",
        "reason",
        "fallback",
        "decided_by",
        "explored",
        "complexity",
        "context_length",
        "require_fast",
        "require_cheap",
        "cost_weight",
        "latency_weight",
        "candidates",
    )

"""Seed 002's LLM routing strategy as data and one pure rule: which tier of model a task calls for, and why.

The seed gives a table (task -> recommended LLM, reason) and a ``SmartRouter.route(task_type,
complexity, context_length, require_fast, require_cheap)`` whose rules, in order, are:
fast and cheap -> local; complex reasoning -> strong (fallback: another strong model);
code generation unless simple -> strong (fallback: a local code model); context over
32,000 tokens -> strong; embeddings -> local; classification -> local (fallback: another
local model); anything else -> local for cost (fallback: a strong model).
:func:`table_rule` is that function over tiers instead of vendors, so it works with any
candidate list; :mod:`engramdb.services.routing` uses it as the decision while outcomes are
few and as the prior after.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from engramdb._validate import shown
from engramdb.errors import ValidationError
from engramdb.models import ModelTier

__all__ = [
    "COMPLEXITIES",
    "LONG_CONTEXT_TOKENS",
    "ROUTING_TABLE",
    "TASK_TYPE_ALIASES",
    "TIER_DEFAULTS",
    "Complexity",
    "TableRule",
    "guess_tier",
    "normalise_complexity",
    "normalise_task_type",
    "rule_prior",
    "table_prior",
    "table_rule",
]

Complexity = Literal["simple", "medium", "complex"]
COMPLEXITIES: Final[tuple[Complexity, ...]] = ("simple", "medium", "complex")
#: The seed's threshold: a context longer than this many tokens needs a large-window model.
LONG_CONTEXT_TOKENS: Final = 32_000

#: Seed 002's routing table: for each task type, the tier it recommends, and why.
ROUTING_TABLE: Final[Mapping[str, tuple[ModelTier, str]]] = {
    "reasoning": ("strong", "complex reasoning: best chain-of-thought"),
    "code_generation": ("strong", "code generation: best code quality"),
    "long_context": ("strong", "long context analysis: large context window"),
    "classification": ("local", "quick classification: fast, low latency"),
    "pattern_matching": ("local", "pattern matching: adequate quality, free"),
    "embedding": ("local", "embedding generation: free, good enough"),
    "cost_sensitive": ("local", "cost-sensitive tasks: zero API cost"),
    "summarization": ("local", "default to local for cost efficiency"),
    "chat": ("local", "default to local for cost efficiency"),
}
#: Other spellings of the table's task types.
TASK_TYPE_ALIASES: Final[Mapping[str, str]] = {
    "code": "code_generation",
    "code_gen": "code_generation",
    "codegen": "code_generation",
    "coding": "code_generation",
    "classify": "classification",
    "long_context_analysis": "long_context",
    "summarisation": "summarization",
    "summary": "summarization",
    "embeddings": "embedding",
    "patterns": "pattern_matching",
    "complex_reasoning": "reasoning",
}

#: Prior mean success by (the tier the table recommends for the task, the model's tier).
_PRIOR: Final[Mapping[str | None, Mapping[ModelTier, float]]] = {
    "strong": {"strong": 0.85, "medium": 0.70, "local": 0.55},
    "local": {"strong": 0.90, "medium": 0.88, "local": 0.85},
    None: {"strong": 0.80, "medium": 0.72, "local": 0.62},  # a task the table says nothing about
}
#: Typical cost per call (relative units: a frontier model's call is 1) and latency of each tier.
TIER_DEFAULTS: Final[Mapping[ModelTier, tuple[float, float]]] = {
    "strong": (1.0, 2500.0),
    "medium": (0.15, 1200.0),
    "local": (0.0, 800.0),
}

_MEDIUM = re.compile(r"mini|nano|haiku|flash|gpt-3\.5|turbo|small|lite", re.IGNORECASE)
_STRONG = re.compile(r"gpt-4|gpt-5|\bo[1345]\b|^o[1345]|claude|opus|sonnet|gemini.*pro|large|grok", re.IGNORECASE)
_LOCAL = re.compile(
    r":|llama|mistral|mixtral|qwen|phi|gemma|deepseek|codellama|starcoder|nomic|local|ollama|lmstudio|gguf",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableRule:
    """What the seed's router says for a task: the tier to use, why, and the tier of its fallback."""

    tier: ModelTier
    why: str
    fallback: ModelTier | None = None


def guess_tier(name: str) -> ModelTier:
    """The tier a model name suggests: medium (mini, haiku, flash...), strong (gpt-4, claude...), local, else medium."""
    if _MEDIUM.search(name):
        return "medium"
    if _STRONG.search(name):
        return "strong"
    if _LOCAL.search(name):
        return "local"
    return "medium"


def normalise_task_type(task_type: object) -> str | None:
    """A task type in the table's spelling (lower case, ``_`` for spaces and hyphens, aliases resolved); None stays."""
    if task_type is None:
        return None
    if not isinstance(task_type, str) or not task_type.strip():
        raise ValidationError(f"task_type must be a non-empty string, not {shown(task_type)}")
    key = re.sub(r"[\s\-]+", "_", task_type.strip().lower())
    if len(key) > 100:
        raise ValidationError(f"task_type is too long ({len(key)} characters; the limit is 100)")
    return TASK_TYPE_ALIASES.get(key, key)


def normalise_complexity(complexity: object) -> Complexity | None:
    """``simple``, ``medium`` or ``complex`` (any case); None stays; anything else is a ValidationError."""
    if complexity is None:
        return None
    if isinstance(complexity, str):
        key = complexity.strip().lower()
        for c in COMPLEXITIES:
            if key == c:
                return c
    raise ValidationError(f"complexity must be one of {', '.join(COMPLEXITIES)}, not {shown(complexity)}")


def table_prior(task_type: str | None, tier: ModelTier) -> float:
    """The prior mean success of a model of ``tier`` on ``task_type`` from the seed's table."""
    row = ROUTING_TABLE.get(task_type) if task_type is not None else None
    return _PRIOR[row[0] if row is not None else None][tier]


def rule_prior(rule: TableRule | None, tier: ModelTier) -> float:
    """The prior mean success of a model of ``tier`` when the seed's router says ``rule`` (None: it says nothing)."""
    return _PRIOR[rule.tier if rule is not None else None][tier]


def table_rule(
    task_type: str | None,
    *,
    complexity: Complexity | None = None,
    context_length: int = 0,
    require_fast: bool = False,
    require_cheap: bool = False,
) -> TableRule | None:
    """The seed router's answer for a task, in its order of rules; None for a task type it does not know.

    Without a complexity, reasoning and code generation are taken as the table names them
    ("complex reasoning", "code generation"). ``require_cheap`` alone is the table's
    "cost-sensitive tasks" row; ``require_fast`` alone changes no rule (the router weighs
    latency instead).
    """
    if require_fast and require_cheap:
        return TableRule(tier="local", why="fast and cheap: always a local model")
    if require_cheap:
        return TableRule(tier="local", why=ROUTING_TABLE["cost_sensitive"][1], fallback="local")
    if task_type == "reasoning" and complexity in (None, "complex"):
        return TableRule(tier="strong", why=ROUTING_TABLE["reasoning"][1], fallback="strong")
    if task_type == "code_generation" and complexity != "simple":
        return TableRule(tier="strong", why=ROUTING_TABLE["code_generation"][1], fallback="local")
    if context_length > LONG_CONTEXT_TOKENS or task_type == "long_context":
        why = f"long context analysis: over {LONG_CONTEXT_TOKENS:,} tokens needs a large context window"
        return TableRule(tier="strong", why=why)
    if task_type in ("embedding", "pattern_matching"):
        return TableRule(tier="local", why=ROUTING_TABLE[task_type][1])
    if task_type in ("classification", "cost_sensitive"):
        return TableRule(tier="local", why=ROUTING_TABLE[task_type][1], fallback="local")
    if task_type is not None and task_type in ROUTING_TABLE:  # summarization, chat, and simpler reasoning or code
        simpler = task_type in ("reasoning", "code_generation")
        qualifier = f" ({complexity} {task_type.replace('_', ' ')})" if simpler else ""
        return TableRule(tier="local", why=f"default to local for cost efficiency{qualifier}", fallback="strong")
    return None

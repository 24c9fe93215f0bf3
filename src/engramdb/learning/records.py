"""How an outcome is written into a ``decision`` memory, and read back.

An outcome is a memory like any other (so sharing, export, retention and audit
apply to it): its content is the context the decision was made in, and its
metadata holds what was done and how it turned out. The keys below are the
on-disk format; :func:`parse_decision` is the only reader, and it skips decision
memories that were written by hand without them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engramdb.errors import ValidationError
from engramdb.learning.stats import outcome_label, success_weight
from engramdb.models import Memory

__all__ = [
    "RESERVED_KEYS",
    "DecisionRecord",
    "ExecutionInfo",
    "decision_metadata",
    "normalise_context",
    "parse_decision",
]

#: Metadata keys :func:`decision_metadata` writes (callers' metadata may not use them).
RESERVED_KEYS: Final = frozenset(
    {"action", "outcome", "success", "reward", "alternatives", "duration", "used", "category", "execution"}
)

MAX_ACTION_CHARS: Final = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionInfo:
    """The extra facts of an execution record (a task run with an approach)."""

    task_type: str | None = None
    complexity: str | None = None
    success_factors: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    calls: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the stored form)."""
        return {
            "type": self.task_type,
            "complexity": self.complexity,
            "success_factors": list(self.success_factors),
            "tools": list(self.tools),
            "calls": self.calls,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """A decision memory read back as an outcome: in ``context``, doing ``action`` gave ``success``."""

    id: str
    agent: str
    context: str
    action: str
    #: Success weight in [0, 1].
    success: float
    at: datetime
    alternatives: tuple[str, ...] = ()
    duration: float | None = None
    category: str | None = None
    #: Set for execution records (see ``Engram.record_execution``).
    execution: ExecutionInfo | None = None
    #: Who shared it with the reader, if it is not the reader's own.
    shared_by: str | None = None

    @property
    def outcome(self) -> str:
        """success, failure or partial."""
        return outcome_label(self.success)

    @property
    def reward(self) -> float:
        """The success weight as a reward in [-1, 1]."""
        return 2.0 * self.success - 1.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {
            "id": self.id,
            "agent": self.agent,
            "context": self.context,
            "action": self.action,
            "outcome": self.outcome,
            "success": self.success,
            "at": self.at.isoformat(),
            "alternatives": list(self.alternatives),
            "duration": self.duration,
            "category": self.category,
        }
        if self.execution is not None:
            out["execution"] = self.execution.to_dict()
        return out


def normalise_context(text: str) -> str:
    """Case- and whitespace-insensitive form of a context, for exact-match comparisons."""
    return " ".join(text.casefold().split())


def _label(value: object, what: str, *, limit: int = MAX_ACTION_CHARS) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string")
    value = value.strip()
    if len(value) > limit:
        raise ValidationError(f"{what} is too long ({len(value)} characters; the limit is {limit})")
    if "\x00" in value:
        raise ValidationError(f"{what} must not contain NUL characters")
    return value


def _labels(values: object, what: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = (values,)
    if not isinstance(values, Iterable):
        raise ValidationError(f"{what} must be a list of strings")
    return tuple(dict.fromkeys(_label(v, f"each of {what}") for v in values))


def _duration(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValidationError(f"duration must be a non-negative number of seconds, not {value!r}")
    return float(value)


def decision_metadata(
    action: object,
    outcome: object,
    *,
    alternatives: object = (),
    duration: object = None,
    category: object = None,
    used: Iterable[str] = (),
    execution: ExecutionInfo | None = None,
    extra: Mapping[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Validate an outcome and return ``(action, metadata)`` for its decision memory.

    Raises ValidationError (and nothing is written) on a bad action, outcome,
    alternative, duration or category, or when ``extra`` uses a reserved key.
    """
    action = _label(action, "action")
    weight = success_weight(outcome)
    alts = tuple(a for a in _labels(alternatives, "alternatives") if a != action)
    clash = sorted(RESERVED_KEYS & set(extra or {}))
    if clash:
        raise ValidationError(f"metadata key(s) {', '.join(clash)} are reserved for the outcome record")
    meta: dict[str, Any] = dict(extra or {})
    meta.update(
        {
            "action": action,
            "outcome": outcome_label(weight),
            "success": weight,
            "reward": 2.0 * weight - 1.0,
        }
    )
    if alts:
        meta["alternatives"] = list(alts)
    dur = _duration(duration)
    if dur is not None:
        meta["duration"] = dur
    if category is not None:
        meta["category"] = _label(category, "category", limit=200)
    used_ids = list(dict.fromkeys(used))
    if used_ids:
        meta["used"] = used_ids
    if execution is not None:
        meta["execution"] = execution.to_dict()
    return action, meta


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _parse_execution(raw: object) -> ExecutionInfo | None:
    if not isinstance(raw, Mapping):
        return None
    factors = raw.get("success_factors")
    tools = raw.get("tools")
    calls = raw.get("calls")
    return ExecutionInfo(
        task_type=_str_or_none(raw.get("type")),
        complexity=_str_or_none(raw.get("complexity")),
        success_factors=tuple(str(f) for f in factors) if isinstance(factors, list) else (),
        tools=tuple(str(t) for t in tools) if isinstance(tools, list) else (),
        calls=calls if isinstance(calls, int) and not isinstance(calls, bool) else None,
    )


def parse_decision(memory: Memory) -> DecisionRecord | None:
    """The outcome a decision memory records, or None if it is not an outcome record."""
    if memory.kind != "decision":
        return None
    meta = memory.metadata
    action = meta.get("action")
    if not isinstance(action, str) or not action:
        return None
    raw = meta.get("success")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and 0.0 <= raw <= 1.0:
        weight = float(raw)
    else:
        try:
            weight = success_weight(meta.get("outcome"))
        except ValidationError:
            return None
    alts = meta.get("alternatives")
    duration = meta.get("duration")
    return DecisionRecord(
        id=memory.id,
        agent=memory.agent,
        context=memory.content,
        action=action,
        success=weight,
        at=memory.created_at,
        alternatives=tuple(a for a in alts if isinstance(a, str)) if isinstance(alts, list) else (),
        duration=float(duration) if isinstance(duration, int | float) and not isinstance(duration, bool) else None,
        category=_str_or_none(meta.get("category")),
        execution=_parse_execution(meta.get("execution")),
        shared_by=memory.shared_by,
    )

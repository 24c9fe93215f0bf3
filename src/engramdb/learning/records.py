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
from typing import Any, Final

from engramdb.errors import ValidationError
from engramdb.learning.stats import success_weight
from engramdb.models import DecisionRecord, ExecutionInfo, Memory
from engramdb.models.learning import outcome_label

__all__ = [
    "EPISODE_TAG",
    "PENDING",
    "RESERVED_KEYS",
    "credited_weights",
    "decision_metadata",
    "is_pending",
    "is_pending_outcome",
    "normalise_context",
    "parse_decision",
    "resolved_metadata",
]

#: Metadata keys :func:`decision_metadata` writes (callers' metadata may not use them).
RESERVED_KEYS: Final = frozenset(
    {"action", "outcome", "success", "reward", "alternatives", "duration", "used", "category", "execution", "episode"}
)
#: The outcome word (and tag) of a decision whose outcome comes later.
PENDING: Final = "pending"
#: Decisions made within an episode carry the tag ``episode:<id>``.
EPISODE_TAG: Final = "episode:"

MAX_ACTION_CHARS: Final = 500


def normalise_context(text: str) -> str:
    """Case- and whitespace-insensitive form of a context, for exact-match comparisons."""
    return " ".join(text.casefold().split())


def is_pending_outcome(outcome: object) -> bool:
    """Whether ``outcome`` says the outcome comes later: None or the word "pending" (any case)."""
    return outcome is None or (isinstance(outcome, str) and outcome.strip().casefold() == PENDING)


def is_pending(meta: Mapping[str, Any]) -> bool:
    """Whether a decision's metadata waits for its outcome.

    Decisions from reasoning written before they shared the learning format carry
    ``pending: True`` and no outcome; they are pending too, so they can still be resolved.
    """
    if "action" not in meta:
        return False
    return meta.get("outcome") == PENDING or (meta.get("pending") is True and "outcome" not in meta)


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

    ``outcome`` None or "pending" records a pending decision (its outcome comes later, see
    :func:`resolved_metadata`). Raises ValidationError (and nothing is written) on a bad action, outcome,
    alternative, duration or category, or when ``extra`` uses a reserved key.
    """
    action = _label(action, "action")
    weight = None if is_pending_outcome(outcome) else success_weight(outcome)
    alts = tuple(a for a in _labels(alternatives, "alternatives") if a != action)
    clash = sorted(RESERVED_KEYS & set(extra or {}))
    if clash:
        raise ValidationError(f"metadata key(s) {', '.join(clash)} are reserved for the outcome record")
    meta: dict[str, Any] = dict(extra or {})
    meta["action"] = action
    if weight is None:
        meta["outcome"] = PENDING
    else:
        meta.update({"outcome": outcome_label(weight), "success": weight, "reward": 2.0 * weight - 1.0})
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
        complexity_assessed=raw.get("complexity_assessed") is True,
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
        user=memory.user,
    )


def resolved_metadata(meta: Mapping[str, Any], outcome: object, *, credit: str | None = None) -> dict[str, Any]:
    """A pending decision's metadata with its outcome attached (ValidationError if it is not pending).

    ``credit`` notes where the outcome came from (e.g. ``"episode"``: credited from an episode's end).
    """
    if not is_pending(meta):
        raise ValidationError("the decision already has an outcome (only a pending decision can be resolved)")
    if is_pending_outcome(outcome):
        raise ValidationError("resolve needs the outcome (success, failure, partial, a boolean or a reward)")
    weight = success_weight(outcome)
    out = dict(meta)
    out.pop("pending", None)
    out.update({"outcome": outcome_label(weight), "success": weight, "reward": 2.0 * weight - 1.0})
    if credit is not None:
        out["credit"] = credit
    return out


def credited_weights(outcome: object, steps: int, *, discount: float) -> list[float]:
    """Success weights for ``steps`` decisions of an episode that ended with ``outcome``, oldest first.

    The decision ``d`` steps before the end gets the episode's reward discounted by ``discount ** d``
    (the return a Q-learner with that discount factor would credit it with when only the end is
    rewarded): a reward r in [-1, 1] becomes ``r * discount**d``, i.e. the success weight moves
    towards 0.5 (no information) the further the decision was from the outcome.
    """
    if not 0.0 < discount <= 1.0 or not math.isfinite(discount):
        raise ValidationError(f"discount must be within (0, 1], not {discount!r}")
    reward = 2.0 * success_weight(outcome) - 1.0
    return [(reward * discount ** (steps - 1 - i) + 1.0) / 2.0 for i in range(steps)]

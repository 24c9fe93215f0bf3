"""Retention policies: which memories expire, and why. Pure: memories, a policy and ``now`` in; ids out.

The values (:class:`~engramdb.models.RetentionPolicy`, :class:`~engramdb.models.RetentionRule`,
:class:`~engramdb.models.Expiry`) live in :mod:`engramdb.models.privacy`.

A policy holds one rule per kind, plus an optional ``default`` rule for kinds
without their own. A rule can say any of:

- ``max_age_days``: memories older than this (by creation) expire;
- ``max_count``: each agent keeps at most this many of the kind, the newest;
- ``decay_half_life_days`` with ``decay_floor``: a memory's strength is its
  confidence halved for every half-life it went unused (since it was last
  retrieved, else created); it expires once that falls below the floor, so unused
  low-confidence memories go first and every retrieval renews a memory.

A memory whose metadata has ``"pinned": true`` never expires. The file form is TOML::

    [default]
    max_age_days = 365

    [conversation]
    max_age_days = 30
    max_count = 5000

    [knowledge]
    decay_half_life_days = 90
    decay_floor = 0.05
"""

from __future__ import annotations

import math
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from engramdb.errors import ConfigError
from engramdb.models import DEFAULT_RULE, KINDS, Expiry, Memory, RetentionPolicy, RetentionRule

__all__ = [
    "evaluate",
    "load_policy",
    "parse_policy",
    "strength",
]

_RULE_KEYS: Final = frozenset({"max_age_days", "max_count", "decay_half_life_days", "decay_floor"})


def _number(key: str, value: Any) -> float:
    # The caller prefixes the source and section.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key} must be a number, not {value!r}")
    return float(value)


def parse_policy(data: Mapping[str, Any], *, source: str = "retention policy") -> RetentionPolicy:
    """A policy from the parsed sections of a policy file (``{kind: {limit: value}}``)."""
    rules: dict[str, RetentionRule] = {}
    default: RetentionRule | None = None
    for section, values in data.items():
        if section != DEFAULT_RULE and section not in KINDS:
            raise ConfigError(
                f"{source}: unknown kind [{section}] (use a kind: {', '.join(sorted(KINDS))}; or [{DEFAULT_RULE}])"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"{source}: [{section}] must be a table of limits")
        unknown = sorted(set(values) - _RULE_KEYS)
        if unknown:
            raise ConfigError(f"{source}: [{section}] has unknown limit(s) {', '.join(unknown)}")
        max_count = values.get("max_count")
        if max_count is not None and (isinstance(max_count, bool) or not isinstance(max_count, int)):
            raise ConfigError(f"{source}: [{section}] max_count must be an integer, not {max_count!r}")
        try:
            rule = RetentionRule(
                max_age_days=_number("max_age_days", values["max_age_days"]) if "max_age_days" in values else None,
                max_count=max_count,
                decay_half_life_days=_number("decay_half_life_days", values["decay_half_life_days"])
                if "decay_half_life_days" in values
                else None,
                decay_floor=_number("decay_floor", values["decay_floor"]) if "decay_floor" in values else None,
            )
        except ConfigError as exc:
            raise ConfigError(f"{source}: [{section}] {exc}") from exc
        if section == DEFAULT_RULE:
            default = rule
        else:
            rules[section] = rule
    return RetentionPolicy(rules=rules, default=default)


def load_policy(path: Path) -> RetentionPolicy:
    """Read a TOML policy file; a missing file is an empty policy (nothing expires)."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return RetentionPolicy()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read retention policy {path}: {exc}") from exc
    return parse_policy(data, source=str(path))


def _days(delta_seconds: float) -> float:
    return delta_seconds / 86400.0


def strength(memory: Memory, rule: RetentionRule, *, now: datetime) -> float:
    """Confidence halved per half-life of disuse (1.0 when the rule has no decay)."""
    if rule.decay_half_life_days is None:
        return 1.0
    since = memory.last_accessed or memory.created_at
    idle = max(0.0, _days((now - since).total_seconds()))
    return float(memory.confidence) * math.pow(0.5, idle / rule.decay_half_life_days)


def _pinned(memory: Memory) -> bool:
    return memory.metadata.get("pinned") is True


def evaluate(memories: Iterable[Memory], policy: RetentionPolicy, *, now: datetime) -> list[Expiry]:
    """The memories ``policy`` removes at ``now``, each with its reason (by agent, kind, id).

    A memory that several limits remove is reported once, for the first of age,
    decay and count. The count limit keeps each agent's newest memories of the kind
    among those that survive the other limits (and the pinned ones count too).
    """
    expired: dict[str, Expiry] = {}
    survivors: dict[tuple[str, str], list[Memory]] = defaultdict(list)
    for memory in memories:
        rule = policy.rule_for(memory.kind)
        if rule is None or rule.empty:
            continue
        if _pinned(memory):
            survivors[(memory.agent, memory.kind)].append(memory)
            continue
        age = _days((now - memory.created_at).total_seconds())
        if rule.max_age_days is not None and age > rule.max_age_days:
            expired[memory.id] = Expiry(
                memory_id=memory.id,
                agent=memory.agent,
                kind=memory.kind,
                reason="max_age",
                detail=f"{age:.1f} days old (limit {rule.max_age_days:g})",
            )
            continue
        if rule.decay_floor is not None:
            value = strength(memory, rule, now=now)
            if value < rule.decay_floor:
                expired[memory.id] = Expiry(
                    memory_id=memory.id,
                    agent=memory.agent,
                    kind=memory.kind,
                    reason="decay",
                    detail=f"strength {value:.3f} below {rule.decay_floor:g} "
                    f"(confidence {memory.confidence:.2f}, unused since "
                    f"{(memory.last_accessed or memory.created_at).date().isoformat()})",
                )
                continue
        survivors[(memory.agent, memory.kind)].append(memory)
    for (agent, kind), group in survivors.items():
        rule = policy.rule_for(kind)
        if rule is None or rule.max_count is None or len(group) <= rule.max_count:
            continue
        # Newest first; pinned memories are kept whatever their age, and take up places.
        group.sort(key=lambda m: (_pinned(m), m.created_at, m.id), reverse=True)
        for memory in group[rule.max_count :]:
            if _pinned(memory):
                continue
            expired[memory.id] = Expiry(
                memory_id=memory.id,
                agent=agent,
                kind=kind,
                reason="max_count",
                detail=f"beyond the newest {rule.max_count} {kind} memories of {agent}",
            )
    return sorted(expired.values(), key=lambda e: (e.agent, e.kind, e.memory_id))

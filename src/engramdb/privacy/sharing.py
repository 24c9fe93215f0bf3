"""Consent rules of sharing (pure: values in, values out): what a share acts on, and who may receive it.

Sharing never copies: a share is a row saying "agent B may read memory X, shared
by A at T", and the store's read filter honours it; revoking deletes the row.
Merging does copy: its provenance rules are in :mod:`engramdb.knowledge.provenance`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from engramdb._validate import shown
from engramdb.errors import ValidationError

__all__ = ["ALL_AGENTS", "Selection", "recipient", "selection"]

#: ``to_agent`` value meaning every agent.
ALL_AGENTS: Final = "*"


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What a share or unshare acts on: exactly one of explicit ids, a tag, or a failure pattern."""

    memory_ids: tuple[str, ...] | None = None
    tag: str | None = None
    pattern: str | None = None

    def describe(self) -> str:
        """A short human description, for messages and audit entries."""
        if self.memory_ids is not None:
            return f"{len(self.memory_ids)} memory id(s)"
        if self.tag is not None:
            return f"tag {self.tag!r}"
        return f"pattern {self.pattern!r}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for audit details)."""
        if self.memory_ids is not None:
            return {"memory_ids": list(self.memory_ids)}
        if self.tag is not None:
            return {"tag": self.tag}
        return {"pattern": self.pattern}


def _nonempty(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, not {shown(value)}")
    if "\x00" in value:
        raise ValidationError(f"{what} must not contain NUL characters")
    return value.strip()


def selection(memory_ids: str | Iterable[str] | None, *, tag: str | None, pattern: str | None) -> Selection:
    """Validate a share/unshare selector: exactly one of ``memory_ids``, ``tag``, ``pattern``.

    Sharing everything an agent has is never implied by leaving the selector out:
    consent is given item by item, by tag or by pattern.
    """
    given = [name for name, value in (("memory ids", memory_ids), ("tag", tag), ("pattern", pattern)) if value]
    if not given:
        raise ValidationError("say which memories: memory ids, a tag or a failure pattern id")
    if len(given) > 1:
        raise ValidationError(f"give only one of memory ids, a tag or a pattern (got {' and '.join(given)})")
    if memory_ids:
        if not isinstance(memory_ids, str | Iterable):
            raise ValidationError(f"memory ids must be an id or a list of ids, not {type(memory_ids).__name__}")
        ids = (memory_ids,) if isinstance(memory_ids, str) else tuple(memory_ids)
        clean = tuple(dict.fromkeys(_nonempty(i, "memory id") for i in ids))
        return Selection(memory_ids=clean)
    if tag:
        return Selection(tag=_nonempty(tag, "tag"))
    return Selection(pattern=_nonempty(pattern, "pattern id"))


def recipient(to_agent: object, *, from_agent: str) -> str:
    """A share's recipient: an agent name other than the owner, or ``"*"`` for every agent."""
    if to_agent == ALL_AGENTS:
        return ALL_AGENTS
    if not isinstance(to_agent, str) or not to_agent.strip() or to_agent != to_agent.strip():
        raise ValidationError(f"to_agent must be an agent name or '*', not {shown(to_agent)}")
    if to_agent == from_agent:
        raise ValidationError(f"agent {from_agent!r} cannot share with itself")
    return to_agent

"""Consent and provenance rules of sharing and merging (pure: values in, values out).

Sharing never copies: a share is a row saying "agent B may read memory X, shared
by A at T", and the store's read filter honours it; revoking deletes the row.
Merging *does* copy (``merge_knowledge``), and these functions decide how a copied
or merged memory records where it came from, and how statistics combine, so that
merging the same source twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engramdb.errors import ValidationError
from engramdb.knowledge.dedupe import MERGED_FROM_KEY, merge_changes
from engramdb.models import Memory

__all__ = [
    "ALL_AGENTS",
    "MERGED_FROM",
    "MERGED_IDS",
    "ORIGIN",
    "Selection",
    "combined",
    "copied",
    "origins",
    "recipient",
    "selection",
]

#: ``to_agent`` value meaning every agent.
ALL_AGENTS: Final = "*"
#: Metadata key of a memory copied from another agent: ``{"agent": ..., "id": ..., "at": ...}``.
ORIGIN: Final = "origin"
#: Metadata key of the write path's merge provenance (bounded); transfers add ``agent`` and ``id`` to entries.
MERGED_FROM: Final = MERGED_FROM_KEY
#: Metadata key listing every ``[agent, id]`` merged in by an import or merge (unbounded: idempotence needs all).
MERGED_IDS: Final = "merged_ids"


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
        raise ValidationError(f"{what} must be a non-empty string, not {value!r}")
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
        raise ValidationError(f"to_agent must be an agent name or '*', not {to_agent!r}")
    if to_agent == from_agent:
        raise ValidationError(f"agent {from_agent!r} cannot share with itself")
    return to_agent


# -- merging ---------------------------------------------------------------------------------------------


def _pair(value: Any) -> tuple[str, str] | None:
    if isinstance(value, Mapping) and isinstance(value.get("agent"), str) and isinstance(value.get("id"), str):
        return (value["agent"], value["id"])
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
    ):
        return (value[0], value[1])
    return None


def _pairs(value: Any) -> set[tuple[str, str]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return set()
    return {p for p in map(_pair, value) if p is not None}


def origins(memory: Memory) -> set[tuple[str, str]]:
    """Every (agent, memory id) this memory was copied or merged from, itself included."""
    found = {(memory.agent, memory.id)}
    meta = memory.metadata
    origin = _pair(meta.get(ORIGIN))
    if origin is not None:
        found.add(origin)
    found |= _pairs(meta.get(MERGED_FROM))
    found |= _pairs(meta.get(MERGED_IDS))
    return found


def _stamp(source: Memory, at: datetime) -> dict[str, Any]:
    return {"agent": source.agent, "id": source.id, "at": at.isoformat(timespec="microseconds")}


def copied(source: Memory, *, to_agent: str, new_id: str, at: datetime) -> Memory:
    """``source`` as a new private memory of ``to_agent``, remembering where it came from.

    Statistics, confidence, timestamps and tags travel with it: the recipient learns
    what the source learned. A copy of a copy points at the first original.
    """
    meta = dict(source.metadata)
    if _pair(meta.get(ORIGIN)) is None:
        meta[ORIGIN] = _stamp(source, at)
    return Memory(
        id=new_id,
        agent=to_agent,
        kind=source.kind,
        content=source.content,
        tags=source.tags,
        metadata=meta,
        created_at=source.created_at,
        updated_at=at,
        last_accessed=source.last_accessed,
        access_count=source.access_count,
        confidence=source.confidence,
        successes=source.successes,
        attempts=source.attempts,
        visibility="private",
        redacted=source.redacted,
        user=source.user,
        session=source.session,
        occurred_at=source.occurred_at,
        valid_until=source.valid_until,
    )


def combined(target: Memory, source: Memory, *, similarity: float, at: datetime) -> dict[str, Any]:
    """The field changes that merge near-duplicate ``source`` (another agent's, or from a file) into ``target``.

    The write path's merge (:func:`engramdb.knowledge.dedupe.merge_changes`) does the
    common part: successes and attempts summed, confidence the higher, tags united,
    metadata keys the target lacked, a ``merged_from`` provenance entry. A transferred
    memory also brings its access count (summed: they count different reads) and the
    provenance names its origin (agent and id), also kept in the unbounded
    ``merged_ids`` list, so merging the same source again is recognised and skipped.
    """
    changes = merge_changes(target, source, similarity=similarity, at=at)
    meta = dict(changes["metadata"])
    entries = list(meta.get(MERGED_FROM) or [])
    if entries and isinstance(entries[-1], Mapping):
        entries[-1] = {**entries[-1], "agent": source.agent, "id": source.id}
        meta[MERGED_FROM] = entries
    known = [list(p) for p in _pairs(target.metadata.get(MERGED_IDS))]
    meta[MERGED_IDS] = [*sorted(known), [source.agent, source.id]]
    changes["metadata"] = meta
    if source.access_count:
        changes["access_count"] = target.access_count + source.access_count
    accessed = [t for t in (target.last_accessed, source.last_accessed) if t is not None]
    if accessed and max(accessed) != target.last_accessed:
        changes["last_accessed"] = max(accessed)
    return changes

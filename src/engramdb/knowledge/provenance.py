"""Provenance of knowledge merged or copied between agents (pure: values in, values out).

Merging copies (``merge_knowledge``, knowledge imports): these functions decide how a copied or merged memory
records where it came from, and how statistics combine, so that merging the same source twice changes nothing
the second time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from engramdb.knowledge.dedupe import MERGED_FROM_KEY, merge_changes
from engramdb.models import Memory

__all__ = ["MERGED_FROM", "MERGED_IDS", "ORIGIN", "combined", "copied", "origins"]

#: Metadata key of a memory copied from another agent: ``{"agent": ..., "id": ..., "at": ...}``.
ORIGIN: Final = "origin"
#: Metadata key of the write path's merge provenance (bounded); transfers add ``agent`` and ``id`` to entries.
MERGED_FROM: Final = MERGED_FROM_KEY
#: Metadata key listing every ``[agent, id]`` merged in by an import or merge (unbounded: idempotence needs all).
MERGED_IDS: Final = "merged_ids"


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

"""What the stores check before they write: values the schema cannot hold are rejected with a
one-line ValidationError (nothing is written), missing memories raise NotFound."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import npt

from engramdb.errors import NotFound, ValidationError
from engramdb.models import KINDS, VISIBILITIES, Memory

__all__ = [
    "UPDATABLE_FIELDS",
    "as_unit_rows",
    "check_changes",
    "check_distinct",
    "check_meta",
    "check_new_memories",
    "check_page",
    "check_share_agents",
    "not_found",
    "require_found",
    "validate_fields",
    "validate_memory",
]

#: Fields ``update`` may change. ``id``, ``agent`` and ``created_at`` are identity, not state.
UPDATABLE_FIELDS: Final = frozenset(
    {
        "content",
        "tags",
        "metadata",
        "kind",
        "confidence",
        "successes",
        "attempts",
        "visibility",
        "last_accessed",
        "access_count",
        "redacted",
        # Set by the write pipeline only: a keyed fact's new value moves into its thread and time.
        "session",
        "occurred_at",
        "valid_until",
    }
)


def _check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"{name} must be a finite number, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValidationError(f"{name} must be between {low} and {high}, not {value!r}")


def _check_strings(name: str, value: Any) -> None:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{name} must be a sequence of strings, not {value!r}")


def validate_fields(fields: Mapping[str, Any]) -> None:
    """Reject values the schema cannot hold, with a one-line message (nothing is written)."""
    for name, value in fields.items():
        if name == "content":
            if not isinstance(value, str) or not value.strip():
                raise ValidationError("content must be a non-empty string")
        elif name == "kind":
            if value not in KINDS:
                raise ValidationError(f"unknown kind {value!r}; expected one of {', '.join(sorted(KINDS))}")
        elif name == "visibility":
            if value not in VISIBILITIES:
                raise ValidationError(f"visibility must be one of {', '.join(sorted(VISIBILITIES))}")
        elif name in ("tags", "redacted"):
            _check_strings(name, value)
        elif name == "metadata":
            if not isinstance(value, Mapping):
                raise ValidationError("metadata must be a mapping")
        elif name == "confidence":
            _check_number(name, value, low=0.0, high=1.0)
        elif name in ("successes", "attempts"):
            _check_number(name, value, low=0.0)
        elif name == "access_count":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError("access_count must be a non-negative integer")
        elif name in ("last_accessed", "valid_until") and value is not None and not isinstance(value, datetime):
            raise ValidationError(f"{name} must be a datetime or None")
        elif name == "occurred_at" and (not isinstance(value, datetime) or value.utcoffset() is None):
            raise ValidationError("occurred_at must be a timezone-aware datetime")
        elif name in ("user", "session") and value is not None and (not isinstance(value, str) or not value):
            raise ValidationError(f"{name} must be a non-empty string or None, not {value!r}")


def validate_memory(memory: Memory) -> None:
    """Validate a whole memory before insert."""
    if not isinstance(memory.id, str) or not memory.id:
        raise ValidationError("memory id must be a non-empty string")
    if not isinstance(memory.agent, str) or not memory.agent or memory.agent == "*":
        raise ValidationError(f"agent must be a non-empty name other than '*', not {memory.agent!r}")
    validate_fields(
        {
            "content": memory.content,
            "kind": memory.kind,
            "visibility": memory.visibility,
            "tags": memory.tags,
            "redacted": memory.redacted,
            "metadata": memory.metadata,
            "confidence": memory.confidence,
            "successes": memory.successes,
            "attempts": memory.attempts,
            "access_count": memory.access_count,
            "last_accessed": memory.last_accessed,
            "user": memory.user,
            "session": memory.session,
            "occurred_at": memory.occurred_at,
            "valid_until": memory.valid_until,
        }
    )


def check_new_memories(memories: Sequence[Memory]) -> list[str]:
    """Check a batch for ``add`` (ids distinct, every memory valid); return its ids in order."""
    ids = [m.id for m in memories]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValidationError(f"memory id {dup!r} appears twice in one batch")
    for memory in memories:
        validate_memory(memory)
    return ids


def check_changes(changes: Mapping[str, Any]) -> None:
    """Check the changes of an ``update``: only updatable fields, with values the schema can hold."""
    unknown = sorted(set(changes) - UPDATABLE_FIELDS)
    if unknown:
        raise ValidationError(f"cannot update field(s) {', '.join(unknown)}")
    validate_fields(changes)


def check_share_agents(from_agent: str, to_agent: str) -> None:
    """Reject a share between no agents or from an agent to itself."""
    if not from_agent or from_agent == "*":
        raise ValidationError("from_agent must name one agent")
    if not to_agent:
        raise ValidationError("to_agent must name an agent, or '*' for every agent")
    if to_agent == from_agent:
        raise ValidationError("an agent cannot share with itself")


def check_meta(key: str, value: str, *, internal: frozenset[str]) -> None:
    """Reject setting a meta key the store maintains itself, or a non-string value."""
    if key in internal:
        raise ValidationError(f"meta key {key!r} is maintained by the store")
    if not isinstance(value, str):
        raise ValidationError(f"meta value for {key!r} must be a string")


def check_page(limit: int, offset: int) -> None:
    """Reject a negative ``limit`` or ``offset`` of a listing."""
    if limit < 0 or offset < 0:
        raise ValidationError("limit and offset must not be negative")


def check_distinct(memory_ids: Sequence[str]) -> None:
    """Reject a list of ids naming a memory twice."""
    if len(set(memory_ids)) != len(memory_ids):
        raise ValidationError("memory ids must be distinct")


def not_found(memory_id: str) -> NotFound:
    """The error for a memory that does not exist."""
    return NotFound(f"no memory with id {memory_id!r}")


def require_found(memory_ids: Iterable[str], found: Iterable[str]) -> None:
    """Raise NotFound for the first of ``memory_ids`` that is not among ``found``."""
    present = set(found)
    missing = [i for i in memory_ids if i not in present]
    if missing:
        raise not_found(missing[0])


def as_unit_rows(vectors: npt.ArrayLike, *, rows: int | None = None) -> _F32:
    """Validate vectors as a finite 2-D float32 array and L2-normalise each row.

    Callers hand in unit vectors already; normalising again costs little and makes
    the dot product an exact cosine whatever they pass.
    """
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValidationError(f"vectors must be a 2-D array with one row per memory, not shape {arr.shape}")
    if rows is not None and arr.shape[0] != rows:
        raise ValidationError(f"got {arr.shape[0]} vectors for {rows} memories")
    if not np.isfinite(arr).all():
        raise ValidationError("vectors must be finite (no NaN or infinity)")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValidationError("vectors must not be all zeros")
    return np.ascontiguousarray(arr / norms, dtype=np.float32)

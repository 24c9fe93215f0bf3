"""SQL building blocks of the SQLite store: value encoding, row decoding, filter clauses.

Kept apart from the store class so the visibility rule, the one thing every read
must get right, lives in exactly one function (:func:`filter_sql`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from engramdb._util import parse_ts
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.models import KINDS, VISIBILITIES, Memory
from engramdb.storage.base import Filter

__all__ = [
    "MEMORY_COLUMNS",
    "UPDATABLE_FIELDS",
    "FilterSQL",
    "check_share_agents",
    "column_value",
    "dumps",
    "filter_sql",
    "fts_query",
    "ids_json",
    "jsonable",
    "normalise_changes",
    "row_to_memory",
    "ts",
    "validate_fields",
    "validate_memory",
]

#: The columns :func:`row_to_memory` decodes, in order (``m`` is the memories alias).
MEMORY_COLUMNS: Final = (
    "m.id, m.agent, m.kind, m.content, m.tags, m.metadata, m.created_at, m.updated_at, "
    "m.last_accessed, m.access_count, m.confidence, m.successes, m.attempts, m.visibility, m.redacted"
)

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
    }
)


def ts(value: datetime) -> str:
    """A fixed-width UTC ISO 8601 string, so text order is time order (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def jsonable(value: Any) -> Any:
    """Turn tuples, mappings and datetimes into JSON values (for history records)."""
    if isinstance(value, datetime):
        return ts(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def dumps(value: Any, *, what: str) -> str:
    """Compact JSON, or a one-line ValidationError naming ``what`` could not be stored."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} must be JSON-serializable: {exc}") from exc


def _loads(text: str | None, *, default: Any) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CorruptStoreError(f"stored JSON is damaged: {exc}") from exc


def row_to_memory(row: Sequence[Any], shared_by: str | None = None, shared_at: str | None = None) -> Memory:
    """Decode a row selected with :data:`MEMORY_COLUMNS` (and the reader's share provenance, if any)."""
    created = parse_ts(row[6])
    updated = parse_ts(row[7])
    if created is None or updated is None:
        raise CorruptStoreError(f"memory {row[0]} has no timestamps")
    return Memory(
        id=row[0],
        agent=row[1],
        kind=row[2],
        content=row[3],
        tags=tuple(_loads(row[4], default=[])),
        metadata=_loads(row[5], default={}),
        created_at=created,
        updated_at=updated,
        last_accessed=parse_ts(row[8]),
        access_count=int(row[9]),
        confidence=float(row[10]),
        successes=float(row[11]),
        attempts=float(row[12]),
        visibility=row[13],
        redacted=tuple(_loads(row[14], default=[])),
        shared_by=shared_by,
        shared_at=parse_ts(shared_at) if shared_by is not None else None,
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
        elif name == "last_accessed" and value is not None and not isinstance(value, datetime):
            raise ValidationError("last_accessed must be a datetime or None")


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
        }
    )


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 query matching any of ``terms``, each quoted as a string; None if no terms.

    Quoting (with ``"`` doubled) makes every term a literal: operators such as
    ``NOT``/``NEAR``, column filters and stray quotes in user text cannot change the query.
    """
    quoted = ['"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms) if t and t.strip()]
    return " OR ".join(quoted) if quoted else None


@dataclass(frozen=True, slots=True)
class FilterSQL:
    """A filter as SQL over the ``memories m`` alias: a WHERE clause, ``shared_by`` and ``shared_at`` expressions."""

    where: str
    params: tuple[Any, ...]
    shared_by: str
    shared_by_params: tuple[Any, ...]
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()


# Visible to reader ? : its own, public ones, and ones shared with it or with everyone.
# Row by row: cheap when the query stops early (newest first with a LIMIT).
_VISIBLE = (
    "(m.agent = ? OR m.visibility = 'public' OR EXISTS "
    "(SELECT 1 FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*')))"
)
# The same rule as a set built from three indexed lookups: cheaper when every row is visited (count).
_VISIBLE_SET = (
    "m.rid IN (SELECT rid FROM memories WHERE agent = ? "
    "UNION ALL SELECT rid FROM memories WHERE visibility = 'public' "
    "UNION ALL SELECT m2.rid FROM shares s JOIN memories m2 ON m2.id = s.memory_id WHERE s.to_agent IN (?, '*'))"
)
# Who shared a memory with reader ? : a direct share wins over a share with everyone;
# a public memory without a share row is shared by its owner.
_SHARED_BY = (
    "CASE WHEN m.agent = ? THEN NULL ELSE COALESCE("
    "(SELECT s.from_agent FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1), m.agent) END"
)
# When it was shared with reader ? (the share _SHARED_BY names; NULL for a public memory never shared).
_SHARED_AT = (
    "CASE WHEN m.agent = ? THEN NULL ELSE "
    "(SELECT s.shared_at FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1) END"
)
_HAS_TAG = "EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id AND t.tag = ?)"


def filter_sql(flt: Filter | None, *, visit_all: bool = False) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (``"1"`` when there is none).

    ``visit_all`` picks the visibility form suited to queries that read every
    matching row (counts) rather than stopping at a LIMIT. Empty ``kinds``/``ids``
    tuples match nothing; empty ``tags`` restrict nothing (every memory has all of no tags).
    """
    if flt is None:
        return FilterSQL("1", (), "NULL", ())
    conds: list[str] = []
    params: list[Any] = []
    shared_by: str = "NULL"
    shared_by_params: tuple[Any, ...] = ()
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()
    if flt.agent is not None:
        if flt.include_shared:
            conds.append(_VISIBLE_SET if visit_all else _VISIBLE)
            params += [flt.agent, flt.agent]
            shared_by, shared_by_params = _SHARED_BY, (flt.agent, flt.agent)
            shared_at, shared_at_params = _SHARED_AT, (flt.agent, flt.agent)
        else:
            conds.append("m.agent = ?")
            params.append(flt.agent)
    if flt.kinds is not None:
        conds.append("m.kind IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(flt.kinds)))
    for tag in dict.fromkeys(flt.tags or ()):
        conds.append(_HAS_TAG)
        params.append(tag)
    if flt.ids is not None:
        conds.append("m.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(flt.ids)))
    return FilterSQL(
        " AND ".join(conds) or "1", tuple(params), shared_by, shared_by_params, shared_at, shared_at_params
    )


def ids_json(ids: Sequence[str]) -> str:
    """A list of ids as one JSON parameter, read in SQL with ``json_each(?)``.

    One parameter instead of one ``?`` per id: no SQLite variable limit, one cached statement.
    """
    return json.dumps(list(ids))


def check_share_agents(from_agent: str, to_agent: str) -> None:
    """Reject a share between no agents or from an agent to itself."""
    if not from_agent or from_agent == "*":
        raise ValidationError("from_agent must name one agent")
    if not to_agent:
        raise ValidationError("to_agent must name an agent, or '*' for every agent")
    if to_agent == from_agent:
        raise ValidationError("an agent cannot share with itself")


def normalise_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Changes in the types :class:`Memory` holds, so old and new values compare equal when equal."""
    out: dict[str, Any] = {}
    for name, value in changes.items():
        if name in ("tags", "redacted"):
            out[name] = tuple(value)
        elif name == "metadata":
            out[name] = dict(value)
        elif name in ("confidence", "successes", "attempts"):
            out[name] = float(value)
        else:
            out[name] = value
    return out


def column_value(name: str, value: Any) -> Any:
    """How a Memory field value is stored in its column."""
    if name in ("tags", "redacted"):
        return dumps(list(value), what=name)
    if name == "metadata":
        return dumps(jsonable(value), what=name)
    if name == "last_accessed":
        return None if value is None else ts(value)
    return value

"""How values are stored and read back: the row codecs both SQL backends share.

Both backends keep the same values in the same text forms (fixed-width UTC ISO timestamps,
compact JSON), so a memory, a history entry, a share or an audit entry is encoded and
decoded here once and both stores return identical values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import npt

from engramdb._util import parse_ts
from engramdb.auditchain import chain, format_at
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.models import AuditEvent, Change, Memory, Share
from engramdb.models.audit import GENESIS, AuditRecord

if TYPE_CHECKING:
    from engramdb.storage.base import Vectors

__all__ = [
    "AUDIT_COLUMNS",
    "AUDIT_HEAD_KEY",
    "FIELD_COLUMNS",
    "MEMORY_COLUMNS",
    "HistoryRow",
    "audit_head_value",
    "chain_rows",
    "checked_vector",
    "column_value",
    "created_history",
    "dumps",
    "history_row",
    "imported_history",
    "in_order",
    "jsonable",
    "memory_row",
    "normalise_changes",
    "parse_audit_head",
    "row_to_change",
    "row_to_event",
    "row_to_memory",
    "row_to_share",
    "shared_row_to_memory",
    "tag_rows",
    "tombstone",
    "ts",
]

#: Meta key holding ``"<seq>:<hash>"`` of the last audit entry.
AUDIT_HEAD_KEY: Final = "audit_head"

#: The columns of the ``audit`` table, in the order :func:`row_to_event` decodes and :func:`chain_rows` encodes.
AUDIT_COLUMNS: Final = "seq, at, action, agent, memory_id, detail, hash"

#: The columns :func:`row_to_memory` decodes, in order (``m`` is the memories alias).
MEMORY_COLUMNS: Final = (
    "m.id, m.agent, m.kind, m.content, m.tags, m.metadata, m.created_at, m.updated_at, "
    "m.last_accessed, m.access_count, m.confidence, m.successes, m.attempts, m.visibility, m.redacted, "
    "m.user_id, m.session_id, m.occurred_at, m.valid_until"
)

#: The column of each :class:`Memory` field whose column is named differently (``user`` is reserved in SQL).
FIELD_COLUMNS: Final = {"user": "user_id", "session": "session_id"}

#: The fields a ``create`` history entry records.
_CREATE_FIELDS: Final = (
    "agent",
    "kind",
    "content",
    "tags",
    "metadata",
    "confidence",
    "visibility",
    "successes",
    "attempts",
    "redacted",
)

#: A history row: (memory_id, action, at, actor, before JSON, after JSON), the ``history`` insert's parameters.
HistoryRow = tuple[str, str, str, str, str | None, str | None]


# -- encoding -------------------------------------------------------------------------------------
def ts(value: datetime) -> str:
    """A fixed-width UTC ISO 8601 string, so text order is time order (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


#: Types :func:`jsonable` returns as they are, tested by exact type first: most metadata values are these,
#: and the abstract ``Mapping`` test below is slow.
_PLAIN: Final = frozenset({str, int, float, bool, type(None)})

#: One encoder of each form, shared: ``json.dumps`` with options builds a new encoder on every call.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_AUDIT_DETAIL: Final = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False)


def jsonable(value: Any) -> Any:
    """Turn tuples, mappings and datetimes into JSON values (for history records)."""
    if type(value) in _PLAIN:
        return value
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
        return _COMPACT.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} must be JSON-serializable: {exc}") from exc


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
    if name in ("last_accessed", "occurred_at", "valid_until"):
        return None if value is None else ts(value)
    return value


def memory_row(m: Memory) -> tuple[Any, ...]:
    """The ``memories`` insert parameters of ``m``: the columns of :data:`MEMORY_COLUMNS`, in order."""
    created = ts(m.created_at)
    return (
        m.id,
        m.agent,
        m.kind,
        m.content,
        dumps(list(m.tags), what="tags"),
        dumps(jsonable(m.metadata), what="metadata"),
        created,
        created if m.updated_at is m.created_at else ts(m.updated_at),  # one object in a new memory
        ts(m.last_accessed) if m.last_accessed is not None else None,
        m.access_count,
        float(m.confidence),
        float(m.successes),
        float(m.attempts),
        m.visibility,
        dumps(list(m.redacted), what="redacted"),
        m.user,
        m.session,
        created if m.occurred_at is m.created_at else ts(m.occurred_at),
        None if m.valid_until is None else ts(m.valid_until),
    )


def tag_rows(memory_id: str, tags: Iterable[str]) -> list[tuple[str, str]]:
    """The ``memory_tags`` rows of a memory: one per distinct tag."""
    return [(memory_id, tag) for tag in dict.fromkeys(tags)]


def history_row(
    memory_id: str, action: str, *, at: datetime, actor: str, before: Any, after: Any, what: str
) -> HistoryRow:
    """A history entry as stored: ``before``/``after`` as JSON (None stays None; ``what`` names them in errors)."""
    return (
        memory_id,
        action,
        ts(at),
        actor,
        None if before is None else dumps(jsonable(before), what=what),
        None if after is None else dumps(jsonable(after), what=what),
    )


def created_history(m: Memory, *, actor: str) -> HistoryRow:
    """The ``create`` history entry of a new memory: no before, its fields after."""
    fields = {name: getattr(m, name) for name in _CREATE_FIELDS}
    return history_row(m.id, "create", at=m.created_at, actor=actor, before=None, after=fields, what="memory")


def tombstone(memory_id: str, *, at: datetime, actor: str) -> HistoryRow:
    """The ``forget`` history entry: it records that a memory was forgotten, with none of its content."""
    return (memory_id, "forget", ts(at), actor, None, None)


def imported_history(changes: Sequence[Change]) -> tuple[list[HistoryRow], list[str]]:
    """History rows of an import (checked, in order) and the distinct memory ids they name."""
    rows = []
    for c in changes:
        if not c.action or not c.actor:
            raise ValidationError("a history entry needs an action and an actor")
        rows.append(
            history_row(
                c.memory_id, c.action, at=c.at, actor=c.actor, before=c.before, after=c.after, what="history entry"
            )
        )
    return rows, list(dict.fromkeys(c.memory_id for c in changes))


# -- decoding -------------------------------------------------------------------------------------
#: The JSON columns' usual values, decoded without the parser (a fresh object each time: callers own it).
_EMPTY_JSON: Final[dict[str, Callable[[], Any]]] = {"[]": list, "{}": dict}


def _loads(text: str | None, *, default: Any) -> Any:
    if text is None:
        return default
    empty = _EMPTY_JSON.get(text)
    if empty is not None:
        return empty()
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
    occurred = parse_ts(row[17]) if row[17] is not None and row[17] != row[6] else created
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
        user=row[15],
        session=row[16],
        occurred_at=occurred if occurred is not None else created,
        valid_until=parse_ts(row[18]),
    )


def shared_row_to_memory(row: Sequence[Any]) -> Memory:
    """Decode a row selected as ``shared_by, shared_at, MEMORY_COLUMNS`` (the filtered reads)."""
    return row_to_memory(row[2:], row[0], row[1])


def in_order(memory_ids: Sequence[str], memories: Iterable[Memory]) -> dict[str, Memory]:
    """``memories`` keyed by id in the order of ``memory_ids`` (first occurrence; ids not found left out)."""
    found = {m.id: m for m in memories}
    return {i: found[i] for i in dict.fromkeys(memory_ids) if i in found}


def row_to_change(row: Sequence[Any]) -> Change:
    """Decode a row selected as ``seq, memory_id, action, at, actor, before, after`` from ``history``."""
    seq, memory_id, action, at, actor, before, after = row
    return Change(
        seq=int(seq),
        memory_id=memory_id,
        action=action,
        at=datetime.fromisoformat(at),
        actor=actor,
        before=None if before is None else json.loads(before),
        after=None if after is None else json.loads(after),
    )


def row_to_share(row: Sequence[Any]) -> Share:
    """Decode a row selected as ``memory_id, from_agent, to_agent, shared_at`` from ``shares``."""
    memory_id, owner, recipient, at = row
    when = parse_ts(at)
    if when is None:
        raise CorruptStoreError(f"share of memory {memory_id!r} has no time")
    return Share(memory_id=memory_id, from_agent=owner, to_agent=recipient, shared_at=when)


def checked_vector(memory_id: str, dim: Any, vector: npt.ArrayLike) -> Vectors:
    """A stored vector as a fresh float32 array, or CorruptStoreError if it is not ``dim`` long."""
    arr = np.asarray(vector, dtype=np.float32)
    if arr.shape != (int(dim),):
        raise CorruptStoreError(f"the vector of memory {memory_id!r} is damaged")
    return arr.copy()


# -- audit entries -------------------------------------------------------------------------------
def chain_rows(
    records: Sequence[AuditRecord], last: Sequence[Any] | None
) -> tuple[list[AuditEvent], list[tuple[Any, ...]]]:
    """Number and hash ``records`` after the ``(seq, hash)`` row ``last`` (None: the first); with their rows.

    The rows hold the :data:`AUDIT_COLUMNS` values. ValidationError if a detail is not JSON.
    """
    last_seq, prev_hash = (int(last[0]), str(last[1])) if last is not None else (0, GENESIS)
    rows: list[tuple[Any, ...]] = []
    try:
        events = chain(records, prev_hash=prev_hash, last_seq=last_seq)
        for e in events:
            detail = _AUDIT_DETAIL.encode(dict(e.detail))
            rows.append((e.seq, format_at(e.at), e.action, e.agent, e.memory_id, detail, e.hash))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"audit detail must be JSON: {exc}") from exc
    return events, rows


def audit_head_value(events: Sequence[AuditEvent]) -> str:
    """The :data:`AUDIT_HEAD_KEY` meta value after appending ``events``."""
    return f"{events[-1].seq}:{events[-1].hash}"


def parse_audit_head(value: str) -> tuple[int, str]:
    """``(seq, hash)`` from a :data:`AUDIT_HEAD_KEY` meta value."""
    seq, _, digest = value.partition(":")
    try:
        return int(seq), digest
    except ValueError:
        return -1, digest  # a damaged head never matches: verification reports it


def row_to_event(row: Sequence[Any]) -> AuditEvent:
    """Decode a row selected with :data:`AUDIT_COLUMNS`; CorruptStoreError if it is unreadable."""
    seq, at, action, agent, memory_id, detail, digest = row
    try:
        parsed = json.loads(detail)
        when = parse_ts(at)
    except (TypeError, ValueError) as exc:
        raise CorruptStoreError(f"audit entry {seq} is unreadable: {exc}") from exc
    if when is None or not isinstance(parsed, dict):
        raise CorruptStoreError(f"audit entry {seq} is unreadable")
    return AuditEvent(
        seq=int(seq), action=str(action), agent=agent, memory_id=memory_id, at=when, detail=parsed, hash=str(digest)
    )

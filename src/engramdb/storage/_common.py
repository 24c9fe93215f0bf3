"""The backend-neutral rules of the stores: what is checked, how values are stored and read back,
what a history entry, a share or an audit entry records, and how migrations are stepped through.

Both backends keep the same values in the same text forms (fixed-width UTC ISO timestamps,
compact JSON), so everything that is not SQL lives here once and both stores apply it the
same way; each backend keeps only its SQL (dialect, placeholders, locking) next to its
store class (``sqlite.py`` with ``_sqlite_*``, ``postgres.py`` with ``_pg_*``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, TypeVar

import numpy as np
import numpy.typing as npt

from engramdb._util import parse_ts
from engramdb.errors import CorruptStoreError, NotFound, SchemaVersionError, ValidationError
from engramdb.models import KINDS, VISIBILITIES, Change, Memory, Share

if TYPE_CHECKING:
    from engramdb.storage.base import Filter, Vectors

__all__ = [
    "AUDIT_COLUMNS",
    "AUDIT_HEAD_KEY",
    "MEMORY_COLUMNS",
    "UPDATABLE_FIELDS",
    "FilterDialect",
    "FilterSQL",
    "HistoryRow",
    "ShareChange",
    "StoreBase",
    "UpdatePlan",
    "as_unit_rows",
    "check_changes",
    "check_distinct",
    "check_meta",
    "check_new_memories",
    "check_not_newer",
    "check_page",
    "check_share_agents",
    "checked_vector",
    "column_value",
    "created_history",
    "dumps",
    "equal_conditions",
    "filter_clauses",
    "history_row",
    "imported_history",
    "in_order",
    "jsonable",
    "keyset_batches",
    "memory_row",
    "normalise_changes",
    "not_found",
    "on_share",
    "on_unshare",
    "plan_update",
    "require_found",
    "row_to_change",
    "row_to_memory",
    "row_to_share",
    "run_steps",
    "shared_row_to_memory",
    "tag_rows",
    "tombstone",
    "ts",
    "validate_fields",
    "validate_memory",
]

#: Meta key holding ``"<seq>:<hash>"`` of the last audit entry.
AUDIT_HEAD_KEY: Final = "audit_head"

#: The columns of the ``audit`` table, in the order :func:`row_to_event` decodes and :func:`chain_rows` encodes.
AUDIT_COLUMNS: Final = "seq, at, action, agent, memory_id, detail, hash"

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


def memory_row(m: Memory) -> tuple[Any, ...]:
    """The ``memories`` insert parameters of ``m``: the columns of :data:`MEMORY_COLUMNS`, in order."""
    return (
        m.id,
        m.agent,
        m.kind,
        m.content,
        dumps(list(m.tags), what="tags"),
        dumps(jsonable(m.metadata), what="metadata"),
        ts(m.created_at),
        ts(m.updated_at),
        ts(m.last_accessed) if m.last_accessed is not None else None,
        m.access_count,
        float(m.confidence),
        float(m.successes),
        float(m.attempts),
        m.visibility,
        dumps(list(m.redacted), what="redacted"),
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


# -- checks ---------------------------------------------------------------------------------------
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


def as_unit_rows(vectors: npt.ArrayLike, *, rows: int | None = None) -> npt.NDArray[np.float32]:
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


# -- updates and shares ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdatePlan:
    """What an ``update`` writes: only the fields whose value really changes."""

    #: Old values of the changed fields.
    before: dict[str, Any]
    #: New values of the changed fields (empty: nothing to write, no history entry).
    after: dict[str, Any]
    #: Column -> stored value of the changed fields plus ``updated_at``.
    columns: dict[str, Any]
    #: The history entry to write.
    history: HistoryRow

    @property
    def withdraws_shares(self) -> bool:
        """Private means the owner alone: making a memory private withdraws its shares."""
        return bool(self.after.get("visibility") == "private")

    @property
    def new_tag_rows(self) -> list[tuple[str, str]] | None:
        """The memory's new ``memory_tags`` rows, or None if its tags did not change."""
        return tag_rows(self.history[0], self.after["tags"]) if "tags" in self.after else None


def plan_update(old: Memory, changes: Mapping[str, Any], *, action: str, actor: str, at: datetime) -> UpdatePlan:
    """Diff checked ``changes`` (see :func:`check_changes`) against ``old``, as one ``action`` by ``actor``.

    Only fields whose value really changes are written and recorded. The store then also drops
    the old vector when ``content`` changes without a new one (it no longer describes the text,
    so the memory shows up in ``iter_missing_vectors``), and making a memory ``private``
    withdraws every share of it (:attr:`UpdatePlan.withdraws_shares`).
    """
    new = normalise_changes(changes)
    before = {k: getattr(old, k) for k, v in new.items() if getattr(old, k) != v}
    after = {k: new[k] for k in before}
    columns = {k: column_value(k, v) for k, v in after.items()}
    columns["updated_at"] = ts(at)
    history = history_row(old.id, action, at=at, actor=actor, before=before, after=after, what="changes")
    return UpdatePlan(before=before, after=after, columns=columns, history=history)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareChange:
    """What sharing or unsharing one memory changes besides the ``shares`` rows."""

    #: The memory's new visibility, or None if it keeps its own.
    visibility: str | None
    before: dict[str, Any]
    after: dict[str, Any]

    def history(self, memory_id: str, action: str, *, at: datetime, actor: str) -> HistoryRow:
        """The ``share``/``unshare`` history entry of ``memory_id``."""
        return history_row(memory_id, action, at=at, actor=actor, before=self.before, after=self.after, what="change")


def on_share(visibility: str, to_agent: str) -> ShareChange:
    """A memory newly shared with ``to_agent``: a private one becomes ``shared`` (public stays public)."""
    if visibility == "private":
        return ShareChange(
            visibility="shared",
            before={"visibility": "private"},
            after={"shared_with": to_agent, "visibility": "shared"},
        )
    return ShareChange(visibility=None, before={}, after={"shared_with": to_agent})


def on_unshare(visibility: str, to_agent: str, *, shares_left: bool) -> ShareChange:
    """A memory that lost its share(s) with ``to_agent``: ``shared`` with none left becomes ``private``.

    A ``public`` memory stays public: that is a visibility change, made with ``update``.
    """
    if not shares_left and visibility == "shared":
        return ShareChange(
            visibility="private",
            before={"shared_with": to_agent, "visibility": "shared"},
            after={"visibility": "private"},
        )
    return ShareChange(visibility=None, before={"shared_with": to_agent}, after={})


# -- queries --------------------------------------------------------------------------------------
def equal_conditions(pairs: Iterable[tuple[str, Any]], *, placeholder: str) -> tuple[list[str], list[Any]]:
    """``column = <placeholder>`` for each ``(column, value)`` whose value is given, and those values."""
    conds: list[str] = []
    params: list[Any] = []
    for column, value in pairs:
        if value is not None:
            conds.append(f"{column} = {placeholder}")
            params.append(value)
    return conds, params


def keyset_batches(batch: int, fetch: Callable[[int, int], Sequence[Sequence[Any]]]) -> Iterator[list[tuple[str, str]]]:
    """Batches of (id, content) from ``fetch(after_key, batch)`` rows ``(key, id, content)`` in key order.

    Each batch is a fresh query resuming after the last key, so the caller may write between batches.
    """
    if batch < 1:
        raise ValidationError("batch must be at least 1")
    last = 0
    while True:
        rows = fetch(last, batch)
        if not rows:
            return
        last = int(rows[-1][0])
        yield [(memory_id, content) for _, memory_id, content in rows]


# -- the visibility filter -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FilterSQL:
    """A filter as SQL over the ``memories m`` alias: a WHERE clause, ``shared_by`` and ``shared_at`` expressions."""

    where: str
    params: tuple[Any, ...]
    shared_by: str = "NULL"
    shared_by_params: tuple[Any, ...] = ()
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()


# The rule, written once with {p} for the driver's placeholder (see filter_clauses).
# Visible to reader {p}: its own, public ones, and ones shared with it or with everyone.
# Row by row: cheap when the query stops early (newest first with a LIMIT).
_VISIBLE = (
    "(m.agent = {p} OR m.visibility = 'public' OR EXISTS "
    "(SELECT 1 FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN ({p}, '*')))"
)
# Who shared a memory with the reader: a direct share wins over a share with everyone;
# a public memory without a share row is shared by its owner.
_SHARED_BY = (
    "CASE WHEN m.agent = {p} THEN NULL ELSE COALESCE("
    "(SELECT s.from_agent FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN ({p}, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1), m.agent) END"
)
# When it was shared with the reader (the share _SHARED_BY names; NULL for a public memory never shared).
_SHARED_AT = (
    "CASE WHEN m.agent = {p} THEN NULL ELSE "
    "(SELECT s.shared_at FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN ({p}, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1) END"
)
_HAS_TAG = "EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id AND t.tag = {p})"


@dataclass(frozen=True, slots=True, kw_only=True)
class FilterDialect:
    """How one SQL dialect spells the parts of a filter: its placeholder, ``true`` and list membership."""

    placeholder: str
    true: str
    #: ``one_of(column, values)``: SQL testing ``column`` against a list (one placeholder) and that list's parameter.
    one_of: Callable[[str, Sequence[str]], tuple[str, Any]]

    @property
    def visible(self) -> str:
        """The row-by-row visibility test (two reader parameters)."""
        return _VISIBLE.format(p=self.placeholder)


def filter_clauses(flt: Filter | None, dialect: FilterDialect, *, visible: str | None = None) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (``dialect.true`` when there is none).

    ``visible`` replaces the row-by-row visibility test by an equivalent one (same two
    parameters). Empty ``kinds``/``ids`` tuples match nothing; empty ``tags`` restrict
    nothing (every memory has all of no tags).
    """
    if flt is None:
        return FilterSQL(dialect.true, ())
    p = dialect.placeholder
    conds: list[str] = []
    params: list[Any] = []
    shared_by: str = "NULL"
    shared_by_params: tuple[Any, ...] = ()
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()
    if flt.agent is not None:
        if flt.include_shared:
            conds.append(visible if visible is not None else dialect.visible)
            params += [flt.agent, flt.agent]
            shared_by, shared_by_params = _SHARED_BY.format(p=p), (flt.agent, flt.agent)
            shared_at, shared_at_params = _SHARED_AT.format(p=p), (flt.agent, flt.agent)
        else:
            conds.append(f"m.agent = {p}")
            params.append(flt.agent)
    if flt.kinds is not None:
        clause, param = dialect.one_of("m.kind", flt.kinds)
        conds.append(clause)
        params.append(param)
    for tag in dict.fromkeys(flt.tags or ()):
        conds.append(_HAS_TAG.format(p=p))
        params.append(tag)
    if flt.ids is not None:
        clause, param = dialect.one_of("m.id", flt.ids)
        conds.append(clause)
        params.append(param)
    return FilterSQL(
        " AND ".join(conds) or dialect.true, tuple(params), shared_by, shared_by_params, shared_at, shared_at_params
    )


# -- migrations -----------------------------------------------------------------------------------
class _Step(Protocol):
    @property
    def version(self) -> int: ...


_S = TypeVar("_S", bound=_Step)


def check_not_newer(version: int, latest: int, location: str) -> None:
    """SchemaVersionError if the store's schema ``version`` is newer than the ``latest`` this code knows."""
    if version > latest:
        raise SchemaVersionError(
            f"{location}: store schema version {version} is newer than this engramdb understands "
            f"({latest}); upgrade engramdb"
        )


def run_steps(
    steps: Sequence[_S],
    *,
    version: int,
    location: str,
    step_transaction: Callable[[], AbstractContextManager[int]],
    apply: Callable[[_S, int], None],
) -> int:
    """Apply every step newer than ``version``, each in its own transaction; return the version reached.

    ``step_transaction()`` opens a transaction holding the store's migration lock and yields the
    version read inside it: another process may have migrated while this one waited for the lock,
    so a step is applied (``apply(step, version_before)``) only if the store still lacks it.
    """
    latest = steps[-1].version
    for step in steps:
        if step.version <= version:
            continue
        with step_transaction() as current:
            check_not_newer(current, latest, location)
            version = current
            if step.version > version:
                apply(step, version)
                version = step.version
    return version


# -- the store class ------------------------------------------------------------------------------
class StoreBase:
    """What every store class does the same way, whatever it stores in."""

    location: str

    if TYPE_CHECKING:

        def close(self) -> None: ...

        def get_many(self, memory_ids: Sequence[str], flt: Filter | None = None) -> dict[str, Memory]: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def get(self, memory_id: str, flt: Filter | None = None) -> Memory | None:
        """See :meth:`Store.get`."""
        return self.get_many([memory_id], flt).get(memory_id)

"""SQL WHERE clauses both backends share: the visibility filter (the one rule every read must get
right, written once here) and the audit query. SQL uses ``?`` placeholders; the PostgreSQL
backend translates them to its driver's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engramdb.storage._codecs import AUDIT_COLUMNS, ts

if TYPE_CHECKING:
    from engramdb.storage.base import Filter

__all__ = ["FilterSQL", "HoldsValue", "OneOf", "audit_query", "equal_conditions", "filter_clauses"]


def equal_conditions(pairs: Iterable[tuple[str, Any]]) -> tuple[list[str], list[Any]]:
    """``column = ?`` for each ``(column, value)`` whose value is given, and those values."""
    conds: list[str] = []
    params: list[Any] = []
    for column, value in pairs:
        if value is not None:
            conds.append(f"{column} = ?")
            params.append(value)
    return conds, params


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


# The rule, written once (see filter_clauses).
# Visible to reader ?: its own, public ones, and ones shared with it or with everyone.
# Row by row: cheap when the query stops early (newest first with a LIMIT).
_VISIBLE = (
    "(m.agent = ? OR m.visibility = 'public' OR EXISTS "
    "(SELECT 1 FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*')))"
)
# Who shared a memory with the reader: a direct share wins over a share with everyone;
# a public memory without a share row is shared by its owner.
_SHARED_BY = (
    "CASE WHEN m.agent = ? THEN NULL ELSE COALESCE("
    "(SELECT s.from_agent FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1), m.agent) END"
)
# When it was shared with the reader (the share _SHARED_BY names; NULL for a public memory never shared).
_SHARED_AT = (
    "CASE WHEN m.agent = ? THEN NULL ELSE "
    "(SELECT s.shared_at FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1) END"
)
#: A condition true on every row, on every backend.
_TRUE = "1 = 1"
_HAS_TAG = "EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id AND t.tag = ?)"


#: ``one_of(column, values)``: SQL testing ``column`` against a list (one placeholder) and that list's parameter.
OneOf = Callable[[str, Sequence[str]], tuple[str, Any]]


#: ``holds(key, value)``: SQL testing that ``m.metadata`` holds ``value`` (a JSON scalar) at top-level ``key``,
#: and its parameters: each backend reads its JSON text its own way.
HoldsValue = Callable[[str, Any], tuple[str, list[Any]]]


def _admits(column: str, admitted: Sequence[str | None], one_of: OneOf) -> tuple[str, list[Any]]:
    """``column`` among ``admitted``, where a None in it admits NULL (no such scope)."""
    names = [a for a in dict.fromkeys(admitted) if a is not None]
    if not names:
        return (f"{column} IS NULL", []) if None in admitted else ("1 = 0", [])
    if len(names) == 1:
        test, param = f"{column} = ?", names[0]
    else:
        test, param = one_of(column, names)
    if None in admitted:
        return f"({column} IS NULL OR {test})", [param]
    return test, [param]


def filter_clauses(flt: Filter | None, one_of: OneOf, *, holds: HoldsValue, visible: str | None = None) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (``1 = 1`` when there is none), lists spelled by ``one_of``,
    metadata tests by ``holds``.

    ``visible`` replaces the row-by-row visibility test by an equivalent one (same two
    parameters). Empty ``kinds``/``ids`` tuples match nothing; empty ``tags`` restrict
    nothing (every memory has all of no tags). Date bounds are inclusive.
    """
    if flt is None:
        return FilterSQL(_TRUE, ())
    conds: list[str] = []
    params: list[Any] = []
    shared_by: str = "NULL"
    shared_by_params: tuple[Any, ...] = ()
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()
    if flt.agent is not None:
        if flt.include_shared:
            conds.append(visible if visible is not None else _VISIBLE)
            params += [flt.agent, flt.agent]
            shared_by, shared_by_params = _SHARED_BY, (flt.agent, flt.agent)
            shared_at, shared_at_params = _SHARED_AT, (flt.agent, flt.agent)
        else:
            conds.append("m.agent = ?")
            params.append(flt.agent)
    if flt.kinds is not None:
        clause, param = one_of("m.kind", flt.kinds)
        conds.append(clause)
        params.append(param)
    for tag in dict.fromkeys(flt.tags or ()):
        conds.append(_HAS_TAG)
        params.append(tag)
    if flt.ids is not None:
        clause, param = one_of("m.id", flt.ids)
        conds.append(clause)
        params.append(param)
    # created_at is stored as fixed-width UTC ISO text (codecs.ts), so text order is time order:
    # the bounds compare as text, as the newest-first listing orders, and can use its index.
    if flt.created_after is not None:
        conds.append("m.created_at >= ?")
        params.append(ts(flt.created_after))
    if flt.created_before is not None:
        conds.append("m.created_at <= ?")
        params.append(ts(flt.created_before))
    for column, admitted in (("m.user_id", flt.users), ("m.session_id", flt.sessions)):
        if admitted is not None:
            clause, clause_params = _admits(column, admitted, one_of)
            conds.append(clause)
            params += clause_params
    for key, value in flt.metadata or ():
        clause, clause_params = holds(key, value)
        conds.append(clause)
        params += clause_params
    # Time: what was true at as_of (it had happened, and no later value had replaced it yet); else the
    # current values only, unless superseded ones are asked for. Same fixed-width text as created_at.
    if flt.as_of is not None:
        conds.append("m.occurred_at <= ? AND (m.valid_until IS NULL OR m.valid_until > ?)")
        params += [ts(flt.as_of), ts(flt.as_of)]
    elif not flt.superseded:
        conds.append("m.valid_until IS NULL")
    return FilterSQL(
        " AND ".join(conds) or _TRUE, tuple(params), shared_by, shared_by_params, shared_at, shared_at_params
    )


def audit_query(
    *,
    agent: str | None,
    memory_id: str | None,
    action: str | None,
    after_seq: int,
    limit: int | None,
    newest_first: bool,
) -> tuple[str, list[Any]]:
    """The SELECT of ``audit.events`` and its parameters."""
    conds, params = equal_conditions((("agent", agent), ("memory_id", memory_id), ("action", action)))
    clauses = ["seq > ?", *conds]
    order = "DESC" if newest_first else "ASC"
    statement = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(clauses)} ORDER BY seq {order}"
    params = [after_seq, *params]
    if limit is not None:
        statement += " LIMIT ?"
        params.append(limit)
    return statement, params

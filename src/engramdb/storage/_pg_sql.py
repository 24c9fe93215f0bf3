"""SQL building blocks of the PostgreSQL store: the visibility filter and the keyword query.

Values are encoded and rows decoded exactly as in the SQLite store (the helpers in
``_sqlite_sql`` are backend-neutral), so both backends return identical memories.
:func:`filter_sql` is the PostgreSQL twin of ``_sqlite_sql.filter_sql``: the same rule,
clause for clause, with ``%s`` placeholders and arrays instead of JSON lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from engramdb.storage.base import Filter

__all__ = ["TS_CONFIG", "FilterSQL", "filter_sql", "tsquery_sql"]

#: The text-search configuration of the keyword index (stemming like FTS5's porter tokenizer).
TS_CONFIG: Final = "english"


@dataclass(frozen=True, slots=True)
class FilterSQL:
    """A filter as SQL over the ``memories m`` alias: a WHERE clause, ``shared_by`` and ``shared_at`` expressions."""

    where: str
    params: tuple[Any, ...]
    shared_by: str = "NULL"
    shared_by_params: tuple[Any, ...] = ()
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()


# Visible to reader %s: its own, public ones, and ones shared with it or with everyone.
_VISIBLE = (
    "(m.agent = %s OR m.visibility = 'public' OR EXISTS "
    "(SELECT 1 FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (%s, '*')))"
)
# Who shared a memory with the reader: a direct share wins over a share with everyone;
# a public memory without a share row is shared by its owner.
_SHARED_BY = (
    "CASE WHEN m.agent = %s THEN NULL ELSE COALESCE("
    "(SELECT s.from_agent FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (%s, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1), m.agent) END"
)
# When it was shared with the reader (the share _SHARED_BY names; NULL for a public memory never shared).
_SHARED_AT = (
    "CASE WHEN m.agent = %s THEN NULL ELSE "
    "(SELECT s.shared_at FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (%s, '*') "
    "ORDER BY s.to_agent = '*' LIMIT 1) END"
)
_HAS_TAG = "EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id AND t.tag = %s)"


def filter_sql(flt: Filter | None) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (``TRUE`` when there is none).

    Empty ``kinds``/``ids`` tuples match nothing; empty ``tags`` restrict nothing.
    """
    if flt is None:
        return FilterSQL("TRUE", ())
    conds: list[str] = []
    params: list[Any] = []
    shared_by: str = "NULL"
    shared_by_params: tuple[Any, ...] = ()
    shared_at: str = "NULL"
    shared_at_params: tuple[Any, ...] = ()
    if flt.agent is not None:
        if flt.include_shared:
            conds.append(_VISIBLE)
            params += [flt.agent, flt.agent]
            shared_by, shared_by_params = _SHARED_BY, (flt.agent, flt.agent)
            shared_at, shared_at_params = _SHARED_AT, (flt.agent, flt.agent)
        else:
            conds.append("m.agent = %s")
            params.append(flt.agent)
    if flt.kinds is not None:
        conds.append("m.kind = ANY(%s::text[])")
        params.append(list(flt.kinds))
    for tag in dict.fromkeys(flt.tags or ()):
        conds.append(_HAS_TAG)
        params.append(tag)
    if flt.ids is not None:
        conds.append("m.id = ANY(%s::text[])")
        params.append(list(flt.ids))
    return FilterSQL(
        " AND ".join(conds) or "TRUE", tuple(params), shared_by, shared_by_params, shared_at, shared_at_params
    )


def tsquery_sql(terms: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """A ``tsquery`` expression matching any of ``terms``, with its parameters; None if no terms.

    Each term goes through ``plainto_tsquery`` as a bound parameter and the results are
    OR-ed with the ``||`` tsquery operator: user text is never parsed as query syntax
    (no quoting to get wrong), yet terms are stemmed like the indexed text. A term that
    is only stop words contributes an empty query, which ``||`` ignores.
    """
    unique = tuple(t for t in dict.fromkeys(terms) if t and t.strip())
    if not unique:
        return None
    expr = " || ".join(f"plainto_tsquery('{TS_CONFIG}', %s)" for _ in unique)
    return f"({expr})", unique

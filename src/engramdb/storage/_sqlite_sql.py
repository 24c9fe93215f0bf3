"""SQLite's spelling of the shared SQL: id lists as one JSON parameter, the visibility filter's
set form, and the FTS5 keyword query. The rule itself is written once in
:mod:`engramdb.storage._filters`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engramdb.storage._filters import FilterSQL, filter_clauses
from engramdb.storage.base import Filter

__all__ = ["filter_sql", "fts_phrase", "fts_query", "holds", "ids_json", "insert_statement", "one_of"]


def insert_statement(table: str, columns: Sequence[str]) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...)``: the names are the store's own, never input."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 query matching any of ``terms``, each quoted as a string; None if no terms.

    Quoting (with ``"`` doubled) makes every term a literal: operators such as
    ``NOT``/``NEAR``, column filters and stray quotes in user text cannot change the query.
    """
    quoted = [fts_phrase(t) for t in dict.fromkeys(terms) if t and t.strip()]
    return " OR ".join(quoted) if quoted else None


def fts_phrase(term: str) -> str:
    """One term as an FTS5 string (a literal, ``"`` doubled; see :func:`fts_query`)."""
    return '"' + term.replace('"', '""') + '"'


# Visible to the reader, the same rule as _filters' row-by-row test, as a set built from three
# indexed lookups: cheaper when every row is visited (count).
_VISIBLE_SET = (
    "m.rid IN (SELECT rid FROM memories WHERE agent = ? "
    "UNION ALL SELECT rid FROM memories WHERE visibility = 'public' "
    "UNION ALL SELECT m2.rid FROM shares s JOIN memories m2 ON m2.id = s.memory_id WHERE s.to_agent IN (?, '*'))"
)


def one_of(column: str, values: Sequence[str]) -> tuple[str, str]:
    """``column`` among ``values``: one JSON parameter read with ``json_each`` (no variable limit)."""
    return f"{column} IN (SELECT value FROM json_each(?))", ids_json(values)


def holds(key: str, value: Any) -> tuple[str, list[Any]]:
    """``m.metadata`` holds ``value`` at top-level ``key``: through ``json_each`` (any key, no JSON path to
    escape); its ``type`` keeps True apart from 1 and "1" apart from 1, its ``atom`` compares numbers as numbers."""
    head = "EXISTS (SELECT 1 FROM json_each(m.metadata) j WHERE j.key = ? AND "
    if value is None or isinstance(value, bool):
        return head + "j.type = ?)", [key, "null" if value is None else "true" if value else "false"]
    if isinstance(value, str):
        return head + "j.type = 'text' AND j.atom = ?)", [key, value]
    return head + "j.type IN ('integer', 'real') AND j.atom = ?)", [key, value]


def filter_sql(flt: Filter | None, *, visit_all: bool = False) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (see :func:`~engramdb.storage._filters.filter_clauses`).

    ``visit_all`` picks the visibility form suited to queries that read every
    matching row (counts) rather than stopping at a LIMIT.
    """
    return filter_clauses(flt, one_of, holds=holds, visible=_VISIBLE_SET if visit_all else None)


def ids_json(ids: Sequence[str]) -> str:
    """A list of ids as one JSON parameter, read in SQL with ``json_each(?)``.

    One parameter instead of one ``?`` per id: no SQLite variable limit, one cached statement.
    """
    return json.dumps(list(ids))

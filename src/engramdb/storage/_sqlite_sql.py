"""SQL building blocks of the SQLite store: the visibility filter, the keyword query, id lists.

Kept apart from the store class so the visibility rule, the one thing every read
must get right, lives in exactly one function (:func:`filter_sql`). Values are encoded
and rows decoded by the backend-neutral helpers in :mod:`engramdb.storage._common`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from engramdb.storage._common import FilterDialect, FilterSQL, filter_clauses
from engramdb.storage.base import Filter

__all__ = ["INSERT_HISTORY", "filter_sql", "fts_query", "ids_json"]

#: Inserts one history row (:func:`engramdb.storage._common.history_row`).
INSERT_HISTORY: Final = "INSERT INTO history (memory_id, action, at, actor, before, after) VALUES (?, ?, ?, ?, ?, ?)"


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 query matching any of ``terms``, each quoted as a string; None if no terms.

    Quoting (with ``"`` doubled) makes every term a literal: operators such as
    ``NOT``/``NEAR``, column filters and stray quotes in user text cannot change the query.
    """
    quoted = ['"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms) if t and t.strip()]
    return " OR ".join(quoted) if quoted else None


# Visible to the reader, the same rule as _common's row-by-row test, as a set built from three
# indexed lookups: cheaper when every row is visited (count).
_VISIBLE_SET = (
    "m.rid IN (SELECT rid FROM memories WHERE agent = ? "
    "UNION ALL SELECT rid FROM memories WHERE visibility = 'public' "
    "UNION ALL SELECT m2.rid FROM shares s JOIN memories m2 ON m2.id = s.memory_id WHERE s.to_agent IN (?, '*'))"
)


def _one_of(column: str, values: Sequence[str]) -> tuple[str, str]:
    return f"{column} IN (SELECT value FROM json_each(?))", ids_json(values)


_DIALECT: Final = FilterDialect(placeholder="?", true="1", one_of=_one_of)


def filter_sql(flt: Filter | None, *, visit_all: bool = False) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (see :func:`~engramdb.storage._common.filter_clauses`).

    ``visit_all`` picks the visibility form suited to queries that read every
    matching row (counts) rather than stopping at a LIMIT.
    """
    return filter_clauses(flt, _DIALECT, visible=_VISIBLE_SET if visit_all else None)


def ids_json(ids: Sequence[str]) -> str:
    """A list of ids as one JSON parameter, read in SQL with ``json_each(?)``.

    One parameter instead of one ``?`` per id: no SQLite variable limit, one cached statement.
    """
    return json.dumps(list(ids))

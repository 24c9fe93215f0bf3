"""SQL building blocks of the PostgreSQL store: the visibility filter and the keyword query.

Values are encoded and rows decoded by the backend-neutral helpers in
:mod:`engramdb.storage._common`, so both backends return identical memories, and the
visibility rule is written there once: :func:`filter_sql` only supplies PostgreSQL's
spelling (``%s`` placeholders, arrays instead of JSON lists).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from engramdb.storage._common import FilterDialect, FilterSQL, filter_clauses
from engramdb.storage.base import Filter

__all__ = ["INSERT_HISTORY", "TS_CONFIG", "filter_sql", "tsquery_sql"]

#: The text-search configuration of the keyword index (stemming like FTS5's porter tokenizer).
TS_CONFIG: Final = "english"

#: Inserts one history row (:func:`engramdb.storage._common.history_row`).
INSERT_HISTORY: Final = (
    "INSERT INTO history (memory_id, action, at, actor, before, after) VALUES (%s, %s, %s, %s, %s, %s)"
)


def _one_of(column: str, values: Sequence[str]) -> tuple[str, list[str]]:
    return f"{column} = ANY(%s::text[])", list(values)


_DIALECT: Final = FilterDialect(placeholder="%s", true="TRUE", one_of=_one_of)


def filter_sql(flt: Filter | None) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (see :func:`~engramdb.storage._common.filter_clauses`)."""
    return filter_clauses(flt, _DIALECT)


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

"""PostgreSQL's spelling of the shared SQL: ``?`` placeholders translated to psycopg's, id lists as
arrays, and the ``tsquery`` keyword query. The visibility rule is written once in
:mod:`engramdb.storage._filters`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final

from engramdb.storage._filters import FilterSQL, filter_clauses
from engramdb.storage.base import Filter

__all__ = ["TS_CONFIG", "filter_sql", "one_of", "pg_statement", "tsquery_sql"]

#: The text-search configuration of the keyword index (stemming like FTS5's porter tokenizer).
TS_CONFIG: Final = "english"


@functools.lru_cache(maxsize=1024)
def pg_statement(statement: str) -> str:
    """``statement`` written with ``?`` placeholders, in psycopg's ``%s`` form (a literal ``%`` doubled).

    The shared SQL never holds a ``?`` or ``%`` of its own (values are always parameters).
    """
    return statement.replace("%", "%%").replace("?", "%s")


def one_of(column: str, values: Sequence[str]) -> tuple[str, list[str]]:
    """``column`` among ``values``: one text array parameter."""
    return f"{column} = ANY(?::text[])", list(values)


def filter_sql(flt: Filter | None) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (see :func:`~engramdb.storage._filters.filter_clauses`)."""
    return filter_clauses(flt, one_of)


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
    expr = " || ".join(f"plainto_tsquery('{TS_CONFIG}', ?)" for _ in unique)
    return f"({expr})", unique

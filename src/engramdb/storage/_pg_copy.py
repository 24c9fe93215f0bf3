"""Rows into PostgreSQL tables by ``COPY``: how a batch write sends its rows.

A batch of ``remember_many`` writes five tables (memories, tags, history, vectors, audit). Row by
row that was a statement per row and table; one ``COPY`` per table sends them in one stream, and
every round trip saved shortens the transaction other writers may wait behind at the audit lock
(bench/pg_writers.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import psycopg
from psycopg import sql

__all__ = ["copy_rows"]

#: Binary COPY's types of the ``vectors`` columns: a binary COPY names each column's type, and pgvector's
#: binary form is what its psycopg adapter writes fastest.
_BINARY_TYPES: Final = {
    "memory_id": "text",
    "agent": "text",
    "open": "bool",
    "model_id": "text",
    "dim": "int4",
    "embedding": "vector",
}


def copy_rows(
    conn: psycopg.Connection[tuple[Any, ...]], table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert ``rows`` (values of ``columns``, in order) into ``table`` with one ``COPY ... FROM STDIN``.

    Text format, except for a table with an ``embedding`` column (binary). Table and column names
    are the store's own, quoted as identifiers. Runs in the connection's open transaction.
    """
    if not rows:
        return
    binary = "embedding" in columns
    statement = sql.SQL("COPY {table} ({columns}) FROM STDIN{binary}").format(
        table=sql.Identifier(table),
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        binary=sql.SQL(" WITH (FORMAT BINARY)" if binary else ""),
    )
    with conn.cursor() as cur, cur.copy(statement) as cp:
        if binary:
            cp.set_types([_BINARY_TYPES[c] for c in columns])
        for row in rows:
            cp.write_row(row)

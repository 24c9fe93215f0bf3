"""PostgreSQL's spelling of the shared SQL: ``?`` placeholders translated to psycopg's, id lists as
arrays, and the ``tsquery`` keyword query. The visibility rule is written once in
:mod:`engramdb.storage._filters`."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._filters import FilterSQL, filter_clauses
from engramdb.storage._pg_terms import LexemeSample
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    import psycopg

    Raw = psycopg.Connection[tuple[Any, ...]]

__all__ = [
    "TS_CONFIG",
    "CurrentModel",
    "ModelCache",
    "TermStats",
    "filter_sql",
    "holds",
    "one_of",
    "open_rows",
    "pg_statement",
    "tsquery_sql",
]

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


# Visible to reader ?: the rule of _filters' row-by-row test, with the shares looked up once per statement (an
# InitPlan array) instead of once per row. Every arm is then indexable, so the planner can gather the visible rows
# from three index scans (a BitmapOr: the agent's, the public ones, the shared ones) and intersect them with the
# keyword index (a BitmapAnd) instead of testing every row it reads. With the per-row EXISTS in an OR it could not:
# at 10k memories an agent filter read all of them (26 ms of a 42 ms exact vector search, bench/scale_pg.py).
# Tested row by row, though, the array is searched linearly (in the reader's shares): where rows come one at a
# time in the HNSW index's order, the row-by-row form stays.
_VISIBLE_INDEXED: Final = (
    "(m.agent = ? OR m.visibility = 'public' OR "
    "m.id = ANY (ARRAY(SELECT s.memory_id FROM shares s WHERE s.to_agent IN (?, '*'))))"
)


# Rows another agent owns that the reader may see: public ones and ones shared with it or everyone (one parameter,
# the reader). Row by row where rows come one at a time (the HNSW index's order); as an array of shares where the
# planner gathers rows through indexes (as _VISIBLE_INDEXED).
_OPEN_ROW_BY_ROW: Final = (
    "(m.visibility = 'public' OR EXISTS (SELECT 1 FROM shares s WHERE s.memory_id = m.id AND s.to_agent IN (?, '*')))"
)
_OPEN_INDEXED: Final = (
    "(m.visibility = 'public' OR m.id = ANY (ARRAY(SELECT s.memory_id FROM shares s WHERE s.to_agent IN (?, '*'))))"
)


def open_rows(*, indexed: bool) -> str:
    """SQL admitting the rows of other agents that a reader (one ``?``) may see: public or shared with it."""
    return _OPEN_INDEXED if indexed else _OPEN_ROW_BY_ROW


def holds(key: str, value: Any) -> tuple[str, list[Any]]:
    """``m.metadata`` holds ``value`` at top-level ``key``: jsonb equality, which keeps true apart from 1 and
    "1" apart from 1, and compares numbers as numbers."""
    return "(m.metadata::jsonb -> ?::text) = ?::jsonb", [key, json.dumps(value)]


def filter_sql(flt: Filter | None, *, indexed: bool = False) -> FilterSQL:
    """The WHERE clause implementing ``flt`` (see :func:`~engramdb.storage._filters.filter_clauses`).

    ``indexed`` picks the visibility form the planner can answer from indexes (for statements that gather
    the rows through indexes: keyword matches, an exact vector scan, counts); the default tests it row by row.
    """
    return filter_clauses(flt, one_of, holds=holds, visible=_VISIBLE_INDEXED if indexed else None)


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


#: How long the keyword column's statistics are reused (autovacuum refreshes them far less often).
_STATS_TTL_S: Final = 60.0
_LEXEME_CACHE: Final = 4096
# The planner's most common lexemes of memories.tsv with their row fractions (ANALYZE keeps them),
# the table's row estimate, and the most common agents with theirs. The lexeme frequency array ends
# with three extra numbers (min, max, nulls).
_STATS_SQL: Final = (
    "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples, "
    "a.most_common_vals::text::text[], a.most_common_freqs, "
    "(SELECT p.most_common_freqs[array_position(p.most_common_vals::text::text[], 'public')] FROM pg_stats p "
    "WHERE p.schemaname = c.relnamespace::regnamespace::text AND p.tablename = 'memories' "
    "AND p.attname = 'visibility'), "
    "(SELECT greatest(s.reltuples, 0) FROM pg_class s WHERE s.oid = to_regclass('shares')) "
    "FROM pg_class c "
    "LEFT JOIN pg_stats s ON s.schemaname = c.relnamespace::regnamespace::text "
    "AND s.tablename = 'memories' AND s.attname = 'tsv' "
    "LEFT JOIN pg_stats a ON a.schemaname = c.relnamespace::regnamespace::text "
    "AND a.tablename = 'memories' AND a.attname = 'agent' WHERE c.oid = to_regclass('memories')"
)


class TermStats:
    """Which keyword terms should select the rows a search ranks, so that ranking stays bounded.

    From the planner's statistics of the ``tsv`` column (cached for a minute): a term's rows are
    estimated by its rarest lexeme's frequency among the most common elements; a lexeme not
    listed there is at most as frequent as the least frequent listed one. Without statistics
    (a small or never analysed table) every term selects. Thread-safe.
    """

    def __init__(self, *, budget_rows: float, sample: LexemeSample | None = None) -> None:
        self._budget = budget_rows
        self._sample = sample
        self._total = 0.0
        self._lock = threading.Lock()
        self._expires = 0.0
        self._rows: dict[str, float] = {}
        self._unlisted = 0.0
        self._agents: dict[str, float] = {}
        self._other_agent = 0.0
        self._open_rows = 0.0
        self._lexemes: dict[str, tuple[str, ...]] = {}

    def selecting(self, conn: Raw, terms: Sequence[str], *, scope: float = 1.0) -> tuple[tuple[str, ...], bool]:
        """The terms whose matches are ranked, rarest first, and whether even the rarest alone is over budget.

        Terms are taken rarest first while their estimated matches together stay within
        ``budget_rows`` (the rarest always); the others only add to the rank of what these select.
        A term's matches are counted in the reader's ``scope`` (the fraction of the rows it may read):
        the statement ranks only those. Frequencies come from the store's :class:`LexemeSample` once one
        is taken, else from the planner's most common lexemes.
        """
        rows = self._estimates(conn)
        sample = self._sample.current(conn, self._total) if self._sample is not None else None
        if not rows and sample is None:
            return tuple(terms), False
        lexemes = self.lexemes_of(conn, terms)
        unlisted = self._unlisted
        if sample is not None:
            estimates = {t: min(sample.rows(x) for x in lexemes[t]) * scope for t in terms if lexemes.get(t)}
        else:
            estimates = {t: min(rows.get(x, unlisted) for x in lexemes[t]) * scope for t in terms if lexemes.get(t)}
        if not estimates:
            return tuple(terms), False
        chosen: list[str] = []
        total = 0.0
        for term in sorted(estimates, key=lambda t: estimates[t]):
            if chosen and total + estimates[term] > self._budget:
                break
            chosen.append(term)
            total += estimates[term]
        return tuple(chosen), total > self._budget

    def agent_rows(self, conn: Raw, agent: str) -> float:
        """About how many memories ``agent`` owns (0 without statistics: a small or never analysed table).

        From the ``agent`` column's most common values; an agent not listed there owns at most as many
        as the least common listed one (all of them when the statistics list no agent but the table has rows).
        """
        self._estimates(conn)
        with self._lock:
            return self._agents.get(agent, self._other_agent)

    def agent_listed(self, conn: Raw, agent: str) -> bool:
        """Whether the statistics list ``agent`` among the most common (its row count is the planner's, not a guess)."""
        self._estimates(conn)
        with self._lock:
            return agent in self._agents

    def total_rows(self, conn: Raw) -> float:
        """About how many memories the store holds (0 without statistics)."""
        self._estimates(conn)
        with self._lock:
            return self._total

    def open_rows(self, conn: Raw) -> float:
        """About how many memories an agent may see that another agent owns: the public ones and the shares (an
        upper bound; 0 without statistics)."""
        self._estimates(conn)
        with self._lock:
            return self._open_rows

    def invalidate(self) -> None:
        """Read the statistics again at the next search (they were just refreshed by ANALYZE)."""
        with self._lock:
            self._expires = 0.0

    def _estimates(self, conn: Raw) -> dict[str, float]:
        now = time.monotonic()
        with self._lock:
            if now < self._expires:
                return self._rows
        row = conn.execute(_STATS_SQL).fetchone()
        estimates: dict[str, float] = {}
        unlisted = 0.0
        agents: dict[str, float] = {}
        other_agent = 0.0
        open_rows = 0.0
        if row is not None and row[2] is not None:
            total = max(0.0, float(row[2]))
            if row[0] is not None and row[1] is not None:
                elems, freqs = list(row[0]), [float(f) for f in row[1]]
                estimates = {lexeme: freq * total for lexeme, freq in zip(elems, freqs, strict=False)}
                # After the per-lexeme frequencies come the minimum, the maximum and the null fraction.
                unlisted = freqs[len(elems)] * total if len(freqs) > len(elems) else 0.0
            if row[3] is not None and row[4] is not None:
                agents = {str(a): float(f) * total for a, f in zip(row[3], row[4], strict=False)}
            other_agent = min(agents.values(), default=total)
            open_rows = float(row[5] or 0) * total + float(row[6] or 0)
        with self._lock:
            self._open_rows = open_rows
            self._total = max(0.0, float(row[2])) if row is not None and row[2] is not None else 0.0
            self._rows, self._unlisted, self._expires = estimates, unlisted, now + _STATS_TTL_S
            self._agents, self._other_agent = agents, other_agent
        return estimates

    def lexemes_of(self, conn: Raw, terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Each of ``terms`` with its stems as the keyword index holds them (``to_tsvector``; cached)."""
        with self._lock:
            known = {t: self._lexemes[t] for t in terms if t in self._lexemes}
        missing = [t for t in terms if t not in known]
        if missing:
            found = conn.execute(
                "SELECT t, tsvector_to_array(to_tsvector(%s::regconfig, t)) FROM unnest(%s::text[]) AS t",
                (TS_CONFIG, missing),
            ).fetchall()
            fetched = {str(t): tuple(str(x) for x in lexemes) for t, lexemes in found}
            with self._lock:
                if len(self._lexemes) + len(fetched) > _LEXEME_CACHE:
                    self._lexemes.clear()
                self._lexemes.update(fetched)
            known.update(fetched)
        return known


@dataclass(frozen=True, slots=True)
class CurrentModel:
    """The store's current embedding model, its vectors' dimension, the planner's estimate of the vector rows, and
    how many partitions (by agent) hold them."""

    model_id: str
    dim: int
    estimate: float
    partitions: int = 1

    @property
    def partition_rows(self) -> float:
        """About how many vectors one partition holds (what an agent's search reads its graph among)."""
        return self.estimate / max(1, self.partitions)


#: How long the current model and the row estimate are reused. A search checks the model in its own statement, so
#: a change is seen at once; the estimate only picks the exact scan or the index, and ANALYZE moves it rarely.
_MODEL_TTL_S: Final = 30.0
# The estimate sums the partitions' (-1 while none was ever counted: a partition holding no agent yet is never
# analysed by autovacuum). The first vectors of a store may all be staged (``_pg_staging``): the dimension is theirs.
_MODEL_SQL: Final = (
    "SELECT m.value, coalesce((SELECT v.dim FROM vectors v WHERE v.model_id = m.value LIMIT 1), "
    "(SELECT s.dim FROM vectors_staged s WHERE s.model_id = m.value LIMIT 1)), "
    "(SELECT CASE WHEN bool_and(c.reltuples < 0) THEN -1 ELSE sum(greatest(c.reltuples, 0)) END "
    "FROM pg_partition_tree(to_regclass('vectors')) p JOIN pg_class c ON c.oid = p.relid WHERE p.isleaf), "
    "(SELECT count(*) FROM pg_partition_tree(to_regclass('vectors')) p WHERE p.isleaf) FROM meta m WHERE m.key = %s"
)


class ModelCache:
    """The store's :class:`CurrentModel`, read once per :data:`_MODEL_TTL_S` (a round trip less per search)."""

    def __init__(self, meta_key: str) -> None:
        self._key = meta_key
        self._lock = threading.Lock()
        self._model: CurrentModel | None = None
        self._expires = 0.0

    def invalidate(self) -> None:
        """Read the model and the row estimate again at the next search."""
        with self._lock:
            self._expires = 0.0

    def current(self, conn: Raw, *, fresh: bool = False) -> CurrentModel | None:
        """The cached model, or (``fresh``, expired, none cached) the store's as of now; None before any vector."""
        now = time.monotonic()
        with self._lock:
            if not fresh and self._model is not None and now < self._expires:
                return self._model
        row = conn.execute(_MODEL_SQL, (self._key,)).fetchone()
        if row is None or row[1] is None:
            # Not cached: the first vectors are found by the next search.
            return None
        model = CurrentModel(str(row[0]), int(row[1]), float(row[2] if row[2] is not None else -1), int(row[3] or 1))
        with self._lock:
            self._model, self._expires = model, now + _MODEL_TTL_S
        return model

"""The PostgreSQL store's two retrieval channels (:class:`PgSearch`): ``tsvector`` keywords and pgvector's HNSW.

See :mod:`engramdb.storage.postgres` for how each works. Both return their candidates' rows with them
(``Candidate.memory``, the columns ``get_many`` reads under the same filter): hybrid search then reads no memory
again, one round trip and ~4 ms fewer at 100k (bench/RESULTS.md, issue 26).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from engramdb.errors import StorageError, ValidationError
from engramdb.models import Memory
from engramdb.storage._checks import as_unit_rows
from engramdb.storage._codecs import MEMORY_COLUMNS, shared_row_to_memory
from engramdb.storage._filters import FilterSQL
from engramdb.storage._pg_analyze import StatisticsKeeper
from engramdb.storage._pg_keywords import KEYWORD_TERM_POSTINGS, Bm25Query, bm25_query, own_scores_sql, tsquery_text
from engramdb.storage._pg_nearest import (
    VectorBranch,
    VectorPlan,
    from_rows,
    inline,
    near_ef,
    near_plan,
    nearest_many,
    vector_branches,
)
from engramdb.storage._pg_sql import (
    CurrentModel,
    ModelCache,
    TermStats,
    filter_sql,
    open_rows,
    pg_statement,
)
from engramdb.storage._pg_staging import WRITE_READ
from engramdb.storage._pg_terms import LexemeSample
from engramdb.storage.base import MODEL_META_KEY, Candidate, Filter, Vectors

__all__ = ["ITERATIVE_SCAN", "KEYWORD_RANK_ROWS", "MIN_EF_SEARCH", "PgSearch"]

Raw = psycopg.Connection[tuple[Any, ...]]


class _Backend(Protocol):
    """What the channels need of :class:`~engramdb.storage.postgres.PostgresBackend` (named here, not imported:
    the backend builds its channels)."""

    def reading(self, *, snapshot: bool = False) -> AbstractContextManager[Raw]: ...

    def in_write(self) -> bool: ...


# A keyword candidate's stored vector of the store's current model (NULL without one): folded into ``vectors``,
# partitioned by agent (the memory's agent prunes the lookup to one partition as it runs), or still staged.
# Takes the model id twice.
_CARRIED_VECTOR: Final = (
    "COALESCE((SELECT v.embedding FROM vectors v WHERE v.memory_id = m.id AND v.agent = m.agent AND v.model_id = ?), "
    "(SELECT s.embedding FROM vectors_staged s WHERE s.memory_id = m.id AND s.model_id = ?))"
)
#: About how many rows found by the keyword index of ``memories`` a keyword search ranks at most, once the store has
#: statistics: other agents' open rows, or every agent's without a reader (keyword_candidates; a reader's own rows
#: come from the postings, see :mod:`._pg_keywords`). Chosen in the fourth round (bench/RESULTS.md, issue 26) for
#: ``ts_rank_cd`` against the embedded store's BM25 on the same 100k rows; each such row now costs an index probe
#: per question lexeme (its postings).
KEYWORD_RANK_ROWS: Final = 500
#: Vector statements kept composed (one per filter form, model and depth: see :meth:`PgSearch._vector_rows`).
_STATEMENT_FORMS: Final = 256
#: The HNSW search breadth (``hnsw.ef_search``) at least, on a graph of :data:`_EF_SCALE_ROWS` vectors; a deeper
#: search raises it to its ``limit``. Measured on the partitioned store (bench/scale_pg.py, 100k memories over 10
#: agents, an agent's graph of 20k vectors, depth 50, 40 questions): ef 64 gave recall@10 0.983 (agent + kind 0.973),
#: 100 0.995 (0.988), 150 1.0 (0.995), with 1,385 buffers read at 100 against 3,273 at 400.
MIN_EF_SEARCH: Final = 100
#: Of the reader's own matches, the best ``limit`` x this many are tested against the rest of the filter first (the
#: embedded store's head: ``_sqlite_search``); all of them only when fewer than ``limit`` of those pass.
_KEYWORD_HEAD_FACTOR: Final = 4
#: An exact scan reads a row for about this fraction of what the HNSW index spends on an entry (see _plan).
_EXACT_COST_RATIO: Final = 4
#: pgvector 0.8's iterative index scan (``hnsw.iterative_scan``): with a filter, the scan goes on past ``ef_search``
#: until ``limit`` rows pass. "relaxed_order" returns them roughly in distance order (the statement re-sorts them).
ITERATIVE_SCAN: Final = "relaxed_order"
#: Past this many vectors in the graph searched, ``hnsw.ef_search`` grows with the square root of its size.
_EF_SCALE_ROWS: Final = 20_000
#: pgvector's ceiling for ``hnsw.ef_search``; a deeper search relies on the iterative scan to go on.
_MAX_EF_SEARCH: Final = 1000


def _as_array(value: Any) -> npt.NDArray[np.float32]:
    """A pgvector value as numbers (pgvector >= 0.3 loads a Vector object, older releases a numpy array)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def _vector_statement(
    conn: Raw, model: CurrentModel, branches: Sequence[VectorBranch], f: FilterSQL, limit: int
) -> str:
    """The vector search of ``branches`` as text: each part's nearest ``limit`` rows with their memories, merged."""
    parts: list[sql.Composable] = []
    for branch in branches:
        # The memory's columns come with each of the LIMIT's rows (the join reads them anyway), after d and model.
        # The relaxed iterative scan of the HNSW path returns rows roughly in order: each part sorts its head.
        parts.append(
            sql.SQL(
                "(SELECT {distance} AS d, (SELECT x.value FROM meta x WHERE x.key = %s) AS model, "
                "{shared_by}, {shared_at}, {columns} FROM {rows} "
                "WHERE v.model_id = {model} AND v.dim = {dim} AND {where} ORDER BY {order} LIMIT {limit})"
            ).format(
                distance=branch.distance,
                order=branch.order_by(),
                rows=from_rows(branch),
                shared_by=sql.SQL(pg_statement(f.shared_by)),
                shared_at=sql.SQL(pg_statement(f.shared_at)),
                columns=sql.SQL(MEMORY_COLUMNS),
                model=inline(model.model_id),
                dim=sql.Literal(model.dim),
                where=sql.SQL(pg_statement(branch.where)),
                limit=sql.Literal(limit),
            )
        )
    statement = sql.SQL("SELECT * FROM ({parts}) h ORDER BY h.d LIMIT {limit}").format(
        parts=sql.SQL(" UNION ALL ").join(parts), limit=sql.Literal(limit)
    )
    return statement.as_string(conn)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    """A part of the keyword statement yielding (rid, score): a CTE chain ending in ``own_best`` (the reader's own
    rows) or a parenthesised SELECT, its parameters, and whether it ranks the newest matches only (over budget)."""

    sql: str
    params: tuple[Any, ...]
    cte: bool
    newest: bool = False


class PgSearch:
    """:class:`~engramdb.storage.base.CandidateSource` of a PostgreSQL store: ``tsvector`` and pgvector."""

    def __init__(
        self,
        backend: _Backend,
        *,
        exact_search_below: int,
        keyword_rank_rows: int = KEYWORD_RANK_ROWS,
        ef_search: int = MIN_EF_SEARCH,
        iterative: str = ITERATIVE_SCAN,
    ) -> None:
        self._backend = backend
        self._exact_below = exact_search_below
        self._ef_search = ef_search
        self._iterative = iterative
        self._models = ModelCache(MODEL_META_KEY)
        self._rank_rows = keyword_rank_rows
        #: Lexeme frequencies from a sample of the store (see :mod:`._pg_terms`).
        self.lexemes = LexemeSample(backend.reading)
        self._terms = TermStats(budget_rows=keyword_rank_rows, sample=self.lexemes)
        #: A question term's postings among the reader's own rows ranked at most, newest first (see
        #: :mod:`._pg_keywords`).
        self.term_postings = KEYWORD_TERM_POSTINGS
        #: Vector searches on prepared generic plans (see :meth:`_vector_rows`); False plans each one for its values.
        self.generic_vector_plans = True
        #: Runs ANALYZE when a bulk load left the planner's statistics behind (see :mod:`._pg_analyze`).
        self.statistics = StatisticsKeeper(backend.reading, self._analysed)
        # The vector statements composed so far, by form (see _vector_rows); shared by the searching threads (an entry
        # lost to a clear is composed again).
        self._statements: dict[tuple[Any, ...], str] = {}

    def _analysed(self) -> None:
        self._terms.invalidate()
        self._models.invalidate()

    def warm(self, conn: Raw) -> None:
        """Take the first look at the change counters, which a process's first search would take on its way (it may
        start an ANALYZE or a merge of the keyword indexes' pending lists). Not the keyword lexeme sample: a process
        that only writes never needs it, and it reads a sample of the whole store (:mod:`._pg_terms`)."""
        self.statistics.check(conn)

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> list[Candidate]:
        """Full-text candidates matching any of ``terms``, best BM25 first (FTS5's form, higher is better).

        The reader's own matches are ranked from the keyword postings (``memory_terms``, see :mod:`._pg_keywords`):
        the terms the embedded store would keep, each term's newest :attr:`term_postings` postings among the
        reader's rows. Other agents' public and shared matches (and a search over every agent) are ranked from their
        ``tsv`` with the same formula; there ranking reads each row, so terms select those rows rarest first while
        their estimated matches among the rows the reader may see stay within :data:`KEYWORD_RANK_ROWS` together
        (frequencies from :attr:`lexemes`); when even the rarest term is over that budget, its newest
        :data:`KEYWORD_RANK_ROWS` matches are ranked. The other terms still add to the score of what these select.
        """
        unique = [t for t in dict.fromkeys(terms) if t and t.strip()]
        if not unique or limit <= 0:
            return []
        with self._backend.reading() as conn:
            self.statistics.check(conn)
            sample = self.lexemes.current(conn, self._terms.total_rows(conn))
            query = bm25_query(unique, self._terms.lexemes_of(conn, unique), sample=sample)
            if query is None:
                return []
            # Others' matches come from the keyword index of ``memories``, their visibility in the form the planner
            # answers from indexes (the reader's own rows come from its postings, never from that index).
            few = flt.agent is not None
            f = filter_sql(flt, indexed=few)
            # Each candidate's vector of the store's model comes with it (read for the LIMIT's rows only, in its
            # agent's partition): hybrid search needs a keyword-only hit's cosine, one more round trip otherwise.
            model = self._models.current(conn)
            model_id = model.model_id if model is not None else None
            others = self._rows_part(conn, flt, f, unique, query, few=few, limit=limit)
            scored = [q for q in (self._own_part(flt, query, limit), others) if q is not None]
            own = [p for part in scored[:1] if part.cte for p in part.params]
            ctes = [part.sql for part in scored if part.cte]
            parts = " UNION ALL ".join(part.sql for part in scored if not part.cte) or ""
            # Each part yields row numbers and scores only: the memories' columns are read for the ``limit`` best.
            outer = f"{_CARRIED_VECTOR}, {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS}"
            union = " UNION ALL ".join(
                [*(["(SELECT o.rid, o.score FROM own_best o)"] if ctes else []), *([parts] if parts else [])]
            )
            statement = (
                (f"WITH {ctes[0]} " if ctes else "")
                + f"SELECT m.id, t.score, {outer} FROM (SELECT h.rid, h.score FROM ({union}) h "
                "ORDER BY h.score DESC, h.rid LIMIT ?) t JOIN memories m ON m.rid = t.rid ORDER BY t.score DESC, t.rid"
            )
            params: tuple[Any, ...] = (
                *own,
                model_id,
                model_id,
                *f.shared_by_params,
                *f.shared_at_params,
                *(p for part in scored if not part.cte for p in part.params),
                limit,
            )
            # A reader's statement runs prepared on a generic plan: its plan does not depend on the values (index-only
            # scans of the reader's postings, the others' matches through the keyword index), and planning it each time
            # cost more than running it (100k, 40 questions alternated, identical answers: 5.9 -> 2.8 ms p50 for an
            # agent, 10.2 -> 6.4 with a kind). Not when others' rows are over budget (their newest first: the plan
            # depends on how common the word is) nor without a reader. Local to the pipeline's implicit transaction.
            # Never inside a caller's transaction (atomic()): the setting would last until its end.
            generic = flt.agent is not None and not any(part.newest for part in scored) and not self._backend.in_write()
            with conn.pipeline():
                conn.execute(
                    "SELECT set_config('plan_cache_mode', %s, true)",
                    ("force_generic_plan" if generic else "force_custom_plan",),
                )
                # Binary results: a vector's text form costs the server ~0.5 ms to print (fetch_vectors).
                cur = conn.execute(pg_statement(statement), params, binary=True, prepare=generic or None)
            rows = cur.fetchall()
        return [
            Candidate(
                row[0],
                float(row[1]),
                shared_row_to_memory(row[3:]),
                vector=None if row[2] is None else _as_array(row[2]),
                vector_model=model_id,
            )
            for row in rows
        ]

    def _own_part(self, flt: Filter, query: Bm25Query, limit: int) -> _Part | None:
        """The reader's own best matches as CTEs ending in ``own_best`` (rid, score), with their parameters.

        Scored from the postings alone, then the filter is tested on the best ``4 x limit`` (the embedded store's
        head): when fewer than ``limit`` of them pass and more rows matched, on every match instead (one statement:
        the second form runs only when the first fell short).
        """
        if flt.agent is None:
            return None
        rest = filter_sql(replace(flt, agent=None))
        where = f"m.agent = ? AND {rest.where}"
        head = limit * _KEYWORD_HEAD_FACTOR
        sql_text = (
            f"own AS MATERIALIZED ({own_scores_sql()}), "
            "own_head AS (SELECT o.rid, o.score FROM (SELECT rid, score FROM own ORDER BY score DESC, rid LIMIT ?) o "
            f"JOIN memories m ON m.rid = o.rid WHERE {where} ORDER BY o.score DESC, o.rid LIMIT ?), "
            "own_enough AS (SELECT (SELECT count(*) FROM own_head) >= ? OR (SELECT count(*) FROM own) <= ? AS ok), "
            "own_best AS ((SELECT rid, score FROM own_head WHERE (SELECT ok FROM own_enough)) UNION ALL "
            f"(SELECT o.rid, o.score FROM own o JOIN memories m ON m.rid = o.rid WHERE {where} "
            "AND NOT (SELECT ok FROM own_enough) ORDER BY o.score DESC, o.rid LIMIT ?))"
        )
        params = (
            query.mean_length, list(query.lexemes), list(query.idf), flt.agent, self.term_postings,
            head, flt.agent, *rest.params, limit,
            limit, head,
            flt.agent, *rest.params, limit,
        )  # fmt: skip
        return _Part(sql=sql_text, params=params, cte=True)

    def _rows_part(
        self, conn: Raw, flt: Filter, f: FilterSQL, terms: Sequence[str], query: Bm25Query, *, few: bool, limit: int
    ) -> _Part | None:
        """Other agents' visible matches (or, with no reader, every agent's), found by the keyword index of
        ``memories`` and ranked from their postings: a part yielding (rid, score), with its parameters; None when the
        reader sees only its own rows."""
        if flt.agent is not None and not flt.include_shared:
            return None
        if flt.agent is None:
            where, where_params = f.where, f.params
        else:
            rest = filter_sql(replace(flt, agent=None))
            where = f"m.agent <> ? AND {open_rows(indexed=few)} AND {rest.where}"
            where_params = (flt.agent, flt.agent, *rest.params)
        chosen, over_budget = self._terms.selecting(conn, terms, scope=self._scope(conn, flt))
        stems = self._terms.lexemes_of(conn, chosen)
        select = tsquery_text(list(dict.fromkeys(x for t in chosen for x in stems.get(t, ()))) or query.lexemes)
        newest = f"ORDER BY m.rid DESC LIMIT {int(self._rank_rows)}" if over_budget else ""
        # Each row's counts come from its postings (an index probe per question lexeme): the same numbers, summed
        # in the same order, as the reader's own rows get; a row's ``tsv`` is never read (ranking it there in SQL
        # took ~0.3 ms a row).
        sql_text = (
            "(SELECT x.rid, s.score FROM (SELECT m.rid, m.agent FROM memories m "
            f"WHERE m.tsv @@ ?::tsquery AND {where} {newest}) x "
            "CROSS JOIN LATERAL (SELECT sum(engram_bm25_part(q.idf, p.tf, p.dl, coalesce(?::float8, p.dl::float8)) "
            "ORDER BY q.n) AS score FROM unnest(?::text[], ?::float8[]) WITH ORDINALITY AS q (lexeme, idf, n) "
            "JOIN memory_terms p ON p.agent = x.agent AND p.lexeme = q.lexeme AND p.rid = x.rid) s "
            "WHERE s.score IS NOT NULL ORDER BY s.score DESC, x.rid LIMIT ?)"
        )
        params = (select, *where_params, query.mean_length, list(query.lexemes), list(query.idf), limit)
        return _Part(sql=sql_text, params=params, cte=False, newest=over_budget)

    def _scope(self, conn: Raw, flt: Filter) -> float:
        """The fraction of the store's rows a keyword search of ``flt`` may read (its own and the open ones)."""
        total = self._terms.total_rows(conn)
        if flt.agent is None or total <= 0:
            return 1.0
        seen = self._terms.open_rows(conn) if flt.include_shared else 0.0
        return min(1.0, (self._terms.agent_rows(conn, flt.agent) + seen) / total)

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> list[Candidate]:
        """Cosine candidates among the current model's vectors, best first (score = 1 - cosine distance)."""
        query = as_unit_rows(vector, rows=1)[0]
        if limit <= 0:
            return []
        if self._backend.in_write():
            # The HNSW settings below are the connection's: kept out of a caller's open transaction.
            raise StorageError("searches cannot run inside an atomic() block")
        with self._backend.reading() as conn:
            self.statistics.check(conn)
            model = self._models.current(conn)
            if model is None:
                return []
            if query.shape != (model.dim,):
                model = self._models.current(conn, fresh=True)
                if model is None:
                    return []
                if query.shape != (model.dim,):
                    raise ValidationError(
                        f"query vector has dimension {query.shape[0]}, the store's vectors have {model.dim}"
                    )
            rows = self._vector_rows(conn, model, query, flt, limit)
            if rows is None:
                # The model changed since it was cached (the statement checks it): once more with the new one.
                model = self._models.current(conn, fresh=True)
                if model is None or query.shape != (model.dim,):
                    return []
                rows = self._vector_rows(conn, model, query, flt, limit) or []
        return [Candidate(memory_id, 1.0 - float(d), memory) for memory_id, d, memory in rows]

    def vector_candidates_many(
        self, queries: Sequence[tuple[Vectors, Filter]], *, limit: int, near: float | None = None
    ) -> list[list[Candidate]]:
        """See :meth:`CandidateSource.vector_candidates_many`: one statement (:mod:`._pg_nearest`)."""
        ef = self._ef if near is None else near_ef

        def plan_of(conn: Raw, model: CurrentModel, flt: Filter, limit: int) -> VectorPlan:
            plan = self._plan(conn, model, flt, limit)
            return plan if near is None else near_plan(plan, model, exact_below=self._exact_below)

        return nearest_many(self._backend, self._models, check_statistics=self.statistics.check,
                            plan_of=plan_of, ef_search=ef, iterative=self._iterative,
                            queries=queries, limit=limit, note="" if near is None else WRITE_READ)  # fmt: skip

    def _ef(self, model: CurrentModel, limit: int, *, graph_rows: float | None = None) -> str:
        """``hnsw.ef_search`` for a search of ``limit`` rows in a graph of ``graph_rows`` vectors (a partition's).

        Wider on larger graphs: on one graph of every agent's vectors at 1M memories (before the partitions), a 10%
        agent filter needed ef 700 for recall@10 0.993 (ef 400: 0.96; 30 questions, bench/scale_pg.py).
        """
        rows = model.partition_rows if graph_rows is None else graph_rows
        wider = int(self._ef_search * math.sqrt(max(1.0, rows) / _EF_SCALE_ROWS))
        return str(min(_MAX_EF_SEARCH, max(self._ef_search, wider, limit)))

    def _plan(self, conn: Raw, model: CurrentModel, flt: Filter, limit: int) -> VectorPlan:
        """The HNSW graphs or an exact scan, for the reader's own vectors and for the others it may see.

        The planner's row estimate (reltuples) is -1 until the table is first analysed: exact until then, and below
        ``exact_search_below`` vectors. Above it, rows a search would find few of are scanned exactly: finding
        ``limit`` of a reader's rows in a graph reads about ``limit`` x (graph rows / reader's rows) entries (and
        gives up at pgvector's ``hnsw.max_scan_tuples``, 20,000: an agent with 0.1% of a million rows got an
        incomplete top 50), while the exact scan reads the reader's rows, each about a quarter of an index entry's
        cost (bench/scale_pg.py at 100k: 10k rows exactly ~4x the time of ~500 index entries). The reader's own
        rows are in its partition's graph (``vectors`` is partitioned by agent); other agents' public and shared
        rows are in every partition's.
        """
        if not 0 <= self._exact_below <= model.estimate:
            return VectorPlan(own=False, others=False)
        if flt.agent is None:
            return VectorPlan(own=True, others=True)
        own = self._terms.agent_rows(conn, flt.agent)
        seen = self._terms.open_rows(conn) if flt.include_shared else 0.0
        return VectorPlan(
            own=own <= 0 or own * own > _EXACT_COST_RATIO * limit * model.partition_rows,
            others=seen * seen > _EXACT_COST_RATIO * limit * model.estimate,
        )

    def _vector_rows(
        self, conn: Raw, model: CurrentModel, query: npt.NDArray[np.float32], flt: Filter, limit: int
    ) -> list[tuple[str, float, Memory]] | None:
        """The nearest ``limit`` (id, distance, memory) under ``flt``; None when ``model`` is no longer the store's."""
        f = filter_sql(flt)
        params: list[Any] = []
        # The reader's partition holds its own rows and maybe another agent's: its graph is at least that large.
        own = self._terms.agent_rows(conn, flt.agent) if flt.agent is not None else 0.0
        ef = self._ef(model, limit, graph_rows=max(model.partition_rows, own))
        plan = self._plan(conn, model, flt, limit)
        branches = vector_branches(model, flt, plan)
        for branch in branches:
            params += branch.ordered_params(query, MODEL_META_KEY, *f.shared_by_params, *f.shared_at_params)
        # The statement's text depends on the filter's form, not its values: composed once per form, not per search.
        form = (
            model.model_id, model.dim, limit, plan, flt.agent is None, flt.include_shared,
            f.where, filter_sql(replace(flt, agent=None)).where, f.shared_by, f.shared_at,
        )  # fmt: skip
        statement = self._statements.get(form)
        if statement is None:
            statement = _vector_statement(conn, model, branches, f, limit)
            if len(self._statements) >= _STATEMENT_FORMS:
                self._statements.clear()
            self._statements[form] = statement
        # Pipelined: the HNSW settings travel with the search in one round trip. They are the pooled connection's
        # session settings (no transaction: BEGIN and COMMIT would cost a round trip each); only this method
        # searches the HNSW index on the store's connections, and it sets both every time.
        # A reader's search of its own many rows through its graph runs prepared, on a generic plan: planned for its
        # values, the statement's HNSW scan took 13-24 ms where the generic plan's took 0.9-1.5 ms for the same 892
        # buffers and rows (100k, EXPLAIN ANALYZE, load ~15; the graph scan alone, outside this statement, is fast on
        # both), and whole statements 27-33 against 12-14 ms p50 at 100k and 1M, agent and agent + kind (120 alike).
        # Only there: a generic plan always walks the graph, where a custom one may find few rows cheaper by their
        # indexes. An agent the statistics do not list (its rows a guess: 3 rows at 1M) then lost a row and took
        # 408 ms against 16; a batch of lookups 10.7 s against 0.43. So only listed agents whose filter is the plain
        # one (nothing narrows their rows further). Each part's plan is fixed by its SQL (the graph or an exact scan,
        # the model's partial index and the LIMITs by literals); the agent's partition is pruned as it starts. The
        # mode is local to the pipeline's implicit transaction: the store's other statements keep custom plans.
        generic = (
            self.generic_vector_plans
            and plan.own
            and flt.agent is not None
            and replace(flt, agent=None, include_shared=True) == Filter(agent=None)
            and self._terms.agent_listed(conn, flt.agent)
        )
        with conn.pipeline():
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', %s, false), "
                "set_config('plan_cache_mode', %s, true)",
                (ef, self._iterative, "force_generic_plan" if generic else "force_custom_plan"),
            )
            cur = conn.execute(statement, params, prepare=generic or None)
        rows = cur.fetchall()
        if rows and rows[0][1] != model.model_id:
            return None
        if not rows and self._models.current(conn, fresh=True) != model:
            return None
        return [(str(row[4]), float(row[0]), shared_row_to_memory(row[2:])) for row in rows]

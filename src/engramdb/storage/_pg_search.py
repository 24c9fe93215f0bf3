"""The PostgreSQL store's two retrieval channels (:class:`PgSearch`): ``tsvector`` keywords and pgvector's HNSW.

See :mod:`engramdb.storage.postgres` for how each works. Both return their candidates' rows with them
(``Candidate.memory``, the columns ``get_many`` reads under the same filter): hybrid search then reads no memory
again, one round trip and ~4 ms fewer at 100k (bench/RESULTS.md, issue 26).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
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
from engramdb.storage._pg_nearest import (
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
    tsquery_sql,
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
#: About how many of the reader's matching rows a keyword search ranks at most, once the store has statistics
#: (keyword_candidates). Chosen against the embedded store's BM25 channel on the same 100k rows (bench/RESULTS.md,
#: issue 26, fourth round; 60 questions, an agent filter): of its top 10, 0.60 / 0.64 / 0.60 / 0.46 / 0.41 are among
#: the top 50 here at 100 / 250 / 500 / 1,000 / 2,000 rows (0.38 ranking every match), of its top 50 0.33 / 0.40 /
#: 0.42 / 0.35 / 0.32: ``ts_rank_cd`` has no inverse document frequency, and leaving common terms out of the
#: selection stands in for it. Ranking 500 rows took 13 ms at 1M (load 13).
KEYWORD_RANK_ROWS: Final = 500
#: ``random_page_cost`` of an over-budget keyword statement (see :meth:`PgSearch.keyword_candidates`): a page read out
#: of order costs about what a page in order does once the store's pages are cached. Measured at 1.26M memories (77
#: over-budget statements of 100 searches, alternated, identical answers): the slowest 97.5 against 282.9 ms, at most
#: 14,540 against 73,680 buffers, mean 29.8 against 35.2 ms (bench/RESULTS.md, issue 26, seventh round).
_CACHED_PAGE_COST: Final = "1.1"
#: The HNSW search breadth (``hnsw.ef_search``) at least, on a graph of :data:`_EF_SCALE_ROWS` vectors; a deeper
#: search raises it to its ``limit``. Measured on the partitioned store (bench/scale_pg.py, 100k memories over 10
#: agents, an agent's graph of 20k vectors, depth 50, 40 questions): ef 64 gave recall@10 0.983 (agent + kind 0.973),
#: 100 0.995 (0.988), 150 1.0 (0.995), with 1,385 buffers read at 100 against 3,273 at 400.
MIN_EF_SEARCH: Final = 100
#: Up to about this many own memories (planner statistics), the keyword channel intersects the reader's visible
#: rows with the keyword matches in the indexes (see :meth:`PgSearch.keyword_candidates`).
_INDEXED_READER_ROWS: Final = 20_000
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


#: The reader's own matches are read from ``memory_words`` (schema step 8) alone when the filter tests no column beyond
#: its copies (agent, kind, user, validity); otherwise it is joined to ``memories`` for the rest of the filter.
_WORDS_ALONE: Final = "memory_words m"
_WORDS_JOINED: Final = "memory_words w JOIN memories m ON m.rid = w.rid"


def _narrow(flt: Filter) -> bool:
    """Whether ``flt`` tests only columns ``memory_words`` copies (besides the reader's visibility)."""
    return (
        not flt.tags
        and flt.ids is None
        and flt.created_after is None
        and flt.created_before is None
        and flt.sessions is None
        and not flt.metadata
        and flt.as_of is None
    )


def _visible_arms(flt: Filter, f: FilterSQL, *, indexed: bool) -> list[tuple[str, str, str, tuple[Any, ...]]]:
    """``flt``'s WHERE clause as disjoint parts whose union it admits, each with the rows it reads (a FROM list) and
    the alias of their ``rid`` and ``tsv``: the reader's own rows (from ``memory_words``), then the rows of other agents
    it may see (one part when the filter names no reader, or only the reader's own rows)."""
    if flt.agent is None:
        return [("memories m", "m", f.where, f.params)]
    rest = filter_sql(replace(flt, agent=None))
    source, alias = (_WORDS_ALONE, "m") if _narrow(flt) else (_WORDS_JOINED, "w")
    own = (source, alias, f"{alias}.agent = ? AND {rest.where}", (flt.agent, *rest.params))
    if not flt.include_shared:
        return [own]
    return [
        own,
        (
            "memories m",
            "m",
            f"m.agent <> ? AND {open_rows(indexed=indexed)} AND {rest.where}",
            (flt.agent, flt.agent, *rest.params),
        ),
    ]


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
        #: Vector searches on prepared generic plans (see :meth:`_vector_rows`); False plans each one for its values.
        self.generic_vector_plans = True
        #: Runs ANALYZE when a bulk load left the planner's statistics behind (see :mod:`._pg_analyze`).
        self.statistics = StatisticsKeeper(backend.reading, self._analysed)

    def _analysed(self) -> None:
        self._terms.invalidate()
        self._models.invalidate()

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> list[Candidate]:
        """Full-text candidates matching any of ``terms``, best ``ts_rank_cd`` first (higher is better).

        Ranking reads every selected row, so its cost grows with the matches of the query's
        commonest terms. Once the table has statistics, terms select rows rarest first while their
        estimated matches among the rows the reader may see stay within :data:`KEYWORD_RANK_ROWS`
        together (frequencies from :attr:`lexemes`, a sample of the store); the other terms only add
        to the rank of what these select (a term in that many rows says little about relevance).
        When even the rarest term is over that budget, its newest :data:`KEYWORD_RANK_ROWS` matches
        are ranked. Without statistics (small stores, before the first ANALYZE) every match is ranked.
        """
        query = tsquery_sql(terms)
        if query is None or limit <= 0:
            return []
        expr, term_params = query
        with self._backend.reading() as conn:
            self.statistics.check(conn)
            chosen, over_budget = self._terms.selecting(conn, term_params, scope=self._scope(conn, flt))
            # Matches come from the keyword index. With the index keyed by agent (schema step 4, on ``memory_words``
            # since step 8), the reader's own matches come from one scan of it, others' public and shared ones from
            # their indexes: only the reader's matches are read. Without it, a reader with few memories has its
            # visible rows gathered from indexes and intersected with the matches; the bitmap of a reader with many
            # costs more than testing the matches one by one (at 1M, an agent's 100k rows: 52 ms, and the keyword p50
            # went 65 -> 106 ms; at 100k, 10k rows: 16 -> 14 ms; bench/scale_pg.py).
            few = flt.agent is not None and (
                self._terms.agent_words(conn) or self._terms.agent_rows(conn, flt.agent) <= _INDEXED_READER_ROWS
            )
            f = filter_sql(flt, indexed=few)
            arms = _visible_arms(flt, f, indexed=few)
            select = tsquery_sql(chosen) if chosen != term_params else query
            assert select is not None
            # Each candidate's vector of the store's model comes with it (read for the LIMIT's rows only, in its
            # agent's partition): hybrid search needs a keyword-only hit's cosine, one more round trip otherwise.
            model = self._models.current(conn)
            model_id = model.model_id if model is not None else None
            # One part per arm of the visibility rule, each sorted and cut, then merged: the reader's own matches
            # come from its keyword index alone, so each matched row's ``tsv`` is read once (to rank it). With the
            # arms OR-ed in one scan, every row fetched was tested against the query again before ranking: twice the
            # detoasting (1,498 against 1,058 buffers, 8.5-11.7 against 4.3-6.7 ms for 389 rows at 100k). Each part
            # yields row numbers and ranks only: the memories' columns are read for the ``limit`` best.
            outer = f"{_CARRIED_VECTOR}, {f.shared_by}, {f.shared_at}, {MEMORY_COLUMNS}"
            outer_params = (model_id, model_id, *f.shared_by_params, *f.shared_at_params)
            if not over_budget:
                # Expressions inline (not a CTE): the planner folds them to constants and uses the GIN index. The
                # subqueries of the outer list run for the LIMIT's rows only.
                parts = " UNION ALL ".join(
                    f"(SELECT {a}.rid, ts_rank_cd({a}.tsv, {expr}) AS rank FROM {source} "
                    f"WHERE {a}.tsv @@ {select[0]} AND {where} ORDER BY rank DESC, {a}.rid LIMIT ?)"
                    for source, a, where, _ in arms
                )
                statement = (
                    f"SELECT m.id, t.rank, {outer} FROM (SELECT h.rid, h.rank FROM ({parts}) h "
                    "ORDER BY h.rank DESC, h.rid LIMIT ?) t JOIN memories m ON m.rid = t.rid "
                    "ORDER BY t.rank DESC, t.rid"
                )
                params: tuple[Any, ...] = (
                    *outer_params,
                    *(p for *_, where_params in arms for p in (*term_params, *select[1], *where_params, limit)),
                    limit,
                )
            else:
                # The newest matches ranked, then the rows of the top ``limit`` read (not of every ranked match).
                parts = " UNION ALL ".join(
                    f"(SELECT {a}.rid, {a}.tsv FROM {source} WHERE {a}.tsv @@ {select[0]} AND {where} "
                    f"ORDER BY {a}.rid DESC LIMIT ?)"
                    for source, a, where, _ in arms
                )
                statement = (
                    f"WITH hits AS (SELECT h.rid, h.tsv FROM ({parts}) h ORDER BY h.rid DESC LIMIT ?), "
                    f"top AS (SELECT h.rid, ts_rank_cd(h.tsv, {expr}) AS rank FROM hits h "
                    "ORDER BY rank DESC, h.rid LIMIT ?) "
                    f"SELECT m.id, t.rank, {outer} FROM top t JOIN memories m ON m.rid = t.rid "
                    "ORDER BY t.rank DESC, t.rid"
                )
                params = (
                    *(p for *_, where_params in arms for p in (*select[1], *where_params, self._rank_rows)),
                    self._rank_rows,
                    *term_params,
                    limit,
                    *outer_params,
                )
            # Binary results: a vector's text form costs the server ~0.5 ms to print (PostgresBackend.fetch_vectors).
            if not over_budget:
                rows = conn.execute(pg_statement(statement), params, binary=True).fetchall()
            else:
                # The newest matches of the reader's own rows come from ``memory_words_agent_rid`` (schema step 10),
                # walked backwards. Costed at the server's default 4 for a page out of order, the planner walked the
                # primary key through every agent's rows instead: 70-74k rows for a common word at 1.26M memories,
                # 280-490 ms, the searches' slowest statements. A store's pages are in memory while it is searched, so
                # the statement is planned as for cached pages (local to the pipeline's implicit transaction); same
                # rows, as they are ordered by a unique key.
                with conn.pipeline():
                    conn.execute("SELECT set_config('random_page_cost', %s, true)", (_CACHED_PAGE_COST,))
                    cur = conn.execute(pg_statement(statement), params, binary=True)
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
        parts: list[sql.Composable] = []
        params: list[Any] = []
        # The reader's partition holds its own rows and maybe another agent's: its graph is at least that large.
        own = self._terms.agent_rows(conn, flt.agent) if flt.agent is not None else 0.0
        ef = self._ef(model, limit, graph_rows=max(model.partition_rows, own))
        plan = self._plan(conn, model, flt, limit)
        for branch in vector_branches(model, flt, plan):
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
            params += branch.ordered_params(query, MODEL_META_KEY, *f.shared_by_params, *f.shared_at_params)
        statement = sql.SQL("SELECT * FROM ({parts}) h ORDER BY h.d LIMIT {limit}").format(
            parts=sql.SQL(" UNION ALL ").join(parts), limit=sql.Literal(limit)
        )
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

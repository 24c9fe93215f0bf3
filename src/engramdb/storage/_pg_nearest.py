"""A PostgreSQL vector search's parts over the agent-partitioned ``vectors``, and many searches in one statement.

A search of one reader has two parts (:func:`vector_branches`): its own rows, in its partition's HNSW graph, and
other agents' public and shared rows. Both :meth:`~engramdb.storage.postgres.PgSearch.vector_candidates` and the
batch form below build their statements from them.

A batch of ``remember_many`` checks each mergeable memory for near-duplicates among the stored
ones of its agent and kind: one filtered vector search each. As separate statements they cost a
round trip and a wait for a core each (bench/pg_writers.py at 100k: 38 ms of wall time for 3.5-10 ms
of execution per lookup, 25 per mixed batch of 50). Here they are the branches of one ``UNION ALL``,
each planned as :meth:`~engramdb.storage.postgres.PgSearch.vector_candidates` plans a search (the HNSW
index or an exact scan of the filter's rows, the same ``hnsw.ef_search``), so the answers are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from psycopg import sql

from engramdb.errors import StorageError, ValidationError
from engramdb.storage._checks import as_unit_rows
from engramdb.storage._pg_sql import CurrentModel, ModelCache, filter_sql, open_rows, pg_statement
from engramdb.storage.base import MODEL_META_KEY, Candidate, Filter, Vectors

__all__ = [
    "NEAR_EF_SEARCH",
    "NEAR_GRAPH_ROWS",
    "STAGED_TABLE",
    "VectorBranch",
    "VectorPlan",
    "from_rows",
    "graph_order",
    "inline",
    "near_ef",
    "near_plan",
    "nearest_many",
    "vector_branches",
]

#: ``hnsw.ef_search`` of lookups that need only near neighbours (a near-duplicate check: cosine >= 0.95). Measured
#: (bench/pg_near_ef.py, stored ``knowledge`` vectors moved a little, their near-duplicates under an agent and kind
#: filter): at 1M, 99 of 100 found at 40, 100, 200 and a search's breadth (800) alike; at 100k, 100 of 100 (noise
#: 0.01) and 91 of 91 (noise 0.016, cosines down to 0.95) at 40, 100 and 200 alike, a lookup 7-10 ms at 40 against
#: 10-17 at 200. The filter still fills the top 5 (iterative scan).
NEAR_EF_SEARCH: Final = 40

#: Vectors in the store from which a near-duplicate check reads the reader's own rows through its partition's graph
#: also below ``exact_search_below`` (where a search scans them exactly for its whole top 10): at 20k memories the
#: exact scans of 25 lookups took a mixed batch of 50 to 1.5 s (56 memories/s for 2 writers against 128-138 at 25k,
#: bench/RESULTS.md, issue 26, fourth round of writes), a lookup at ``NEAR_EF_SEARCH`` ~1 ms.
NEAR_GRAPH_ROWS: Final = 5_000

Query = tuple[npt.NDArray[np.float32], Filter]
#: New vectors not yet folded into the HNSW graphs (schema step 6, :mod:`engramdb.storage._pg_staging`).
STAGED_TABLE: Final = "vectors_staged"
#: How a search of this filter reads the vectors (PgSearch._plan, bound to its connection and limit).
PlanOf = Callable[[Any, CurrentModel, Filter, int], "VectorPlan"]


@dataclass(frozen=True, slots=True)
class VectorPlan:
    """Whether a search reads the HNSW graphs (True) or scans exactly: for the reader's own vectors (``own``, its
    partition's graph) and for the other agents' public and shared ones (``others``, every partition's graph)."""

    own: bool
    others: bool


@dataclass(frozen=True, slots=True)
class VectorBranch:
    """One part of a vector search: its distance expression and WHERE clause over ``{table} v`` and ``memories m``."""

    distance: sql.Composable
    where: str
    params: tuple[Any, ...]
    #: ``vectors`` (the HNSW graphs, or an exact scan of the filter's rows) or ``vectors_staged`` (new vectors not yet
    #: folded into the graphs, scanned exactly: see :mod:`engramdb.storage._pg_staging`).
    table: str = "vectors"
    #: A staged branch's test of the staged row alone: the rows it admits are ordered by distance before their
    #: memories are looked up (:func:`from_rows`).
    staged_where: sql.Composable | None = None
    #: The parameters of :attr:`staged_where` (the reader: a parameter, so one statement serves every agent).
    staged_params: tuple[Any, ...] = ()
    #: What the branch's rows are ordered by when it is not their distance ``d``: the graph's own half-precision
    #: distance (:func:`graph_order`), which takes the query once more, after the WHERE clause's parameters.
    order: sql.Composable | None = None

    def ordered_params(self, query: Any, *middle: Any) -> list[Any]:
        """The branch's parameters in statement order: its distance's ``query``, ``middle`` (the caller's, between
        the SELECT list and FROM), the WHERE clause's, then the ORDER BY's ``query`` where it has its own order. A
        staged branch takes the query and its staged rows' test in its FROM clause."""
        if self.table == STAGED_TABLE:
            return [*middle, query, *self.staged_params, *self.params]
        return [query, *middle, *self.params, *((query,) if self.order is not None else ())]

    def order_by(self) -> sql.Composable:
        """The branch's ORDER BY expression: the graph's order, or its distance column ``d``."""
        return self.order if self.order is not None else sql.SQL("d")


def near_ef(model: CurrentModel, limit: int) -> str:
    """``hnsw.ef_search`` of a lookup of near neighbours only (see :data:`NEAR_EF_SEARCH`)."""
    return str(max(NEAR_EF_SEARCH, limit))


#: A staged branch's distance: computed in its FROM clause (:func:`from_rows`), which orders the rows by it.
_STAGED_DISTANCE: Final = sql.SQL("v.staged_d")


def near_plan(plan: VectorPlan, model: CurrentModel, *, exact_below: int) -> VectorPlan:
    """A near-duplicate check's plan from a search's ``plan``: the reader's own rows through the graph where only
    the store's size (under ``exact_below``, from :data:`NEAR_GRAPH_ROWS` up) made the search scan them exactly.
    Near neighbours are what the graph finds first (bench/pg_near_ef.py: every near-duplicate at ef 40)."""
    if plan.own or not NEAR_GRAPH_ROWS <= model.estimate < exact_below:
        return plan
    return replace(plan, own=True)


#: The distance a search reports, in full precision: computed for the rows a branch returns only.
_DISTANCE: Final = sql.SQL("v.embedding <=> %s::vector")


def graph_order(model: CurrentModel) -> sql.Composable:
    """The expression the model's partial HNSW index is built on (schema step 9: half precision): ordered by it, the
    rows come in the graph's order. Only the order is half precision; the distance reported is the full one."""
    return sql.SQL("v.embedding::halfvec({dim}) <=> %s::halfvec({dim})").format(dim=sql.Literal(model.dim))


def inline(value: str) -> sql.Composable:
    """``value`` written into a statement that also takes ``%s`` parameters: quoted, its ``%`` doubled (psycopg reads
    the whole composed text for placeholders, so an agent named ``%`` was refused as a bad placeholder)."""
    return sql.SQL(sql.Literal(value).as_string(None).replace("%", "%%"))


def vector_branches(model: CurrentModel, flt: Filter, plan: VectorPlan) -> list[VectorBranch]:
    """The parts of a vector search under ``flt``; its answer is the nearest rows of their union.

    ``vectors`` is partitioned by agent: a reader's own rows are searched apart (``v.agent = reader`` prunes to one
    partition and its HNSW graph), and other agents' rows it may see (public, shared) in a second part. The two
    are disjoint and together are what the visibility rule admits. Without a reader, one part over every partition.
    The same parts again over the staged vectors (a memory's vector is in one table or the other), scanned exactly
    and row by row: the table is small.
    """
    current = sql.SQL("s.model_id = {model} AND s.dim = {dim}").format(
        model=inline(model.model_id), dim=sql.Literal(model.dim)
    )
    # The reader is a parameter, not a literal: the statement's text is then the same for every agent, so a
    # connection prepares it once rather than once per agent (psycopg keeps 100 prepared statements a connection).
    reader: tuple[Any, ...] = ()
    if flt.agent is None:
        own, others = current, current
    else:
        reader = (flt.agent,)
        own = sql.SQL("s.agent = %s AND {current}").format(current=current)
        # Other agents' staged rows: only those not private (an index of them), each then tested as above.
        others = sql.SQL("s.agent <> %s AND s.open AND {current}").format(current=current)
    staged = [
        replace(
            branch,
            distance=_STAGED_DISTANCE,
            table=STAGED_TABLE,
            staged_where=own if n == 0 else others,
            staged_params=reader,
            order=None,
        )
        for n, branch in enumerate(_branches(model, flt, VectorPlan(own=True, others=True)))
    ]
    return _branches(model, flt, plan) + staged


def from_rows(branch: VectorBranch) -> sql.Composable:
    """The FROM clause of ``branch``: its rows as ``v``, their memories as ``m``.

    Staged rows (``branch.staged_where``) are ordered by their distance to the query first (``v.staged_d``, the
    branch's distance), and each one's memory is then looked up by its key in that order, until the branch's LIMIT
    has rows that pass the filter: a few lookups where testing every staged row of the agent read one memory per
    row (~1 ms a search per 100 staged rows; 25 near-duplicate lookups of a mixed batch read ~10,000 memories at
    4,000 staged, which made such batches 2-3.5x slower with staging: bench/RESULTS.md, issue 26, fourth round of
    writes). Never a hash of the memories the filter admits (every memory of the store: 42-82 ms at 20k, third
    round). ``OFFSET 0`` keeps each subquery whole (its order, its lookup by key).
    """
    if branch.table == STAGED_TABLE:
        return sql.SQL(
            "(SELECT s.*, s.embedding <=> %s::vector AS staged_d FROM {table} s WHERE {own} ORDER BY staged_d "
            "OFFSET 0) v CROSS JOIN LATERAL (SELECT * FROM memories x WHERE x.id = v.memory_id OFFSET 0) m"
        ).format(table=sql.Identifier(STAGED_TABLE), own=branch.staged_where or sql.SQL("true"))
    return sql.SQL("{table} v JOIN memories m ON m.id = v.memory_id").format(table=sql.Identifier(branch.table))


def _order(model: CurrentModel, *, index: bool) -> sql.Composable | None:
    # Not the indexed expression for an exact scan: the planner scans the rows that pass the filter, gathered from
    # indexes, and sorts them by their full distance.
    return graph_order(model) if index else None


def _branches(model: CurrentModel, flt: Filter, plan: VectorPlan) -> list[VectorBranch]:
    if flt.agent is None:
        f = filter_sql(flt, indexed=not plan.own)
        return [VectorBranch(_DISTANCE, f.where, f.params, order=_order(model, index=plan.own))]
    rest = filter_sql(replace(flt, agent=None))
    reader = flt.agent
    branches = [
        VectorBranch(
            _DISTANCE,
            f"v.agent = ? AND m.agent = ? AND {rest.where}",
            (reader, reader, *rest.params),
            order=_order(model, index=plan.own),
        )
    ]
    if flt.include_shared:
        visible = open_rows(indexed=not plan.others)
        branches.append(
            VectorBranch(
                _DISTANCE,
                f"v.agent <> ? AND m.agent <> ? AND {visible} AND {rest.where}",
                (reader, reader, reader, *rest.params),
                order=_order(model, index=plan.others),
            )
        )
    return branches


def nearest_many(
    backend: Any,
    models: ModelCache,
    *,
    check_statistics: Callable[[Any], None],
    plan_of: PlanOf,
    ef_search: Callable[[CurrentModel, int], str],
    iterative: str,
    queries: Sequence[tuple[Vectors, Filter]],
    limit: int,
    note: str = "",
) -> list[list[Candidate]]:
    """For each (unit vector, filter) of ``queries``, its ``limit`` nearest candidates, best first, in order.

    ``note`` begins the statement (a comment saying whose read it is, see ``_pg_staging.WRITE_READ``)."""
    unit = [(as_unit_rows(vector, rows=1)[0], flt) for vector, flt in queries]
    if limit <= 0 or not unit:
        return [[] for _ in unit]
    if backend.in_write():
        # The HNSW settings are the connection's: kept out of a caller's open transaction.
        raise StorageError("searches cannot run inside an atomic() block")
    with backend.reading() as conn:
        check_statistics(conn)
        for fresh in (False, True):
            model = models.current(conn, fresh=fresh)
            if model is None:
                return [[] for _ in unit]
            wrong = next((q.shape[0] for q, _ in unit if q.shape != (model.dim,)), None)
            if wrong is not None:
                if not fresh:
                    continue  # the cached model may be stale: once more with the store's own
                raise ValidationError(f"query vector has dimension {wrong}, the store's vectors have {model.dim}")
            rows = _rows(
                conn, model, unit, limit, plan_of=plan_of, ef=ef_search(model, limit), iterative=iterative, note=note
            )
            if rows is not None:
                return rows
            # The model changed since it was cached (the statement reads it): once more with the new one.
    return [[] for _ in unit]


def _rows(
    conn: Any,
    model: CurrentModel,
    unit: Sequence[Query],
    limit: int,
    *,
    plan_of: PlanOf,
    ef: str,
    iterative: str,
    note: str,
) -> list[list[Candidate]] | None:
    branches: list[sql.Composable] = []
    params: list[Any] = []
    for pos, (query, flt) in enumerate(unit):
        for branch in vector_branches(model, flt, plan_of(conn, model, flt, limit)):
            branches.append(
                sql.SQL(
                    "(SELECT {pos} AS q, v.memory_id, {distance} AS d FROM {rows} "
                    "WHERE v.model_id = {model} AND v.dim = {dim} AND {where} ORDER BY {order} LIMIT %s)"
                ).format(
                    pos=sql.Literal(pos),
                    order=branch.order_by(),
                    rows=from_rows(branch),
                    distance=branch.distance,
                    model=inline(model.model_id),
                    dim=sql.Literal(model.dim),
                    where=sql.SQL(pg_statement(branch.where)),
                )
            )
            params += [*branch.ordered_params(query), limit]
    # The store's current model travels with the answer (one row even when no branch finds any): a model
    # changed since it was cached makes the caller ask again.
    statement = sql.SQL(
        "{note}SELECT NULL, NULL, NULL, (SELECT x.value FROM meta x WHERE x.key = %s) UNION ALL SELECT h.q, "
        "h.memory_id, h.d, NULL FROM ({branches}) h ORDER BY 1 NULLS FIRST, 3"
    ).format(note=sql.SQL(note.replace("%", "%%")), branches=sql.SQL(" UNION ALL ").join(branches))
    # No parallel workers for a batch's lookups: with the staged parts the planner gathered them in parallel, and
    # the workers' start and shutdown for a statement of 25 small searches made mixed batches 3.5x slower (25k
    # memories, bench/RESULTS.md, issue 26, third round of writes). Reset after: the connection is the pool's.
    with conn.pipeline():
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', %s, false), "
            "set_config('max_parallel_workers_per_gather', '0', false)",
            (ef, iterative),
        )
        cur = conn.execute(statement, (MODEL_META_KEY, *params))
        conn.execute("RESET max_parallel_workers_per_gather")
    found = cur.fetchall()
    if not found or found[0][3] != model.model_id:
        return None
    out: list[list[Candidate]] = [[] for _ in unit]
    for pos, memory_id, d, _ in found[1:]:
        # Sorted by query, then distance: a query's parts together give its nearest ``limit``.
        if len(out[int(pos)]) < limit:
            out[int(pos)].append(Candidate(str(memory_id), 1.0 - float(d)))
    return out

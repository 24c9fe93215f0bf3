"""A batch's near-duplicate lookups on PostgreSQL: many vector searches in one statement
(``search.vector_candidates_many``) answer exactly as the searches one by one, on the HNSW path
and the exact one, and refuse what a single search refuses.

Real server (pg_server.py); skipped with a reason when PostgreSQL or pgvector is missing, failed under ``CI=true``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import PgServer
from storage_helpers import MODEL, memory, unit_vectors

from engramdb.errors import StorageError, ValidationError
from engramdb.storage._pg_nearest import NEAR_GRAPH_ROWS, VectorPlan, near_plan
from engramdb.storage._pg_sql import CurrentModel
from engramdb.storage.base import Filter, Store
from engramdb.storage.postgres import open_postgres

AGENTS = ("big", "mid", "few")
KINDS = ("knowledge", "preference", "conversation")
USERS = (None, "u1", "u2")


@pytest.fixture(scope="module")
def store(postgres_server: PgServer) -> Iterator[Store]:
    """600 memories: "big" owns most (HNSW path with exact_search_below=0), "few" a handful (exact scan)."""
    url = postgres_server.new_database()
    with open_postgres(url, exact_search_below=0) as s:
        owners = ["big"] * 450 + ["mid"] * 140 + ["few"] * 10
        ms = [
            memory(
                f"note {i}", agent=a, kind=KINDS[i % 3], user=USERS[i % 3], visibility="public" if i % 7 else "private"
            )
            for i, a in enumerate(owners)
        ]
        s.memories.add(ms, unit_vectors(len(ms), seed=3), model_id=MODEL, actor="t")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        yield s


lookup = st.tuples(
    st.integers(0, 10_000),
    st.sampled_from(AGENTS),
    st.sampled_from(KINDS),
    st.sampled_from(USERS),
    st.booleans(),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lookups=st.lists(lookup, max_size=12), limit=st.sampled_from([1, 5, 50]))
def test_one_statement_answers_as_the_searches_one_by_one(
    store: Store, lookups: list[tuple[int, str, str, str | None, bool]], limit: int
) -> None:
    queries = [
        (
            unit_vectors(1, seed=seed)[0],
            Filter(agent=agent, kinds=(kind,), include_shared=shared, users=None if user is None else (user,)),
        )
        for seed, agent, kind, user, shared in lookups
    ]
    many = store.search.vector_candidates_many(queries, limit=limit)
    one_by_one = [store.search.vector_candidates(vector, flt, limit=limit) for vector, flt in queries]
    assert [[c.id for c in found] for found in many] == [[c.id for c in found] for found in one_by_one]
    for found, alone in zip(many, one_by_one, strict=True):
        assert [c.score for c in found] == pytest.approx([c.score for c in alone], abs=1e-6)
        assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)


def test_bad_lookups_are_refused_like_a_single_search(store: Store) -> None:
    flt = Filter(agent="big", kinds=("knowledge",), include_shared=False)
    assert store.search.vector_candidates_many([], limit=5) == []
    assert store.search.vector_candidates_many([(unit_vectors(1)[0], flt)], limit=0) == [[]]
    with pytest.raises(ValidationError, match="dimension 8"):
        store.search.vector_candidates_many([(unit_vectors(1)[0], flt), (unit_vectors(1, dim=8)[0], flt)], limit=5)
    with store.atomic(), pytest.raises(StorageError, match="atomic"):
        store.search.vector_candidates_many([(unit_vectors(1)[0], flt)], limit=5)


def test_a_store_without_vectors_finds_nothing(postgres_server: PgServer) -> None:
    with open_postgres(postgres_server.new_database()) as empty:
        flt = Filter(agent="big", include_shared=False)
        assert empty.search.vector_candidates_many([(unit_vectors(1)[0], flt)] * 2, limit=5) == [[], []]


def test_lookups_of_near_neighbours_find_every_near_duplicate(store: Store) -> None:
    # Stored vectors slightly moved: each has exactly one neighbour at cosine >= 0.95 under its owner's filter.
    stored = unit_vectors(600, seed=3)
    rows = [0, 3, 450, 455, 590, 597]
    owners = {0: "big", 3: "big", 450: "mid", 455: "mid", 590: "few", 597: "few"}
    moved = stored[rows] + 0.02 * unit_vectors(len(rows), seed=8)
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    queries = [
        (vector, Filter(agent=owners[r], kinds=(KINDS[r % 3],), include_shared=False, users=(USERS[r % 3],)))
        for vector, r in zip(moved, rows, strict=True)
    ]
    found = store.search.vector_candidates_many(queries, limit=5, near=0.95)
    wide = store.search.vector_candidates_many(queries, limit=5)
    for near, alone in zip(found, wide, strict=True):
        assert [c.id for c in near if c.score >= 0.95] == [c.id for c in alone if c.score >= 0.95]
        assert len([c for c in near if c.score >= 0.95]) == 1


@given(
    estimate=st.floats(min_value=-1.0, max_value=2e6, allow_nan=False),
    exact_below=st.integers(min_value=0, max_value=100_000),
    own=st.booleans(),
    others=st.booleans(),
)
def test_a_near_check_reads_the_graph_where_only_the_stores_size_chose_an_exact_scan(
    estimate: float, exact_below: int, own: bool, others: bool
) -> None:
    model = CurrentModel(MODEL, 16, estimate, partitions=16)
    plan = near_plan(VectorPlan(own=own, others=others), model, exact_below=exact_below)
    assert plan.others == others  # other agents' rows: as the search plans them
    if own:
        assert plan.own  # a search's graph stays a graph
    elif NEAR_GRAPH_ROWS <= estimate < exact_below:
        assert plan.own  # small store, analysed, a graph worth reading: near neighbours come from it
    else:
        # Unanalysed or tiny stores scan exactly (cheap); above the threshold an exact own scan is the search's
        # choice for a reader with few rows in a large graph (which the graph might not fill), kept.
        assert not plan.own

"""How the PostgreSQL channels run their statements changes their cost, never their answers (bench/RESULTS.md, issue 26,
fifth round): the keyword statement's part for other agents brings their open rows (its ranking is checked against
FTS5's BM25 in test_pg_memory_terms.py), and a vector search runs prepared on a generic plan, checked here against
the custom one on a store with public rows, shares, users and kinds, over filters and depths."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import FILTERS, PgServer, graph_and_exact
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.storage.base import Candidate, Filter, Store
from engramdb.storage.postgres import PgSearch, open_postgres

AGENTS = ("agent-0", "agent-1", "agent-2")
WORDS = ("alpha beta", "beta gamma", "gamma delta", "delta alpha")


@pytest.fixture(scope="module")
def stores(postgres_server: PgServer) -> Iterator[tuple[Store, Store]]:
    """300 memories over 3 agents (public rows, shares, users, kinds), opened twice: HNSW path and exact scan."""
    url = postgres_server.new_database()
    ms = [
        memory(f"{WORDS[i % 4]} note {i} " + "epsilon " * (i % 3), agent=AGENTS[i % 3],
               kind="knowledge" if i % 2 else "conversation", visibility="public" if i % 13 == 0 else "private",
               user=None if i % 5 else f"user-{i % 2}", at=NOW + timedelta(seconds=i))
        for i in range(300)
    ]  # fmt: skip
    shares = [([ms[1].id, ms[4].id], "agent-1", "agent-0"), ([ms[2].id, ms[5].id], "agent-2", "*")]
    with graph_and_exact(url, ms, seed=5, shares=shares) as pair:
        yield pair


def _answer(found: list[Candidate]) -> list[tuple[str, float, object, object]]:
    return [
        (c.id, c.score, c.memory, None if c.vector is None else c.vector.tolist())  # type: ignore[union-attr]
        for c in found
    ]


def test_the_other_agents_part_brings_their_open_rows(stores: tuple[Store, Store]) -> None:
    search = stores[0].search
    found = search.keyword_candidates(["note"], Filter(agent="agent-0"), limit=300)
    others = {c.id for c in found if c.memory is not None and c.memory.agent != "agent-0"}
    # Public rows of agent-1 and agent-2, and the four shared ones (two with agent-0, two with everyone).
    assert len(others) == sum(1 for i in range(300) if i % 3 and i % 13 == 0) + 4
    assert len(found) == 100 + len(others)
    alone = search.keyword_candidates(["note"], Filter(agent="agent-0", include_shared=False), limit=300)
    assert {c.id for c in found} - {c.id for c in alone} == others


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=FILTERS, seed=st.integers(0, 1000), limit=st.sampled_from((1, 5, 20)))
def test_generic_vector_plans_answer_as_custom_ones(
    stores: tuple[Store, Store], flt: Filter, seed: int, limit: int
) -> None:
    query = unit_vectors(1, seed=seed)[0]
    for store in stores:
        search = store.search
        assert isinstance(search, PgSearch)
        generic = search.vector_candidates(query, flt, limit=limit)
        search.generic_vector_plans = False
        try:
            custom = search.vector_candidates(query, flt, limit=limit)
        finally:
            search.generic_vector_plans = True
        assert [(c.id, round(c.score, 6), c.memory) for c in generic] == [
            (c.id, round(c.score, 6), c.memory) for c in custom
        ]


def test_only_a_plain_search_of_a_listed_agent_runs_generic(postgres_server: PgServer) -> None:
    """The generic plan is the vector search's only, for a listed agent's own rows through its graph under the plain
    filter: a write's parameter-sensitive checks would scan on one, and a narrowed filter's rows may be few."""
    url = postgres_server.new_database()
    with open_postgres(url, pool_size=1, exact_search_below=0) as store:
        ms = [memory(f"note {i}", agent=AGENTS[i % 2], at=NOW + timedelta(seconds=i)) for i in range(200)]
        store.memories.add(ms, unit_vectors(200, seed=2), model_id=MODEL, actor="t")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        search = store.search
        assert isinstance(search, PgSearch)

        def plans() -> tuple[int, int]:
            with search._backend.reading() as conn:  # type: ignore[attr-defined]
                assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)
                row = conn.execute(
                    "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements"
                ).fetchone()
            assert row is not None
            return int(row[0]), int(row[1])

        for seed in range(3):
            search.vector_candidates(unit_vectors(1, seed=seed)[0], Filter(agent="agent-0"), limit=5)
        generic, _ = plans()
        assert generic == 3
        for seed in range(8):  # past psycopg's prepare threshold: prepared, still planned for their values
            search.vector_candidates(
                unit_vectors(1, seed=seed)[0], Filter(agent="agent-0", kinds=("knowledge",)), limit=5
            )
            search.vector_candidates(unit_vectors(1, seed=seed)[0], Filter(agent="agent-9"), limit=5)  # not listed
        assert plans()[0] == generic
        search.generic_vector_plans = False
        search.vector_candidates(unit_vectors(1, seed=0)[0], Filter(agent="agent-0"), limit=5)
        assert plans()[0] == generic

"""The PostgreSQL store reaches its steady state at the open, not in its first searches (bench/RESULTS.md, issue 26,
ninth round): the warm-up opens a search's connections and takes the first look at the change counters (not the
keyword lexeme sample: a writing process never needs it); every new connection plans the store's relations once; a
vector search is one prepared statement for every agent (its text names no agent)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
from pg_server import PgServer
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.config import load_settings
from engramdb.storage.base import Filter
from engramdb.storage.postgres import (
    _CATALOG_WARM,
    SEARCH_CONNECTIONS,
    PgSearch,
    PostgresBackend,
    _prewarm,
    open_postgres,
)

AGENTS = ("agent-0", "agent-1", "agent-2")


def _filled(url: str) -> None:
    with open_postgres(url, pool_size=1, settings=load_settings(warm=False)) as store:
        ms = [memory(f"note {i} about gardens", agent=AGENTS[i % 3], at=NOW + timedelta(seconds=i)) for i in range(300)]
        store.memories.add(ms, unit_vectors(300, seed=3), model_id=MODEL, actor="t")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def _backend(store: object) -> PostgresBackend:
    search = store.search  # type: ignore[attr-defined]
    search = getattr(search, "_inner", search)
    assert isinstance(search, PgSearch)
    backend = search._backend
    assert isinstance(backend, PostgresBackend)
    return backend


def test_the_open_warms_the_pool_and_looks_at_the_statistics(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    _filled(url)
    with open_postgres(url, pool_size=4, settings=load_settings(warm=True)) as store:
        backend = _backend(store)
        assert backend._background.wait(30)
        search = backend.search
        pool = backend._pool
        assert pool is not None
        pool.wait(30)
        # The connections one search holds at once are open before any search; the counters were looked at (the next
        # look is due in CHECK_EVERY_S), the lexeme sample is left to the first keyword search.
        assert pool.get_stats()["pool_size"] >= SEARCH_CONNECTIONS
        assert search.statistics._looked_at is not None
        assert search.lexemes.last is None


def test_without_warming_nothing_is_read_before_the_first_search(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    _filled(url)
    with open_postgres(url, pool_size=4, settings=load_settings(warm=False)) as store:
        backend = _backend(store)
        assert backend._background.wait(5)
        assert backend._pool is not None
        assert backend._pool.get_stats()["pool_size"] == 1
        assert backend.search.statistics._looked_at is None


def test_the_catalog_warm_up_plans_on_the_current_schema(postgres_server: PgServer) -> None:
    """Its errors are swallowed (a connection must not fail for it): each statement is checked here instead, so a
    schema step renaming a relation shows up."""
    url = postgres_server.new_database()
    _filled(url)
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in _CATALOG_WARM:
            assert conn.execute(statement).fetchall()


def test_one_prepared_vector_statement_serves_every_agent(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    _filled(url)
    with open_postgres(url, pool_size=1, exact_search_below=0, settings=load_settings(warm=False)) as store:
        search = _backend(store).search
        for n in range(6):
            found = search.vector_candidates(unit_vectors(1, seed=n)[0], Filter(agent=AGENTS[n % 3]), limit=5)
            assert len(found) == 5
            assert {c.memory.agent for c in found if c.memory is not None} == {AGENTS[n % 3]}
        with search._backend.reading() as conn:
            rows = conn.execute(
                "SELECT statement, generic_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                ("%vectors_staged%",),
            ).fetchall()
        assert len(rows) == 1
        assert rows[0][1] == 6
        assert all(agent not in rows[0][0] for agent in AGENTS)


def test_the_hottest_relations_are_read_into_the_servers_buffers_where_it_can(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    _filled(url)
    with psycopg.connect(url, autocommit=True) as conn:
        assert _prewarm(conn) == 0  # no pg_prewarm: nothing read, nothing raised
        conn.execute("CREATE EXTENSION pg_prewarm")
        row = conn.execute(
            "SELECT (SELECT sum(pg_relation_size(p.relid)) FROM vector_indexes v "
            "CROSS JOIN LATERAL pg_partition_tree(to_regclass(v.index_name)) p WHERE p.isleaf), "
            "pg_relation_size('memory_terms_pkey'), pg_relation_size('memories_pkey') + pg_relation_size('memories') "
            "+ (SELECT sum(pg_relation_size(p.relid)) FROM pg_partition_tree(to_regclass('vectors')) p), "
            "current_setting('block_size')::int"
        ).fetchone()
        assert row is not None
        blocks = _prewarm(conn)
    graphs, postings, rest, block = (int(x) for x in row)
    # A small store fits the budget whole: the graphs, the postings' index and the rest, each block once.
    assert graphs > 0
    assert blocks == (graphs + postings + rest) // block

"""A keyword search on PostgreSQL ranks each term's newest postings among the reader's rows (since schema step 11,
from ``memory_terms``); a store made before step 10 migrates through the steps that add and drop
``memory_words_agent_rid`` (10 and 12), the answers are the newest matches of that reader among interleaved agents,
and the pooled connection keeps the server's planner settings."""

from __future__ import annotations

from datetime import timedelta

import psycopg
from pg_server import PgServer, old_store
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.storage import _pg_schema
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres

AGENTS = ("a0", "a1", "a2")


def test_a_store_made_before_the_step_migrates_through_it(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"harbor note {i}", agent=AGENTS[i % 3]) for i in range(30)]
    old_store(url, step=9, memories=ms, vectors=unit_vectors(30, seed=51), model=MODEL)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('memory_words_agent_rid')").fetchone() == (None,)
    with open_postgres(url) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            assert conn.execute("SELECT to_regclass('memory_words_agent_rid')").fetchone() == (None,)
            assert conn.execute("SELECT count(DISTINCT rid) FROM memory_terms").fetchone() == (30,)
        found = store.search.keyword_candidates(["harbor"], Filter(agent="a1"), limit=50)
        assert {c.id for c in found} == {m.id for m in ms if m.agent == "a1"}


def test_an_over_budget_search_ranks_the_readers_newest_matches(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    # Three agents' rows interleaved, every one matching "deploy": each term reads its newest 40 of the reader's.
    ms = [
        memory(f"deploy step {i} ran", agent=AGENTS[i % 3],
               at=NOW + timedelta(seconds=i))
        for i in range(450)
    ]  # fmt: skip
    with open_postgres(url) as store:
        store.memories.add(ms, None, model_id=MODEL, actor="t")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    with open_postgres(url) as store:  # fresh: the statistics are cached a minute
        store.search.term_postings = 40  # type: ignore[attr-defined]
        for agent in AGENTS:
            found = store.search.keyword_candidates(["deploy", "step"], Filter(agent=agent), limit=10)
            own = [m for m in ms if m.agent == agent]
            newest = own[-40:]  # rows are numbered in insertion order: the newest 40 of the reader's matches
            assert len(found) == 10
            assert {c.id for c in found} <= {m.id for m in newest}
            assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
        with store.search._backend.reading() as conn:  # type: ignore[attr-defined]
            # The statement's planner setting was local to it: the pooled connection keeps the server's.
            assert conn.execute("SHOW random_page_cost").fetchone() == ("4",)

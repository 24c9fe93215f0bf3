"""The PostgreSQL store's two spellings of the visibility rule select the same memories.

The keyword channel, the exact vector scan and counts use a form the planner can answer from
indexes (the shares read once per statement into an array); the HNSW path keeps the row-by-row
``EXISTS``. Both must see exactly an agent's own memories, public ones, and ones shared with it
or with everyone, on a real server.
"""

from __future__ import annotations

import psycopg
import pytest
from pg_server import PgServer
from storage_helpers import MODEL, later, memory, unit_vectors

from engramdb.errors import StorageError
from engramdb.models import Memory
from engramdb.storage._pg_sql import TermStats, filter_sql, pg_statement
from engramdb.storage.base import Filter, Store
from engramdb.storage.postgres import open_postgres


def _selected(url: str, flt: Filter, *, indexed: bool) -> set[str]:
    f = filter_sql(flt, indexed=indexed)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(pg_statement(f"SELECT m.id FROM memories m WHERE {f.where}"), f.params).fetchall()
    return {str(r[0]) for r in rows}


def _fill(store: Store) -> dict[str, Memory]:
    ms = {
        "alice_own": memory("alpha note one", agent="alice"),
        "alice_task": memory("alpha note two", agent="alice", kind="decision"),
        "bob_private": memory("alpha note three", agent="bob"),
        "bob_to_alice": memory("alpha note four", agent="bob"),
        "bob_to_all": memory("alpha note five", agent="bob"),
        "bob_public": memory("alpha note six", agent="bob", visibility="public"),
        "carol_to_dave": memory("alpha note seven", agent="carol"),
    }
    store.memories.add(list(ms.values()), unit_vectors(len(ms), seed=3), model_id=MODEL, actor="t")
    store.shares.share([ms["bob_to_alice"].id], from_agent="bob", to_agent="alice", at=later(1))
    store.shares.share([ms["bob_to_all"].id], from_agent="bob", to_agent="*", at=later(2))
    store.shares.share([ms["carol_to_dave"].id], from_agent="carol", to_agent="dave", at=later(3))
    return ms


def test_both_forms_select_the_same_memories(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = _fill(store)
        ids = {name: m.id for name, m in ms.items()}
        filters = [
            Filter(agent=agent, include_shared=shared, kinds=kinds)
            for agent in ("alice", "bob", "carol", "dave", "nobody")
            for shared in (True, False)
            for kinds in (None, ("knowledge",))
        ]
        for flt in filters:
            assert _selected(url, flt, indexed=True) == _selected(url, flt, indexed=False), flt
        # The rule itself, spelled out for one reader.
        alice = _selected(url, Filter(agent="alice"), indexed=True)
        assert alice == {ids[n] for n in ("alice_own", "alice_task", "bob_to_alice", "bob_to_all", "bob_public")}
        assert _selected(url, Filter(agent="dave"), indexed=True) == {
            ids[n] for n in ("bob_to_all", "bob_public", "carol_to_dave")
        }
        # The channels and counts using the indexed form return the visible memories, no more.
        found = store.search.keyword_candidates(["alpha"], Filter(agent="alice"), limit=50)
        assert {c.id for c in found} == alice
        near = store.search.vector_candidates(unit_vectors(1, seed=5)[0], Filter(agent="alice"), limit=50)
        assert {c.id for c in near} == alice
        assert store.memories.count(Filter(agent="alice")) == len(alice)
        # Unsharing takes effect in the same statement form (the array is read per statement, not cached).
        store.shares.unshare([ms["bob_to_all"].id], from_agent="bob", to_agent="*", at=later(4))
        assert ids["bob_to_all"] not in {
            c.id for c in store.search.keyword_candidates(["alpha"], Filter(agent="alice"), limit=50)
        }
        assert store.memories.count(Filter(agent="alice")) == len(alice) - 1


def test_vector_search_inside_an_atomic_block_is_refused(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        _fill(store)
        query = unit_vectors(1, seed=5)[0]
        with pytest.raises(StorageError, match="atomic"), store.atomic():
            store.search.vector_candidates(query, Filter(agent="alice"), limit=5)
        # The pooled connections are fine afterwards, and searches outside a block run.
        assert len(store.search.vector_candidates(query, Filter(agent="alice"), limit=5)) == 5


def test_reader_sizes_come_from_the_planner_statistics(postgres_server: PgServer) -> None:
    # The keyword channel picks the indexed form for readers owning few memories (agent_rows): before
    # ANALYZE every reader counts as small; after it, an agent's estimate is about what it owns.
    url = postgres_server.new_database()
    with open_postgres(url) as store, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE memories SET (autovacuum_enabled = false)")  # no ANALYZE behind the test's back
        ms = [memory(f"note {i}", agent="alice" if i % 4 else "bob") for i in range(400)]
        store.memories.add(ms, None, model_id=MODEL, actor="t")
        assert TermStats(budget_rows=50).agent_rows(conn, "alice") == 0
        conn.execute("ANALYZE memories")
        stats = TermStats(budget_rows=50)
        assert stats.agent_rows(conn, "alice") == pytest.approx(300, rel=0.05)
        assert stats.agent_rows(conn, "bob") == pytest.approx(100, rel=0.05)
        # An agent the statistics do not list owns at most as many as the least common listed one.
        assert stats.agent_rows(conn, "carol") <= stats.agent_rows(conn, "bob")


def test_relax_commit_makes_only_the_open_transaction_asynchronous(postgres_server: PgServer) -> None:
    # Read bookkeeping (Recall._bookkeep) relaxes its own commit; the next transaction on the same pooled
    # connection must be synchronous again, and outside a block there is nothing to relax.
    # The test server runs with synchronous_commit off; these sessions start with it on, like a real server.
    url = postgres_server.new_database() + "?options=-c%20synchronous_commit%3Don"
    with open_postgres(url, pool_size=1) as store:
        dialect = store._relax.__self__  # type: ignore[attr-defined]
        with store.atomic(), dialect.transaction() as conn:
            store.relax_commit()
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"
            store.memories.add(
                [memory("kept after an asynchronous commit", agent="alice")], None, model_id=MODEL, actor="t"
            )
        with dialect.transaction() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        assert store.memories.count(Filter(agent="alice")) == 1
        with pytest.raises(StorageError, match="atomic"):
            store.relax_commit()

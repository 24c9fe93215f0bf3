"""The PostgreSQL search paths of issue 26, on a real server: the vector channel's single round trip (a cached
model, checked in the statement) and its relaxed iterative scan, and statistics kept current after a bulk load by
the store itself."""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pg_server import PgServer, fold_staged
from storage_helpers import MODEL, memory, unit_vectors

from engramdb.storage._pg_analyze import stale_tables
from engramdb.storage.base import MODEL_META_KEY, Filter
from engramdb.storage.postgres import PgSearch, open_postgres


def _words(i: int) -> str:
    return ["alpha beta", "beta gamma", "gamma delta", "delta alpha"][i % 4] + f" note {i}"


def test_the_vector_channel_follows_a_model_switch_and_sorts_the_relaxed_scan(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url, exact_search_below=0) as store:  # the HNSW path from the first row
        ms = [memory(f"m{i}", agent=f"agent-{i % 3}") for i in range(300)]
        vecs = unit_vectors(300, seed=4)
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        exact = PgSearch(store.search._backend, exact_search_below=10**9)  # type: ignore[attr-defined]
        for i in range(20):
            flt = Filter(agent=f"agent-{i % 3}")
            got = store.search.vector_candidates(vecs[i], flt, limit=30)
            want = exact.vector_candidates(vecs[i], flt, limit=30)
            assert [c.score for c in got] == sorted((c.score for c in got), reverse=True)
            assert got[0].id == ms[i].id
            assert len({c.id for c in got[:10]} & {c.id for c in want[:10]}) >= 9
        # The model is cached by the searches above; another model's vectors, then the switch.
        other = unit_vectors(300, dim=8, seed=5)
        store.vectors.set([m.id for m in ms], other, model_id="other-model")
        store.meta.set(MODEL_META_KEY, "other-model")
        found = store.search.vector_candidates(other[7], Filter(agent="agent-1"), limit=5)
        assert found[0].id == ms[7].id
        assert np.isclose(found[0].score, 1.0, atol=1e-5)


def test_a_bulk_load_is_analysed_by_the_next_searches(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [memory(_words(i), agent=f"agent-{i % 4}") for i in range(3000)]
        store.memories.add(ms, unit_vectors(3000, seed=2), model_id=MODEL, actor="t")
        fold_staged(url)  # the graphs' table is the one analysed (staged vectors are always scanned exactly)
        leaves = "SELECT relid::regclass::text FROM pg_partition_tree('vectors') WHERE isleaf"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE memories SET (autovacuum_enabled = off)")
            # vectors is partitioned by agent: autovacuum would analyse its partitions.
            for (leaf,) in conn.execute(leaves).fetchall():
                conn.execute(f"ALTER TABLE {leaf} SET (autovacuum_enabled = off)")
        keeper = store.search.statistics  # type: ignore[attr-defined]
        # A backend publishes its write counters at most once a second, and a busy one up to 10 s later (PostgreSQL
        # 15's statistics): the searches that follow analyse once the load shows, each looking every few seconds.
        deadline = time.monotonic() + 60
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                store.search.keyword_candidates(["alpha"], Filter(agent="agent-0"), limit=5)
                assert keeper.wait(timeout=60)
                memories = conn.execute(
                    "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'memories'"
                ).fetchone()
                if memories == (True,) or time.monotonic() > deadline:
                    break
                time.sleep(0.25)
            parts = conn.execute(
                "SELECT bool_and(s.last_analyze IS NOT NULL), sum(greatest(c.reltuples, 0)) "
                "FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
                f"WHERE s.relid::regclass::text IN ({leaves})"
            ).fetchone()
        assert memories == (True,)
        assert parts is not None
        assert parts[0] is True
        assert parts[1] == pytest.approx(3000, rel=0.05)
        # The vector channel now knows the table's size (the row estimate of the plan choice).
        with store.search._backend.reading() as raw:  # type: ignore[attr-defined]
            model = store.search._models.current(raw)  # type: ignore[attr-defined]
        assert model is not None
        assert model.estimate == pytest.approx(3000, rel=0.05)
        # And the keyword channel's word frequencies: sampled from the loaded table at its next search.
        store.search.keyword_candidates(["alpha"], Filter(agent="agent-0"), limit=5)
        lexemes = store.search.lexemes  # type: ignore[attr-defined]
        assert lexemes.wait(timeout=60)
        sample = lexemes.last
        assert sample is not None
        assert sample.total == pytest.approx(3000, rel=0.05)
        assert sample.sampled == pytest.approx(3000, rel=0.05)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["memories", "vectors"]),
            st.floats(min_value=-1, max_value=1e7),
            st.integers(min_value=0, max_value=10**7),
            st.integers(min_value=0, max_value=10**7),
            st.booleans(),
        ),
        max_size=2,
        unique_by=lambda r: r[0],
    )
)
def test_a_table_is_stale_when_much_of_it_changed_since_analyze(rows: list[tuple[str, float, int, int, bool]]) -> None:
    stale = stale_tables(list(rows))
    for name, reltuples, live, changed, analysed in rows:
        expected = changed >= 1000 and (not analysed or reltuples < 0 or changed > 0.2 * max(reltuples, live, 0))
        assert (name in stale) == expected
    assert stale == sorted(stale, key=["memories", "vectors"].index)


def test_a_reader_with_a_small_share_of_a_large_store_is_scanned_exactly(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url, exact_search_below=100) as store:
        ms = [memory(f"m{i}", agent="small" if i % 50 == 0 else "big") for i in range(1000)]
        vecs = unit_vectors(1000, seed=6)
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        fold_staged(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        search = store.search
        exact = PgSearch(search._backend, exact_search_below=10**9)  # type: ignore[attr-defined]
        with search._backend.reading() as raw:  # type: ignore[attr-defined]
            model = search._models.current(raw, fresh=True)  # type: ignore[attr-defined]
            assert model is not None
            # 20 of 1,000 rows: the index would read ~2,500 entries for a top 50; the 20 rows are read instead.
            assert not search._plan(raw, model, Filter(agent="small"), 50).own  # type: ignore[attr-defined]
            assert search._plan(raw, model, Filter(agent="big"), 50).own  # type: ignore[attr-defined]
            assert search._plan(raw, model, Filter(agent=None), 50).own  # type: ignore[attr-defined]
        for i in range(0, 1000, 97):
            got = search.vector_candidates(vecs[i], Filter(agent="small"), limit=50)
            assert got == exact.vector_candidates(vecs[i], Filter(agent="small"), limit=50)
            assert len(got) == 20


def test_the_keyword_indexes_pending_lists_are_merged_after_writes(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        conn.execute("ALTER TABLE memories SET (autovacuum_enabled = off)")  # autovacuum would merge them too
        keeper = store.search.statistics  # type: ignore[attr-defined]
        store.search.keyword_candidates(["alpha"], Filter(agent="agent-0"), limit=5)  # a first look: merged once
        assert keeper.wait(timeout=60)

        def pending() -> int:
            rows = conn.execute(
                "SELECT sum(p.pending_tuples) FROM unnest(ARRAY['memories_tsv']) AS i "
                "CROSS JOIN LATERAL pgstatginindex(to_regclass(i)) p WHERE to_regclass(i) IS NOT NULL"
            ).fetchone()
            assert rows is not None
            return int(rows[0])

        ms = [memory(_words(i), agent=f"agent-{i % 4}") for i in range(800)]
        store.memories.add(ms, None, model_id=MODEL, actor="t")
        written = pending()
        assert written > 0  # GIN's fast update: the new rows' words wait in the pending lists
        # Searches look at the write counters every few seconds (statistics are flushed to them within a second).
        deadline = time.monotonic() + 60
        while pending() and time.monotonic() < deadline:
            keeper._next_check = 0.0  # type: ignore[attr-defined]  # do not wait the check interval out
            store.search.keyword_candidates(["alpha"], Filter(agent="agent-0"), limit=5)
            assert keeper.wait(timeout=60)
            time.sleep(0.2)
        assert pending() == 0
        # Nothing lost in the merge: the words are found through the index as before.
        found = store.search.keyword_candidates([_words(5).split()[0]], Filter(agent="agent-1"), limit=1000)
        assert {c.id for c in found} >= {m.id for m in ms if m.agent == "agent-1" and _words(5).split()[0] in m.content}

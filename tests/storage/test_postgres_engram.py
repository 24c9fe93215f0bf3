"""The PostgreSQL backend beyond the shared contract: the Engram facade end to end, the HNSW path,
two writing processes, and how it refuses what it cannot use.

Runs against a real server started by the session (see pg_server.py); skipped with a
reason when PostgreSQL or pgvector is missing, and failed instead under ``CI=true``.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import psycopg
import pytest
from pg_server import PgServer, fold_staged, skip_or_fail
from storage_helpers import MODEL, memory, unit_vectors

from engramdb import Engram
from engramdb.auditchain import verify
from engramdb.embeddings.base import Embedder
from engramdb.errors import NotAStoreError, StorageError
from engramdb.models.audit import AuditRecord
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres, redact_url


def test_engram_remember_search_forget_end_to_end(postgres_server: PgServer, embedder: Embedder) -> None:
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder) as mem:
        target = mem.remember("The deploy failed because the lockfile was stale; regenerating it fixed the build")
        mem.remember("Alice prefers tabs over spaces in Go code", kind="preference")
        mem.remember("The staging database is restored from a nightly snapshot", tags=("db",))
        hits = mem.search("why did the deploy fail?")
        assert hits[0].memory.id == target.id
        assert hits[0].score > 0
        assert [h.memory.id for h in mem.search("nightly snapshot restore", tags=["db"])][:1] != [target.id]
        mem.forget(target.id)
        assert target.id not in {h.memory.id for h in mem.search("why did the deploy fail?")}
        assert [c.action for c in mem.history(target.id)][-1] == "forget"
        assert mem.count() == 2
        assert mem.audit.verify()
    with Engram(url, embedder=embedder) as again:  # everything is in the server, not the process
        assert again.count() == 2
        assert again.search("tabs or spaces")[0].memory.kind == "preference"


def test_hnsw_index_path_returns_the_true_neighbours(postgres_server: PgServer) -> None:
    # exact_search_below=0 takes the HNSW path large stores use; on 400 rows the planner would still
    # rather sort them all (and be exact), so session settings steer it onto the index.
    steer = "-c enable_seqscan=off -c enable_bitmapscan=off -c enable_sort=off"
    url = postgres_server.new_database() + "?options=" + steer.replace(" ", "%20").replace("=", "%3D")
    with open_postgres(url, exact_search_below=0) as store:
        ms = [memory(f"note {i}", kind=("decision", "failure")[i % 2]) for i in range(400)]
        vecs = unit_vectors(len(ms), seed=3)
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        fold_staged(url)  # into the graphs (schema step 6 stages new vectors)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE vectors")  # the store reads the planner's row estimate
            [(name,)] = conn.execute("SELECT index_name FROM vector_indexes").fetchall()
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN SELECT memory_id FROM vectors WHERE model_id = %s AND dim = 16 "
                    "ORDER BY embedding::halfvec(16) <=> %s::halfvec(16) LIMIT 5",
                    (MODEL, str(vecs[0].tolist())),
                ).fetchall()
            )
            # vectors is partitioned by agent: the index is one per partition.
            parts = {
                r[0]
                for r in conn.execute(
                    "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", (name,)
                )
            }
        assert parts
        assert any(part in plan for part in parts)  # the per-model partial index is what such a query uses
        for q in range(5):
            query = unit_vectors(1, seed=100 + q)[0]
            for kinds in (None, ("failure",)):
                found = store.search.vector_candidates(query, Filter(agent="alice", kinds=kinds), limit=10)
                allowed = [i for i, m in enumerate(ms) if kinds is None or m.kind in kinds]
                truth = {ms[i].id for i in sorted(allowed, key=lambda i: -float(vecs[i] @ query))[:10]}
                assert len(found) == 10  # hard filters still fill the top k (iterative scan)
                assert len({c.id for c in found} & truth) >= 9  # approximate, but close
                assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)


def _write(url: str, agent: str, count: int) -> int:
    """Process entry point: add memories and audit entries in small transactions."""
    with open_postgres(url) as store:
        vecs = unit_vectors(count, seed=len(agent))
        for start in range(0, count, 5):
            items = [memory(f"note {i} from {agent}", agent=agent) for i in range(start, min(count, start + 5))]
            store.memories.add(items, vecs[start : start + len(items)], model_id=MODEL, actor=agent)
            store.audit.append([AuditRecord(action="create", agent=agent, at=items[0].created_at)])
        return store.memories.count(Filter(agent=agent, include_shared=False))


def test_two_processes_writing_at_once_both_succeed(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    open_postgres(url).close()  # create the schema first, so the processes race on writes only
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_write, url, agent, 40) for agent in ("ann", "bob")]
        assert [f.result(timeout=300) for f in futures] == [40, 40]
    with open_postgres(url) as store:
        assert store.memories.count(Filter(agent=None)) == 80
        events = store.audit.events(limit=None)
        assert [e.seq for e in events] == list(range(1, 17))
        assert verify(events, head=store.audit.head()).ok


def test_a_database_with_other_tables_of_those_names_is_not_a_store(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE memories (id int)")
    with pytest.raises(NotAStoreError, match="memories"):
        open_postgres(url)


def test_unreachable_server_is_a_storage_error_without_the_password(postgres_server: PgServer) -> None:
    url = f"postgresql://someone:hunter2@127.0.0.1:{postgres_server.port + 1}/nowhere"
    with pytest.raises(StorageError) as info:
        open_postgres(url)
    assert "hunter2" not in str(info.value)
    assert redact_url(url) == f"postgresql://someone:***@127.0.0.1:{postgres_server.port + 1}/nowhere"


def test_text_postgres_cannot_hold_is_rejected_cleanly(postgres_server: PgServer) -> None:
    from engramdb.errors import ValidationError

    with open_postgres(postgres_server.new_database()) as store:
        with pytest.raises(ValidationError):
            store.memories.add([memory("nul \x00 byte")], None, model_id=MODEL, actor="t")
        assert store.memories.count(Filter(agent=None)) == 0
        store.memories.add([memory("fine")], np.ones((1, 16), dtype=np.float32), model_id=MODEL, actor="t")
        assert store.memories.count(Filter(agent=None)) == 1


def test_missing_server_skips_locally_but_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        skip_or_fail("no initdb")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no initdb"):
        skip_or_fail("no initdb")


def test_pooled_connections_plan_each_execution_for_its_values(postgres_server: PgServer) -> None:
    # psycopg prepares a statement on its fifth run and PostgreSQL may then reuse a generic plan, which
    # turned the vector write's dimension check into a scan of every vector (3 s per write at 1M).
    with open_postgres(postgres_server.new_database(), pool_size=2) as store:
        ms = [memory(f"note {i}") for i in range(12)]
        vecs = unit_vectors(len(ms), seed=5)
        for m, v in zip(ms, vecs, strict=True):  # past psycopg's prepare threshold on one connection
            store.memories.add([m], v[None, :], model_id=MODEL, actor="t")
        backend = store.search._backend  # type: ignore[attr-defined]
        with backend.reading() as conn:
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)

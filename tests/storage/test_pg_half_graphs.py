"""The HNSW graphs in half precision (PostgreSQL schema step 9): a store made before the step gets its graphs rebuilt
on ``embedding::halfvec(dim)`` under the same names, the full-precision ones gone; a new store's first write builds
the half-precision one; searches and near-duplicate lookups walk it and still report each row's full distance."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import psycopg
from pg_server import PgServer, fold_staged, old_store
from storage_helpers import DIM, MODEL, memory, unit_vectors

from engramdb.models import Memory
from engramdb.storage import _pg_schema
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres

AGENTS = ("a0", "a1", "a2")
# Of the graphs on ``vectors``' partitions: their opclass and expression (every partition's index is its parent's).
_GRAPHS = (
    "SELECT i.indexdef FROM pg_indexes i JOIN pg_partition_tree('vectors') p ON p.relid::regclass::text = i.tablename "
    "WHERE p.isleaf AND i.indexdef LIKE '%USING hnsw%'"
)
# Steers a tiny table's statements onto its indexes (the planner would rather sort 30 rows).
_STEER = "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off"


def _graphs(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [str(r[0]) for r in conn.execute(_GRAPHS).fetchall()]


def _exact(
    ms: list[Memory], vecs: npt.NDArray[np.float32], query: npt.NDArray[np.float32], agent: str, limit: int
) -> list[tuple[str, float]]:
    """The nearest ``limit`` of ``agent``'s own memories with their full-precision cosines, by numpy."""
    scored = [(m.id, float(np.dot(vecs[n].astype(np.float64), query.astype(np.float64)))) for n, m in enumerate(ms)
              if m.agent == agent]  # fmt: skip
    return sorted(scored, key=lambda s: -s[1])[:limit]


def _parent_indexes(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [str(r[0]) for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'vectors'")]


def _uses_graph(url: str, dim: int, name: str) -> bool:
    """Whether a statement ordered by the half-precision distance is answered by the graph ``name`` (a partition's)."""
    with psycopg.connect(url, autocommit=True) as conn:
        parts = {str(r[0]) for r in conn.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", (name,)
        )}  # fmt: skip
        conn.execute(_STEER)
        plan = conn.execute(
            f"EXPLAIN SELECT memory_id FROM vectors WHERE model_id = %s AND dim = {dim} "
            f"ORDER BY embedding::halfvec({dim}) <=> %s::halfvec({dim}) LIMIT 5",
            (MODEL, str([0.5] * dim)),
        ).fetchall()
    return any(part in str(r[0]) for r in plan for part in parts)


def test_a_store_made_before_the_half_graphs_migrates_in_place(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"note {i}", agent=AGENTS[i % 3]) for i in range(90)]
    vecs = unit_vectors(90, seed=41)
    old_store(url, step=8, memories=ms, vectors=vecs, model=MODEL)
    before = _graphs(url)
    assert before
    assert all("vector_cosine_ops" in g for g in before)
    with open_postgres(url, exact_search_below=0) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            [(name,)] = conn.execute("SELECT index_name FROM vector_indexes").fetchall()
            conn.execute("ANALYZE vectors")
        after = _graphs(url)
        # One graph per partition again, each in half precision: the full-precision graphs are gone.
        assert len(after) == len(before) == _pg_schema.VECTOR_PARTITIONS
        assert all("halfvec_cosine_ops" in g and f"halfvec({DIM})" in g for g in after)
        assert _uses_graph(url, DIM, name)
        assert name in _parent_indexes(url)  # under its recorded name
        for q in range(4):
            query = unit_vectors(1, seed=300 + q)[0]
            for agent in AGENTS:
                found = store.search.vector_candidates(query, Filter(agent=agent), limit=6)
                truth = _exact(ms, vecs, query, agent, 6)
                assert [c.id for c in found] == [i for i, _ in truth]
                # Walked in half precision, reported in full: the cosines are numpy's to float precision, closer than
                # a half-precision distance would be (~1e-3).
                assert np.allclose([c.score for c in found], [s for _, s in truth], rtol=0, atol=1e-6)
        # A write after the step goes through the mover into the half-precision graph and is found there.
        new = memory("written after", agent="a1")
        store.memories.add([new], query[None, :], model_id=MODEL, actor="t")
        fold_staged(url)
        [top] = store.search.vector_candidates(query, Filter(agent="a1"), limit=1)
        assert top.id == new.id
        assert abs(top.score - 1.0) < 1e-6


def test_a_new_store_builds_its_graph_in_half_precision(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"fresh {i}", agent=AGENTS[i % 3], kind="knowledge") for i in range(60)]
    vecs = unit_vectors(60, seed=43)
    with open_postgres(url, exact_search_below=0) as store:
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        fold_staged(url)
        graphs = _graphs(url)
        assert len(graphs) == _pg_schema.VECTOR_PARTITIONS
        assert all("halfvec_cosine_ops" in g for g in graphs)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE vectors")
        # Near-duplicate lookups walk the same graph and report full distances: a stored vector finds itself at 1.0.
        lookups = [(vecs[n], Filter(agent=ms[n].agent, kinds=("knowledge",))) for n in (0, 7, 20)]
        found = store.search.vector_candidates_many(lookups, limit=3, near=0.95)
        assert [f[0].id for f in found] == [ms[n].id for n in (0, 7, 20)]
        assert all(abs(f[0].score - 1.0) < 1e-6 for f in found)
        for (query, _), hits in zip(lookups, found, strict=True):
            full = {m.id: float(np.dot(vecs[n].astype(np.float64), query.astype(np.float64))) for n, m in enumerate(ms)}
            assert np.allclose([c.score for c in hits], [full[c.id] for c in hits], rtol=0, atol=1e-6)

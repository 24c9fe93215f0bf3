"""``vectors`` partitioned by agent (PostgreSQL schema step 5): a store made before it migrates in place, and a search
split into the reader's own partition and other agents' public and shared rows returns what the visibility rule admits,
nearest first, on every plan (HNSW graphs or exact scans, for each part)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import PgServer, fold_staged, old_store
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.models import Memory
from engramdb.storage import _pg_schema
from engramdb.storage._pg_nearest import VectorPlan
from engramdb.storage._pg_sql import CurrentModel
from engramdb.storage.base import Filter, Store
from engramdb.storage.postgres import PgSearch, open_postgres

AGENTS = ("a0", "a1", "a2", "a3")


def _truth(
    ms: list[Memory], vecs: npt.NDArray[np.float32], query: npt.NDArray[np.float32], flt: Filter, limit: int,
    shares: dict[str, set[str]],
) -> list[str]:  # fmt: skip
    """The nearest ``limit`` ids the filter admits, by numpy over every row."""

    def admitted(m: Memory) -> bool:
        if flt.agent is not None and m.agent != flt.agent:
            seen = m.visibility == "public" or bool(shares.get(m.id, set()) & {flt.agent, "*"})
            if not (flt.include_shared and seen):
                return False
        if flt.kinds is not None and m.kind not in flt.kinds:
            return False
        return flt.users is None or m.user in flt.users

    rows = [n for n, m in enumerate(ms) if admitted(m)]
    order = sorted(rows, key=lambda n: -float(vecs[n] @ query))
    return [ms[n].id for n in order[:limit]]


def test_a_store_made_before_the_partitions_migrates_in_place(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"note {i}", agent=AGENTS[i % 4], visibility="public" if i % 9 == 0 else "private") for i in range(80)]
    vecs = unit_vectors(80, seed=21)
    old_store(url, step=4, memories=ms, vectors=vecs, model=MODEL)  # one ``vectors`` table, one HNSW graph
    with open_postgres(url, exact_search_below=0) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            assert conn.execute("SELECT relkind FROM pg_class WHERE oid = 'vectors'::regclass").fetchone() == ("p",)
            leaves = conn.execute("SELECT count(*) FROM pg_partition_tree('vectors') WHERE isleaf").fetchone()
            assert leaves == (_pg_schema.VECTOR_PARTITIONS,)
            # Every vector moved, with its memory's agent.
            moved = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE v.agent = m.agent) FROM vectors v JOIN memories m "
                "ON m.id = v.memory_id"
            ).fetchone()
            assert moved == (80, 80)
            # The model's HNSW index is there again under its recorded name, one graph per partition.
            [(name,)] = conn.execute("SELECT index_name FROM vector_indexes").fetchall()
            graphs = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", (name,)).fetchone()
            assert graphs == (_pg_schema.VECTOR_PARTITIONS,)
        with store.search._backend.reading() as raw:  # type: ignore[attr-defined]
            model = store.search._models.current(raw, fresh=True)  # type: ignore[attr-defined]
        assert model is not None
        assert model.estimate == 80  # analysed by the step: searches choose their plan on real counts
        query = unit_vectors(1, seed=5)[0]
        for agent in AGENTS:
            flt = Filter(agent=agent)
            found = [c.id for c in store.search.vector_candidates(query, flt, limit=7)]
            assert found == _truth(ms, vecs, query, flt, 7, {})
        # A write after the step lands in its agent's partition and is found.
        new = memory("written after", agent="a2")
        store.memories.add([new], query[None, :], model_id=MODEL, actor="t")
        assert store.search.vector_candidates(query, Filter(agent="a2"), limit=1)[0].id == new.id
        assert new.id not in {c.id for c in store.search.vector_candidates(query, Filter(agent="a1"), limit=80)}
        # Staged first (schema step 6), then folded into the partitions by the mover: the agent travels with it.
        fold_staged(url)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT agent FROM vectors WHERE memory_id = %s", (new.id,)).fetchone() == ("a2",)


class _Forced(PgSearch):
    """A search whose plan is fixed (both parts' graphs or exact scans), to test each against the truth."""

    plan = VectorPlan(own=True, others=True)

    def _plan(self, conn: object, model: CurrentModel, flt: Filter, limit: int) -> VectorPlan:  # type: ignore[override]
        return self.plan if flt.agent is not None else VectorPlan(own=self.plan.own, others=self.plan.own)


@pytest.fixture(scope="module")
def scoped(
    postgres_server: PgServer,
) -> Iterator[tuple[Store, list[Memory], npt.NDArray[np.float32], dict[str, set[str]]]]:
    """240 memories over 4 agents: a third public, some shared with one agent or with every agent, two users."""
    url = postgres_server.new_database()
    ms = [
        memory(f"note {i}", agent=AGENTS[i % 4], kind="knowledge" if i % 2 else "decision",
               visibility="public" if i % 3 == 0 else "private", user=None if i % 5 else f"u{i % 2}",
               at=NOW + timedelta(seconds=i))
        for i in range(240)
    ]  # fmt: skip
    vecs = unit_vectors(240, seed=31)
    shares: dict[str, set[str]] = {}
    with open_postgres(url) as store:
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        to_a0 = [m.id for m in ms if m.agent == "a1" and m.visibility == "private"][:6]
        to_all = [m.id for m in ms if m.agent == "a2" and m.visibility == "private"][:4]
        store.shares.share(to_a0, from_agent="a1", to_agent="a0", at=NOW)
        store.shares.share(to_all, from_agent="a2", to_agent="*", at=NOW)
        shares.update({i: {"a0"} for i in to_a0} | {i: {"*"} for i in to_all})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    with open_postgres(url, exact_search_below=0) as opened:
        yield opened, ms, vecs, shares


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flt=st.builds(
        Filter,
        agent=st.sampled_from((*AGENTS, None)),
        kinds=st.sampled_from((None, ("knowledge",))),
        include_shared=st.booleans(),
        users=st.sampled_from((None, (None,), (None, "u1"), ("u0",))),
    ),
    own=st.booleans(),
    others=st.booleans(),
    limit=st.sampled_from((1, 5, 30)),
    seed=st.integers(0, 10_000),
)
def test_every_plan_returns_the_nearest_rows_the_filter_admits(
    scoped: tuple[Store, list[Memory], npt.NDArray[np.float32], dict[str, set[str]]],
    flt: Filter,
    own: bool,
    others: bool,
    limit: int,
    seed: int,
) -> None:
    store, ms, vecs, shares = scoped
    # ef 1000 covers every graph of this store: the HNSW path answers exactly, so it is compared like the scan.
    search = _Forced(store.search._backend, exact_search_below=0, ef_search=1000)  # type: ignore[attr-defined]
    search.plan = VectorPlan(own=own, others=others)
    query = unit_vectors(1, seed=seed)[0]
    found = search.vector_candidates(query, flt, limit=limit)
    assert [c.id for c in found] == _truth(ms, vecs, query, flt, limit, shares)
    # Users see their own and no-user memories only, whichever part found them.
    if flt.users is not None:
        assert all(c.memory is not None and c.memory.user in flt.users for c in found)
    # The batch form (a write's near-duplicate lookups) answers the same.
    [batch] = search.vector_candidates_many([(query, flt)], limit=limit)
    assert [c.id for c in batch] == [c.id for c in found]


@pytest.mark.parametrize("own", [True, False])
@pytest.mark.parametrize("others", [True, False])
def test_each_plan_sees_exactly_the_visible_rows(
    scoped: tuple[Store, list[Memory], npt.NDArray[np.float32], dict[str, set[str]]], own: bool, others: bool
) -> None:
    """Deep enough for every admitted row: own, public, shared with the reader, shared with every agent."""
    store, ms, vecs, shares = scoped
    search = _Forced(store.search._backend, exact_search_below=0, ef_search=1000)  # type: ignore[attr-defined]
    search.plan = VectorPlan(own=own, others=others)
    query = unit_vectors(1, seed=77)[0]
    for agent in (*AGENTS, None):
        for flt in (Filter(agent=agent), Filter(agent=agent, include_shared=False), Filter(agent=agent, users=(None,))):
            found = [c.id for c in search.vector_candidates(query, flt, limit=len(ms))]
            assert found == _truth(ms, vecs, query, flt, len(ms), shares)
    # The reader a0 sees a1's rows shared with it and a2's shared with everyone; a3 only the latter.
    seen = {c.id for c in search.vector_candidates(query, Filter(agent="a0"), limit=len(ms))}
    assert {i for i, to in shares.items() if to & {"a0", "*"}} <= seen
    seen3 = {c.id for c in search.vector_candidates(query, Filter(agent="a3"), limit=len(ms))}
    assert not {i for i, to in shares.items() if to == {"a0"}} & seen3


def test_vectors_named_with_their_owners_are_read_from_their_partitions_only(
    scoped: tuple[Store, list[Memory], npt.NDArray[np.float32], dict[str, set[str]]],
) -> None:
    store, ms, vecs, _ = scoped
    picked = [ms[n] for n in (0, 5, 10, 17)]
    plain = store.vectors.get([m.id for m in picked], model_id=MODEL)
    owned = store.vectors.get([m.id for m in picked], model_id=MODEL, agents=[m.agent for m in picked])
    assert set(plain) == set(owned) == {m.id for m in picked}
    for n, m in zip((0, 5, 10, 17), picked, strict=True):
        assert np.allclose(owned[m.id], vecs[n], atol=1e-6)
    # The hint restricts: an owner left out leaves its memories' vectors out (callers name every owner).
    only = store.vectors.get([m.id for m in picked], model_id=MODEL, agents=[picked[0].agent])
    assert set(only) == {m.id for m in picked if m.agent == picked[0].agent}

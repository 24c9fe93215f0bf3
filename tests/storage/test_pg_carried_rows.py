"""The PostgreSQL channels carry their candidates' rows (``Candidate.memory``) so hybrid search reads no memory again:
each carried memory must be exactly what ``get_many`` returns under the same filter (visibility, share provenance,
user scopes), on the HNSW path, the exact scan and the keyword channel; a whole search then sends no ``get_many``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import FILTERS, PgServer, graph_and_exact
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.retrieval.ranking import Fused
from engramdb.storage.base import Candidate, Filter, Store
from engramdb.storage.postgres import PgSearch

AGENTS = ("agent-0", "agent-1", "agent-2")
WORDS = ("alpha beta", "beta gamma", "gamma delta", "delta alpha")


@pytest.fixture(scope="module")
def stores(postgres_server: PgServer) -> Iterator[tuple[Store, Store]]:
    """300 memories over 3 agents (public rows, shares, users, kinds), opened twice: HNSW path and exact scan."""
    url = postgres_server.new_database()
    ms = [
        memory(f"{WORDS[i % 4]} note {i}", agent=AGENTS[i % 3], kind="knowledge" if i % 2 else "conversation",
               visibility="public" if i % 13 == 0 else "private", user=None if i % 5 else f"user-{i % 2}",
               tags=("t1",) if i % 7 == 0 else (), at=NOW + timedelta(seconds=i))
        for i in range(300)
    ]  # fmt: skip
    shares = [([ms[1].id, ms[4].id], "agent-1", "agent-0"), ([ms[2].id], "agent-2", "*")]
    with graph_and_exact(url, ms, seed=11, shares=shares) as pair:
        yield pair


def _same_as_get_many(store: Store, found: list[Candidate], flt: Filter) -> None:
    assert all(c.memory is not None for c in found)
    read = store.memories.get_many([c.id for c in found], flt)
    assert {c.id: c.memory for c in found} == read
    # Provenance too (Memory's equality may not cover it): who shared it with the reader, and when.
    assert [(c.memory.shared_by, c.memory.shared_at) for c in found if c.memory is not None] == [
        (read[c.id].shared_by, read[c.id].shared_at) for c in found
    ]


def _same_vectors(store: Store, found: list[Candidate]) -> None:
    """A keyword candidate carries its stored vector of the store's model, equal to what ``vectors.get`` reads."""
    read = store.vectors.get([c.id for c in found], model_id=MODEL)
    assert all(c.vector_model == MODEL for c in found)
    assert {c.id: np.asarray(c.vector).tolist() for c in found if c.vector is not None} == {
        i: np.asarray(v).tolist() for i, v in read.items()
    }


def test_the_index_store_takes_the_hnsw_path(stores: tuple[Store, Store]) -> None:
    search = stores[0].search
    budget = PgSearch(search._backend, exact_search_below=0, keyword_rank_rows=20)  # type: ignore[attr-defined]
    with search._backend.reading() as raw:  # type: ignore[attr-defined]
        # "note" is in every row: over a budget of 20 ranked rows (the keyword channel's second statement).
        assert budget._terms.selecting(raw, ["note"])[1]
        model = search._models.current(raw, fresh=True)  # type: ignore[attr-defined]
        assert model is not None
        assert search._plan(raw, model, Filter(agent="agent-0"), 5).own  # type: ignore[attr-defined]
        assert not stores[1].search._plan(raw, model, Filter(agent="agent-0"), 5).own  # type: ignore[attr-defined]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=FILTERS, seed=st.integers(0, 1000), words=st.sampled_from((["alpha"], ["beta", "delta"], ["note"])))
def test_carried_rows_are_what_get_many_returns(stores: tuple[Store, Store], flt: Filter, seed: int, words: list[str]):
    query = unit_vectors(1, seed=seed)[0]
    for store in stores:
        # Depth 5: a reader owning a third of the rows stays on the HNSW path (20 would scan its rows exactly).
        _same_as_get_many(store, store.search.vector_candidates(query, flt, limit=5), flt)
        found = store.search.keyword_candidates(words, flt, limit=20)
        _same_as_get_many(store, found, flt)
        _same_vectors(store, found)
    # Over the ranking budget (the newest matches of common words ranked): the rows come with them too.
    budget = PgSearch(stores[0].search._backend, exact_search_below=0, keyword_rank_rows=20)  # type: ignore[attr-defined]
    found = budget.keyword_candidates(words, flt, limit=10)
    _same_as_get_many(stores[0], found, flt)
    _same_vectors(stores[0], found)
    if words == ["note"] and flt.agent is None:
        assert found  # every row has the word: the newest 20 of them are ranked


def test_a_search_reads_no_memory_after_its_channels(
    embedder: Embedder, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
):
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder) as mem:
        mem.remember("Retry with exponential backoff after rate limit errors", agent="alice")
        mem.remember("The staging database lives in eu-west-1", agent="alice", visibility="public")
        mem.remember("Rate limits reset every minute", agent="bob")
        reads: list[list[str]] = []
        inner = mem.store.memories.get_many

        def counted(ids: list[str], flt: Filter | None = None) -> dict[str, object]:
            reads.append(list(ids))
            return inner(ids, flt)  # type: ignore[return-value]

        monkeypatch.setattr(mem.store.memories, "get_many", counted)
        # Nor a vector: a keyword-only hit's cosine comes from the vector its keyword candidate carried.
        vector_reads: list[list[str]] = []
        inner_vectors = mem.store.vectors.get

        def counted_vectors(ids: list[str], **kw: object) -> dict[str, object]:
            vector_reads.append(list(ids))
            return inner_vectors(ids, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(mem.store.vectors, "get", counted_vectors)
        hits = mem.search("how do I handle rate limit errors", agent="alice", limit=5)
        assert [h.memory.agent for h in hits][:1] == ["alice"]
        assert {h.memory.content for h in hits} >= {"Retry with exponential backoff after rate limit errors"}
        assert "Rate limits reset every minute" not in {h.memory.content for h in hits}  # bob's, private
        assert reads == []
        assert vector_reads == []
        # A keyword-only hit's cosine comes from the vector its keyword candidate carried, equal to the one read.
        question = "rate limit errors"
        query = embedder.embed([question])[0]
        keyword = mem.store.search.keyword_candidates(["rate", "limit", "errors"], Filter(agent="alice"), limit=5)
        assert keyword
        searcher = mem._recall._searcher  # type: ignore[attr-defined]
        only = [Fused(c.id, 0.5, c.score, None) for c in keyword]
        carried = searcher._cosines(query, only, agents=["alice"], carried=keyword)
        assert vector_reads == []
        read = searcher._cosines(query, only, agents=["alice"])
        assert len(vector_reads) == 1
        assert carried == pytest.approx(read)
        assert all(v > 0 for v in carried.values())

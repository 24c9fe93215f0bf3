"""The PostgreSQL store's paired keyword call (``PgSearch.keyword_candidates_pair``, the optional
``PairedKeywords`` role hybrid search uses for a question's words and their related words) returns exactly what
the two ``keyword_candidates`` calls return, over the ranking budget too; a search's answers are the same with it
as with two calls."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import PgServer
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage.base import Candidate, Filter, PairedKeywords, Store
from engramdb.storage.postgres import PgSearch, open_postgres

AGENTS = ("agent-0", "agent-1")
VOCABULARY = ("sisters", "brothers", "siblings", "doctor", "physician", "garden", "note", "trip", "the")


@pytest.fixture(scope="module")
def small_stores(postgres_server: PgServer) -> Iterator[list[Store]]:
    """Three small stores of random-ish texts over the vocabulary (one analysed, so terms are chosen by frequency)."""
    stores: list[Store] = []
    for n, size in enumerate((0, 40, 160)):
        url = postgres_server.new_database()
        ms = [
            memory(" ".join(VOCABULARY[(i * k + n) % len(VOCABULARY)] for k in range(1, 2 + i % 4)),
                   agent=AGENTS[i % 2], visibility="public" if i % 7 == 0 else "private",
                   at=NOW + timedelta(seconds=i))
            for i in range(size)
        ]  # fmt: skip
        store = open_postgres(url)
        if ms:
            store.memories.add(ms, unit_vectors(size, seed=n), model_id=MODEL, actor="t")
            store.shares.share([ms[1].id], from_agent="agent-1", to_agent="agent-0", at=NOW + timedelta(days=1))
        if n == 2:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")
        stores.append(store)
    yield stores
    for store in stores:
        store.close()


def _key(found: list[Candidate]) -> list[tuple[object, ...]]:
    return [(c.id, c.score, c.memory, None if c.vector is None else c.vector.tolist(), c.vector_model) for c in found]


terms = st.lists(st.sampled_from((*VOCABULARY, "absent", "")), max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, 2),
    words=terms,
    related=terms,
    flt=st.builds(Filter, agent=st.sampled_from((*AGENTS, None)), include_shared=st.booleans()),
    limit=st.integers(0, 30),
    related_limit=st.integers(0, 10),
    budget=st.sampled_from((None, 5)),
)
def test_the_pair_is_the_two_calls(
    small_stores: list[Store],
    which: int,
    words: list[str],
    related: list[str],
    flt: Filter,
    limit: int,
    related_limit: int,
    budget: int | None,
) -> None:
    search = small_stores[which].search
    if budget is not None:
        # Over a budget of 5 ranked rows, the newest matches are ranked (the keyword channel's second statement).
        search = PgSearch(search._backend, exact_search_below=0, keyword_rank_rows=budget)  # type: ignore[attr-defined]
    assert isinstance(search, PairedKeywords)
    pair = search.keyword_candidates_pair(words, related, flt, limit=limit, related_limit=related_limit)
    assert _key(pair[0]) == _key(search.keyword_candidates(words, flt, limit=limit))
    assert _key(pair[1]) == _key(search.keyword_candidates(related, flt, limit=related_limit))


def test_a_search_answers_the_same_paired_or_not(embedder: Embedder, postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder) as mem:
        for text in (
            "I have two sisters and one brother",
            "My brothers live in Lisbon",
            "The physician said my blood pressure is fine",
            "We planted tomatoes in the garden",
            "My siblings are coming over on Sunday",
        ):
            mem.remember(text, agent="alice")
        searcher = mem._recall._searcher
        assert isinstance(mem.store.search, PairedKeywords)
        for question in ("How many siblings do I have?", "Which doctors did I visit?", "what about the garden"):
            answers = []
            for paired in (True, False):
                searcher.pair_keywords = paired
                # Untouched and at one moment: a search's bookkeeping would change the next one's scores.
                hits = searcher.search(question, Filter(agent="alice"), limit=5, now=NOW, touch=False)
                answers.append([(h.memory.id, h.score, h.keyword_score, h.vector_score) for h in hits])
            assert answers[0] == answers[1]
            assert answers[0]
        # The related words reach a memory the question's own words do not: "sisters" for "siblings".
        searcher.pair_keywords = True
        found = searcher.search("How many siblings do I have?", Filter(agent="alice"), limit=5, now=NOW, touch=False)
        assert "I have two sisters and one brother" in {h.memory.content for h in found}

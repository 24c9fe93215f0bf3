"""The keyword channel's postings on PostgreSQL (schema step 11, ``memory_terms``): kept in step with ``memories`` by
every write, a store made before the step migrates in place, and the channel's scores are BM25 of FTS5's form (the
embedded store's), computed here in Python from each memory's ``tsv``: equal to the bit, under every filter form, for
the reader's own rows (from the postings) and the others it may see (from their ``tsv``)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import (
    EDITS,
    FILTERS,
    POSTINGS_DRIFT,
    PgServer,
    apply_edits,
    bm25_reference,
    count,
    graph_and_exact,
    old_store,
    written_on,
)
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.storage import _pg_schema
from engramdb.storage._pg_keywords import fts5_idf, tsquery_text
from engramdb.storage.base import Filter, Store
from engramdb.storage.postgres import PgSearch, open_postgres

_WORDS = ("alpha", "beta", "gamma", "delta", "harbor", "violin")
AGENTS = ("agent-0", "agent-1", "agent-2")


@pytest.fixture(scope="module")
def analysed(postgres_server: PgServer) -> Any:
    """300 memories over 3 agents (public rows, shares, users, kinds, repeated words), analysed, with the lexeme
    sample taken: the keyword channel weighs terms by their document counts."""
    url = postgres_server.new_database()
    ms = [
        memory(f"{_WORDS[i % 6]} {_WORDS[(i * 7) % 6]} note {i} " + "harbor " * (i % 4), agent=AGENTS[i % 3],
               kind="knowledge" if i % 2 else "conversation", visibility="public" if i % 13 == 0 else "private",
               user=None if i % 5 else f"user-{i % 2}", at=NOW + timedelta(seconds=i))
        for i in range(300)
    ]  # fmt: skip
    shares = [([ms[1].id, ms[4].id], "agent-1", "agent-0"), ([ms[2].id, ms[5].id], "agent-2", "*")]
    with graph_and_exact(url, ms, seed=7, shares=shares) as (store, _):
        search = store.search
        with search._backend.reading() as conn:
            search.lexemes.current(conn, search._terms.total_rows(conn))
        assert search.lexemes.last is not None
        assert search.lexemes.last.mean_length > 0
        yield url, store


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flt=FILTERS,
    words=st.sampled_from((["alpha"], ["beta", "harbor"], ["note", "violin"], ["harbor"], ["nothing", "gamma"])),
    limit=st.sampled_from((1, 5, 50, 300)),
)
def test_the_channel_ranks_by_fts5sbm25_reference(analysed: Any, flt: Filter, words: list[str], limit: int) -> None:
    url, store = analysed
    found = [(c.id, c.score) for c in store.search.keyword_candidates(words, flt, limit=limit)]
    assert found == bm25_reference(store, url, words, flt, limit)


def test_idf_is_fts5s() -> None:
    assert fts5_idf(1, 100) == math.log(99.5 / 1.5)
    assert fts5_idf(60, 100) == 1e-6  # in more than half the rows: FTS5's floor


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4), min_size=4, max_size=24),
    edits=EDITS,
)
def test_every_write_keeps_the_postings_in_step(
    postgres_server: PgServer, texts: list[list[str]], edits: list[tuple[int, str]]
) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [
            memory(" ".join(words), agent=f"agent-{i % 3}", tags=(words[0],), at=NOW + timedelta(seconds=i))
            for i, words in enumerate(texts)
        ]
        store.memories.add(ms, unit_vectors(len(ms), seed=3), model_id=MODEL, actor="t")
        assert count(url, POSTINGS_DRIFT) == 0
        apply_edits(
            store,
            ms,
            edits,
            edit=lambda n: {
                "content": f"{_WORDS[n % len(_WORDS)]} rewritten {_WORDS[n % len(_WORDS)]}",
                "tags": ("x",),
            },
        )
        assert count(url, POSTINGS_DRIFT) == 0
        for flt in (Filter(agent="agent-1"), Filter(agent="agent-2", include_shared=False), Filter(agent=None)):
            found = [(c.id, c.score) for c in store.search.keyword_candidates(["alpha", "violin"], flt, limit=10)]
            assert found == bm25_reference(store, url, ["alpha", "violin"], flt, 10)


def test_a_store_made_before_the_step_migrates_in_place(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"{_WORDS[i % 6]} old note {i} {_WORDS[i % 6]}", agent=f"a{i % 3}") for i in range(60)]
    old_store(url, step=10, memories=ms, vectors=unit_vectors(60, seed=12), model=MODEL)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('memory_terms')").fetchone() == (None,)
    with open_postgres(url) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            # Every memory's lexemes: its word twice, "old", "note" and its number.
            assert conn.execute("SELECT count(*), sum(tf), min(dl), max(dl) FROM memory_terms").fetchone() == (
                240,
                300,
                5,
                5,
            )
        written_on(store, url, ms)


def test_a_term_ranks_its_newest_postings_of_the_reader(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [memory(f"deploy step {i} ran", agent=AGENTS[i % 3], at=NOW + timedelta(seconds=i)) for i in range(90)]
        store.memories.add(ms, None, model_id=MODEL, actor="t")
        search = store.search
        assert isinstance(search, PgSearch)
        search.term_postings = 7
        found = search.keyword_candidates(["deploy"], Filter(agent="agent-1", include_shared=False), limit=50)
        assert [c.id for c in found] == [m.id for m in ms if m.agent == "agent-1"][-7:]


@pytest.fixture(scope="module")
def scratch(postgres_server: PgServer) -> str:
    return postgres_server.new_database()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lexemes=st.lists(
        st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=12),
        min_size=1,
    )
)
def test_a_query_of_stems_matches_exactly_them(scratch: str, lexemes: list[str]) -> None:
    with psycopg.connect(scratch, autocommit=True) as conn:
        query = tsquery_text(lexemes)
        row = conn.execute(
            "SELECT bool_and(array_to_tsvector(ARRAY[x]) @@ %s::tsquery), "
            "array_to_tsvector(ARRAY['zz-none-of-them']) @@ %s::tsquery FROM unnest(%s::text[]) x",
            (query, query, lexemes),
        ).fetchone()
    assert row == (True, "zz-none-of-them" in lexemes)


def test_a_readers_keyword_statement_runs_on_a_generic_plan(analysed: Any) -> None:
    """Prepared and planned once for any values (the search's answers are checked against BM25 above); without a
    reader, planned for its values; the mode never stays on the pooled connection."""
    url, _ = analysed
    with open_postgres(url, pool_size=1) as store:  # one connection: its prepared statements are the searches'
        _count_generic(store)


def _count_generic(store: Store) -> None:
    search = store.search
    assert isinstance(search, PgSearch)

    def generic_plans() -> int:
        with search._backend.reading() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)
            row = conn.execute("SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements").fetchone()
        assert row is not None
        return int(row[0])

    before = generic_plans()
    for words in (["alpha"], ["beta", "harbor"], ["violin"]):
        search.keyword_candidates(words, Filter(agent="agent-1"), limit=5)
    after = generic_plans()
    assert after >= before + 3
    search.keyword_candidates(["alpha"], Filter(agent=None), limit=5)
    assert generic_plans() == after

"""The keyword channel's term frequencies on PostgreSQL come from a sample of the store (``_pg_terms``), on a real
server: rare words the planner's statistics do not list are told apart, and the rarest one selects the rows ranked
from their ``tsv`` (a search over every agent, and other agents' open rows; a reader's own rows are ranked from the
postings, test_pg_memory_terms.py).
"""

from __future__ import annotations

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import PgServer
from storage_helpers import MODEL, memory

from engramdb.storage._pg_terms import LexemeSample
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres

_COMMON = [f"filler{chr(97 + i)}" for i in range(15)]


def _analyze(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def test_the_rarest_unlisted_word_selects_the_rows_ranked(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        # The planner lists at most 10 lexemes at this statistics target: the fillers fill the list, so both words
        # below are unlisted and look equally common to it (its least common listed frequency).
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE memories ALTER COLUMN tsv SET STATISTICS 1")
        fillers = [memory(" ".join(_COMMON) + f" row {i}") for i in range(120)]
        commoner = [memory(f"alpha notes {i}") for i in range(40)]
        rare = [memory(f"omega notes {i}") for i in range(4)]
        store.memories.add([*fillers, *commoner, *rare], None, model_id=MODEL, actor="t")
    _analyze(url)
    with open_postgres(url, keyword_rank_rows=20) as store:  # fresh: statistics are cached a minute
        found = store.search.keyword_candidates(["alpha", "omega"], Filter(agent=None), limit=10)
        sample = store.search.lexemes.last  # type: ignore[attr-defined]
    # "alpha" comes first in the question, but "omega" is rarer: only its rows are selected (40 alpha rows are over
    # the budget of 20; ranked by the planner's tie, they were the newest 20 alpha rows).
    assert {c.id for c in found} == {m.id for m in rare}
    assert sample is not None


def test_a_sample_counts_each_lexeme_and_scales_to_the_table(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [memory(f"kiwi plum {i}" if i % 4 == 0 else f"plum {i}") for i in range(200)]
        store.memories.add(ms, None, model_id=MODEL, actor="t")
        backend = store.search._backend  # type: ignore[attr-defined]
        # Above ``inline_rows`` the sample is taken on a worker thread: none until it is done.
        sample = LexemeSample(backend.reading, inline_rows=10)
        with backend.reading() as conn:
            assert sample.current(conn, 200.0) is None
            assert sample.wait(30)
            taken = sample.current(conn, 200.0)
            assert taken is not None
            # The whole table is sampled at this size: exact counts; an unseen lexeme is rarer than any seen.
            assert taken.sampled == 200
            assert taken.rows("plum") == 200
            assert taken.rows("kiwi") == 50
            assert 0 < taken.rows("durian") < taken.rows("kiwi")
            # Not taken again until the table moved by a fifth.
            assert sample.current(conn, 230.0) is taken


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(st.integers(min_value=1, max_value=30), min_size=2, max_size=4),
    budget=st.integers(min_value=1, max_value=40),
)
def test_selected_rows_always_match_the_rarest_term(postgres_server: PgServer, counts: list[int], budget: int) -> None:
    url = postgres_server.new_database()
    words = [f"word{chr(97 + i)}" for i in range(len(counts))]
    ms = [memory(f"{w} entry {j}") for w, n in zip(words, counts, strict=True) for j in range(n)]
    with open_postgres(url) as store:
        store.memories.add(ms, None, model_id=MODEL, actor="t")
    _analyze(url)
    with open_postgres(url, keyword_rank_rows=budget) as store:
        found = store.search.keyword_candidates(words, Filter(agent=None), limit=200)
    by_id = {m.id: m for m in ms}
    rarest = min(counts)
    holders = {w for w, n in zip(words, counts, strict=True) if n == rarest}
    texts = [by_id[c.id].content for c in found]
    # The rarest word's rows are always among the candidates (up to the budget when even it is over).
    assert sum(t.split()[0] in holders for t in texts) >= min(rarest, budget)
    # What is selected stays within the budget, except that the rarest word always selects; a word seen once in the
    # sample is estimated at half a row (rarer than any seen twice), so each such word may overshoot by half.
    ones = sum(n == 1 for n in counts)
    assert len(found) <= max(budget, rarest) + 0.5 * ones

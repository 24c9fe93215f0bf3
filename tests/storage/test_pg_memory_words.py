"""The keyword channel's narrow table on PostgreSQL (schema step 8, ``memory_words``): kept in step with ``memories``
by every write (batch adds, edits, supersession, forgetting), answers what the wide table answers, checked by the
store's doctor, and a store made before the step migrates in place."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import EDITS, PgServer, apply_edits, count, old_store
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.storage import _pg_schema
from engramdb.storage.base import Candidate, Filter
from engramdb.storage.postgres import open_postgres

_WORDS = ("alpha", "beta", "gamma", "delta", "harbor", "violin")
# The copy of each memory's keyword columns against the memory itself: rows of either side without the other, or
# whose columns differ.
_DRIFT = (
    "SELECT count(*) FROM memories m FULL JOIN memory_words w ON w.rid = m.rid WHERE m.rid IS NULL OR w.rid IS NULL "
    "OR (w.agent, w.kind, w.user_id, w.valid_until, w.tsv) IS DISTINCT FROM (m.agent, m.kind, m.user_id, "
    "m.valid_until, m.tsv)"
)


def _drift(url: str) -> int:
    return count(url, _DRIFT)


def _wide(url: str, terms: list[str], flt: Filter, limit: int) -> list[tuple[str, float]]:
    """The keyword answers as the store gave them before step 8: every arm ranked from ``memories``."""
    with open_postgres(url) as store, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE memory_words RENAME TO memory_words_aside")
        conn.execute("CREATE VIEW memory_words AS SELECT rid, agent, kind, user_id, valid_until, tsv FROM memories")
        try:
            return [(c.id, c.score) for c in store.search.keyword_candidates(terms, flt, limit=limit)]
        finally:
            conn.execute("DROP VIEW memory_words")
            conn.execute("ALTER TABLE memory_words_aside RENAME TO memory_words")


def _ids(found: list[Candidate]) -> list[tuple[str, float]]:
    return [(c.id, c.score) for c in found]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4), min_size=4, max_size=24),
    edits=EDITS,
)
def test_every_write_keeps_the_narrow_copy_in_step(
    postgres_server: PgServer, texts: list[list[str]], edits: list[tuple[int, str]]
) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [
            memory(" ".join(words), agent=f"agent-{i % 3}", tags=(words[0],), user=f"u{i % 2}",
                   at=NOW + timedelta(seconds=i))
            for i, words in enumerate(texts)
        ]  # fmt: skip
        store.memories.add(ms, unit_vectors(len(ms), seed=3), model_id=MODEL, actor="t")
        assert _drift(url) == 0
        apply_edits(
            store, ms, edits, edit=lambda n: {"content": f"{_WORDS[n % len(_WORDS)]} rewritten", "tags": ("violin",)}
        )
        assert _drift(url) == 0
        assert store.checks.keyword_index() == []
        for flt in (Filter(agent="agent-1"), Filter(agent="agent-2", include_shared=False), Filter(agent=None)):
            got = _ids(store.search.keyword_candidates(["alpha", "violin"], flt, limit=10))
            assert got == _wide(url, ["alpha", "violin"], flt, 10)


def test_the_narrow_table_answers_as_the_wide_one_under_every_filter_form(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [
            memory(f"{_WORDS[i % 6]} {_WORDS[(i * 7) % 6]} note {i}", agent=f"agent-{i % 4}",
                   kind="episode" if i % 5 == 0 else "knowledge", tags=("t1",) if i % 3 == 0 else (),
                   user=f"u{i % 3}", session=f"s{i % 2}", visibility="public" if i % 11 == 0 else "private",
                   at=NOW + timedelta(seconds=i))
            for i in range(300)
        ]  # fmt: skip
        store.memories.add(ms, unit_vectors(300, seed=5), model_id=MODEL, actor="t")
        store.shares.share([ms[1].id], from_agent="agent-1", to_agent="agent-0", at=NOW + timedelta(days=1))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        filters = [
            Filter(agent="agent-0"),
            Filter(agent="agent-0", kinds=("episode",)),
            Filter(agent="agent-0", users=("u1",)),
            Filter(agent="agent-0", tags=("t1",)),  # a column only memories holds: joined
            Filter(agent="agent-0", sessions=("s1",), include_shared=False),
            Filter(agent="agent-3", superseded=True),
            Filter(agent=None, kinds=("knowledge",)),
        ]
        for flt in filters:
            for terms in (["alpha"], ["harbor", "violin"], ["note"]):
                got = _ids(store.search.keyword_candidates(terms, flt, limit=15))
                assert got == _wide(url, terms, flt, 15), (flt, terms)
        seen = {c.id for c in store.search.keyword_candidates(["note"], filters[0], limit=300)}
        assert ms[1].id in seen  # shared with agent-0
        assert ms[11].id in seen  # public


def test_the_doctor_finds_a_narrow_copy_out_of_step(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [memory(f"harbor note {i}") for i in range(5)]
        store.memories.add(ms, None, model_id=MODEL, actor="t")
        assert store.checks.keyword_index() == []
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM memory_words WHERE rid = (SELECT min(rid) FROM memory_words)")
        assert store.checks.keyword_index() == ["1 memories have a keyword copy (memory_words) out of step"]


@pytest.mark.parametrize("step", [4, 7])
def test_a_store_made_before_the_narrow_table_migrates_in_place(postgres_server: PgServer, step: int) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"{_WORDS[i % 6]} old note {i}", agent=f"a{i % 3}") for i in range(60)]
    old_store(url, step=step, memories=ms, vectors=unit_vectors(60, seed=12), model=MODEL)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('memory_words')").fetchone() == (None,)
    with open_postgres(url) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            assert conn.execute("SELECT count(*) FROM memory_words").fetchone() == (60,)
            assert conn.execute("SELECT to_regclass('memories_agent_tsv')").fetchone() == (None,)
        assert _drift(url) == 0
        old = {c.id for c in store.search.keyword_candidates(["harbor"], Filter(agent="a1"), limit=50)}
        assert old == {m.id for i, m in enumerate(ms) if i % 6 == 4 and i % 3 == 1}
        new = memory("harbor written after the step", agent="a1")
        store.memories.add([new], None, model_id=MODEL, actor="t")
        found = store.search.keyword_candidates(["harbor"], Filter(agent="a1"), limit=50)
        assert {c.id for c in found} == old | {new.id}
        assert _drift(url) == 0

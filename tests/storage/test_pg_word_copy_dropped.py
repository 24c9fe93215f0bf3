"""Schema step 12 on PostgreSQL: the narrow keyword copy ``memory_words`` (step 8) is gone, the triggers keep the
postings (``memory_terms``) alone. A store at step 11 holding data migrates with nothing lost (its postings and every
keyword answer identical before and after); an update rewrites postings only when the words or the agent change; the
store's doctor finds postings out of step; stores made before step 8 migrate through it. (The step-11 code's answers
are not taken here: this code migrates any store it opens; its answers after the step are checked against BM25
computed in Python, and what they are read from against the store before the step.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from pg_server import POSTINGS_DRIFT, PgServer, bm25_reference, count, old_store, schema_at, written_on
from storage_helpers import MODEL, NOW, memory, unit_vectors

from engramdb.models import Memory
from engramdb.storage import _pg_schema
from engramdb.storage.base import Filter, Store
from engramdb.storage.postgres import PgSearch, open_postgres

_WORDS = ("alpha", "beta", "gamma", "delta", "harbor", "violin")
_POSTINGS = "SELECT agent, lexeme, rid, tf, dl FROM memory_terms ORDER BY agent, lexeme, rid"
_MEMORIES = "SELECT rid, id, agent, kind, user_id, valid_until, visibility, tsv FROM memories ORDER BY rid"
_FILTERS = (
    Filter(agent="agent-0"),
    Filter(agent="agent-0", kinds=("episode",)),
    Filter(agent="agent-1", users=("u1",)),
    Filter(agent="agent-2", include_shared=False),
    Filter(agent="agent-3", superseded=True),
    Filter(agent=None),
)
_QUESTIONS = (["alpha"], ["harbor", "violin"], ["note"], ["gamma", "delta", "nothing"])


def _memories(n: int) -> list[Memory]:
    return [
        memory(f"{_WORDS[i % 6]} {_WORDS[(i * 7) % 6]} note {i} " + "harbor " * (i % 3), agent=f"agent-{i % 4}",
               kind="episode" if i % 5 == 0 else "knowledge", user=f"u{i % 3}",
               visibility="public" if i % 11 == 0 else "private", at=NOW + timedelta(seconds=i))
        for i in range(n)
    ]  # fmt: skip


def _answers(store: Store) -> list[list[tuple[str, float]]]:
    return [
        [(c.id, c.score) for c in store.search.keyword_candidates(q, flt, limit=20)]
        for flt in _FILTERS
        for q in _QUESTIONS
    ]


def _step_11_store(url: str, ms: Sequence[Memory]) -> None:
    """A store left at step 11 by that release's own code: its rows written through its triggers (memory_words and
    memory_terms), then edited, superseded, forgotten and shared."""
    with psycopg.connect(url, autocommit=True) as conn:
        schema_at(conn, 11)
    with psycopg.connect(url, autocommit=True) as conn:
        for m in ms:
            created = m.created_at.isoformat(timespec="microseconds")
            conn.execute(
                "INSERT INTO memories (id, agent, kind, content, user_id, created_at, updated_at, occurred_at, "
                "visibility) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (m.id, m.agent, m.kind, m.content, m.user, created, created, created, m.visibility),
            )
        conn.execute("UPDATE memories SET content = 'violin rewritten ' || rid WHERE rid % 13 = 1")
        conn.execute("UPDATE memories SET valid_until = '2026-01-01T00:00:00.000000+00:00' WHERE rid % 17 = 2")
        conn.execute("DELETE FROM memories WHERE rid % 19 = 3")
        conn.execute(
            "INSERT INTO shares (memory_id, from_agent, to_agent, shared_at) SELECT id, agent, 'agent-0', created_at "
            "FROM memories WHERE rid % 7 = 0 AND agent <> 'agent-0'"
        )
        conn.execute("ANALYZE")
        assert conn.execute("SELECT count(*) FROM memory_words").fetchone() == (len(ms) - len(range(3, len(ms), 19)),)


def test_a_step_11_store_migrates_with_nothing_lost(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = _memories(240)
    _step_11_store(url, ms)
    assert count(url, POSTINGS_DRIFT) == 0
    with psycopg.connect(url, autocommit=True) as conn:
        postings_before = conn.execute(_POSTINGS).fetchall()
        memories_before = conn.execute(_MEMORIES).fetchall()
    with open_postgres(url) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            assert conn.execute("SELECT to_regclass('memory_words')").fetchone() == (None,)
            assert conn.execute(
                "SELECT count(*) FROM pg_proc WHERE proname LIKE 'engram_memory_words_%'"
            ).fetchone() == (0,)
            # What the keyword channel reads is untouched: every posting, every memory's words and filter columns.
            assert conn.execute(_POSTINGS).fetchall() == postings_before
            assert conn.execute(_MEMORIES).fetchall() == memories_before
        _sampled(store)
        answers = _answers(store)
        assert any(answers)
        assert answers == [bm25_reference(store, url, q, flt, 20) for flt in _FILTERS for q in _QUESTIONS]
        # The triggers go on keeping the postings: a write of each kind after the step.
        new = memory("harbor written after the step", agent="agent-1")
        store.memories.add([new], None, model_id=MODEL, actor="t")
        store.memories.update(ms[5].id, {"content": "gamma rewritten after"}, vector=None, model_id=MODEL, actor="t",
                              at=NOW + timedelta(days=3))  # fmt: skip
        store.memories.delete(ms[6].id, actor="t", at=NOW + timedelta(days=3))
        assert count(url, POSTINGS_DRIFT) == 0
        found = {c.id for c in store.search.keyword_candidates(["harbor"], Filter(agent="agent-1"), limit=300)}
        assert new.id in found
        assert store.checks.keyword_index() == []


def _sampled(store: Store) -> None:
    """Take the store's lexeme sample now (the document counts both the channel and the reference weigh by)."""
    search = store.search
    assert isinstance(search, PgSearch)
    with search._backend.reading() as conn:  # type: ignore[attr-defined]
        search.lexemes.current(conn, search._terms.total_rows(conn))
    assert search.lexemes.last is not None


def test_an_update_rewrites_postings_only_when_the_words_or_the_agent_change(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = _memories(12)
        store.memories.add(ms, None, model_id=MODEL, actor="t")
    with psycopg.connect(url) as conn:

        def postings_written(change: str) -> int:
            """Postings inserted and deleted by ``change`` (this transaction's own counters, exact)."""
            with conn.transaction(force_rollback=True):
                conn.execute(change)
                row = conn.execute(
                    "SELECT n_tup_ins + n_tup_del FROM pg_stat_xact_user_tables WHERE relname = 'memory_terms'"
                ).fetchone()
            assert row is not None
            return int(row[0])

        rid = "(SELECT min(rid) FROM memories)"
        assert postings_written(f"UPDATE memories SET kind = 'decision' WHERE rid = {rid}") == 0
        assert postings_written(f"UPDATE memories SET valid_until = '2027-01-01', user_id = 'u' WHERE rid = {rid}") == 0
        assert postings_written(f"UPDATE memories SET content = content WHERE rid = {rid}") == 0
        assert postings_written(f"UPDATE memories SET access_count = access_count + 1 WHERE rid = {rid}") == 0
        assert postings_written(f"UPDATE memories SET content = 'violin harbor' WHERE rid = {rid}") > 0
        assert postings_written(f"UPDATE memories SET tags = '[\"violin\"]' WHERE rid = {rid}") > 0
        assert postings_written(f"UPDATE memories SET agent = 'agent-9' WHERE rid = {rid}") > 0
    assert count(url, POSTINGS_DRIFT) == 0


def test_the_doctor_finds_postings_out_of_step(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store:
        ms = [memory(f"harbor note {i} " + "violin " * i, agent=f"a{i % 2}") for i in range(6)]
        store.memories.add([*ms, memory("the and of", agent="a0")], None, model_id=MODEL, actor="t")  # no words: none
        assert store.checks.keyword_index() == []
        first = "(SELECT min(rid) FROM memories)"
        breaks: list[tuple[str, Any]] = [
            # One posting gone; one memory's postings all gone; a posting under another agent; a count changed.
            (f"DELETE FROM memory_terms WHERE (rid, lexeme) = ({first}, 'harbor')", 1),
            (f"DELETE FROM memory_terms WHERE rid = {first} + 1", 2),
            (f"UPDATE memory_terms SET agent = 'a9' WHERE (rid, lexeme) = ({first} + 2, 'note')", 3),
            (f"UPDATE memory_terms SET tf = tf + 1 WHERE (rid, lexeme) = ({first} + 3, 'violin')", 4),
            ("INSERT INTO memory_terms VALUES ('a0', 'ghost', 999999, 1, 1)", 5),
        ]  # fmt: skip
        for change, broken in breaks:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(change)
            found = store.checks.keyword_index()
            assert found == [f"{broken} memories have keyword postings (memory_terms) out of step"]


@pytest.mark.parametrize("step", [4, 7, 10])
def test_a_store_made_before_the_narrow_table_migrates_in_place(postgres_server: PgServer, step: int) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"{_WORDS[i % 6]} old note {i}", agent=f"a{i % 3}") for i in range(60)]
    old_store(url, step=step, memories=ms, vectors=unit_vectors(60, seed=12), model=MODEL)
    with open_postgres(url) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            assert conn.execute("SELECT to_regclass('memory_words')").fetchone() == (None,)
            assert conn.execute("SELECT to_regclass('memories_agent_tsv')").fetchone() == (None,)
        written_on(store, url, ms)

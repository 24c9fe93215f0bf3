"""The keyword indexes' pending lists on PostgreSQL (``_pg_analyze``): the writers merge what they add (the store's
connections set ``gin_pending_list_limit``), so a burst of writes never leaves a search scanning more than about the
limit's pages, and the searching process's statistics thread merges only what a trickle of writes left, between
bursts, not during them. Nothing is lost in either merge."""

from __future__ import annotations

import time

import psycopg
from hypothesis import given
from hypothesis import strategies as st
from pg_server import PgServer
from storage_helpers import MODEL, memory

from engramdb.storage._pg_analyze import _CLEAN_AFTER, PENDING_LIST_LIMIT, clean_due
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres

_INDEXES = "ARRAY['memories_tsv']"
# GIN merges once the pending pages' free space passes the limit (in MB here) over ~8 kB pages.
assert PENDING_LIST_LIMIT.endswith("MB")
_LIMIT_PAGES = int(PENDING_LIST_LIMIT[:-2]) * 1024 * 1024 // 8000 + 1
# Memories written: about two and a half limits' worth of entries (~0.125 pending pages a memory here).
_BATCHES = _LIMIT_PAGES * 20 // 200 + 1

_VOCAB = [f"w{n:03d}x" for n in range(600)]


def _text(i: int) -> str:
    """A turn of 40 distinct words (each memory's index entries fill ~a fifth of a pending page)."""
    return " ".join(_VOCAB[(i * 7 + k * 13) % len(_VOCAB)] for k in range(40)) + f" turn{i}"


def _pending_pages(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The pending pages of the keyword index."""
    row = conn.execute(
        f"SELECT max(p.pending_pages) FROM unnest({_INDEXES}) AS i "
        "CROSS JOIN LATERAL pgstatginindex(to_regclass(i)) p WHERE to_regclass(i) IS NOT NULL"
    ).fetchone()
    assert row is not None
    return int(row[0])


@given(
    writes=st.none() | st.integers(0, 10_000),
    cleaned=st.none() | st.integers(0, 10_000),
    looked=st.none() | st.integers(0, 10_000),
)
def test_a_merge_is_due_after_enough_writes_and_never_during_a_burst(
    writes: int | None, cleaned: int | None, looked: int | None
) -> None:
    due = clean_due(writes, cleaned_at=cleaned, looked_at=looked)
    if writes is None:
        assert not due
    elif cleaned is None or writes < cleaned:
        assert due  # a process's first look, or a counter reset
    elif looked is not None and looked <= writes and writes - looked >= _CLEAN_AFTER:
        assert not due  # a burst since the previous look: its writers merge their own entries
    else:
        assert due == (writes - cleaned >= _CLEAN_AFTER)


def test_writers_merge_their_own_entries_past_the_limit(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        conn.execute("ALTER TABLE memories SET (autovacuum_enabled = off)")  # autovacuum would merge them too
        with store.search._backend.reading() as raw:  # type: ignore[attr-defined]  # a pooled connection
            assert raw.execute("SHOW gin_pending_list_limit").fetchone() == (PENDING_LIST_LIMIT,)
        most = 0
        for b in range(_BATCHES):
            batch = [memory(_text(b * 200 + i), agent=f"agent-{i % 4}") for i in range(200)]
            store.memories.add(batch, None, model_id=MODEL, actor="t")
            most = max(most, _pending_pages(conn))
        # Several limits' worth of entries: merged along the way, never past the limit and a row's.
        assert 0 < most <= _LIMIT_PAGES + 2
        # A session with a higher limit leaves more than that bound waiting for a search to scan.
        conn.execute("SELECT gin_clean_pending_list(to_regclass(i)) FROM unnest(" + _INDEXES + ") AS i")
        conn.execute("SET gin_pending_list_limit = '64MB'")
        conn.execute(
            "INSERT INTO memories (id, agent, kind, content, created_at, updated_at) "
            "SELECT 'raw-' || g, 'agent-0', 'conversation', 'w001x w002x w003x ' || 'z' || g || ' ' "
            "|| (SELECT string_agg('v' || g || '_' || k, ' ') FROM generate_series(1, 40) k), '2026-01-01', "
            "'2026-01-01' FROM generate_series(1, %s) g",
            (_LIMIT_PAGES * 16,),
        )
        assert _pending_pages(conn) > _LIMIT_PAGES + 2
        # Nothing lost in the writers' merges: every memory is found by its own word.
        for i in (0, 777, _BATCHES * 200 - 1):
            found = store.search.keyword_candidates([f"turn{i}"], Filter(agent=f"agent-{i % 200 % 4}"), limit=5)
            assert [c.memory.content for c in found] == [_text(i)]


def test_the_statistics_thread_merges_after_a_burst_not_during_it(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url) as store, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        conn.execute("ALTER TABLE memories SET (autovacuum_enabled = off)")
        keeper = store.search.statistics  # type: ignore[attr-defined]

        def look() -> None:
            # Statistics reach the write counters within a second of the writing transaction's end.
            time.sleep(1.5)
            keeper._next_check = 0.0  # type: ignore[attr-defined]  # do not wait the check interval out
            store.search.keyword_candidates(["w001x"], Filter(agent="agent-0"), limit=5)
            assert keeper.wait(timeout=60)

        look()  # a process's first look merges once
        burst = [memory(_text(i), agent=f"agent-{i % 4}") for i in range(2 * _CLEAN_AFTER)]
        store.memories.add(burst, None, model_id=MODEL, actor="t")
        left = _pending_pages(conn)
        assert left > 0
        look()  # the burst's writers merge their own: the searching process does not
        assert _pending_pages(conn) == left
        look()  # the burst is over: what it left is merged
        assert _pending_pages(conn) == 0
        found = store.search.keyword_candidates(["turn777"], Filter(agent="agent-1"), limit=5)
        assert [c.memory.content for c in found] == [_text(777)]

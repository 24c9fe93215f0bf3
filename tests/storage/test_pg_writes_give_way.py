"""Bulk writes give way to searches on PostgreSQL (``_pg_giveway``): while another session's read is at work, a
``remember_many`` batch first waits up to ``pg_writes_yield`` of its previous batch's time (capped), ending early
once the reads pause; never without reads, never for a single memory or inside a caller's transaction, never for
the writers' own near-duplicate lookups. Nothing is lost: every memory is stored, audited, with its vector."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from pg_server import PgServer, Read, fold_staged
from storage_helpers import MODEL, memory, unit_vectors

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.errors import ConfigError
from engramdb.storage._pg_giveway import WAIT_MAX
from engramdb.storage._pg_staging import WRITE_READ, reads_at_work
from engramdb.storage.postgres import open_postgres

LIMIT = 60.0


def _seen(url: str, *, lookups: bool) -> None:
    began = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        while reads_at_work(conn, lookups=lookups) == 0:
            assert time.monotonic() - began < LIMIT, "the read was never seen"
            time.sleep(0.02)


def _store(url: str, share: float) -> Any:
    return open_postgres(url, settings=load_settings({}, pg_vector_mover=False, pg_writes_yield=share))


def test_a_bulk_write_waits_its_share_while_a_read_runs_and_not_without(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with _store(url, 0.5) as store:
        assert store.give_way(2.0) == 0.0  # no read at work: no wait
        with Read(url, 30):
            _seen(url, lookups=False)
            waited = store.give_way(2.0)
            assert 0.9 <= waited < 1.9  # half of the previous write's 2 s, not the read's 30 s
            assert store.give_way(100.0) >= WAIT_MAX - 0.1  # capped at WAIT_MAX, not 50 s
            with store.atomic():
                assert store.give_way(2.0) == 0.0  # inside a transaction: never (it may hold locks)
    with _store(url, 0.0) as store, Read(url, 30):
        _seen(url, lookups=False)
        assert store.give_way(2.0) == 0.0  # pg_writes_yield 0: writes never wait


def test_the_wait_ends_once_the_reads_pause(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with _store(url, 1.0) as store:
        read = Read(url, 30)
        _seen(url, lookups=False)
        threading.Timer(0.5, read.end).start()
        waited = store.give_way(WAIT_MAX)
        assert 0.5 <= waited < WAIT_MAX - 1.0  # the read ended after 0.5 s, the quiet period after it


def test_writers_lookups_and_waiting_writes_are_no_reads_to_give_way_to(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with _store(url, 1.0) as store:
        with Read(url, 30, text=WRITE_READ):
            _seen(url, lookups=True)  # the mover still counts a writer's lookup ...
            assert store.give_way(2.0) == 0.0  # ... a bulk write does not
        with _store(url, 1.0) as other, Read(url, 30):
            _seen(url, lookups=False)
            # Two writers waiting at once: each sees the read, neither sees the other's look as one.
            results: list[float] = []
            thread = threading.Thread(target=lambda: results.append(other.give_way(1.0)))
            thread.start()
            mine = store.give_way(1.0)
            thread.join(LIMIT)
            assert mine >= 0.9
            assert results[0] >= 0.9


def test_remember_many_gives_way_for_a_share_of_its_previous_batch_and_loses_nothing(
    postgres_server: PgServer,
) -> None:
    url = postgres_server.new_database()
    settings = load_settings({}, pg_writes_yield=0.5, vectors="sync")
    with Engram(url, settings=settings) as mem:
        store = mem._pipeline._store  # type: ignore[attr-defined]
        asked: list[tuple[float, float]] = []
        real = store._give_way

        def spy(seconds: float) -> float:  # the real wait, with what it was asked and did
            waited = float(real(seconds))
            asked.append((seconds, waited))
            return waited

        object.__setattr__(store, "_give_way", spy)
        mem.remember_many([{"content": f"first note {i}", "agent": "a"} for i in range(5)])
        mem.remember("a single memory never waits", agent="a")
        with Read(url, 30):
            _seen(url, lookups=False)
            written = mem.remember_many([{"content": f"second note {i}", "agent": "a"} for i in range(5)])
        # The first batch had no previous one; the second was offered the first's time and waited half of it.
        assert len(asked) == 2
        assert asked[0] == (0.0, 0.0)
        previous, waited = asked[1]
        assert previous > 0
        assert waited == pytest.approx(0.5 * previous, abs=0.15)
        assert all(mem.get(m.id).content == m.content for m in written)
        assert mem.audit.verify()
    fold_staged(url)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM vectors").fetchone()
        assert row is not None
        assert row[0] == 11


def test_the_setting_is_validated() -> None:
    assert load_settings({}).pg_writes_yield == 0.5
    assert load_settings({"ENGRAM_PG_WRITES_YIELD": "0"}).pg_writes_yield == 0.0
    for bad in ("-1", "11", "lots"):
        with pytest.raises(ConfigError):
            load_settings({"ENGRAM_PG_WRITES_YIELD": bad})


def test_sqlite_never_waits(tmp_path: Any) -> None:
    from engramdb.storage.sqlite import open_sqlite

    with open_sqlite(tmp_path / "m.db") as store:
        store.memories.add([memory("x")], unit_vectors(1, seed=3), model_id=MODEL, actor="t")
        assert store.give_way(5.0) == 0.0


def test_a_client_searching_without_pause_is_seen_between_its_statements(postgres_server: PgServer) -> None:
    """Its statements come with short gaps (its own work on the hits), in which one look would find no read."""
    url = postgres_server.new_database()
    stop = threading.Event()

    def searches() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                conn.execute("SELECT pg_sleep(0.06)")
                time.sleep(0.015)

    thread = threading.Thread(target=searches)
    thread.start()
    try:
        _seen(url, lookups=False)
        with _store(url, 1.0) as store:
            waits = [store.give_way(0.3) for _ in range(12)]
            assert min(waits) > 0.25, waits
    finally:
        stop.set()
        thread.join(LIMIT)

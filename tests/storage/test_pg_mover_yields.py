"""The vector mover yields to reads (``_pg_staging``): while another session's read is at work on the store's database
the staged vectors stay staged (searchable exactly), and they are folded once the reads end, after ``yield_max``
seconds of reads without pause, or at once past the high water. Writers and lock waiters are not reads."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from pg_server import PgServer, Read, fold_staged
from storage_helpers import MODEL, memory, unit_vectors

from engramdb.config import load_settings
from engramdb.storage._pg_schema import LOCK_MOVER
from engramdb.storage._pg_staging import _READS_GONE, QUIET, StagedMover, reads_at_work, staged_rows
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres

LIMIT = 60.0
NO_MOVER = load_settings({}, pg_vector_mover=False)
Raw = psycopg.Connection[tuple[Any, ...]]


def _staged_store(url: str, n: int) -> list[Any]:
    """A store with ``n`` vectors staged (the model's graph made by a first, folded one); the memories."""
    ms = [memory(f"note {i}", agent=f"a{i % 3}") for i in range(n + 1)]
    vecs = unit_vectors(n + 1, seed=21)
    with open_postgres(url, settings=NO_MOVER) as store:
        store.memories.add(ms[:1], vecs[:1], model_id=MODEL, actor="t")
        fold_staged(url)
        store.memories.add(ms[1:], vecs[1:], model_id=MODEL, actor="t")
    return ms


def _connections(url: str) -> Any:
    @contextmanager
    def connect() -> Iterator[Raw]:
        with psycopg.connect(url, autocommit=True) as conn:
            yield conn

    return connect


def _until(condition: Any, what: str) -> float:
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > LIMIT:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return time.monotonic() - began


def _staged(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return staged_rows(conn)


def test_reads_at_work_counts_reads_not_writers_lock_waiters_or_other_databases(postgres_server: PgServer) -> None:
    url, other = postgres_server.new_database(), postgres_server.new_database()
    _staged_store(url, 3)
    with psycopg.connect(url, autocommit=True) as look:
        assert reads_at_work(look) == 0
        with Read(url, 30):
            _until(lambda: reads_at_work(look) == 1, "the read to be seen")
            with Read(other, 30), Read(url, 30, after_write=True):
                time.sleep(0.3)
                assert reads_at_work(look) == 1  # another database's read, and a writer's statement, are not
        _until(lambda: reads_at_work(look) == 0, "the read to end")
        holder = psycopg.connect(url)
        waiter = psycopg.connect(url, autocommit=True)
        try:
            holder.execute("SELECT pg_advisory_xact_lock(4242)")
            thread = threading.Thread(target=waiter.execute, args=("SELECT pg_advisory_xact_lock(4242)",))
            thread.start()
            time.sleep(0.3)
            assert reads_at_work(look) == 0  # waiting for a lock (a background write's turn) is no read at work
            holder.rollback()
            thread.join(LIMIT)
        finally:
            holder.close()
            waiter.close()


def test_the_mover_leaves_staged_vectors_while_a_read_runs_and_folds_them_after(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = _staged_store(url, 120)
    with Read(url, 30) as read:
        mover = StagedMover(_connections(url), poll=0.05, yield_max=30.0)
        try:
            # A second of its own yielding, not of the test's clock: a starved mover had not yet looked in 1.5 s.
            _until(lambda: mover.yielded >= 1.0, "the mover to yield to the read for a second")
            assert _staged(url) == 120
            assert mover.moved == 0
            with open_postgres(url, settings=NO_MOVER) as store:  # still found by meaning meanwhile
                query = unit_vectors(121, seed=21)[7]
                assert store.search.vector_candidates(query, Filter(agent=ms[7].agent), limit=1)[0].id == ms[7].id
            read.end()
            _until(lambda: _staged(url) == 0, "the mover to fold once the read ended")
            assert mover.moved == 120
        finally:
            mover.close()


def test_a_mover_yields_no_longer_than_yield_max_nor_past_the_high_water(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    _staged_store(url, 60)
    with Read(url, 60):
        mover = StagedMover(_connections(url), poll=0.05, batch=20, rest=0.0, yield_max=1.0)
        try:
            took = _until(lambda: _staged(url) == 0, "the mover to fold under reads without pause")
            # Three batches of 20, one a second or so: it yielded between them, and did not wait for the read.
            assert took >= 1.0
            assert mover.yielded >= 1.0
            assert mover.moved == 60
        finally:
            mover.close()
    url = postgres_server.new_database()
    _staged_store(url, 60)
    with Read(url, 60):
        mover = StagedMover(_connections(url), poll=0.05, batch=20, rest=0.0, high_water=50, yield_max=30.0)
        try:
            # Past the high water it folds a batch at once; under it again, it yields to the read.
            _until(lambda: mover.moved > 0, "the mover to fold past the high water")
            time.sleep(1.0)
            assert mover.moved == 20
            assert _staged(url) == 40
        finally:
            mover.close()
    # One agent's high water too (a search scans its agent's staged rows): 20 of each of 3 agents, past 15.
    url = postgres_server.new_database()
    _staged_store(url, 60)
    with Read(url, 60):
        mover = StagedMover(
            _connections(url), poll=0.05, batch=20, rest=0.0, high_water=1000, agent_high_water=15, yield_max=30.0
        )
        try:
            _until(lambda: mover.moved > 0, "the mover to fold past one agent's high water")
            time.sleep(1.0)
            assert 20 <= mover.moved <= 40  # then under it again (oldest first: each agent loses a third a batch)
            assert _staged(url) == 60 - mover.moved
        finally:
            mover.close()


@pytest.mark.parametrize("turn", [True, False], ids=["the mover at work", "a mover without the turn"])
def test_short_gaps_between_a_clients_searches_do_not_start_a_batch(postgres_server: PgServer, turn: bool) -> None:
    """A client searching without pause leaves gaps of milliseconds between statements (its own work on the hits).

    The gaps are the client's: on a loaded machine its thread may not run for longer than QUIET, and then the gap the
    server sees is a real pause the mover is right to use. So the client times each round (sent to sent again), and
    the assertion holds for a window in which every gap stayed under half QUIET; a window with a longer stall is
    watched again on a fresh store (a few times), never judged. A mover that lost the store's turn to another looks
    once a second (POLL): one look in a gap is not a pause either."""
    for _ in range(_GAP_WINDOWS):
        moved, longest = _a_window_of_short_gaps(postgres_server, turn=turn)
        if longest < QUIET / 2:
            assert moved == 0
            return
    raise AssertionError(f"the client never kept its gaps under {QUIET / 2} s in {_GAP_WINDOWS} windows")


#: Windows of searches watched at most, each on a fresh store, for one whose client was never stalled.
_GAP_WINDOWS = 5
_SEARCH_SECONDS = 0.08


def _a_window_of_short_gaps(postgres_server: PgServer, *, turn: bool) -> tuple[int, float]:
    """Two seconds (five without the turn) of a client's searches with 0.05 s gaps beside a mover: the rows it moved
    meanwhile, and the longest gap the client left (an upper bound: a round's time less the statement's own)."""
    url = postgres_server.new_database()
    _staged_store(url, 40)
    stop = threading.Event()
    rounds: list[float] = []

    def searches() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                rounds.append(time.monotonic())
                conn.execute("SELECT pg_sleep(%s)", (_SEARCH_SECONDS,))
                time.sleep(0.05)

    thread = threading.Thread(target=searches)
    holder = psycopg.connect(url)
    try:
        if turn:
            # A read surely at work at the mover's first look, and the searches begun before it ends: a mover that never
            # saw a read takes one look without one for a pause, and under load its first look could come before the
            # client's first statement (40 rows moved before any search, outside the window the client times).
            with Read(url, 30), psycopg.connect(url, autocommit=True) as look:
                _until(lambda: reads_at_work(look) == 1, "the read to be seen")
                mover = StagedMover(_connections(url), poll=0.05, yield_max=30.0)
                _until(lambda: mover._read_seen > 0, "the mover to see the read")  # type: ignore[attr-defined]
                thread.start()
                _until(lambda: reads_at_work(look) == 2, "the searches to be seen beside the read")
        else:
            # Another mover's batch holds the store's turn when this one first tries (no read at work yet): it loses
            # the turn, and looks once a second (its poll) from then on. The turn is free once it has seen the
            # searches at work (a mover that never saw a read takes one look without one for a pause).
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_MOVER,))
            mover = StagedMover(_connections(url), poll=1.0, yield_max=30.0)
            _until(lambda: not mover._turn, "the mover to try for the turn")  # type: ignore[attr-defined]
            thread.start()
            _until(lambda: mover._read_seen > 0, "the mover to see the searches")  # type: ignore[attr-defined]
            assert mover.moved == 0
            holder.rollback()
        try:
            time.sleep(2.0 if turn else 5.0)
            moved = mover.moved
            if moved == 0:
                assert _staged(url) == 40
            stop.set()
            thread.join(LIMIT)
            _until(lambda: _staged(url) == 0, "the mover to fold once the searches stopped")
        finally:
            mover.close()
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(LIMIT)
        holder.close()
    longest = max((b - a - _SEARCH_SECONDS for a, b in itertools.pairwise(rounds)), default=float("inf"))
    return moved, longest


def test_after_its_thread_stalled_one_look_finding_no_read_does_not_end_a_yield(postgres_server: PgServer) -> None:
    """The mover's looks are what it judges quiet by: a read seen, then its thread stalled past QUIET (a loaded
    machine), then a look finding none (it may fall in a gap between a client's statements): it yields on until its
    looks have found none for QUIET seconds."""
    url = postgres_server.new_database()
    _staged_store(url, 3)
    mover = StagedMover(_connections(url), poll=60.0, yield_max=30.0)
    mover.close()  # its own thread stopped: the test makes the looks
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(3):
            with Read(url, 30):
                _until(lambda: reads_at_work(conn) == 1, "the read to be seen")
                before = time.monotonic()
                assert mover._yields(conn, before)
            _until(lambda: reads_at_work(conn) == 0, "the read to end")
            time.sleep(QUIET * 2)  # the stall: no look for longer than QUIET
            began = time.monotonic()
            first = mover._yields(conn, began)
            if time.monotonic() - before < _READS_GONE:
                break
            # Past _READS_GONE since the read was seen (the test itself stalled): one look is rightly enough then.
        else:
            raise AssertionError("the test never looked within _READS_GONE of the read")
        assert first  # one fresh look: not yet quiet
        while mover._yields(conn, time.monotonic()):
            assert time.monotonic() - began < LIMIT
            time.sleep(0.05)
        assert time.monotonic() - began >= QUIET  # quiet after QUIET of looks finding none

"""New vectors of a PostgreSQL store: staged in a small table, folded into the HNSW graphs by one mover.

A vector write (the background worker's, or a checked memory's in its writer's transaction) inserts into
``vectors_staged`` (schema step 6): a plain table with no vector index, so the write costs a row, not an HNSW
insert. Searches scan the staged rows exactly beside the graphs, in the same statement
(``_pg_nearest.vector_branches``): a memory is found by meaning as soon as its vector is committed.

:class:`StagedMover` folds them into the agent-partitioned ``vectors`` and its HNSW graphs: a thread per store
instance, of which one at a time per store moves (a transaction-scoped advisory lock, so every process may run one
and a crashed one's turn passes on), in batches of up to :data:`MOVE_BATCH` rows, oldest first, grouped by agent (one
partition's graph after another). One HNSW inserter per store instead of one per writer process: 4 inserting at
once kept 2.7 sessions on the cores of a 2-core server and searches ran at 3x their idle time (bench/RESULTS.md,
issue 26). Between batches the mover rests a share of the time its batch took (:data:`REST`), and it yields to
reads: while a read is at work on the store's database (:func:`reads_at_work`, from ``pg_stat_activity``: any
process or machine's searches) it waits until none ran for :data:`QUIET` seconds, so that searches get the server's
cores and buffers during a burst of writes, with its HNSW inserts done after the burst or between searches. Neither
while the staged rows are past :data:`HIGH_WATER` (searches scan them exactly) nor for longer than
:data:`YIELD_MAX` at a time (a store searched without pause still gets its graphs). Background vector writes wait
while one agent has :data:`AGENT_CAP` vectors staged, or the store :data:`STAGED_CAP` (``background_turn``): the
exact scan each search makes of its agent's staged rows stays bounded, and what waits meanwhile is in the writer's
queue (stored, keyword-searchable).

Nothing is lost: a batch is one transaction (the staged rows deleted and the graphs' rows inserted together), so a
mover killed mid-batch, or a server crash before its commit, leaves the rows staged for the next one. A memory's
vector is in exactly one of the two tables: writers replacing a vector delete the staged row first (waiting for a
mover holding it) and then the folded one (``_memories.delete_vectors``); the mover takes the staged rows it moves
with ``SKIP LOCKED`` and the memories' key-share lock, so it never waits for a writer, and a forget waits for its
batch instead of deadlocking with it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final

import psycopg

from engramdb.errors import EngramError
from engramdb.storage._pg_schema import LOCK_MOVER

__all__ = [
    "AGENT_CAP",
    "AGENT_HIGH_WATER",
    "HIGH_WATER",
    "MOVE_BATCH",
    "OWN_LOOK",
    "QUIET",
    "REST",
    "ROOM_WAIT",
    "STAGED_CAP",
    "WRITE_READ",
    "YIELD_MAX",
    "StagedMover",
    "move_batch",
    "reads_at_work",
    "staged_load",
    "staged_rows",
    "wait_for_room",
]

log = logging.getLogger("engramdb.vectors")

Raw = psycopg.Connection[tuple[Any, ...]]

#: Most staged rows one mover transaction folds into the graphs: small enough that a mover yielding to searches
#: looks again soon (a batch at 1M memories takes ~1 s: the graphs are read from disk).
MOVE_BATCH: Final = 250
#: After a batch, the mover waits this share of the time the batch took (while staged rows stay under HIGH_WATER).
REST: Final = 0.5
#: Staged rows of one agent past which background vector writes wait for the mover (``background_turn``):
#: a search scans its agent's staged rows exactly (and others' open ones), so its cost follows the agent's count, not
#: the store's. 1,200 -> 2,400 of the reader's agent cost 2-4 ms a search (load ~20); with a cap of 12,000 for the
#: whole store (1,200 an agent over 10 agents) a burst of 4 writers at 1M filled it in ~20 s and the mover then folded
#: without yielding, 0.6 sessions during the searches (bench/RESULTS.md, issue 26, sixth and seventh rounds of writes).
AGENT_CAP: Final = 2_400
#: Staged rows of the whole store past which background vector writes wait for the mover: bounds the table and the
#: scan of other agents' open staged rows (each search reads those too) when many agents write at once.
STAGED_CAP: Final = 48_000
#: Longest a background vector write waits for room in the staging table, seconds (no mover may be at work).
ROOM_WAIT: Final = 10.0
#: Staged rows (of the store, and of one agent) past which the mover neither rests nor yields to reads.
HIGH_WATER: Final = STAGED_CAP
AGENT_HIGH_WATER: Final = AGENT_CAP
#: Longest a mover yields to reads in a row, seconds; then it folds one batch and may yield again. At 1M memories a
#: batch takes 1.4 s alone and several under load: with 5 s the mover was at work most of a burst of writes.
YIELD_MAX: Final = 30.0
#: How often a yielding mover looks whether the reads ended, seconds.
YIELD_POLL: Final = 0.02
#: Seconds without a read at work before a yielding mover folds again: a client searching without pause leaves gaps
#: of a few milliseconds between its statements (its own fusion), and a batch begun in one runs into its next search.
QUIET: Final = 0.3
#: Longest pause between two looks that still watch the same quiet period, seconds: a mover that looked longer ago (one
#: without the store's turn looks every :data:`POLL`; a thread stalled on a loaded machine) watches for :data:`QUIET`
#: seconds, looking every :data:`YIELD_POLL`, before it folds, since one look may fall in a gap between a client's
#: statements. With one look a second, the movers of 5 processes without the turn each took such a gap for quiet now
#: and then: 0.6-0.75 sessions folded during 4 writers' burst at 700k while a client searched without pause
#: (bench/RESULTS.md, issue 26, seventh round of writes).
_WATCH_GAP: Final = 0.5
#: Seconds since this mover last saw a read after which one look that finds none is quiet enough (no client is taken
#: to be searching): folding after a burst of writes without searches waits for no watch.
_READS_GONE: Final = 5.0
#: How often an idle mover looks for staged rows (another process's writes), seconds.
POLL: Final = 1.0
#: After an error (the server restarting, a lost connection), seconds before the mover tries again.
RETRY: Final = 5.0
#: How often a background write waiting for room in the staging table looks again, seconds. Each look counts the
#: staged rows, a scan of the table (4-17 ms at 12,000 staged on the loaded 2-core machine), while the mover frees
#: room a batch at a time (~1.4 s a batch at 1M): the movers' and the waiting writes' counts kept 0.11 sessions on
#: the server's cores during 4 writers' burst at 1M with a look every 0.1 s (bench/RESULTS.md, issue 26, sixth round
#: of writes).
_ROOM_POLL: Final = 0.5
#: After a batch that emptied the staging table, seconds before the next look at least.
_SETTLE: Final = 0.2
#: How often a yielding mover counts the staged rows again, seconds (the count reads the table).
_RECOUNT: Final = 0.5

# The first words of the mover's own statements (and of the staged count the background writes poll): not reads
# another mover yields to. Nor are statements starting with WRITE_READ (a batch's near-duplicate lookups, one writer's
# reads the others' writes need not wait for); both start with _OWN.
_OWN: Final = "/* engramdb "
_MOVER: Final = f"{_OWN}mover */ "
#: The first words of the reads a write makes for itself (near-duplicate lookups): not searches anything yields to.
WRITE_READ: Final = f"{_OWN}write */ "
#: The first words of the store's own upkeep (a new connection's settings and planning, the statistics' looks, ANALYZE
#: and merges, the open's prewarm): not searches a bulk write yields to. The open's warm-up runs them on several
#: connections at once, and a write right after the open would otherwise wait for its own store.
OWN_LOOK: Final = f"{_OWN}look */ "
# The rows to move, oldest first: skipped while a writer holds one (it replaces or deletes that vector) or its memory
# (a forget, which then waits for this batch rather than deadlocking on the foreign key check of the insert).
_TAKE: Final = (
    f"{_MOVER}SELECT s.memory_id FROM vectors_staged s JOIN memories m ON m.id = s.memory_id ORDER BY s.seq LIMIT %s "
    "FOR UPDATE OF s SKIP LOCKED FOR KEY SHARE OF m SKIP LOCKED"
)
# A vector replaced while its first one was being folded: the folded one goes (a memory has one vector).
_DROP_FOLDED: Final = "DELETE FROM vectors WHERE memory_id = ANY(%s::text[])"
_MOVE: Final = (
    "WITH moved AS (DELETE FROM vectors_staged WHERE memory_id = ANY(%s::text[]) "
    "RETURNING memory_id, agent, model_id, dim, embedding) "
    "INSERT INTO vectors (memory_id, agent, model_id, dim, embedding) "
    "SELECT memory_id, agent, model_id, dim, embedding FROM moved ORDER BY agent"
)


# Reads at work on this database: active statements of other sessions that have written nothing in their transaction
# (no transaction id: searches, not the writers' COPYs, which get one with their first row) and wait for no lock (the
# background vector writes waiting for their turn). Another mover's or a waiting write's look is no read. The writers'
# near-duplicate lookups (WRITE_READ) count for the mover (yielding to them only defers the graphs' inserts), not for
# writes giving way (writers waiting for one another would only slow the writes).
_READS: Final = (
    f"{_MOVER}SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND backend_xid IS NULL "
    "AND wait_event_type IS DISTINCT FROM 'Lock' AND NOT starts_with(query, %s)"
)


def reads_at_work(conn: Raw, *, lookups: bool = True) -> int:
    """How many reads other sessions are running on the store's database now (searches: see ``_READS``); with
    ``lookups=False``, not counting the writers' near-duplicate lookups."""
    row = conn.execute(_READS, (_MOVER if lookups else _OWN,)).fetchone()
    return int(row[0]) if row is not None else 0


def staged_rows(conn: Raw) -> int:
    """How many vectors are staged (not yet in the HNSW graphs)."""
    row = conn.execute(f"{_MOVER}SELECT count(*) FROM vectors_staged").fetchone()
    return int(row[0]) if row is not None else 0


def staged_load(conn: Raw) -> tuple[int, int]:
    """How many vectors are staged, and how many of them the agent with the most has (one scan of the table)."""
    row = conn.execute(
        f"{_MOVER}SELECT coalesce(sum(n), 0), coalesce(max(n), 0) "
        "FROM (SELECT count(*) AS n FROM vectors_staged GROUP BY agent) s"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def wait_for_room(conn: Raw, *, cap: int = STAGED_CAP, agent_cap: int = AGENT_CAP, timeout: float = ROOM_WAIT) -> None:
    """Return once fewer than ``cap`` vectors are staged and fewer than ``agent_cap`` of any one agent, or after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        total, most = staged_load(conn)
        if total < cap and most < agent_cap:
            return
        time.sleep(_ROOM_POLL)


def move_batch(conn: Raw, *, limit: int = MOVE_BATCH) -> int | None:
    """Fold up to ``limit`` staged vectors into ``vectors`` in one transaction on ``conn`` (autocommit mode).

    Returns how many were moved, or None when another mover holds the store's turn.
    """
    with conn.transaction():
        row = conn.execute(f"{_MOVER}SELECT pg_try_advisory_xact_lock(%s)", (LOCK_MOVER,)).fetchone()
        if row is None or not row[0]:
            return None
        # Atomic either way: lost with the commit, the rows are still staged. Not waiting for the WAL flush of the
        # HNSW inserts spares the writers' commits theirs.
        conn.execute("SET LOCAL synchronous_commit = off")
        ids = [str(r[0]) for r in conn.execute(_TAKE, (max(1, limit),)).fetchall()]
        if not ids:
            return 0
        conn.execute(_DROP_FOLDED, (ids,))
        cur = conn.execute(_MOVE, (ids,))
        return max(0, cur.rowcount)


class StagedMover:
    """A daemon thread folding the store's staged vectors into the HNSW graphs (one mover per store at a time).

    ``connection`` lends a connection of the store's pool for a batch (the process's connections stay bounded by its
    pool). :meth:`nudge` after staging rows moves them without waiting for the next poll.
    """

    def __init__(
        self,
        connection: Callable[[], AbstractContextManager[Raw]],
        *,
        batch: int = MOVE_BATCH,
        rest: float = REST,
        high_water: int = HIGH_WATER,
        agent_high_water: int = AGENT_HIGH_WATER,
        poll: float = POLL,
        yield_max: float = YIELD_MAX,
    ) -> None:
        self._connection = connection
        self._batch = max(1, batch)
        self._rest = max(0.0, rest)
        self._high_water = high_water
        self._agent_high_water = agent_high_water
        self._poll = poll
        self._yield_max = max(0.0, yield_max)
        # When this mover began yielding to the reads at work (None: it is not yielding).
        self._yielding_since: float | None = None
        # When this mover last saw a read at work, when it last looked, and since when its looks find none (None: the
        # last one found one). Quiet is QUIET seconds of looks finding none, each at most _WATCH_GAP after the one
        # before: after its thread stalled (a loaded machine), or for a mover looking once a second (without the
        # store's turn), one look falling in a gap between a client's statements would otherwise end the yield.
        self._read_seen = -_READS_GONE
        self._looked = -_READS_GONE
        self._none_since: float | None = None
        # Whether this instance had the store's turn at its last batch (it is the mover at work; at first, maybe).
        self._turn = True
        # The staged rows it last counted while yielding, with when (a count reads the table: not every poll).
        self._staged_seen = ((0, 0), -1.0)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._busy: Raw | None = None
        self._lock = threading.Lock()
        #: Rows this instance moved, and seconds it left them staged for reads at work (for tests and benchmarks).
        self.moved = 0
        self.yielded = 0.0
        # When the last step that yielded began: the time to the next step is counted, not the wait alone (a step
        # on a loaded machine takes longer than its wait, and the waits undercounted a yield of YIELD_MAX).
        self._yield_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="engramdb-vector-mover", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """Look for staged rows now (this process just staged some)."""
        self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread: a batch under way is cancelled (rolled back: its rows stay staged). Idempotent."""
        self._stopping.set()
        self._wake.set()
        with self._lock:
            conn = self._busy
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.cancel()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        # Not at once: a short-lived process (one command) would start a batch only for its close to cancel it.
        self._stopping.wait(self._poll)
        while not self._stopping.is_set():
            try:
                wait = self._step()
            except (psycopg.Error, EngramError) as exc:
                if self._stopping.is_set():
                    break
                log.debug("vector mover: %s (retrying in %.0f s)", exc, RETRY)
                wait = RETRY
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()

    def _step(self) -> float:
        """Move one batch; how long to wait before the next."""
        began = time.monotonic()
        with self._connection() as conn:
            with self._lock:
                if self._stopping.is_set():
                    return 0.0
                self._busy = conn
            try:
                yields = self._yields(conn, began)
                if self._yield_at is not None:
                    self.yielded += began - self._yield_at
                self._yield_at = began if yields else None
                if yields:
                    # Only the instance that moved last looks often (the others' movers wait for the turn anyway),
                    # and any instance watching whether the reads paused.
                    return YIELD_POLL if self._turn or self._none_since is not None else self._poll
                moved = move_batch(conn, limit=self._batch)
                self._turn = moved is not None
                self._staged_seen = ((0, 0), -1.0)
                more = bool(moved) and moved == self._batch and self._past_high_water(staged_load(conn))
            finally:
                with self._lock:
                    self._busy = None
        if not moved:
            return self._poll
        self.moved += moved
        if more:
            return 0.0
        rest = (time.monotonic() - began) * self._rest
        # After emptying the table, a moment gathers more of what a burst of writes keeps staging.
        return rest if moved == self._batch else max(rest, _SETTLE)

    def _yields(self, conn: Raw, now: float) -> bool:
        """Whether to leave the staged rows for now: its looks found a read at work, then none for less than
        :data:`QUIET` seconds of looks at most :data:`_WATCH_GAP` apart (a fresh look's time, not the step's: see
        ``_none_since``), the staged rows are under the high water, and the mover at work has not yielded for
        :data:`YIELD_MAX` in a row."""
        if self._yield_max <= 0:
            return False
        found = reads_at_work(conn) > 0
        looked = time.monotonic()
        if found:
            self._read_seen = looked
            self._none_since = None
        else:
            if self._none_since is None or looked - self._looked > _WATCH_GAP:
                self._none_since = looked
            if looked - self._none_since >= QUIET or looked - self._read_seen >= _READS_GONE:
                self._looked = looked
                self._yielding_since = None
                return False
        self._looked = looked
        if self._yielding_since is None:
            self._yielding_since = now
        elif self._turn and now - self._yielding_since >= self._yield_max:
            # One batch, then it may yield again: one batch per YIELD_MAX for the store, from the mover at work (the
            # others' movers wait for the reads to pause, or for the high water: 6 processes each folding a batch
            # every so often kept 0.75 sessions at work in the HNSW graphs during a burst of writes).
            self._yielding_since = None
            return False
        load, at = self._staged_seen
        if at < 0 or now - at >= _RECOUNT:
            load = staged_load(conn)
            self._staged_seen = (load, now)
        if load[0] == 0:
            return False
        return not self._past_high_water(load)

    def _past_high_water(self, load: tuple[int, int]) -> bool:
        """Whether ``load`` (staged rows, the most of one agent) is past the store's or one agent's high water."""
        total, most = load
        return total >= self._high_water or most >= self._agent_high_water

"""Bulk writes that give way to searches on a PostgreSQL store, for a bounded share of their own time.

On a server with few cores, a burst of ``remember_many`` batches from several processes takes the cores searches
need: searches during several writer processes ran at a multiple of their idle time even with the vector mover kept
out of the way, waiting for the writers' COPYs, the keyword indexes' upkeep and the writer processes' own Python
(bench/RESULTS.md, issue 26, fifth and sixth rounds of writes). So before a bulk write (a batch of more than one new
memory), a writer looks whether reads are at work on the store's database (:func:`~._pg_staging.reads_at_work`:
other sessions' searches, from any process or machine; not the writers' near-duplicate lookups) and, if so, waits
until none ran for :data:`~._pg_staging.QUIET` seconds, or for at most ``share`` of the time its own previous bulk
write took, whichever comes first. Writes therefore keep at least ``1 / (1 + share)`` of their rate however busy the
searches are (never starved), and the searches get the cores for the rest. A single ``remember`` never waits, nor
does a write inside a caller's transaction (it may hold locks others wait for).

Nothing is lost or reordered: the wait comes before the batch's transaction begins.
"""

from __future__ import annotations

import time
from typing import Any, Final

import psycopg

from engramdb.storage._pg_staging import QUIET, reads_at_work

__all__ = ["LOOKS", "LOOK_GAP", "POLL", "RECENT", "WAIT_MAX", "give_way"]

Raw = psycopg.Connection[tuple[Any, ...]]

#: Longest one bulk write waits for reads, seconds, whatever its previous one took.
WAIT_MAX: Final = 5.0
#: How often a waiting write looks whether the reads ended, seconds (a catalog read each time).
POLL: Final = 0.1
#: Looks before a write finds no read at work, and the pause between them, seconds: a client searching without pause
#: spends part of its time in its own code between statements, where one look would miss it (bench/RESULTS.md).
LOOKS: Final = 3
LOOK_GAP: Final = 0.01
#: Seconds after a read was last seen within which a write's wait takes the searches to go on without looking first
#: (they are looked for at every poll of the wait, which ends after :data:`~._pg_staging.QUIET` without one).
RECENT: Final = 5.0


def give_way(
    conn: Raw, *, budget: float, seen: float | None = None, quiet: float = QUIET, poll: float = POLL
) -> tuple[float, float | None]:
    """Wait while other sessions' reads are at work on ``conn``'s database, at most ``budget`` seconds (capped at
    :data:`WAIT_MAX`), returning early once none ran for ``quiet`` seconds.

    ``seen`` is when this writer last saw a read at work (``time.monotonic()``; None: never): within :data:`RECENT`
    of it, the searches are taken to go on (one look may fall in a gap between a client's statements), and the wait
    ends after ``quiet`` seconds if they did not.
    Returns the seconds waited and when a read was last seen.
    """
    budget = min(budget, WAIT_MAX)
    if budget <= 0:
        return 0.0, seen
    began = time.monotonic()
    if seen is None or began - seen >= RECENT:
        for look in range(LOOKS):
            if reads_at_work(conn, lookups=False) > 0:
                break
            if look == LOOKS - 1:
                return 0.0, seen
            time.sleep(LOOK_GAP)
    # Seen now, or taken to go on: the wait ends after a quiet period without one.
    seen = time.monotonic()
    while True:
        now = time.monotonic()
        left = budget - (now - began)
        if left <= 0 or now - seen >= quiet:
            return now - began, seen
        time.sleep(min(poll, left))
        if reads_at_work(conn, lookups=False) > 0:
            seen = time.monotonic()

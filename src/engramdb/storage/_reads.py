"""Independent reads of one store run side by side where the store allows it (a connection pool).

A batch write checks each of its memories for near-duplicates: one vector search and one fetch per
memory. On PostgreSQL each costs a few milliseconds of the server's time but tens of milliseconds of
round trips and waiting on a loaded machine (bench/pg_writers.py: 38 ms per lookup for ~4-10 ms of
execution at 100k memories), so a batch's lookups run on the pool's connections at once. SQLite reads
share one connection under a lock: there they run one after another, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

from engramdb.storage.base import Store

__all__ = ["MAX_PARALLEL_READS", "each_read"]

#: At most this many reads at once: the library's default pool size, so one batch cannot starve other threads.
MAX_PARALLEL_READS: Final = 4

_T = TypeVar("_T")
_R = TypeVar("_R")


def each_read(store: Store, read: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``[read(item) for item in items]``, in order; side by side when ``store.concurrent_reads``.

    Not inside the calling thread's open write (:meth:`Store.in_write`): its reads must see the
    write's own rows and hold its locks, which only its own connection does. The first error raised
    by a read is raised here (the other reads still finish).
    """
    if len(items) < 2 or not store.concurrent_reads or store.in_write():
        return [read(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_READS, len(items)), thread_name_prefix="engram-read") as pool:
        return list(pool.map(read, items))

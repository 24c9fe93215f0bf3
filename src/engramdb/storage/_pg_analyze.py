"""Planner statistics kept current by the PostgreSQL store itself (ANALYZE after bulk loads).

The store's search plans depend on statistics: the row estimate of ``vectors`` picks the exact scan or the HNSW
index, the keyword channel picks its selecting terms and its visibility form from the ``tsv`` and ``agent``
statistics. Autovacuum analyses a table once about 10% of it changed, but only on its own schedule (a minute at
least, longer while it is busy), so right after a bulk load searches planned for the store as it was: at 100k
memories never analysed, a vector search was an exact scan of every vector (~200 ms instead of ~10). Searches
therefore look at the tables' change counters every few seconds and, when a table changed by more than a fifth
since it was last analysed (or never was), run ``ANALYZE`` on a worker thread, once at a time.

The keyword indexes' pending lists are kept short by whoever fills them. A GIN index collects new entries in an
unsorted pending list (``fastupdate``) that every search scans in full, merged into the index by the inserting
session once it passes ``gin_pending_list_limit`` (4 MB by default: ~2,300 memories at 0.22 pages each). The store's
connections set the limit to :data:`PENDING_LIST_LIMIT` (1 MB, ~580 memories): the writers merge their own entries,
within their writes (paced by the give-way, :mod:`._pg_giveway`), at the same server cost per memory as a merge every
500 writes (smaller limits cost more, fast update off most: bench/RESULTS.md, issue 26, seventh round of writes), and
a search scans at most ~128 pending pages of each index. Before, the searching process merged them every 500 writes
on this thread, a large share of a core on the searches' side during a burst of writes (sixth round).

What a trickle of writes leaves under the limit (and a search's access counts: on full pages their updates are not HOT
and add entries too) is merged here between bursts: once :data:`_CLEAN_AFTER` non-HOT row versions were written since
the last merge (and at a process's first look), unless as many were written since the previous look (a burst: its
writers merge their own); a long pending list makes every keyword scan slower (fourth round).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._pg_staging import OWN_LOOK

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import psycopg

    Raw = psycopg.Connection[tuple[Any, ...]]

__all__ = ["PENDING_LIST_LIMIT", "StatisticsKeeper", "clean_due", "finished", "stale_tables"]

log = logging.getLogger(__name__)

#: Seconds between two looks at the change counters (one small catalog query).
CHECK_EVERY_S: Final = 5.0
#: Seconds before trying again after ANALYZE failed (e.g. a user that does not own the tables).
_RETRY_AFTER_S: Final = 600.0
#: Changed rows since the last ANALYZE that make a table stale: a fifth of it, and at least this many.
_MIN_CHANGED: Final = 1000
_TABLES: Final = ("memories", "vectors")
#: The keyword postings (``memory_terms``, schema step 11) change with ``memories``, ~50 rows a memory: analysed
#: with it, so a bulk-loaded store's postings are not planned as the empty table they were.
_ANALYSED_TOGETHER: Final = {"memories": "memories, memory_terms"}
#: Row versions written to ``memories`` (inserts and non-HOT updates) after which the keyword indexes' pending lists
#: are merged: a few hundred keep each list within a few dozen pages.
_CLEAN_AFTER: Final = 500
#: ``gin_pending_list_limit`` of the store's connections: past it, the inserting session merges the pending list.
PENDING_LIST_LIMIT: Final = "1MB"
# Inserts and non-HOT updates of memories so far (each adds entries to the keyword indexes' pending lists).
_INDEXED_WRITES_SQL: Final = (
    f"{OWN_LOOK}SELECT s.n_tup_ins + s.n_tup_upd - s.n_tup_hot_upd FROM pg_stat_user_tables s "
    "WHERE s.relid = to_regclass('memories')"
)
#: The GIN indexes with pending lists (the postings' index is a b-tree: entries go straight into it).
_KEYWORD_INDEXES: Final = ("memories_tsv",)
# gin_clean_pending_list of each keyword index the store has.
_CLEAN_SQL: Final = (
    f"{OWN_LOOK}SELECT gin_clean_pending_list(to_regclass(i)) FROM unnest(%s::text[]) AS i "
    "WHERE to_regclass(i) IS NOT NULL"
)
# Summed over a table's partitions (``vectors`` is partitioned by agent since schema step 5; a plain table is its own
# only leaf). A partition never counted has reltuples -1: the table is unknown only when none was ever counted.
_COUNTERS_SQL: Final = (
    f"{OWN_LOOK}SELECT t.name, CASE WHEN bool_and(c.reltuples < 0) THEN -1 ELSE sum(greatest(c.reltuples, 0)) END, "
    "sum(s.n_live_tup), sum(s.n_mod_since_analyze), "
    "bool_and(s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL) "
    "FROM unnest(ARRAY['memories', 'vectors']) AS t(name) "
    "CROSS JOIN LATERAL (SELECT p.relid FROM pg_partition_tree(to_regclass(t.name)) p WHERE p.isleaf "
    "UNION ALL SELECT to_regclass(t.name) WHERE NOT EXISTS "
    "(SELECT 1 FROM pg_inherits i WHERE i.inhparent = to_regclass(t.name))) p "
    "JOIN pg_class c ON c.oid = p.relid JOIN pg_stat_user_tables s ON s.relid = c.oid "
    "GROUP BY t.name"
)


def finished(running: threading.Thread | None, timeout: float | None) -> bool:
    """Wait up to ``timeout`` for a background thread (None: none runs); True once it has ended."""
    if running is not None:
        running.join(timeout)
        return not running.is_alive()
    return True


def clean_due(writes: int | None, *, cleaned_at: int | None, looked_at: int | None) -> bool:
    """Whether to merge the keyword indexes' pending lists, from the indexed writes counter now (``writes``), at the
    last merge (``cleaned_at``, None: not yet in this process) and at the previous look (``looked_at``).

    Due after :data:`_CLEAN_AFTER` writes since the last merge, unless as many were written since the previous look:
    a burst, whose writers merge their own entries (:data:`PENDING_LIST_LIMIT`); the next look after it merges what
    they left. A counter that went back (statistics reset) counts from zero.
    """
    if writes is None:
        return False
    if cleaned_at is None or writes < cleaned_at:
        return True
    burst = looked_at is not None and looked_at <= writes and writes - looked_at >= _CLEAN_AFTER
    return writes - cleaned_at >= _CLEAN_AFTER and not burst


def stale_tables(rows: list[tuple[Any, ...]]) -> list[str]:
    """The tables among ``rows`` (name, reltuples, live rows, changed since ANALYZE, ever analysed) to analyse."""
    stale: list[str] = []
    for name, reltuples, live, changed, analysed in rows:
        known = max(0.0, float(reltuples or 0))
        moved = int(changed or 0)
        if moved < _MIN_CHANGED:
            continue
        # reltuples is -1 (never counted) or None; 0.0 is a count (an empty table when last analysed).
        unknown = reltuples is None or float(reltuples) < 0
        if not analysed or unknown or moved > 0.2 * max(known, float(live or 0)):
            stale.append(str(name))
    return [t for t in _TABLES if t in stale]


class StatisticsKeeper:
    """Runs ``ANALYZE`` on stale store tables in the background; ``on_analysed`` drops the callers' cached plans."""

    def __init__(self, connect: Callable[[], AbstractContextManager[Raw]], on_analysed: Callable[[], None]) -> None:
        self._connect = connect
        self._on_analysed = on_analysed
        self._lock = threading.Lock()
        self._next_check = 0.0
        self._running: threading.Thread | None = None
        #: The indexed writes counter when the pending lists were last merged (None: not yet in this process).
        self._cleaned_at: int | None = None
        # The counter at the previous look: a burst of writes since then merges its own entries.
        self._looked_at: int | None = None

    def check(self, conn: Raw) -> None:
        """Look at the change counters (at most every :data:`CHECK_EVERY_S`); start an ANALYZE or a merge of the
        keyword indexes' pending lists if one is due."""
        now = time.monotonic()
        with self._lock:
            if now < self._next_check or self._running is not None:
                return
            self._next_check = now + CHECK_EVERY_S
        tables = stale_tables(conn.execute(_COUNTERS_SQL).fetchall())
        row = conn.execute(_INDEXED_WRITES_SQL).fetchone()
        writes = int(row[0]) if row is not None and row[0] is not None else None
        clean = clean_due(writes, cleaned_at=self._cleaned_at, looked_at=self._looked_at)
        self._looked_at = writes
        if not tables and not clean:
            return
        with self._lock:
            if self._running is not None:
                return
            self._running = threading.Thread(
                target=self._analyse, args=(tables, writes if clean else None), name="engram-pg-analyze", daemon=True
            )
            self._running.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a running ANALYZE; True once none runs (for tests and benchmarks)."""
        return finished(self._running, timeout)

    def _analyse(self, tables: list[str], writes: int | None) -> None:
        retry = 0.0
        try:
            with self._connect() as conn:
                if writes is not None:
                    # Counted before the merge: writes during it are merged next time.
                    self._cleaned_at = writes
                    conn.execute(_CLEAN_SQL, (list(_KEYWORD_INDEXES),)).fetchall()
                for table in tables:
                    conn.execute(f"{OWN_LOOK}ANALYZE {_ANALYSED_TOGETHER.get(table, table)}")  # names from _TABLES only
            if tables:
                self._on_analysed()
        except Exception as exc:  # noqa: BLE001 - a background thread: report, never raise
            log.warning("engramdb: ANALYZE of %s failed (%s); autovacuum keeps the statistics", tables, exc)
            retry = _RETRY_AFTER_S
        finally:
            with self._lock:
                self._running = None
                self._next_check = time.monotonic() + max(CHECK_EVERY_S, retry)

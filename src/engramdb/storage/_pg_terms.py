"""How many memories hold each keyword lexeme, from a sample of the PostgreSQL store (:class:`LexemeSample`).

The keyword channel ranks the matches of a question's rarest terms only (:class:`~._pg_sql.TermStats`), so it needs
each term's document frequency. The planner's statistics list the ~1,000 commonest lexemes and put every other one at
the least common listed frequency: 1.1% of the rows at 100k and at 1M memories (bench/scale_pg.py's corpus), so every
rare word of a question looked as common as that, rare words tied in query order, and at 1M each query was "over
budget": it ranked the newest matches of whichever unlisted word came first ("chat" rather than "tanqueray" or
"ukulele"; 1,000-1,900 of the agent's rows ranked, 60-130 ms). ``ts_stat`` over a block sample of about
:data:`SAMPLE_ROWS` memories counts every lexeme instead (2-3 s at 1M, on a worker thread); a lexeme absent from the
sample is rarer than one seen once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._pg_analyze import finished

if TYPE_CHECKING:
    import psycopg

    Raw = psycopg.Connection[tuple[Any, ...]]

__all__ = ["SAMPLE_ROWS", "LexemeSample", "SampledFrequencies"]

log = logging.getLogger(__name__)

#: Memories the sample reads: a lexeme in 0.1% of the rows is seen ~20 times, one in 1% ~200.
SAMPLE_ROWS: Final = 20_000
#: Up to this many memories the sample is the whole table, taken on the searching thread (a few ms).
_INLINE_ROWS: Final = 5_000
#: The sample is taken again once the table's row estimate moved by this fraction since.
_REDO_CHANGE: Final = 0.2
#: Seconds before trying again after a sample failed.
_RETRY_AFTER_S: Final = 300.0
# Lexemes seen once in the sample are left out (most of its distinct ones): they read as absent, i.e. rare.
_SAMPLE_SQL: Final = (
    "SELECT word, ndoc FROM ts_stat(format('SELECT tsv FROM memories TABLESAMPLE SYSTEM (%%s) REPEATABLE (7)', "
    "%s::float8)) WHERE ndoc >= 2"
)
# The rows sampled and their mean length (lexeme positions, as ``memory_terms.dl`` counts them): BM25's average.
_SAMPLED_ROWS_SQL: Final = (
    "SELECT count(*), avg(engram_doc_length(tsv)) FROM memories TABLESAMPLE SYSTEM (%s) REPEATABLE (7)"
)


@dataclass(frozen=True, slots=True)
class SampledFrequencies:
    """Lexeme counts in a sample of ``sampled`` memories, of a table of about ``total``, and their mean length."""

    counts: Mapping[str, int]
    sampled: int
    total: float
    mean_length: float = 0.0

    def rows(self, lexeme: str) -> float:
        """About how many memories hold ``lexeme``; one absent from the sample counts as half a sighting."""
        seen = self.counts.get(lexeme, 0)
        return (seen if seen >= 2 else 0.5) * self.total / max(1, self.sampled)


class LexemeSample:
    """The current :class:`SampledFrequencies` of a store, taken again in the background as the table grows."""

    def __init__(self, connect: Callable[[], AbstractContextManager[Raw]], *, inline_rows: int = _INLINE_ROWS) -> None:
        self._connect = connect
        self._inline_rows = inline_rows
        self._lock = threading.Lock()
        self._current: SampledFrequencies | None = None
        self._running: threading.Thread | None = None
        self._retry_at = 0.0

    def current(self, conn: Raw, total: float) -> SampledFrequencies | None:
        """The sample for a table of about ``total`` rows, or None while the first one is being taken.

        A small table is sampled whole at once on ``conn``; a larger one on a worker thread, meanwhile the
        previous sample (if any) serves.
        """
        if total <= 0:
            return None
        with self._lock:
            have = self._current
            fresh = have is not None and abs(total - have.total) <= _REDO_CHANGE * max(have.total, 1.0)
            if fresh or self._running is not None or time.monotonic() < self._retry_at:
                return have
            if total > self._inline_rows:
                self._running = threading.Thread(
                    target=self._take_apart, args=(total,), name="engram-pg-lexemes", daemon=True
                )
                self._running.start()
                return have
        taken = _take(conn, total)
        with self._lock:
            self._current = taken
        return taken

    @property
    def last(self) -> SampledFrequencies | None:
        """The latest sample taken (None before the first)."""
        with self._lock:
            return self._current

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a sample being taken; True once none is (for tests and benchmarks)."""
        return finished(self._running, timeout)

    def _take_apart(self, total: float) -> None:
        retry = 0.0
        try:
            with self._connect() as conn:
                taken = _take(conn, total)
            with self._lock:
                self._current = taken
        except Exception as exc:  # noqa: BLE001 - a background thread: report, never raise
            log.warning("engramdb: sampling the keyword lexemes failed (%s); the planner's statistics serve", exc)
            retry = _RETRY_AFTER_S
        finally:
            with self._lock:
                self._running = None
                self._retry_at = time.monotonic() + retry


def _take(conn: Raw, total: float) -> SampledFrequencies:
    percent = min(100.0, 100.0 * SAMPLE_ROWS / max(total, 1.0))
    counts = {str(word): int(n) for word, n in conn.execute(_SAMPLE_SQL, (percent,)).fetchall()}
    row = conn.execute(_SAMPLED_ROWS_SQL, (percent,)).fetchone()
    sampled = int(row[0]) if row is not None else 0
    mean = float(row[1]) if row is not None and row[1] is not None else 0.0
    return SampledFrequencies(counts, sampled, total, mean)

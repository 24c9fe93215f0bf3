"""Searches' access counts (and, on a server store, their read-audit entries) written in batches by a background
thread (the ``access_flush_seconds`` setting).

Access counts are a soft ranking signal, so, as a file system's ``relatime``, they may wait in memory for a
moment and be written together: a search then returns without a write of ~10 random rows on its path. A crash
loses at most that moment's counts. On PostgreSQL a search's read-audit entry waits with its counts (its own
commit was a third of a 100k search's server time: bench/RESULTS.md, issue 26) and is appended with them, in the
order the searches ran, by the batch's one transaction; every read of the audit trail through the instance
(:class:`FlushedAudit`) and ``close()`` write them first, so a clean close loses none. On SQLite the entry is
still written before the search returns (a local WAL append; see ``Recall._bookkeep``).
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from engramdb.config import Settings
from engramdb.errors import StorageError
from engramdb.models import AuditEvent, AuditRecord
from engramdb.storage.base import AuditRepo, Store

__all__ = ["FLUSH_CHUNK", "PENDING_LIMIT", "AccessBatch", "FlushedAudit"]

log = logging.getLogger(__name__)

#: Searches whose access counts one flush transaction writes (the store's lock is released between them,
#: so a search waits for at most one such transaction: ~64 x 10 rows, a few milliseconds).
FLUSH_CHUNK = 64
#: Searches kept waiting at most; beyond (a store that stays locked), the oldest are given up, logged.
PENDING_LIMIT = 10_000

#: One search waiting to be written: its distinct accessed ids, its time, its read-audit entry (if batched).
_Item = tuple[builtins.list[str], datetime, AuditRecord | None]


class AccessBatch:
    """Searches' access counts kept in memory and written in batches by one background thread (``relatime``).

    Each pending item is one search's distinct ids and time, written later, in order, by the same ``touch``
    the search would have made (the counts and times this process's synchronous writes would leave), and its
    read-audit entry when the caller batches those too (appended in the same transaction, in search order). A flush
    is due ``delay`` seconds after the oldest pending search, or at once when :data:`FLUSH_CHUNK` are pending.
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self._store = store
        self._delay = settings.access_flush_seconds
        self._relax = settings.synchronous == "NORMAL"
        self._cond = threading.Condition()
        self._pending: builtins.list[_Item] = []
        # Per id: searches pending or being written (what a returned hit adds to its row's count).
        self._counts: dict[str, int] = {}
        self._epoch = 0
        self._since = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None
        # Flushes from the thread, from close() and from reads run one at a time, in order.
        self._flushing = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._pending)

    @property
    def epoch(self) -> int:
        """How many flush chunks have been written (or given up) so far."""
        return self._epoch

    def pending_counts(self, ids: Iterable[str]) -> tuple[dict[str, int], int]:
        """Searches not yet written (or being written) per id among ``ids``, and the current :attr:`epoch`."""
        with self._cond:
            return {i: self._counts[i] for i in ids if i in self._counts}, self._epoch

    def add(self, ids: builtins.list[str], at: datetime, *, audit: AuditRecord | None = None) -> None:
        """One search's accessed ids (and its read-audit entry), to be written within the delay."""
        ids = list(dict.fromkeys(ids))
        with self._cond:
            if not self._pending:
                self._since = time.monotonic()
            self._pending.append((ids, at, audit))
            for memory_id in ids:
                self._counts[memory_id] = self._counts.get(memory_id, 0) + 1
            if len(self._pending) > PENDING_LIMIT:
                self._done([self._pending.pop(0)])
                log.warning(
                    "access counts (and read-audit entry) of a search given up: %d searches wait to be written",
                    PENDING_LIMIT,
                )
            if self._thread is None and not self._closed:
                self._start()
            elif len(self._pending) == 1 or len(self._pending) >= FLUSH_CHUNK:
                # The first pending search: a thread started idle (at open) waits without a deadline until told.
                self._cond.notify()

    def start(self) -> None:
        """Start the writing thread now (at open, in the background) rather than in the first search (~1-3 ms)."""
        with self._cond:
            if self._thread is None and not self._closed:
                self._start()

    def _start(self) -> None:
        """Start the thread (under the condition's lock)."""
        self._thread = threading.Thread(target=self._run, name="engramdb-access-flush", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (
                    not self._pending
                    or (len(self._pending) < FLUSH_CHUNK and time.monotonic() < self._since + self._delay)
                ):
                    wait = self._since + self._delay - time.monotonic() if self._pending else None
                    self._cond.wait(wait)
                if self._closed:
                    return  # close() writes what is left
            try:
                self.flush()
            except Exception:  # the thread must outlive any one failure; StorageError is handled inside
                log.exception("writing searches' access counts failed")

    def flush(self, *, wait: bool = True) -> None:
        """Write every pending search's access counts now (a chunk of searches per transaction).

        ``wait=False`` (reads): if a flush is already running, leave it to that one. A read inside the
        caller's atomic() block must not wait for a flush that waits for that block (SQLite's one writer).
        """
        if not self._flushing.acquire(blocking=wait):
            return
        try:
            with self._cond:
                batch, self._pending = self._pending, []
            for start in range(0, len(batch), FLUSH_CHUNK):
                self._write(batch[start : start + FLUSH_CHUNK])
        finally:
            self._flushing.release()

    def _done(self, chunk: builtins.list[_Item]) -> None:
        """``chunk`` is written (or given up): its searches no longer count as pending. Under ``_cond``."""
        for ids, _, _ in chunk:
            for memory_id in ids:
                left = self._counts.pop(memory_id) - 1
                if left:
                    self._counts[memory_id] = left
        self._epoch += 1

    def _write(self, chunk: builtins.list[_Item]) -> None:
        failed = chunk
        try:
            failed = self._commit(chunk)
        finally:
            with self._cond:
                kept = {id(item) for item in failed}
                self._done([item for item in chunk if id(item) not in kept])
                if failed:
                    # Kept (ahead of newer searches) for the next flush: e.g. another process held the lock.
                    self._pending[:0] = failed
                    self._since = time.monotonic()
        if failed:
            log.warning("access counts of %d searches could not be written yet", len(failed))

    def _commit(self, chunk: builtins.list[_Item]) -> builtins.list[_Item]:
        """Write ``chunk`` in one transaction, else one search at a time; the searches (or parts) not written."""
        records = [record for _, _, record in chunk if record is not None]
        try:
            with self._store.atomic():
                if self._relax:
                    self._store.relax_commit()  # as the synchronous path: see Recall._bookkeep
                for ids, at, _ in chunk:
                    if ids:
                        self._store.memories.touch(ids, at=at)
                if records:
                    self._store.audit.append(records)
            return []
        except StorageError:
            pass
        # One at a time, as a search's own touch and audit append: on a full disk each waits in the store's own
        # queue (engramdb.storage._bookkeeping) and lands with the store's next write.
        failed: builtins.list[_Item] = []
        for item in chunk:
            ids, at, record = item
            try:
                if ids:
                    self._store.memories.touch(ids, at=at)
            except StorageError:
                failed.append(item)
                continue
            if record is not None:
                try:
                    self._store.audit.append([record], deferrable=True)
                except StorageError:
                    failed.append(([], at, record))  # the counts are in: only the entry waits
        return failed

    def close(self) -> None:
        """Stop the thread and write what is pending."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        self.flush()


class FlushedAudit:
    """A store's :class:`~engramdb.storage.base.AuditRepo` that first writes the searches' batched audit entries.

    Anything reading the trail through the instance (``mem.audit``, ``doctor``, feedback naming a search) then sees
    every search made before the read, as when each search wrote its own entry.
    """

    def __init__(self, inner: AuditRepo, batch: AccessBatch, in_write: Callable[[], bool]) -> None:
        self._inner = inner
        self._batch = batch
        self._in_write = in_write

    def _written(self) -> None:
        if self._batch:
            # Inside the caller's atomic() block a flush must not wait for the background one (see flush()).
            self._batch.flush(wait=not self._in_write())

    def append(self, records: Sequence[AuditRecord], *, deferrable: bool | None = None) -> builtins.list[AuditEvent]:
        """See :meth:`AuditRepo.append`."""
        return self._inner.append(records, deferrable=deferrable)

    def events(self, **query: Any) -> builtins.list[AuditEvent]:
        """See :meth:`AuditRepo.events` (pending read entries written first)."""
        self._written()
        return self._inner.events(**query)

    def head(self) -> tuple[int, str] | None:
        """See :meth:`AuditRepo.head` (pending read entries written first)."""
        self._written()
        return self._inner.head()

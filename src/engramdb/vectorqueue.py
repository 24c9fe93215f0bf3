"""Background vectors: the bounded queue and worker thread that embed memories after they are committed.

With the ``vectors = "background"`` setting (the default), a write commits the memory row,
its keyword index, history and audit entry and returns; its vector is computed here, by one
daemon thread per :class:`~engramdb.Engram`, in batches (what is queued, up to
``vector_batch_size`` texts per embed call) and written in its own transaction.

Durability rests on the store, not on this queue: a memory without a vector of the current
model is "stale" (``store.vectors.count_stale`` / ``iter_stale``), so memories whose vector
was still queued when the process died are found and queued again when the store is next
opened (:meth:`VectorQueue.rebuild`, in the background). A vector is written only if the
memory still holds the text it was computed from (checked under the row lock in the write
transaction), so a forgotten memory is never resurrected and newer content never overwritten.

The queue is bounded: a writer blocks while it is full (backpressure), nothing is dropped.
An embedder or storage failure in the worker never kills the thread: the memories stay
pending (``engram doctor`` reports them) and the error, the library's own (an ``EmbeddingError``
or ``StorageError``), is raised by the next call of this process that waits for the queue (a
search, a read of vectors, a deduplicated write) or by :meth:`VectorQueue.flush`, once; the
next flush queues the failed memories again. It is logged only at DEBUG level: a background thread's
traceback on stderr is no way to report an error (and the ``engramdb`` logger has a
``NullHandler``, as a library's should, so nothing reaches stderr unless the application
configures logging).

:func:`waiting_store` gives the rest of the process a view of the store whose vector reads
(vector search, vector and doctor reads) first wait for this queue: code that remembers then
searches in one process sees what sync mode shows. Other processes see vectors moments later.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Final

from engramdb.embeddings.base import Embedder
from engramdb.errors import EmbeddingError, EngramError
from engramdb.models import Memory
from engramdb.storage.base import Candidate, Filter, Store, StoredVector

if TYPE_CHECKING:
    from engramdb.storage.base import Vectors

__all__ = ["VectorQueue", "waiting_store"]

log = logging.getLogger("engramdb.vectors")
# Without it, Python's last-resort handler prints the library's warnings (with tracebacks) to stderr of
# applications that configure no logging, the CLI among them. Errors reach callers as exceptions instead.
logging.getLogger("engramdb").addHandler(logging.NullHandler())

#: The queue holds this many worker batches (at least _MIN_CAPACITY memories) before writers wait.
_BATCHES_QUEUED: Final = 16
#: Smallest queue capacity, in memories.
_MIN_CAPACITY: Final = 1024
#: Groups remembered for settle(groups=...) before the finished ones are forgotten.
_MAX_GROUPS: Final = 4096
#: How often a waiting thread checks that the worker is still alive, seconds.
_POLL: Final = 0.5
#: At interpreter exit, how long the queued memories of an instance never closed may still take, seconds.
_EXIT_GRACE: Final = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Item:
    """One memory to embed: its id and the exact text committed with it."""

    seq: int
    memory_id: str
    text: str
    #: What near-duplicate checks may find it as ((agent, kind) of the memory), or None: unknown, any may.
    group: Hashable | None = None


class VectorQueue:
    """A bounded queue of committed memories awaiting their vector, and the daemon thread that embeds them."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        batch_size: int,
        capacity: int | None = None,
        relax_commit: bool = False,
    ) -> None:
        self._store = store
        self._relax = relax_commit
        self._embedder = embedder
        self._batch = max(1, batch_size)
        self._capacity = capacity if capacity is not None else max(_MIN_CAPACITY, _BATCHES_QUEUED * self._batch)
        self._cond = threading.Condition()
        self._items: deque[_Item] = deque()
        self._queued_ids: dict[str, int] = {}
        self._enqueued = 0  # seq of the last item put
        # Seq of the last item put of each group, and of the last of no known group (settle(groups=...)).
        self._last_of: dict[Hashable, int] = {}
        self._last_unknown = 0
        self._done = 0  # seq up to which every item is finished (written, skipped or failed)
        self._rebuild: Iterator[list[tuple[str, str]]] | None = None
        self._stopping = False
        self._error: EngramError | None = None
        self._failed: list[_Item] = []  # failed since the last flush
        self._retry: list[_Item] = []  # failed before the last flush: queued again by the next one
        self._local = threading.local()
        self._thread = threading.Thread(target=self._run, name="engramdb-vectors", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    # -- producers ----------------------------------------------------------------------------------------
    def put(self, items: Sequence[tuple[str, str]], *, groups: Sequence[Hashable] | None = None) -> None:
        """Queue committed memories ``(id, text)``; blocks while the queue is full (never drops).

        ``groups`` (one per item): which near-duplicate checks could find each memory, so that
        :meth:`settle` for other groups need not wait for it; without them, every check waits.
        Inside a ``store.atomic()`` block of this thread the items are held and queued when
        the outermost block commits (dropped if it rolls back): the worker reads the store
        through its own connection and must not look for rows that are not committed yet.
        """
        tagged = [(*item, group) for item, group in zip(items, groups or [None] * len(items), strict=True)]
        self._put(tagged)

    def _put(self, tagged: Sequence[tuple[str, str, Hashable | None]]) -> None:
        if self.in_transaction():
            self._local.held.extend(tagged)
            return
        pending = list(tagged)
        while pending:
            with self._cond:
                while len(self._items) >= self._capacity and self._thread.is_alive() and not self._stopping:
                    self._cond.wait(_POLL)
                if self._stopping or not self._thread.is_alive():
                    # Committed already: the next open queues them again (they are stale in the store).
                    log.warning("vector worker stopped: %d memories stay pending until the store is reopened",
                                len(pending))  # fmt: skip
                    return
                room = max(1, self._capacity - len(self._items))
                for memory_id, text, group in pending[:room]:
                    self._enqueued += 1
                    self._items.append(_Item(self._enqueued, memory_id, text, group))
                    if group is None:
                        self._last_unknown = self._enqueued
                    else:
                        self._last_of[group] = self._enqueued
                    self._queued_ids[memory_id] = self._queued_ids.get(memory_id, 0) + 1
                pending = pending[room:]
                self._cond.notify_all()

    def ungroup(self) -> None:
        """Make every memory queued so far one that any :meth:`settle` waits for (a queued memory's group changed)."""
        with self._cond:
            self._last_unknown = self._enqueued

    def rebuild(self) -> None:
        """Queue, in the background, every memory of the store without a vector of the current model."""
        with self._cond:
            if self._rebuild is None:
                self._rebuild = self._store.vectors.iter_stale(self._embedder.model_id, batch=self._batch)
                self._cond.notify_all()

    # -- waiting ------------------------------------------------------------------------------------------
    def wait(
        self, timeout: float | None = None, *, rebuild: bool = True, groups: Collection[Hashable] | None = None
    ) -> bool:
        """Wait until every memory queued before this call is finished (only those of ``groups`` and of no known
        group, if given), and the open-time rebuild, if ``rebuild``; True when done, False on timeout. Never
        raises; see :meth:`flush`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = (
                self._enqueued
                if groups is None
                else max([self._last_unknown, *(self._last_of.get(g, 0) for g in groups)])
            )
            while self._done < target or (rebuild and self._rebuild is not None):
                if not self._thread.is_alive():
                    return False
                left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued vector is written; raise the worker's last error (an EngramError) if any.

        The memories of a batch that failed before are queued again first, so each flush
        retries them once. Returns False if ``timeout`` seconds passed first.
        """
        with self._cond:
            retry, self._retry = self._retry, []
        self._put([(i.memory_id, i.text, i.group) for i in retry])
        done = self.wait(timeout)
        with self._cond:
            error, self._error = self._error, None
            self._retry, self._failed = self._failed, []
        if error is not None:
            raise error
        return done

    def raise_failure(self) -> None:
        """Raise the worker's error since it was last raised, if any (once); the next :meth:`flush` queues its
        memories again (not at once: a lasting fault, a full disk, would fail them again right away)."""
        with self._cond:
            error, self._error = self._error, None
            self._retry.extend(self._failed)
            self._failed = []
        if error is not None:
            raise error

    @property
    def pending(self) -> int:
        """Memories queued and not yet finished (without the open-time rebuild)."""
        with self._cond:
            return self._enqueued - self._done

    def in_transaction(self) -> bool:
        """Whether this thread is inside a ``store.atomic()`` block of the :func:`waiting_store` view."""
        return getattr(self._local, "depth", 0) > 0

    @contextmanager
    def _tracked(self, atomic: Callable[[], AbstractContextManager[None]]) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.held = []
        self._local.depth = depth + 1
        committed = False
        try:
            with atomic():
                yield
            committed = True
        finally:
            self._local.depth = depth
            if depth == 0:
                held, self._local.held = self._local.held, []
                if committed:
                    self._put(held)

    def settle(self, *, rebuild: bool, report: bool = True, groups: Collection[Hashable] | None = None) -> None:
        """:meth:`wait` for a read of vector state (of ``groups`` only, if given), unless this thread holds a write
        transaction (the worker could not commit then: waiting would deadlock on SQLite and is pointless on
        PostgreSQL); then, with ``report``, raise what the worker failed with (:meth:`raise_failure`)."""
        if not self.in_transaction() and threading.current_thread() is not self._thread:
            self.wait(rebuild=rebuild, groups=groups)
            if report:
                self.raise_failure()

    # -- lifecycle ----------------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Stop the worker after the queued memories (the rebuild is left for the next open); idempotent."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def drain(self, location: str) -> None:
        """Embed what is queued, then stop (the owner's close): a failure to embed is logged, and those
        memories stay pending until ``location`` is next opened."""
        try:
            self.flush()
        except EngramError:
            log.warning("closing %s with memories still waiting for their vector", location)
        finally:
            self.close()

    def abandon(self, grace: float) -> None:
        """Stop at interpreter exit: finish the queue within ``grace`` seconds, drop what is left, join.

        The dropped memories keep no vector until the store is next opened (they are stale, so that
        open queues them again); nothing acknowledged is lost.
        """
        self.wait(grace, rebuild=False)
        with self._cond:
            self._items.clear()
            self._rebuild = None
        self.close()

    # -- the worker ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            behind = False
            with self._cond:
                while not self._items and self._rebuild is None and not self._stopping:
                    self._cond.wait()
                if self._items:
                    batch = [self._items.popleft() for _ in range(min(self._batch, len(self._items)))]
                    behind = len(self._items) >= self._capacity // 2
                    self._cond.notify_all()  # room for blocked writers
                elif self._stopping:
                    return
                else:
                    batch = []
            if batch:
                self._process(batch, take_turn=not behind)
                with self._cond:
                    for item in batch:
                        left = self._queued_ids.pop(item.memory_id, 1) - 1
                        if left > 0:
                            self._queued_ids[item.memory_id] = left
                    self._done = batch[-1].seq
                    if len(self._last_of) > _MAX_GROUPS:
                        self._last_of = {g: seq for g, seq in self._last_of.items() if seq > self._done}
                    self._cond.notify_all()
            else:
                self._rebuild_step()

    def _rebuild_step(self) -> None:
        """One batch of the open-time rebuild (live writes go first: the loop takes them before this)."""
        rebuild = self._rebuild
        try:
            found = next(rebuild, None) if rebuild is not None else None
        except Exception as exc:  # noqa: BLE001 - kept for flush, logged; the memories stay pending
            self._fail(exc, [])
            found = None
        if found is not None:
            with self._cond:
                queued = set(self._queued_ids)
            todo = [_Item(0, memory_id, text) for memory_id, text in found if memory_id not in queued]
            if todo:
                self._process(todo)
            return
        with self._cond:
            self._rebuild = None
            self._cond.notify_all()

    def _process(self, batch: Sequence[_Item], *, take_turn: bool = True) -> None:
        """Embed ``batch`` and write the vectors of the memories that still hold the embedded text.

        ``take_turn``: wait for the store's other background writes (:meth:`Store.background_turn`). A worker half
        a queue behind writes at once instead: taking turns protects searches while one inserter keeps up, and
        past that the writers would soon block on a full queue.
        """
        distinct = list({(i.memory_id, i.text): i for i in batch}.values())
        model_id = self._embedder.model_id
        try:
            vectors = self._embedder.embed([i.text for i in distinct])
            with self._store.atomic():
                if self._relax:
                    # synchronous=NORMAL: a vector lost to a server crash is only late (its memory is stale, queued
                    # again at the next open); not waiting for the WAL flush of its HNSW inserts spares the writers'.
                    self._store.relax_commit()
                if take_turn:
                    self._store.background_turn()
                current = self._store.memories.get_many(list(dict.fromkeys(i.memory_id for i in distinct)))
                # Forgotten meanwhile: skipped (never resurrected). Changed meanwhile: the newer text is
                # queued too, and only the vector of the text the memory holds now is written.
                rows = {i.memory_id: r for r, i in enumerate(distinct) if _holds(current, i)}
                if rows:
                    self._store.vectors.set(list(rows), vectors[list(rows.values())], model_id=model_id)
        except Exception as exc:  # noqa: BLE001 - kept for flush, logged; the memories stay pending
            self._fail(exc, batch)

    def _fail(self, exc: Exception, batch: Sequence[_Item]) -> None:
        # Reported to the caller by the next call (settle, flush); the traceback is for those who ask for it.
        log.debug("background vectors failed for %d memories (they stay pending): %s", len(batch), exc,
                  exc_info=exc)  # fmt: skip
        error = exc if isinstance(exc, EngramError) else EmbeddingError(f"background embedding failed: {exc}")
        if error is not exc:
            error.__cause__ = exc
        with self._cond:
            self._error = error
            self._failed.extend(batch)


#: Every queue whose worker may still run: stopped at interpreter exit (:func:`_stop_workers`).
_LIVE: weakref.WeakSet[VectorQueue] = weakref.WeakSet()


@atexit.register
def _stop_workers() -> None:
    # A daemon worker still inside the embedder's native code while the interpreter finalizes can abort
    # the whole process (SIGABRT, exit 134) when a script ends without close(): stop each one first.
    for queue in list(_LIVE):
        queue.abandon(_EXIT_GRACE)


def _holds(current: dict[str, Memory], item: _Item) -> bool:
    memory = current.get(item.memory_id)
    return memory is not None and memory.content == item.text


# -- the waiting view of the store --------------------------------------------------------------------------
class _WaitingSearch:
    """Candidate source whose vector channel first waits for the queue (keywords are current already)."""

    def __init__(self, store: Store, queue: VectorQueue) -> None:
        self._inner = store.search
        self._queue = queue

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> list[Candidate]:
        return self._inner.keyword_candidates(terms, flt, limit=limit)

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> list[Candidate]:
        # Live writes only: a long open-time rebuild must not stall every search.
        self._queue.settle(rebuild=False)
        return self._inner.vector_candidates(vector, flt, limit=limit)

    def vector_candidates_many(
        self, queries: Sequence[tuple[Vectors, Filter]], *, limit: int, near: float | None = None
    ) -> list[list[Candidate]]:
        # Only the queued memories these filters could find (the pipeline queues its memories by (agent, kind); a
        # filter admitting other agents' memories waits for all):
        # a batch checked for near-duplicates does not wait for the vectors of the conversation turns before it.
        groups: set[Hashable] | None = set()
        for _, flt in queries:
            if groups is None or flt.agent is None or not flt.kinds or flt.include_shared:
                groups = None
                break
            groups.update((flt.agent, kind) for kind in flt.kinds)
        self._queue.settle(rebuild=False, groups=groups)
        return self._inner.vector_candidates_many(queries, limit=limit, near=near)


class _WaitingVectors:
    """Vector repository whose reads first wait for the queue."""

    def __init__(self, store: Store, queue: VectorQueue) -> None:
        self._inner = store.vectors
        self._queue = queue

    def count_stale(self, model_id: str) -> int:
        self._queue.settle(rebuild=True)
        return self._inner.count_stale(model_id)

    def iter_stale(self, model_id: str, *, batch: int = 256) -> Iterator[list[tuple[str, str]]]:
        self._queue.settle(rebuild=True)
        return self._inner.iter_stale(model_id, batch=batch)

    def set(self, memory_ids: Sequence[str], vectors: Vectors, *, model_id: str) -> None:
        self._inner.set(memory_ids, vectors, model_id=model_id)

    def get(
        self, memory_ids: Sequence[str], *, model_id: str, agents: Sequence[str] | None = None
    ) -> dict[str, Vectors]:
        self._queue.settle(rebuild=True)
        return self._inner.get(memory_ids, model_id=model_id, agents=agents)


class _WaitingChecks:
    """Store checks whose vector check first waits for the queue (the doctor sees settled vectors)."""

    def __init__(self, store: Store, queue: VectorQueue) -> None:
        self._inner = store.checks
        self._queue = queue

    def database(self, *, quick: bool = False) -> builtins.list[str] | None:
        return self._inner.database(quick=quick)

    def keyword_index(self) -> builtins.list[str]:
        return self._inner.keyword_index()

    def iter_vectors(self, *, batch: int = 1000) -> Iterator[builtins.list[StoredVector]]:
        # The doctor reports the store's state itself: a worker's error is not raised at it.
        self._queue.settle(rebuild=True, report=False)
        return self._inner.iter_vectors(batch=batch)

    def pending(self) -> int:
        return self._inner.pending()


def waiting_store(store: Store, queue: VectorQueue) -> Store:
    """``store`` as this process should see it: vector reads wait for ``queue``, transactions are tracked.

    The worker writes through the plain ``store``; everything else uses this view.
    """
    return dataclasses.replace(
        store,
        search=_WaitingSearch(store, queue),
        vectors=_WaitingVectors(store, queue),
        checks=_WaitingChecks(store, queue),
        _atomic=lambda: queue._tracked(store.atomic),
    )

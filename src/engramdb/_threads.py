"""The background threads an owner starts (a store's warm-up, a search's warm-up), told to stop and joined at close.

A thread that outlives its store reads a closed connection, writes files beside a database a caller already
removed or replaced, or restarts work the close just stopped; tests failed once in CI on each (git log: "failed
once in CI"). So an owner starts its threads here and its close calls :meth:`Background.stop` outside its own lock
(a thread waiting for that lock would otherwise never end, and the close would wait for it): every thread is told
to stop, its reads under way are interrupted, and each is joined, within a bounded wait.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["JOIN_SECONDS", "THREAD_PREFIX", "Background"]

log = logging.getLogger("engramdb")

#: Every thread the library starts is named with this prefix (tests find them by it).
THREAD_PREFIX: Final = "engram"
#: How long a close waits for its threads altogether: a read is interrupted, so only a step that cannot be
#: (an import, a numpy computation) takes this long; a thread still alive then is logged and left to end.
JOIN_SECONDS: Final = 10.0
#: A SQLite interrupt is lost between two statements: it is repeated this often until the threads end.
_INTERRUPT_EVERY: Final = 0.05


class Background:
    """The threads one owner started, and the interrupts of the reads they have under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._interrupts: dict[int, Callable[[], object]] = {}
        self._next = 0

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called: a thread checks it between its steps and returns."""
        return self._stop.is_set()

    def start(self, name: str, target: Callable[[], object]) -> threading.Thread | None:
        """Run ``target`` on a daemon thread called ``name``; None (nothing started) once stopping."""
        if not name.startswith(THREAD_PREFIX):
            raise ValueError(f"a library thread's name starts with {THREAD_PREFIX!r}, not {name!r}")
        with self._lock:
            if self._stop.is_set():
                return None
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()
        return thread

    @contextlib.contextmanager
    def interruptible(self, interrupt: Callable[[], object]) -> Iterator[None]:
        """While inside, :meth:`stop` calls ``interrupt`` (e.g. ``sqlite3.Connection.interrupt``); at once if
        already stopping. Leave it before the connection closes."""
        with self._lock:
            key = self._next
            self._next += 1
            self._interrupts[key] = interrupt
            stopping = self._stop.is_set()
        if stopping:
            _call(interrupt)
        try:
            yield
        finally:
            with self._lock:
                del self._interrupts[key]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the threads started so far to end, without stopping them; whether none is alive (for tests
        and benches that must know a warm-up is over before they go on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # Again after each join: a thread may start another (the warm-up starts the read-ahead).
            with self._lock:
                alive = [t for t in self._threads if t.is_alive() and t is not threading.current_thread()]
            if not alive:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            alive[0].join(left)

    def stop(self, timeout: float = JOIN_SECONDS) -> list[threading.Thread]:
        """Tell every thread to stop, interrupt their reads until they end, join them (``timeout`` seconds
        altogether); the threads still alive then (logged). Idempotent. Call it without holding a lock the
        threads may take."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        while True:
            with self._lock:
                threads = [t for t in self._threads if t.is_alive() and t is not me]
                interrupts = list(self._interrupts.values())
            left = deadline - time.monotonic()
            if not threads or left <= 0:
                break
            for interrupt in interrupts:
                _call(interrupt)
            threads[0].join(min(left, _INTERRUPT_EVERY))
        if threads:
            log.warning(
                "engramdb: %s still running %.0f s after the close; left to end on its own",
                ", ".join(t.name for t in threads),
                timeout,
            )
        return threads


def _call(interrupt: Callable[[], object]) -> None:
    # The connection may have closed meanwhile (its reader left): nothing is running on it then.
    with contextlib.suppress(Exception):
        interrupt()

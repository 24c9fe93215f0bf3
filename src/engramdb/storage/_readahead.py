"""Ask the kernel to read a store's files into the page cache (at open, on the warm-up thread).

A store opened after its pages left the page cache (another program, a reboot) otherwise pays a
disk read for each page its first searches touch (bench/RESULTS.md, issue 27, first searches).
``posix_fadvise(WILLNEED)`` starts the reads and returns: nothing is mapped, copied or locked, the
kernel may drop the pages again under memory pressure, and the files are never written.

SQLite's own files are never opened here: closing any descriptor of a file drops every POSIX
lock this process holds on it, SQLite's included (two writers then corrupt the database). Their
pages are asked for through the descriptors SQLite already holds open (found in ``/proc/self/fd``).

Asked for in pieces, paced: the kernel reads at most its read-ahead window per ``WILLNEED`` call (Linux caps
``force_page_cache_ra`` at the device's window: one call for a whole 2.5 GB file read its first 8 MB on this machine,
bench/RESULTS.md, issue 27, eighth round), and pieces asked for all at once would queue ahead of a search's own
reads. So each piece is at most the window (and 256 KiB), at most ``_IN_FLIGHT`` bytes are asked for and not yet read,
and a :class:`Pace` lets the searches go first (no new piece while one runs) and a close stop it between pieces.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

#: The nice value a background thread of the open takes (see yield_cpu): the lowest priority.
_BACKGROUND_NICE: Final = 19

#: Bytes asked for at most per store: a 1M store's database (~3 GB) is not pulled in whole
#: (the files named first, the vector sidecar, are the ones every search reads).
READAHEAD_BUDGET: Final = 1 << 30
_FDS: Final = Path("/proc/self/fd")
#: Bytes per WILLNEED call at most (see the module docstring), and asked for but not yet read at most.
_PIECE: Final = 256 << 10
_IN_FLIGHT: Final = 1 << 20
#: The kernel's window where the device's is not found (Linux's default, 128 KiB).
_DEFAULT_WINDOW: Final = 128 << 10
#: How long a read-ahead waits for the searches at most before asking for one more piece (it never starves).
_YIELD_MAX: Final = 0.5
_YIELD_STEP: Final = 0.005
_windows: dict[int, int] = {}


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Pace:
    """How a read-ahead shares the disk: it ends when ``stopping()`` (the store closes) and asks for no new piece
    while ``busy()`` (a search is reading), up to ``_YIELD_MAX`` at a time."""

    stopping: Callable[[], bool] = field(default=_never)
    busy: Callable[[], bool] = field(default=_never)


#: A (byte offset, length) range of a file.
Span = tuple[int, int]


def sidecar_files(sidecar: Path) -> list[Path]:
    """The vector sidecar's files (no lock is ever taken on them)."""
    try:
        return sorted(p for p in sidecar.rglob("*") if p.is_file())
    except OSError:
        return []


def read_ahead(paths: Iterable[Path], *, budget: int = READAHEAD_BUDGET, pace: Pace | None = None) -> int:
    """Start reading ``paths`` (in order, until ``budget`` bytes) into the page cache; the bytes asked for.

    Opens and closes each file: never pass a file this process locks (a SQLite database). Best
    effort: a missing or unreadable file is skipped; without ``posix_fadvise`` nothing is done.
    """
    if not hasattr(os, "posix_fadvise"):
        return 0
    asked = 0
    for path in paths:
        if asked >= budget:
            break
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            asked += read_spans(fd, [(0, _size(fd))], budget=budget - asked, pace=pace)
        finally:
            os.close(fd)
    return asked


def read_ahead_open(paths: Iterable[Path], *, budget: int = READAHEAD_BUDGET, pace: Pace | None = None) -> int:
    """:func:`read_ahead` through the descriptors this process already holds on ``paths`` (opens none).

    Only where ``/proc/self/fd`` names them (Linux); elsewhere nothing is done. A descriptor closed
    and reused meanwhile only has another file read ahead.
    """
    if not hasattr(os, "posix_fadvise"):
        return 0
    asked = 0
    for fd in held_descriptors(paths):
        if asked >= budget:
            break
        asked += read_spans(fd, [(0, _size(fd))], budget=budget - asked, pace=pace)
    return asked


def held_descriptors(paths: Iterable[Path]) -> list[int]:
    """One descriptor this process holds open on each of ``paths`` that it holds open (in ``/proc/self/fd``'s
    order); never closes one (see the module docstring)."""
    wanted = {os.path.realpath(p) for p in paths}
    try:
        entries = os.listdir(_FDS)
    except OSError:
        return []
    seen: set[str] = set()
    found = []
    for entry in entries:
        try:
            target = os.readlink(_FDS / entry)
        except OSError:
            continue
        if target in wanted and target not in seen:
            seen.add(target)
            found.append(int(entry))
    return found


def read_spans(fd: int, spans: Sequence[Span], *, budget: int = READAHEAD_BUDGET, pace: Pace | None = None) -> int:
    """Ask for the byte ranges ``spans`` of the file open as ``fd`` in order, in pieces, paced (see the module
    docstring), until ``budget`` bytes; the bytes asked for. Best effort: an error ends it quietly."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    pace = pace or Pace()
    asked = 0
    waiting: deque[tuple[int, int]] = deque()  # (last byte, length) of the pieces asked for, oldest first
    queued = 0
    try:
        piece = min(_PIECE, _window(fd))
        size = _size(fd)
        for start, length in spans:
            end = min(start + length, size)
            for at in range(max(start, 0), end, piece):
                if asked >= budget or pace.stopping():
                    return asked
                _wait_while(pace.busy)
                n = min(piece, end - at, budget - asked)
                os.posix_fadvise(fd, at, n, os.POSIX_FADV_WILLNEED)
                asked += n
                waiting.append((at + n - 1, n))
                queued += n
                while queued > _IN_FLIGHT:
                    last, done = waiting.popleft()
                    os.pread(fd, 1, last)  # returns once that piece is read: the next waits for the disk
                    queued -= done
    except OSError:
        pass
    return asked


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


def _window(fd: int) -> int:
    """The most one WILLNEED call reads of the file open as ``fd``: its device's read-ahead window."""
    try:
        dev = os.fstat(fd).st_dev
    except OSError:
        return _DEFAULT_WINDOW
    window = _windows.get(dev)
    if window is None:
        try:
            kb = int(Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb").read_text())
            window = max(kb << 10, 4096) if kb > 0 else _DEFAULT_WINDOW
        except (OSError, ValueError):
            window = _DEFAULT_WINDOW
        _windows[dev] = window
    return window


def _wait_while(busy: Callable[[], bool]) -> None:
    waited = 0.0
    while waited < _YIELD_MAX and busy():
        time.sleep(_YIELD_STEP)
        waited += _YIELD_STEP


def yield_cpu() -> bool:
    """Give the calling thread the lowest CPU priority (its own nice value: Linux schedules threads one by one), so
    a search's threads run first when both want a core; whether it was lowered. Only for threads that hold no lock a
    search waits for (a starved holder would make the search wait the longer). Best effort: elsewhere nothing."""
    if not hasattr(os, "setpriority"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), _BACKGROUND_NICE))
    except OSError:
        return False
    return True

"""Ask the kernel to read a store's files into the page cache (at open, on the warm-up thread).

A store opened after its pages left the page cache (another program, a reboot) otherwise pays a
disk read for each page its first searches touch (bench/RESULTS.md, issue 27, first searches).
``posix_fadvise(WILLNEED)`` starts the reads and returns: nothing is mapped, copied or locked, the
kernel may drop the pages again under memory pressure, and the files are never written.

SQLite's own files are never opened here: closing any descriptor of a file drops every POSIX
lock this process holds on it, SQLite's included (two writers then corrupt the database). Their
pages are asked for through the descriptors SQLite already holds open (found in ``/proc/self/fd``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final

#: The nice value a background thread of the open takes (see yield_cpu): the lowest priority.
_BACKGROUND_NICE: Final = 19

#: Bytes asked for at most per store: a 1M store's database (~3 GB) is not pulled in whole
#: (the files named first, the vector sidecar, are the ones every search reads).
READAHEAD_BUDGET: Final = 1 << 30
_FDS: Final = Path("/proc/self/fd")


def sidecar_files(sidecar: Path) -> list[Path]:
    """The vector sidecar's files (no lock is ever taken on them)."""
    try:
        return sorted(p for p in sidecar.rglob("*") if p.is_file())
    except OSError:
        return []


def read_ahead(paths: Iterable[Path], *, budget: int = READAHEAD_BUDGET) -> int:
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
            asked += _advise(fd, budget - asked)
        finally:
            os.close(fd)
    return asked


def read_ahead_open(paths: Iterable[Path], *, budget: int = READAHEAD_BUDGET) -> int:
    """:func:`read_ahead` through the descriptors this process already holds on ``paths`` (opens none).

    Only where ``/proc/self/fd`` names them (Linux); elsewhere nothing is done. A descriptor closed
    and reused meanwhile only has another file read ahead.
    """
    if not hasattr(os, "posix_fadvise"):
        return 0
    wanted = {os.path.realpath(p) for p in paths}
    asked = 0
    try:
        entries = os.listdir(_FDS)
    except OSError:
        return 0
    seen: set[str] = set()
    for entry in entries:
        if asked >= budget:
            break
        try:
            target = os.readlink(_FDS / entry)
        except OSError:
            continue
        if target in wanted and target not in seen:
            seen.add(target)
            asked += _advise(int(entry), budget - asked)
    return asked


def _advise(fd: int, budget: int) -> int:
    try:
        size = min(os.fstat(fd).st_size, budget)
        if size > 0:
            os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
            return size
    except OSError:
        pass
    return 0


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

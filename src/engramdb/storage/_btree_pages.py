"""Where a SQLite table's rows lie in the database file, so a search can ask for the pages it will read at once.

A search reads a few hundred rows scattered over the database: the vector rows its graph head is re-scored on
(by ``seq``) and the memory rows of its candidates (by ``rid``). With the file out of the page cache SQLite reads
them one page at a time, each waiting for the disk (~0.6 ms a random read here), where the same pages asked for
together come back in a quarter of the time (the disk serves them side by side; bench/RESULTS.md, issue 27, eighth
round). So at open the interior pages of those tables' b-trees are read (a few hundred pages at 1M memories: each
holds the keys and page numbers of ~900 leaves), and before a search reads its rows it asks the kernel for their
leaf pages (``posix_fadvise(WILLNEED)``: the reads start and the call returns).

Only ever a hint: the file is parsed through a descriptor SQLite itself holds open (never opened here: closing any
descriptor of the database drops this process's locks on it, see _readahead), pages may be stale (newer versions
in the write-ahead log, a checkpoint since) or not a b-tree at all, and whatever is wrong only makes the kernel read
other pages. What SQLite reads, and so every answer, is unchanged.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engramdb.storage._arrays import np

try:
    import resource as _resource
except ImportError:  # not POSIX: no per-thread read counts (the probe re-arms on samples and idle gaps only)
    _resource = None  # type: ignore[assignment]
from engramdb.storage._readahead import Pace, Span, read_spans
from engramdb.storage._sqlite_files import connect_read_only

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import npt

__all__ = ["LeafMap", "PageHints", "advise_pages", "database_fd", "read_leaf_map", "thread_reads"]

_FDS: Final = Path("/proc/self/fd")
#: B-tree page types (the first byte of a page's header).
_TABLE_INTERIOR: Final = 0x05
_TABLE_LEAF: Final = 0x0D
_INDEX_INTERIOR: Final = 0x02
_INDEX_LEAF: Final = 0x0A
#: Interior pages read at most per tree (a 1M-row vectors table has ~220; 4 MB at 8 KiB pages).
MAX_INTERIOR_PAGES: Final = 512
#: A search counts as reading for this long after it last said so (see PageHints.searching): the open's read-ahead
#: asks for no new piece meanwhile.
_BUSY_SECONDS: Final = 0.05
#: Until when (``time.monotonic()``) some search of this process reads: any store's read-ahead yields to any store's
#: search (a process that opens six 1M stores in turn had their read-aheads beside each next store's first searches).
_busy_until = 0.0


@dataclass(frozen=True, slots=True)
class LeafMap:
    """The leaves of one b-tree in key order; for a table tree, the separating rowids too."""

    #: Leaf page numbers (from 1), in key order.
    pages: _I64
    #: For a table tree: ``keys[i]`` is the largest rowid of leaf ``i`` (one fewer than pages); empty for an index.
    keys: _I64
    page_size: int

    def spans(self) -> list[Span]:
        """Every leaf as byte ranges of the file (adjacent leaves as one), in page order."""
        ordered = np.unique(self.pages)
        breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
        return [
            ((int(run[0]) - 1) * self.page_size, int(run.size) * self.page_size) for run in np.split(ordered, breaks)
        ]

    def leaves_of(self, rowids: npt.NDArray[np.int64]) -> _I64:
        """The distinct leaf pages holding ``rowids`` (a table tree), ascending."""
        if not len(self.keys) or not rowids.size:
            return np.unique(self.pages[:1]) if rowids.size else np.empty(0, dtype=np.int64)
        at = np.searchsorted(self.keys, rowids, side="left")
        return np.unique(self.pages[at])


def database_fd(path: Path) -> int | None:
    """A descriptor this process holds open on the file ``path`` (SQLite's), or None (not open, or not Linux)."""
    try:
        want = os.stat(path)
        real = os.path.realpath(path)
        for entry in os.listdir(_FDS):
            try:
                if os.readlink(_FDS / entry) != real:
                    continue
                fd = int(entry)
                got = os.fstat(fd)
            except (OSError, ValueError):
                continue
            if (got.st_dev, got.st_ino) == (want.st_dev, want.st_ino):
                return fd
    except OSError:
        return None
    return None


def read_leaf_map(fd: int, root: int, *, max_interior: int = MAX_INTERIOR_PAGES) -> LeafMap | None:
    """The leaves of the b-tree rooted at page ``root`` of the SQLite file open as ``fd``, from its interior pages
    (each level's pages asked for together first), or None: not a b-tree there, too large, or unreadable."""
    try:
        header = os.pread(fd, 100, 0)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            return None
        (raw,) = struct.unpack(">H", header[16:18])
        page_size = 65536 if raw == 1 else raw
        if page_size < 512 or page_size & (page_size - 1):
            return None
        last = os.fstat(fd).st_size // page_size
        level = np.array([root], dtype=np.int64)
        keys = np.empty(0, dtype=np.int64)
        read = 0
        while True:
            if not 1 <= int(level.min()) <= int(level.max()) <= last:
                return None
            read += level.size
            if read > max_interior:
                return None
            advise_pages(fd, level, page_size)
            kinds: set[int] = set()
            children: list[_I64] = []
            separators: list[_I64] = []
            for i, page_no in enumerate(level.tolist()):
                page = os.pread(fd, page_size, (page_no - 1) * page_size)
                at = 100 if page_no == 1 else 0
                if len(page) < page_size:
                    return None
                if page[at] in (_TABLE_LEAF, _INDEX_LEAF) and level.size == 1:
                    return LeafMap(level, keys, page_size)  # the root is the only page
                parsed = _interior(page, at)
                if parsed is None:
                    return None
                kinds.add(page[at])
                children.append(parsed[0])
                separators.append(parsed[1])
                if i < keys.size:  # the parent's key between this page and the next
                    separators.append(keys[i : i + 1])
            if len(kinds) != 1:
                return None
            level = np.concatenate(children)
            keys = np.concatenate(separators) if kinds == {_TABLE_INTERIOR} else np.empty(0, dtype=np.int64)
            if not 1 <= int(level.min()) <= int(level.max()) <= last:
                return None
            first = os.pread(fd, 1, (int(level[0]) - 1) * page_size)
            if first and first[0] in (_TABLE_LEAF, _INDEX_LEAF):
                return LeafMap(level, keys, page_size)
    except (OSError, ValueError, IndexError, struct.error):
        return None


def _interior(page: bytes, at: int) -> tuple[_I64, _I64] | None:
    """An interior page's child page numbers (the right-most last) and, for a table tree, its rowid keys."""
    kind = page[at]
    if kind not in (_TABLE_INTERIOR, _INDEX_INTERIOR):
        return None
    (cells,) = struct.unpack(">H", page[at + 3 : at + 5])
    (right,) = struct.unpack(">I", page[at + 8 : at + 12])
    raw = np.frombuffer(page, dtype=np.uint8)
    pointers = np.frombuffer(page, dtype=">u2", count=cells, offset=at + 12).astype(np.int64)
    if cells and (int(pointers.min()) < at + 12 + 2 * cells or int(pointers.max()) + 5 > len(page)):
        return None
    kids = (
        raw[pointers].astype(np.int64) << 24
        | raw[pointers + 1].astype(np.int64) << 16
        | raw[pointers + 2].astype(np.int64) << 8
        | raw[pointers + 3].astype(np.int64)
    )
    kids = np.append(kids, right)
    if kind == _INDEX_INTERIOR:
        return kids, np.empty(0, dtype=np.int64)
    keys = _varints(raw, pointers + 4)
    return (kids, keys) if keys is not None else None


def _varints(raw: npt.NDArray[np.uint8], at: _I64) -> _I64 | None:
    """The SQLite varints starting at offsets ``at`` of ``raw``; None if one is longer than 8 bytes."""
    b = raw[np.minimum(at[:, None] + np.arange(8), raw.size - 1)].astype(np.int64)
    more = b >= 0x80
    if bool(more.all(axis=1).any()):
        return None
    ends = np.argmin(more, axis=1)  # the varint's last byte: its first without the high bit
    value = np.zeros(at.size, dtype=np.int64)
    for j in range(8):
        value = np.where(j <= ends, (value << 7) | (b[:, j] & 0x7F), value)
    return value


#: Pages looked at (spread over those asked for) to tell whether they are cached already.
_PROBES: Final = 4
_probe = bytearray(1)


def _cached(fd: int, pages: _I64, page_size: int) -> bool:
    """Whether ``pages`` look cached: a few of them, spread, each read without waiting (``RWF_NOWAIT``: refused,
    not waited for, when the page is not in the cache). False where that is not available."""
    if not pages.size or not hasattr(os, "RWF_NOWAIT") or not hasattr(os, "preadv"):
        return False
    for i in np.linspace(0, pages.size - 1, num=min(_PROBES, pages.size)).astype(np.int64).tolist():
        try:
            os.preadv(fd, [_probe], (int(pages[i]) - 1) * page_size, os.RWF_NOWAIT)
        except OSError:  # BlockingIOError: not cached; others: cannot tell
            return False
    return True


def advise_pages(fd: int, pages: Iterable[int] | _I64, page_size: int) -> int:
    """Ask the kernel to start reading database pages ``pages`` (adjacent ones as one range); how many asked."""
    ordered = np.unique(np.asarray(list(pages) if not isinstance(pages, np.ndarray) else pages, dtype=np.int64))
    if not ordered.size or not hasattr(os, "posix_fadvise"):
        return 0
    breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
    for run in np.split(ordered, breaks):
        os.posix_fadvise(fd, (int(run[0]) - 1) * page_size, int(run.size) * page_size, os.POSIX_FADV_WILLNEED)
    return int(ordered.size)


#: The rowid tables a search reads rows of by key, and the column it reads them by.
_TABLES: Final = ("memories", "vectors")
#: Probes in a row that found a search's pages cached before :meth:`PageHints.ahead` stops probing: the store's
#: pages are known resident. The probe (finding the leaves, four reads without waiting) is a measurable part of a
#: warm search (bench/RESULTS.md, issue 27, ninth round) that saves nothing once all is cached.
WARM_AFTER: Final = 16
#: Once warm, one call in this many still probes: pages pushed out by other programs while the store is in use.
SAMPLE_EVERY: Final = 64
#: Once warm, a call after this long without one probes: an idle store's pages may have been pushed out meanwhile.
IDLE_SECONDS: Final = 10.0


def thread_reads() -> int:
    """Blocks the calling thread has read from the disk so far (page-cache hits do not count); 0 where unknown."""
    who = getattr(_resource, "RUSAGE_THREAD", None)
    if who is None:
        return 0
    try:
        return int(_resource.getrusage(who).ru_inblock)
    except (OSError, ValueError):
        return 0


class PageHints:
    """Where one store's ``memories`` and ``vectors`` rows lie (see the module docstring), loaded at open (:meth:`load`,
    on the warm-up thread); :meth:`ahead` asks for the pages of rows about to be read. Thread-safe; every method is
    best effort and never raises for the file's sake."""

    def __init__(self, database: Path) -> None:
        self._database = database
        self._maps: dict[str, LeafMap] = {}
        self._fd: tuple[int, int, int] | None = None
        self._stopped = threading.Event()
        #: Probes in a row that found the pages cached (WARM_AFTER or more: warm, see ahead); races only blur it.
        self._streak = 0
        self._skipped = 0
        self._last = 0.0
        #: Per thread, its disk reads at its last call (see thread_reads): any since is evidence to probe again.
        self._reads = threading.local()

    def load(self) -> list[LeafMap]:
        """Read the tables' interior pages (their maps then serve :meth:`ahead`); the leaves of the unique indexes a
        search looks rows up by id in (memories' id, vectors' memory id), for the open's read-ahead to ask for."""
        indexes: list[LeafMap] = []
        try:
            conn = connect_read_only(self._database, timeout=30.0)  # a path's "?" or "#" escaped
        except sqlite3.Error:
            return indexes
        try:
            roots = conn.execute(
                "SELECT name, type, rootpage FROM sqlite_schema WHERE tbl_name IN ('memories', 'vectors') "
                "AND (type = 'table' OR name LIKE 'sqlite_autoindex_%')"
            ).fetchall()
            # Through the descriptor this connection now holds (it stays open meanwhile; see the module docstring).
            fd = database_fd(self._database)
            if fd is None:
                return indexes
            maps: dict[str, LeafMap] = {}
            for name, kind, root in roots:
                if self._stopped.is_set():
                    break
                if not isinstance(root, int) or root < 1 or (kind == "table" and name not in _TABLES):
                    continue
                found = read_leaf_map(fd, root)
                if found is None:
                    continue
                if kind == "table":
                    maps[name] = found
                else:
                    indexes.append(found)
            self._maps = maps
        except (sqlite3.Error, OSError):
            pass
        finally:
            conn.close()
        return indexes

    def searching(self) -> None:
        """A search is reading now: every read-ahead of this process waits (see busy)."""
        global _busy_until  # noqa: PLW0603 - one process-wide mark, read by every store's read-ahead
        _busy_until = time.monotonic() + _BUSY_SECONDS

    def busy(self) -> bool:
        """Whether a search of this process (of any store) said it was reading within the last ``_BUSY_SECONDS``."""
        return time.monotonic() < _busy_until

    def table(self, name: str) -> LeafMap | None:
        """The leaf map of table ``name`` (``memories``, ``vectors``) once loaded."""
        return self._maps.get(name)

    @property
    def warm(self) -> bool:
        """Whether the store's pages are known resident: :meth:`ahead` then neither probes nor asks (mostly)."""
        return self._streak >= WARM_AFTER

    def ahead(self, table: str, keys: npt.ArrayLike) -> int:
        """Ask for the pages of ``table``'s rows with rowids ``keys`` (about to be read); how many pages.

        Once WARM_AFTER probes in a row found the pages cached, nothing is probed or asked for, except one call in
        SAMPLE_EVERY, a call after IDLE_SECONDS without one, and a call on a thread that read from the disk since
        its last (a search that waited for the disk): any of those finding pages out of the cache re-arms the
        probe for every call.
        """
        self.searching()
        found = self._maps.get(table)
        if found is None:
            return 0
        now = time.monotonic()
        last, self._last = self._last, now
        reads = thread_reads()
        before = getattr(self._reads, "value", -1)
        self._reads.value = reads
        if self._streak >= WARM_AFTER and reads == before and now - last < IDLE_SECONDS:
            self._skipped += 1
            if self._skipped < SAMPLE_EVERY:
                return 0
        self._skipped = 0
        try:
            fd = self._descriptor()
            if fd is None:
                return 0
            pages = found.leaves_of(np.asarray(keys, dtype=np.int64).ravel())
            if _cached(fd, pages, found.page_size):
                self._streak += 1
                return 0  # warm: asking costs ~2.5 us a page (0.4-0.6 ms a search at 1M) and saves nothing
            self._streak = 0
            asked = advise_pages(fd, pages, found.page_size)
            # The reads just asked for are this thread's: not evidence for its next call.
            self._reads.value = thread_reads()
            return asked
        except (OSError, ValueError):
            return 0

    def read_ahead(self, found: LeafMap, *, budget: int, pace: Pace) -> int:
        """Ask for every leaf of one tree, paced (see _readahead.read_spans), until ``budget`` bytes; the bytes."""
        fd = self._descriptor()
        return 0 if fd is None else read_spans(fd, found.spans(), budget=budget, pace=pace)

    def _descriptor(self) -> int | None:
        """SQLite's descriptor of the database, found once and checked (by inode) at each use: it may be reused."""
        if self._stopped.is_set():
            return None
        held = self._fd
        if held is not None:
            fd, dev, ino = held
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == (dev, ino):
                    return fd
            except OSError:
                pass
        fd_new = database_fd(self._database)
        if fd_new is None:
            self._fd = None
            return None
        st = os.fstat(fd_new)
        self._fd = (fd_new, st.st_dev, st.st_ino)
        return fd_new

    def close(self) -> None:
        """Forget the maps and ask for nothing more (the store closed; a load under way stops between trees)."""
        self._stopped.set()
        self._maps = {}
        self._fd = None
        self._streak = 0

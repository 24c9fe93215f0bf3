"""Which pages of a file are in the OS page cache (``mincore``), and dropping a store's files from it.

Linux only (``ctypes`` over libc's ``mmap``/``mincore``): a read-only shared mapping is asked which of its pages
are resident; nothing is read, so asking does not change the answer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["PAGE", "evict", "resident", "resident_bytes", "store_files"]

PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_PROT_READ, _MAP_SHARED = 1, 1
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident(path: Path) -> npt.NDArray[np.bool_]:
    """One flag per OS page of ``path``: in the page cache now (an empty array for an empty or missing file)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return np.zeros(0, dtype=bool)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return np.zeros(0, dtype=bool)
        addr = _libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return (np.frombuffer(vec, dtype=np.uint8) & 1).astype(bool)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def store_files(directory: Path) -> list[Path]:
    """Every file of a store directory (the database, its log, the postings, the tenants file, the sidecar)."""
    return sorted(p for p in directory.rglob("*") if p.is_file())


def resident_bytes(paths: list[Path]) -> tuple[int, int]:
    """Bytes of ``paths`` in the page cache, and their total size."""
    cached = sum(int(resident(p).sum()) * PAGE for p in paths)
    return cached, sum(p.stat().st_size for p in paths if p.exists())


def evict(directory: Path) -> tuple[int, int]:
    """Drop the store's files from the page cache: each synced (a dirty page cannot be dropped), then
    ``POSIX_FADV_DONTNEED``; the bytes still resident after, and the files' total (checked by ``mincore``)."""
    files = store_files(directory)
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return resident_bytes(files)

"""Files of aligned arrays read in place: the container of the caches saved beside the database.

A fixed prefix (magic, format, header length, header CRC-32), a JSON header (the caller's fields, where each array
lies, the CRC-32 of the arrays the caller names as checked at load), then each array aligned to 64 bytes, memory-mapped
when read and never copied whole. Written atomically: a temporary file in the same directory, fsynced, renamed over.
Used by the keyword postings (:mod:`engramdb.storage._kw_persist`) and the tenants' key sets
(:mod:`engramdb.storage._tenant_persist`); what the arrays mean, and which bytes are checked later, is theirs.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import npt

__all__ = ["WIDTHS", "narrowest", "packed", "read_mapped", "read_sections", "write_sections"]

T = TypeVar("T")

#: magic, format, header length, header CRC-32.
_PREFIX: Final = struct.Struct("<8sIII")
_ALIGN: Final = 64
#: The little-endian unsigned types of 1, 2 and 4 bytes.
WIDTHS: Final = {1: "u1", 2: "<u2", 4: "<u4"}


def narrowest(largest: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The narrowest of 1, 2, 4 bytes holding each of ``largest`` (non-negative, below 2**32)."""
    return np.where(largest < 1 << 8, 1, np.where(largest < 1 << 16, 2, 4)).astype(np.int64)


def packed(values: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64], widths: npt.NDArray[np.int64]) -> Any:
    """``values`` (runs of ``sizes``) split by each run's width: the sections by width and each run's start."""
    per_value = np.repeat(widths, sizes)
    sections = {w: values[per_value == w].astype(WIDTHS[w]) for w in WIDTHS}
    starts = np.zeros(sizes.size, dtype=np.int64)
    for w in WIDTHS:
        mine = widths == w
        starts[mine] = np.cumsum(sizes[mine]) - sizes[mine]
    return sections, starts


def write_sections(
    path: Path,
    *,
    magic: bytes,
    version: int,
    meta: Mapping[str, Any],
    arrays: Mapping[str, npt.NDArray[Any]],
    checked: Iterable[str],
) -> None:
    """Write ``arrays`` after a header of ``meta`` (plus ``sections``: each array's place, ``crc``: the CRC-32 of
    each array named in ``checked``), atomically."""
    layout: dict[str, list[Any]] = {}
    position = 0
    for name, array in arrays.items():
        position += -position % _ALIGN
        layout[name] = [position, int(array.size), array.dtype.str]
        position += array.nbytes
    crc = {k: zlib.crc32(np.ascontiguousarray(arrays[k]).tobytes()) for k in checked}
    header = json.dumps({**meta, "sections": layout, "crc": crc}).encode("utf-8")
    start = _PREFIX.size + len(header)
    start += -start % _ALIGN
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(_PREFIX.pack(magic, version, len(header), zlib.crc32(header)))
            fh.write(header)
            for name, array in arrays.items():
                fh.seek(start + layout[name][0])
                fh.write(np.ascontiguousarray(array).tobytes())
            fh.truncate(start + position)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_mapped(path: Path, read: Callable[[mmap.mmap], T | None], *, keep: bool) -> T | None:
    """``read`` of the file mapped read-only; None when the file is missing, unreadable or empty, or when ``read``
    fails on its contents (a header of the wrong shape). ``keep``: what ``read`` returns holds views of the map
    (else the map is closed at once)."""
    try:
        with open(path, "rb") as fh:
            view = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        return read(view)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, struct.error, OverflowError):
        return None
    finally:
        if not keep:
            with contextlib.suppress(BufferError):
                view.close()  # a view still held (an exception's frames) keeps the map until collected


def read_sections(
    view: mmap.mmap, *, magic: bytes, version: int, allowed: Iterable[str]
) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]] | None:
    """The header and the arrays (views of ``view``) of a file written by :func:`write_sections`; None when its
    prefix, header or a checked array is not as written, or an array's type is not among ``allowed``. Raises
    ValueError, KeyError, TypeError or struct.error on a header of the wrong shape."""
    got, found, size, crc = _PREFIX.unpack_from(view, 0)
    body = view[_PREFIX.size : _PREFIX.size + size]
    if got != magic or found != version or len(body) != size or zlib.crc32(body) != crc:
        return None
    meta = json.loads(body.decode("utf-8"))
    start = _PREFIX.size + size
    start += -start % _ALIGN
    kinds = {np.dtype(d).str for d in allowed}
    sections: dict[str, npt.NDArray[Any]] = {}
    for name, (offset, count, dtype) in meta["sections"].items():
        kind = np.dtype(dtype)
        if kind.str not in kinds or offset % kind.itemsize:
            return None
        sections[name] = np.frombuffer(view, dtype=kind, count=int(count), offset=start + int(offset))
    for name, expected in meta["crc"].items():
        if zlib.crc32(sections[name].data) != expected:
            return None
    return meta, sections

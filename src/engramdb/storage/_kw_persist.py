"""The keyword cache's postings saved beside the database, so a store opens with them instead of rebuilding.

Building the postings from FTS5 takes seconds at 100k memories, and until they are ready the keyword
channel falls back to FTS5 (tens of ms for a tenant among many, seconds for a big one at 1M).

``engram.db.kw`` (format 3, in the container of :mod:`engramdb.storage._sections`) is read in place: a fixed
prefix, a JSON header (what the postings reflect: the ``history`` position and the memory id of the history row
there, FTS5's totals and structure record; the terms; where each section lies), then plain arrays, each aligned,
memory-mapped and never copied whole. Per term its row keys are stored as differences from the previous key in the
narrowest unsigned width that holds the term's largest difference (1, 2 or 4 bytes), its counts likewise, each term
with a CRC-32 of its bytes. Opening reads the header and the small per-term tables (milliseconds at 1M memories, where
inflating the deflated format 2 took 1-2 s that the first search waited for); a term's keys are decoded (a cumulative
sum) and checked the first time a query ranks it (its count, for the postings budget, is read from the table).
The file is 1.5x format 2's (1 byte a key difference and 1 a count for most postings): 7 MB at 100k memories.

SQLite stays the only truth: a file whose history row is not this store's is not used, and a loaded one is checked
by :class:`~engramdb.storage._kw_index.KeywordIndex` exactly as a fresh build is (caught up through ``history``,
totals and structure compared with FTS5's own; any mismatch rebuilds). A damaged header or table is not loaded; a
damaged term raises :class:`DamagedPostings` when first decoded, and the index rebuilds. So a missing, damaged or
foreign file only costs that build. A file still naming a forgotten memory's terms is deleted as soon as the forget
is seen, and written anew at close. A format 2 file (a deflated ``.npz``, written until this format) still loads,
whole, and is written anew in format 3 at close.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np
from engramdb.storage._sections import WIDTHS, narrowest, packed, read_mapped, read_sections, write_sections

if TYPE_CHECKING:
    from engramdb.storage._arrays import I32 as _I32
    from engramdb.storage._arrays import npt

__all__ = [
    "DamagedPostings",
    "SavedPostings",
    "TermPostings",
    "load_postings",
    "postings_path",
    "remove_postings",
    "save_postings",
]

_FORMAT: Final = 3
_MAGIC: Final = b"ENGRAMKW"
#: The per-term tables (one entry per term) and their types.
_TABLES: Final = {
    "n": "<i8",  # postings of the term
    "dw": "u1",  # width of its key differences
    "ds": "<i8",  # its first posting's position in the section of that width
    "cw": "u1",  # width of its counts
    "cs": "<i8",
    "crc": "<u4",  # CRC-32 of its key bytes, then its count bytes
}
#: The deflated ``.npz`` format written before this one, still read (then written anew at close).
_LEGACY_FORMAT: Final = 2


class DamagedPostings(ValueError):
    """A saved term's bytes fail their checksum or bounds: the file is damaged (the index rebuilds)."""


@dataclass(frozen=True, slots=True)
class SavedPostings:
    """What a saved file holds: per term its row keys (ascending) and counts, per row its token count."""

    seq: int
    #: The memory id of the store's history row at ``seq`` (tells this store's file from another's).
    anchor: str
    rows: int
    tokens: int
    structure: bytes
    terms: Mapping[str, tuple[_I32, npt.NDArray[Any]]]
    doc_len: _I32
    #: Whether the file is in the current format (else it is written anew at close).
    current: bool = True


def postings_path(database: str) -> Path:
    """The saved postings of the database file ``database`` (``engram.db`` -> ``engram.db.kw``)."""
    return Path(database + ".kw")


def save_postings(
    path: Path,
    *,
    seq: int,
    anchor: str,
    rows: int,
    tokens: int,
    structure: bytes,
    terms: Iterable[tuple[str, npt.NDArray[np.integer], npt.NDArray[np.integer]]],
    doc_len: npt.NDArray[np.integer],
) -> None:
    """Write the postings atomically (a temporary file in the same directory, fsynced, renamed over).

    Each term's row keys must be ascending and distinct (ValueError otherwise: nothing is written)."""
    names: list[str] = []
    docs: list[npt.NDArray[np.int64]] = []
    counts: list[npt.NDArray[np.int64]] = []
    for term, d, c in terms:
        if d.size:
            names.append(term)
            docs.append(d.astype(np.int64, copy=False))
            counts.append(c.astype(np.int64, copy=False))
    sizes = np.array([d.size for d in docs], dtype=np.int64)
    firsts = np.cumsum(sizes) - sizes
    flat = np.concatenate(docs) if docs else np.zeros(0, np.int64)
    tf = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    # One running difference over all terms, each term's first key kept whole.
    deltas = np.diff(flat, prepend=np.int64(0))
    deltas[firsts] = flat[firsts]
    inner = np.ones(flat.size, dtype=bool)
    inner[firsts] = False
    if flat.size and (int(flat.min()) < 0 or int(deltas[inner].min(initial=1)) <= 0 or int(tf.min()) < 0):
        raise ValueError("postings must be ascending, distinct, non-negative row keys with counts")
    if flat.size and max(int(flat.max()), int(tf.max())) >= 1 << 32:
        raise ValueError("row keys and counts must fit 32 bits")
    dw = narrowest(np.maximum.reduceat(deltas, firsts)) if names else np.zeros(0, np.int64)
    cw = narrowest(np.maximum.reduceat(tf, firsts)) if names else np.zeros(0, np.int64)
    doc_sections, ds = packed(deltas, sizes, dw)
    count_sections, cs = packed(tf, sizes, cw)
    crc = np.zeros(len(names), dtype=np.uint32)
    for i in range(len(names)):
        a, b = int(ds[i]), int(cs[i])
        key_bytes = doc_sections[int(dw[i])][a : a + int(sizes[i])]
        count_bytes = count_sections[int(cw[i])][b : b + int(sizes[i])]
        crc[i] = zlib.crc32(count_bytes.tobytes(), zlib.crc32(key_bytes.tobytes()))
    lengths = np.asarray(doc_len, dtype=np.int64)
    top = int(lengths.max(initial=0))
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError("token counts must not be negative")
    sections: dict[str, npt.NDArray[Any]] = {
        "n": sizes,
        "dw": dw,
        "ds": ds,
        "cw": cw,
        "cs": cs,
        "crc": crc,
        **{f"d{w}": a for w, a in doc_sections.items()},
        **{f"c{w}": a for w, a in count_sections.items()},
        "doc_len": lengths.astype(WIDTHS[int(narrowest(np.array([top]))[0])] if top < 1 << 32 else "<i8"),
    }
    typed = {k: np.ascontiguousarray(v, dtype=_TABLES[k]) if k in _TABLES else v for k, v in sections.items()}
    meta = {
        "format": _FORMAT,
        "seq": seq,
        "anchor": anchor,
        "rows": rows,
        "tokens": tokens,
        "structure": structure.hex(),
        "terms": names,
    }
    # The small parts are checked at load; the big ones term by term when decoded.
    write_sections(path, magic=_MAGIC, version=_FORMAT, meta=meta, arrays=typed, checked=(*_TABLES, "doc_len"))


class TermPostings(Mapping[str, tuple["_I32", "npt.NDArray[Any]"]]):
    """A saved file's terms, each decoded and checked when first asked for (then kept)."""

    def __init__(
        self,
        names: list[str],
        tables: dict[str, npt.NDArray[Any]],
        sections: dict[str, Any],
        rows: int,
        *,
        view: mmap.mmap | None = None,
    ):
        self._names = names
        self._position = {t: i for i, t in enumerate(names)}
        self._tables = tables
        self._sections = sections
        self._rows = rows
        self._decoded: dict[str, tuple[_I32, npt.NDArray[Any]]] = {}
        #: The map the sections are views of (see ahead), and its address.
        self._view = view
        self._base = np.frombuffer(view, dtype=np.uint8).ctypes.data if view is not None and len(view) else 0

    def ahead(self, terms: Iterable[str]) -> None:
        """Ask for the bytes of ``terms``' postings not decoded yet, all at once (a hint: a query decodes them next).

        With the file out of the page cache, each term's first touch would otherwise fault in its pages one read at
        a time, and a mapped file's faults read megabytes around each (the device's read-ahead): bench/RESULTS.md,
        issue 27, eighth round.
        """
        view = self._view
        if view is None or not self._base or not hasattr(mmap, "MADV_WILLNEED"):
            return
        for term in terms:
            i = self._position.get(term)
            if i is None or term in self._decoded:
                continue
            n, dw, ds, cw, cs = (int(self._tables[k][i]) for k in ("n", "dw", "ds", "cw", "cs"))
            for part, start in ((self._sections[f"d{dw}"], ds), (self._sections[f"c{cw}"], cs)):
                lo = int(part.ctypes.data) - self._base + start * part.itemsize
                hi = min(lo + n * part.itemsize, len(view))
                lo -= lo % mmap.PAGESIZE
                if 0 <= lo < hi:
                    with contextlib.suppress(OSError, ValueError):
                        view.madvise(mmap.MADV_WILLNEED, lo, hi - lo)

    def __getitem__(self, term: str) -> tuple[_I32, npt.NDArray[Any]]:
        hit = self._decoded.get(term)
        if hit is None:
            hit = self._decoded[term] = self._decode(self._position[term])
        return hit

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, term: object) -> bool:
        return term in self._position

    def count(self, term: str) -> int:
        """How many rows hold ``term`` (0: none), from the checked table: its keys are not decoded."""
        i = self._position.get(term)
        return 0 if i is None else int(self._tables["n"][i])

    def _decode(self, i: int) -> tuple[_I32, npt.NDArray[Any]]:
        n, dw, ds, cw, cs, crc = (int(self._tables[k][i]) for k in _TABLES)
        keys = self._sections[f"d{dw}"][ds : ds + n]
        counts = self._sections[f"c{cw}"][cs : cs + n]
        if keys.size != n or counts.size != n or zlib.crc32(counts.data, zlib.crc32(keys.data)) != crc:
            raise DamagedPostings(f"saved postings of term {self._names[i]!r} are damaged")
        docs = np.cumsum(keys, dtype=np.int64)
        if n and (int(docs[-1]) >= self._rows or (n > 1 and int(keys[1:].min()) == 0)):
            raise DamagedPostings(f"saved postings of term {self._names[i]!r} are out of order or range")
        tf = counts.astype(np.uint16 if counts.dtype.itemsize < 4 else np.int32)
        return docs.astype(np.int32), tf


def load_postings(path: Path) -> SavedPostings | None:
    """The saved postings, or None when missing, unreadable, of another format or inconsistent."""
    try:
        with open(path, "rb") as fh:
            if fh.read(2) == b"PK":
                return _load_legacy(path)
    except OSError:
        return None
    return read_mapped(path, _read, keep=True)  # the terms are decoded from the map as queries name them


def _read(view: mmap.mmap) -> SavedPostings | None:
    allowed = (*WIDTHS.values(), *_TABLES.values(), "<i8")
    found = read_sections(view, magic=_MAGIC, version=_FORMAT, allowed=allowed)
    if found is None:
        return None
    meta, sections = found
    names = [str(t) for t in meta["terms"]]
    if set(meta["crc"]) != {*_TABLES, "doc_len"}:
        return None
    tables = {k: sections[k] for k in _TABLES}
    if any(a.size != len(names) for a in tables.values()):
        return None
    doc_len = np.array(sections["doc_len"], dtype=np.int32)
    # Every term's slice inside its section (its bytes are checked when decoded).
    for kind in ("d", "c"):
        widths, starts = tables[f"{kind}w"], tables[f"{kind}s"]
        for w in WIDTHS:
            mine = widths == w
            ends = starts[mine] + tables["n"][mine]
            if mine.any() and (int(starts[mine].min()) < 0 or int(ends.max()) > sections[f"{kind}{w}"].size):
                return None
        if not np.isin(widths, list(WIDTHS)).all():
            return None
    if len(set(names)) != len(names) or (tables["n"] < 0).any():
        return None
    if hasattr(mmap, "MADV_RANDOM"):
        # Terms are read where queries name them (see TermPostings.ahead): a fault here should read its page, not
        # the megabytes around it that the device's read-ahead would (8 MB on this machine).
        with contextlib.suppress(OSError, ValueError):
            view.madvise(mmap.MADV_RANDOM)
    return _saved(meta, TermPostings(names, tables, sections, doc_len.size, view=view), doc_len, current=True)


def _saved(
    meta: dict[str, Any], terms: Mapping[str, tuple[_I32, npt.NDArray[Any]]], doc_len: _I32, *, current: bool
) -> SavedPostings:
    """What a file's header says the postings reflect, with its terms (either format)."""
    return SavedPostings(
        seq=int(meta["seq"]),
        anchor=str(meta["anchor"]),
        rows=int(meta["rows"]),
        tokens=int(meta["tokens"]),
        structure=bytes.fromhex(str(meta["structure"])),
        terms=terms,
        doc_len=doc_len,
        current=current,
    )


def _load_legacy(path: Path) -> SavedPostings | None:
    """A format 2 file (a deflated ``.npz``, keys as running differences): read whole, then written anew at close."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
            if meta.get("format") != _LEGACY_FORMAT:
                return None
            offsets, counts = data["offsets"], data["counts"]
            keys = np.cumsum(data["docs"], dtype=np.int64)
            doc_len = np.array(data["doc_len"], dtype=np.int32)
        names = [str(t) for t in meta["terms"]]
        if (
            offsets.size != len(names) + 1
            or keys.size != counts.size
            or int(offsets[-1]) != keys.size
            or (keys.size and (int(keys.max()) >= doc_len.size or int(keys.min()) < 0))
        ):
            return None
        docs, counts = keys.astype(np.int32), counts.astype(np.int32, copy=False)
        bounds = offsets.tolist()
        terms = {t: (docs[bounds[i] : bounds[i + 1]], counts[bounds[i] : bounds[i + 1]]) for i, t in enumerate(names)}
        return _saved(meta, terms, doc_len, current=False)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile):
        return None


def remove_postings(path: Path) -> None:
    """Delete the saved postings (they name a forgotten memory's terms), if any."""
    with contextlib.suppress(OSError):
        path.unlink()

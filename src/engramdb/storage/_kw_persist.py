"""The keyword cache's postings saved beside the database, so a store opens with them instead of rebuilding.

Building the postings from FTS5 takes seconds at 100k memories, and until they are ready the keyword
channel falls back to FTS5 (tens of ms for a tenant among many): the first searches after opening were
5-10x the warm ones. Saved, they load in tens of milliseconds.

``engram.db.kw`` is one ``.npz`` (written to a temporary file, fsynced, renamed over): every term's row keys and
counts back to back, each term's offset, the per-row token counts, and what the postings reflect (the ``history``
position and the memory id of the history row there, FTS5's totals and structure record). The row keys are stored as
differences from the previous key, deflated at the fastest level: ascending keys become small numbers and counts are
mostly 1, so the file is about a quarter of the raw arrays and the store's disk stays close to the database's own.
SQLite stays the only truth: a file whose history row is not this store's is not read, and a loaded one is checked
by :class:`~engramdb.storage._kw_index.KeywordIndex` exactly as a fresh build is (caught up through ``history``,
totals and structure compared with FTS5's own; any mismatch rebuilds), so a missing, damaged or foreign file only
costs that build. A file still naming a forgotten memory's terms is deleted as soon as the forget is seen, and
written anew at close.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import I32 as _I32
    from engramdb.storage._arrays import npt

__all__ = ["SavedPostings", "load_postings", "postings_path", "remove_postings", "save_postings"]

_FORMAT: Final = 2
#: zlib's fastest level: at 100k memories it writes ~0.2 s at close where level 6 takes ~1.5 s for 10% less.
_LEVEL: Final = 1


@dataclass(frozen=True, slots=True)
class SavedPostings:
    """What a saved file holds: per term its row keys (ascending) and counts, per row its token count."""

    seq: int
    #: The memory id of the store's history row at ``seq`` (tells this store's file from another's).
    anchor: str
    rows: int
    tokens: int
    structure: bytes
    terms: dict[str, tuple[_I32, _I32]]
    doc_len: _I32


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
    """Write the postings atomically (a temporary file in the same directory, fsynced, renamed over)."""
    names: list[str] = []
    docs: list[npt.NDArray[np.int32]] = []
    counts: list[npt.NDArray[np.int32]] = []
    for term, d, c in terms:
        if d.size:
            names.append(term)
            docs.append(d.astype(np.int32, copy=False))
            counts.append(c.astype(np.int32, copy=False))
    offsets = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum([d.size for d in docs], out=offsets[1:])
    meta = {
        "format": _FORMAT,
        "seq": seq,
        "anchor": anchor,
        "rows": rows,
        "tokens": tokens,
        "structure": structure.hex(),
        "terms": names,
    }
    flat = np.concatenate(docs) if docs else np.zeros(0, np.int32)
    arrays: dict[str, npt.NDArray[np.generic]] = {
        "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
        "offsets": offsets,
        # One running difference over all terms: a plain cumulative sum restores every key.
        "docs": np.diff(flat, prepend=np.int32(0)).astype(np.int32, copy=False),
        "counts": np.concatenate(counts) if counts else np.zeros(0, np.int32),
        "doc_len": np.asarray(doc_len, dtype=np.int32),
    }
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as fh:
            with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=_LEVEL) as zf:
                for name, array in arrays.items():
                    with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, array, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def load_postings(path: Path) -> SavedPostings | None:
    """The saved postings, or None when missing, unreadable, of another format or inconsistent."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
            if meta.get("format") != _FORMAT:
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
        return SavedPostings(
            seq=int(meta["seq"]),
            anchor=str(meta["anchor"]),
            rows=int(meta["rows"]),
            tokens=int(meta["tokens"]),
            structure=bytes.fromhex(str(meta["structure"])),
            terms=terms,
            doc_len=doc_len,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile):
        return None


def remove_postings(path: Path) -> None:
    """Delete the saved postings (they name a forgotten memory's terms), if any."""
    with contextlib.suppress(OSError):
        path.unlink()

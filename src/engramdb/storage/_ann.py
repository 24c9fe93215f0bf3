"""A persisted HNSW index (faiss) over a store's vectors, kept in a sidecar directory beside the database.

Past a size threshold the vector cache (:mod:`engramdb.storage._vector_index`) answers from an
HNSW graph instead of scanning every vector. The graph (over 8-bit codes) and the per-row data (memory
id, rid, agent, kind, public flag, and the ``seq`` of the vector row it was built from) are written once
into a *generation* directory and then memory-mapped, so opening a large store reads a few kilobytes, not
every vector, and only the pages a search touches become resident::

    engram.db.ann/
        CURRENT          JSON: format, generation, the SyncState it reflects, rows, dim, code tables
        g-<uuid>/        hnsw_sq.faiss (IndexHNSWSQ, 8-bit codes, inner product),
                         [groups.npy, members.npy, starts.npy], ids.npy, sorted_ids.npy, order.npy,
                         rids.npy, seqs.npy, agents.npy, kinds.npy, public.npy

A generation is built in ``tmp-<uuid>/``, renamed to ``g-<uuid>/``, and only then named by
``CURRENT`` (written to a temporary file and renamed over), so a reader never sees half a
generation. SQLite stays the only truth: the sidecar is checked against the store's
:class:`~engramdb.storage._vector_index.SyncState` on open, and deleting it loses nothing.

This module writes generations and overlays; :mod:`engramdb.storage._ann_base` maps one and searches it. The graph
walks over 8-bit codes (a quarter of the float32 bytes), and only its head is re-ranked
exactly, on the float32 vectors of SQLite's own ``vectors`` table read by seq
(:mod:`engramdb.storage._ann_rows`): the scores returned are true cosines, and each vector is on disk
once. A selective filter's rows are ranked on their codes and the head re-ranked the same way.

Formats 2 and 4 (which kept a second float32 copy, ``vectors.npy``, beside the graph) are migrated in
place at open (:func:`migrate_generation`: each row's seq looked up, then ``CURRENT`` rewritten, then the
copy deleted); format 1 and 3 read as missing, so the store loads from SQLite and builds anew.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I32 as _I32
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import Bool as _Bool
    from engramdb.storage._arrays import npt

from engramdb.errors import CorruptStoreError
from engramdb.storage._ann_fill import fill_sparse
from engramdb.storage._ann_groups import find_groups, save_groups
from engramdb.storage._ann_links import link_islands

__all__ = [
    "ANN_DEFAULT_THRESHOLD",
    "EF_MAX",
    "EF_SEARCH",
    "GRAPH_FILE",
    "AnnMeta",
    "Overlay",
    "Snapshot",
    "ann_available",
    "build_generation",
    "load_faiss",
    "migrate_generation",
    "prewarm",
    "read_meta",
    "read_overlay",
    "sidecar_dir",
    "write_overlay",
]

#: Vectors of one model above which the store answers from the HNSW index (see config.Settings.ann_threshold).
ANN_DEFAULT_THRESHOLD: Final = 20_000
log = logging.getLogger(__name__)

#: 5: no float32 file, each row's vector seq instead (re-scored from SQLite). 4: a graph node and a float32 row
#: per group of identical rows (_ann_groups.py); 2: a node and a float32 row per row; both migrated to 5 at open
#: (MIGRATE_FORMATS). 3 (short-lived) and 1 (IndexHNSWFlat) are rebuilt, as older code rebuilds a format-5 one.
_FORMAT: Final = 5
_READ_FORMATS: Final = (5,)
MIGRATE_FORMATS: Final = (2, 4)
GRAPH_FILE: Final = "hnsw_sq.faiss"
_VECTORS: Final = "vectors.npy"
_CURRENT: Final = "CURRENT"
#: HNSW graph degree and build/search breadth. On 50k distinct MiniLM rows M 16 / efConstruction 40 / ef 128
#: reaches recall@10 0.989, but on compare.py's 100k rows (LoCoMo turns and ~36 noisy copies of each, cosine
#: ~0.9 to their original: near-duplicate groups, as repeated events make) only 0.885, 0.932 at ef 256 and
#: 0.974 at ef 512 (walk p50 0.6 / 0.7 / 1.4-3.2 ms, load 11). M 32 / 80 / ef 256: 0.977 (@50: 0.982; ef 384:
#: 0.992), walk p50 0.7 ms, for a 1.7x longer build (146 s against 85 s at load 12) and a graph of 66 MB
#: against 53 MB (bench/RESULTS.md, issue 27). Graphs built with M 16 keep working (searched at ef 256).
_HNSW_M: Final = 32
_EF_CONSTRUCTION: Final = 80
EF_SEARCH: Final = 256
EF_MAX: Final = 1024
#: Rows the quantiser's per-dimension ranges are trained on (a random sample; values outside the
#: range are clipped, which only perturbs the walk: the head is re-ranked on float32 vectors).
_TRAIN_ROWS: Final = 100_000
#: Rows added to the graph per call while building, so a cancelled build (the store closing) stops within
#: one chunk: a few seconds even on busy cores (the chunks are drawn in a random order: see _insertion_chunks).
_ADD_CHUNK: Final = 2_048
#: Leftovers of builds this old (a crashed process's snapshot or half-built generation) are deleted.
_STALE_SECONDS: Final = 6 * 3600


def ann_available() -> bool:
    """Whether faiss is installed (without it every search stays an exact scan).

    Looked up, not imported: importing faiss takes 0.3-1.8 s, paid only once an index is used.
    """
    return importlib.util.find_spec("faiss") is not None


def prewarm() -> None:
    """Import faiss (on a background thread when a store with an index opens)."""
    with contextlib.suppress(ImportError):
        load_faiss()


def load_faiss() -> Any:
    """The faiss module, imported at first use."""
    import faiss

    return faiss


def sidecar_dir(database: Path) -> Path:
    """The sidecar directory of the database file ``database`` (``engram.db`` -> ``engram.db.ann``)."""
    return database.with_name(database.name + ".ann")


@dataclass(frozen=True, slots=True)
class AnnMeta:
    """What ``CURRENT`` says: the generation, what it reflects, and its code tables."""

    generation: str
    model_id: str | None
    epoch: int
    max_seq: int
    rows: int
    dim: int
    #: Agent and kind names in code order (row arrays store codes).
    agents: tuple[str, ...]
    kinds: tuple[str, ...]
    #: The overlay directory (``o-<uuid>``) of changes since the build, if any (see write_overlay).
    overlay: str | None = None


def read_meta(root: Path, *, formats: tuple[int, ...] = _READ_FORMATS) -> AnnMeta | None:
    """The sidecar's ``CURRENT``, or None when missing, unreadable or of a format not in ``formats``."""
    try:
        raw = json.loads((root / _CURRENT).read_text(encoding="utf-8"))
        if raw.get("format") not in formats:
            return None
        return AnnMeta(
            generation=str(raw["generation"]),
            model_id=None if raw["model_id"] is None else str(raw["model_id"]),
            epoch=int(raw["epoch"]),
            max_seq=int(raw["max_seq"]),
            rows=int(raw["rows"]),
            dim=int(raw["dim"]),
            agents=tuple(str(a) for a in raw["agents"]),
            kinds=tuple(str(k) for k in raw["kinds"]),
            overlay=None if raw.get("overlay") is None else str(raw["overlay"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The rows a build indexes, captured under the vector cache's lock.

    ``vectors`` is a file (``.npy``, float32, one row per memory) so the build reads it while
    the cache goes on changing; the other arrays are in row order. ``seqs``: each row's vector
    seq in the store's ``vectors`` table (-1: not known, the row's memory changed since).
    """

    meta: AnnMeta
    vectors: Path
    ids: npt.NDArray[np.bytes_]
    rids: _I64
    agents: _I32
    kinds: _I32
    public: _Bool
    seqs: _I64


def build_generation(root: Path, snap: Snapshot, cancel: threading.Event) -> AnnMeta | None:
    """Build the HNSW graph of ``snap`` into a new generation and name it in ``CURRENT``.

    Returns the new meta, or None if ``cancel`` was set (nothing is left behind). Uses
    both cores (faiss's OpenMP threads); runs on a background thread of the store.
    """
    faiss = load_faiss()
    name = uuid.uuid4().hex
    tmp = root / f"tmp-{name}"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        vectors = np.load(snap.vectors, mmap_mode="r")
        found = find_groups(vectors)
        if found is not None:
            # One node per group of identical rows: the graph is built over each group's first row.
            save_groups(tmp, found[0])
            vectors = _gather(vectors, found[1], tmp / "leaders.npy")
        index = faiss.IndexHNSWSQ(snap.meta.dim, faiss.ScalarQuantizer.QT_8bit, _HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = _EF_CONSTRUCTION
        n = vectors.shape[0]
        sample = np.sort(np.random.default_rng(0).choice(n, size=min(n, _TRAIN_ROWS), replace=False))
        index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
        chunks = _insertion_chunks(n)
        for rows in chunks:
            if cancel.is_set():
                return None
            index.add(np.ascontiguousarray(vectors[rows], dtype=np.float32))
        if cancel.is_set():
            return None
        # Node i of the graph is the i-th row added: renumber the nodes (codes and links) back to row order.
        added = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
        if not np.array_equal(added, np.arange(n)):
            index.permute_entries(np.argsort(added).astype(np.int64))
        # Near-duplicate rows leave nodes with most level-0 slots free (see _ann_fill): fill them with
        # their nearest rows, then link the groups still closed off as islands (see _ann_links).
        filled = fill_sparse(index, faiss, vectors)
        if filled:
            log.debug("HNSW build: %d level-0 links added to sparse nodes", filled)
        if cancel.is_set():
            return None
        linked = link_islands(index, faiss, vectors)
        if linked:
            log.debug("HNSW build: %d groups of rows linked to the rest of the graph", linked)
        del vectors
        faiss.write_index(index, str(tmp / GRAPH_FILE))
        del index
        # No float32 file: the head is re-scored on SQLite's rows, found by each row's seq.
        with contextlib.suppress(OSError):
            (tmp / "leaders.npy").unlink()
        order = np.argsort(snap.ids, kind="stable").astype(np.int64)
        arrays = {
            "ids": snap.ids,
            "sorted_ids": snap.ids[order],
            "order": order,
            "rids": snap.rids,
            "seqs": snap.seqs,
            "agents": snap.agents,
            "kinds": snap.kinds,
            "public": snap.public,
        }
        for key, arr in arrays.items():
            np.save(tmp / f"{key}.npy", arr, allow_pickle=False)
        if cancel.is_set():
            return None
        final = root / f"g-{name}"
        tmp.rename(final)
        meta = AnnMeta(**{**_fields(snap.meta), "generation": final.name})
        _write_current(root, meta)
        _remove_other_generations(root, keep=final.name)
        return meta
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(OSError):
            snap.vectors.unlink()


def migrate_generation(root: Path, meta: AnnMeta, seqs: _I64) -> AnnMeta:
    """Bring a format-2 or -4 generation to format 5: ``seqs.npy`` written, ``CURRENT`` renamed over, then
    the float32 copy deleted. Each step leaves a sidecar that reads right: a crash before ``CURRENT`` leaves
    the old format (migrated again at the next open), one after it only an orphan file, deleted then."""
    directory = root / meta.generation
    if len(seqs) != meta.rows:
        raise CorruptStoreError(f"vector index {directory}: {len(seqs)} seqs for {meta.rows} rows")
    tmp = directory / f"seqs.npy.tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as fh:
        np.save(fh, np.asarray(seqs, dtype=np.int64), allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, directory / "seqs.npy")
    _write_current(root, meta)
    drop_float32_copy(directory)
    return meta


def drop_float32_copy(directory: Path) -> None:
    """Delete an older format's float32 file left beside a format-5 generation (a migration cut short)."""
    with contextlib.suppress(OSError):
        (directory / _VECTORS).unlink()


def _gather(vectors: _F32, rows: _I64, path: Path) -> _F32:
    """``vectors[rows]`` written to ``path`` chunk by chunk and mapped (never all of it in memory)."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows.size, vectors.shape[1]))
    for start in range(0, rows.size, _ADD_CHUNK):
        out[start : start + _ADD_CHUNK] = vectors[rows[start : start + _ADD_CHUNK]]
    out.flush()
    del out
    gathered: _F32 = np.load(path, mmap_mode="r")
    return gathered


def _insertion_chunks(n: int) -> list[_I64]:
    """The rows of a build in the order they are added to the graph: a random order, in chunks of :data:`_ADD_CHUNK`.

    faiss inserts the rows of one ``add`` call in random order, but the calls in the order given. In store
    order a near-duplicate comes after its original and keeps only it as a link (the heuristic drops every
    other candidate as closer to the original), so each group hangs off one node: on compare.py's 100k rows
    (LoCoMo turns and ~36 noisy copies each) a graph added in store order agreed with the exact top 50 on 0.40
    of rows, one added in a random order on 0.85 (one ``add`` of every row: 0.86). Each chunk is sorted: the
    rows are read from the mapped snapshot in file order.
    """
    perm = np.random.default_rng(n).permutation(n)
    return [np.sort(perm[start : start + _ADD_CHUNK]) for start in range(0, n, _ADD_CHUNK)]


def _fields(meta: AnnMeta) -> dict[str, Any]:
    return {f: getattr(meta, f) for f in AnnMeta.__slots__}


def _write_current(root: Path, meta: AnnMeta) -> None:
    """Name ``meta``'s generation in ``CURRENT`` atomically (write a temporary file, fsync, rename)."""
    body = {"format": _FORMAT, **_fields(meta), "agents": list(meta.agents), "kinds": list(meta.kinds)}
    tmp = root / f"{_CURRENT}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(body, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / _CURRENT)


def _remove_other_generations(root: Path, *, keep: str, prefix: str = "g-") -> None:
    """Delete finished generations (or overlays, ``prefix="o-"``) other than ``keep``.

    A process that has one memory-mapped keeps reading it (the file lives until unmapped);
    ``tmp-*`` directories are another builder's work in progress and are left alone.
    """
    now = time.time()
    for child in root.iterdir():
        if child.name.startswith(prefix) and child.name != keep:
            shutil.rmtree(child, ignore_errors=True)
        elif child.name.startswith(("tmp-", "snapshot-")):
            with contextlib.suppress(OSError):
                if now - child.stat().st_mtime > _STALE_SECONDS:
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink()
    if prefix == "g-":  # a new generation has no overlay yet
        _remove_other_generations(root, keep="", prefix="o-")


#: Row arrays of an overlay: the index rows' state, then the delta's rows.
_OVERLAY_ARRAYS: Final = ("alive", "agents", "kinds", "public")
#: The delta's vectors are not written: they are SQLite's, read back by memory id at open (older overlays
#: carry ``delta_vectors.npy``, still read).
_DELTA_ARRAYS: Final = ("ids", "rids", "agents", "kinds", "public")


@dataclass(frozen=True, slots=True)
class Overlay:
    """Changes since a generation's build: which of its rows live, their filter data, and newer rows."""

    alive: _Bool
    agents: _I32
    kinds: _I32
    public: _Bool
    delta: dict[str, npt.NDArray[Any]]


def write_overlay(root: Path, meta: AnnMeta, overlay: Overlay) -> None:
    """Persist ``overlay`` over ``meta.generation`` and name both in ``CURRENT`` (atomically).

    Lets a store whose own writes changed indexed rows (forget, update) reopen on its sidecar
    instead of rebuilding it; ``meta`` carries the state those changes reach.
    """
    if not (root / meta.generation).is_dir():
        return  # another process replaced the generation meanwhile: its CURRENT stays
    name = f"o-{uuid.uuid4().hex}"
    tmp = root / f"tmp-{name}"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        for key in _OVERLAY_ARRAYS:
            np.save(tmp / f"{key}.npy", getattr(overlay, key), allow_pickle=False)
        for key in _DELTA_ARRAYS:
            np.save(tmp / f"delta_{key}.npy", overlay.delta[key], allow_pickle=False)
        tmp.rename(root / name)
        _write_current(root, AnnMeta(**{**_fields(meta), "overlay": name}))
        _remove_other_generations(root, keep=name, prefix="o-")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_overlay(directory: Path, n: int) -> Overlay:
    """The overlay :func:`write_overlay` wrote in ``directory`` over a generation of ``n`` rows."""
    parts = {key: np.load(directory / f"{key}.npy") for key in _OVERLAY_ARRAYS}
    delta = {key: np.load(directory / f"delta_{key}.npy") for key in _DELTA_ARRAYS}
    if (directory / "delta_vectors.npy").exists():
        delta["vectors"] = np.load(directory / "delta_vectors.npy")
    if any(len(a) != n for a in parts.values()) or len({len(a) for a in delta.values()}) != 1:
        raise CorruptStoreError(f"vector index overlay {directory} does not match its generation")
    return Overlay(
        np.array(parts["alive"], dtype=np.bool_),
        np.array(parts["agents"], dtype=np.int32),
        np.array(parts["kinds"], dtype=np.int32),
        np.array(parts["public"], dtype=np.bool_),
        delta,
    )


def snapshot_path(root: Path) -> Path:
    """A fresh file name for a build's vector snapshot."""
    root.mkdir(parents=True, exist_ok=True)
    return root / f"snapshot-{uuid.uuid4().hex}.npy"

"""A persisted HNSW index (faiss) over a store's vectors, kept in a sidecar directory beside the database.

Past a size threshold the vector cache (:mod:`engramdb.storage._vector_index`) answers from an
HNSW graph instead of scanning every vector. The graph, the float32 vectors and the per-row filter
data (memory id, rid, agent, kind, public flag) are written once into a *generation* directory and
then memory-mapped, so opening a large store reads a few kilobytes, not every vector, and only the
pages a search touches become resident::

    engram.db.ann/
        CURRENT          JSON: format, generation, the SyncState it reflects, rows, dim, code tables
        g-<uuid>/        hnsw_sq.faiss (IndexHNSWSQ, 8-bit codes, inner product), vectors.npy
                         (float32, one row per node), [groups.npy, members.npy, starts.npy],
                         ids.npy, sorted_ids.npy, order.npy, rids.npy, agents.npy, kinds.npy, public.npy

A generation is built in ``tmp-<uuid>/``, renamed to ``g-<uuid>/``, and only then named by
``CURRENT`` (written to a temporary file and renamed over), so a reader never sees half a
generation. SQLite stays the only truth: the sidecar is checked against the store's
:class:`~engramdb.storage._vector_index.SyncState` on open, and deleting it loses nothing.

The graph walks over 8-bit codes (a quarter of the float32 bytes: at 1M rows ~0.4 GB of codes
against 1.5 GB of vectors, so the pages a walk touches stay few), and only its head is
re-ranked exactly: those rows' float32 vectors are read with ``os.pread`` (through the page
cache, never mapped, so they add nothing to the process's resident memory) and the scores
returned are true cosines. The float32 file also serves the exact scan of a selective filter
(mapped with ``MADV_RANDOM``: no read-ahead around the rows read).

Format 1 (``IndexHNSWFlat`` with the vectors inside the graph file) is no longer read: its
``CURRENT`` reads as missing, so the store loads from SQLite and builds a format-2 generation.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import mmap
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
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
from engramdb.storage._ann_exact import MaskCache
from engramdb.storage._ann_fill import fill_sparse
from engramdb.storage._ann_groups import Groups, find_groups, load_groups, save_groups
from engramdb.storage._ann_links import link_islands

__all__ = [
    "ANN_DEFAULT_THRESHOLD",
    "AnnBase",
    "AnnMeta",
    "Overlay",
    "Snapshot",
    "ann_available",
    "build_generation",
    "prewarm",
    "read_meta",
    "sidecar_dir",
    "write_overlay",
]

#: Vectors of one model above which the store answers from the HNSW index (see config.Settings.ann_threshold).
ANN_DEFAULT_THRESHOLD: Final = 20_000
log = logging.getLogger(__name__)

#: 4: a graph node and a float32 row per group of identical rows (_ann_groups.py); 2: a node per row, still read
#: (3, a node per group over a float32 row per row, was short-lived); 1: IndexHNSWFlat. Formats not read are
#: rebuilt on open, as older code rebuilds a format-4 sidecar.
_FORMAT: Final = 4
_READ_FORMATS: Final = (2, 4)
_GRAPH: Final = "hnsw_sq.faiss"
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
_EF_SEARCH: Final = 256
_EF_MAX: Final = 1024
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
        _faiss()


def _faiss() -> Any:
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


def read_meta(root: Path) -> AnnMeta | None:
    """The sidecar's ``CURRENT``, or None when missing, unreadable or of another format."""
    try:
        raw = json.loads((root / _CURRENT).read_text(encoding="utf-8"))
        if raw.get("format") not in _READ_FORMATS:
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
    the cache goes on changing; the other arrays are in row order.
    """

    meta: AnnMeta
    vectors: Path
    ids: npt.NDArray[np.bytes_]
    rids: _I64
    agents: _I32
    kinds: _I32
    public: _Bool


def build_generation(root: Path, snap: Snapshot, cancel: threading.Event) -> AnnMeta | None:
    """Build the HNSW graph of ``snap`` into a new generation and name it in ``CURRENT``.

    Returns the new meta, or None if ``cancel`` was set (nothing is left behind). Uses
    both cores (faiss's OpenMP threads); runs on a background thread of the store.
    """
    faiss = _faiss()
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
        faiss.write_index(index, str(tmp / _GRAPH))
        del index
        # The float32 file of the graph's nodes: the snapshot itself, or each group's row once (identical rows
        # share one vector, as they share one node).
        os.replace(snap.vectors if found is None else tmp / "leaders.npy", tmp / _VECTORS)
        order = np.argsort(snap.ids, kind="stable").astype(np.int64)
        arrays = {
            "ids": snap.ids,
            "sorted_ids": snap.ids[order],
            "order": order,
            "rids": snap.rids,
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
_DELTA_ARRAYS: Final = ("ids", "rids", "agents", "kinds", "public", "vectors")


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


def _read_overlay(directory: Path, n: int) -> Overlay:
    parts = {key: np.load(directory / f"{key}.npy") for key in _OVERLAY_ARRAYS}
    delta = {key: np.load(directory / f"delta_{key}.npy") for key in _DELTA_ARRAYS}
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


def _map_rows(path: Path, n: int, dim: int) -> tuple[_F32, int, int]:
    """Map a float32 ``.npy`` of ``n`` x ``dim`` read-only, without read-ahead.

    Returns the array, the file's descriptor (kept open for ``os.pread``) and the data's offset.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        with open(path, "rb", buffering=0) as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(fh)
            offset = fh.tell()
        if shape != (n, dim) or fortran or dtype != np.dtype(np.float32):
            raise CorruptStoreError(f"vector file {path} holds {shape} {dtype}, expected ({n}, {dim}) float32")
        if n == 0:
            return np.empty((0, dim), dtype=np.float32), fd, offset
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        # A random row per read: the kernel's default read-ahead would map (and count as resident)
        # up to 128 KB around each one.
        mapped.madvise(mmap.MADV_RANDOM)
        rows: _F32 = np.frombuffer(mapped, dtype=np.float32, count=n * dim, offset=offset).reshape(n, dim)
        return rows, fd, offset
    except BaseException:
        os.close(fd)
        raise


class AnnBase:
    """One memory-mapped generation: the 8-bit graph, the float32 vectors and the filter data of its rows.

    Rows are never added: rows replaced or forgotten since the build are marked dead
    (``alive``), and the vector cache keeps newer rows in a small exact delta beside it.
    Filter data that may change (agent, kind, public) is copied into memory; ids and
    rids are memory-mapped.
    """

    def __init__(self, root: Path, meta: AnnMeta) -> None:
        faiss = _faiss()
        self._fd = -1  # set first: __del__ closes it
        directory = root / meta.generation
        try:
            # IO_FLAG_MMAP_IFC maps the graph and the codes, so opening reads nothing; plain IO_FLAG_MMAP
            # would read the HNSW graph into memory.
            self._index = faiss.read_index(str(directory / _GRAPH), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError as exc:  # faiss reports unreadable files as RuntimeError
            raise CorruptStoreError(f"unreadable vector index {directory}: {exc}") from exc
        try:
            #: Rows by graph node when identical rows share one (None: a node per row).
            self.groups: Groups | None = load_groups(directory, meta.rows, int(self._index.ntotal))
        except (OSError, ValueError) as exc:
            raise CorruptStoreError(f"unreadable vector index {directory}: {exc}") from exc
        nodes = meta.rows if self.groups is None else int(self._index.ntotal)
        try:
            #: The float32 vector of each graph node (of each row, or each group of identical rows).
            self.vectors, self._fd, self._offset = _map_rows(directory / _VECTORS, nodes, meta.dim)
        except (OSError, ValueError) as exc:
            raise CorruptStoreError(f"unreadable vector index {directory}: {exc}") from exc
        try:
            self.ids: npt.NDArray[np.bytes_] = np.load(directory / "ids.npy", mmap_mode="r")
            self._sorted_ids: npt.NDArray[np.bytes_] = np.load(directory / "sorted_ids.npy", mmap_mode="r")
            self._order: _I64 = np.load(directory / "order.npy", mmap_mode="r")
            self.rids: _I64 = np.load(directory / "rids.npy", mmap_mode="r")
            self.agents: _I32 = np.array(np.load(directory / "agents.npy"), dtype=np.int32)
            self.kinds: _I32 = np.array(np.load(directory / "kinds.npy"), dtype=np.int32)
            self.public: _Bool = np.array(np.load(directory / "public.npy"), dtype=np.bool_)
        except (OSError, ValueError) as exc:
            raise CorruptStoreError(f"unreadable vector index {directory}: {exc}") from exc
        n = meta.rows
        if (
            self._index.ntotal != nodes
            or self._index.d != meta.dim
            or any(len(a) != n for a in (self.ids, self._sorted_ids, self._order, self.rids, self.agents))
            or len(self.kinds) != n
            or len(self.public) != n
        ):
            raise CorruptStoreError(f"vector index {directory} does not match its description")
        storage = faiss.downcast_index(self._index.storage)
        self._code_size = int(storage.code_size)
        #: The graph's codes (a view of the mapped file), to check the scrub's offset against.
        self._codes: npt.NDArray[np.uint8] = faiss.rev_swig_ptr(storage.codes.data(), nodes * self._code_size)
        self._nodes = nodes
        self._path = directory / _GRAPH
        self._vector_path = directory / _VECTORS
        self.meta = meta
        self.n = n
        self.alive: _Bool = np.ones(n, dtype=np.bool_)
        self.dead = 0
        #: Moves whenever a row's liveness or filter data changes (masks made before are stale).
        self.version = 0
        #: Filter masks over these rows, by version (see MaskCache).
        self.masks = MaskCache()
        #: Rows newer than the build, from the overlay (the caller moves them into its delta).
        self.delta: dict[str, npt.NDArray[Any]] | None = None
        if meta.overlay is not None:
            try:
                over = _read_overlay(root / meta.overlay, n)
            except (OSError, ValueError) as exc:
                raise CorruptStoreError(f"unreadable vector index overlay {meta.overlay}: {exc}") from exc
            self.alive, self.agents, self.kinds, self.public = over.alive, over.agents, over.kinds, over.public
            self.dead = n - int(np.count_nonzero(self.alive))
            self.delta = over.delta
        if self.groups is not None:
            self.groups.refresh(self.alive)

    def row_of(self, memory_id: str) -> int | None:
        """The live row of ``memory_id``, or None."""
        key = memory_id.encode()
        at = int(np.searchsorted(self._sorted_ids, key))
        if at >= self.n or self._sorted_ids[at] != key:
            return None
        row = int(self._order[at])
        return row if self.alive[row] else None

    def kill(self, row: int) -> None:
        """Mark a row dead (its memory was replaced, moved to the delta, or forgotten) and scrub its vector."""
        if self.alive[row]:
            self.alive[row] = False
            self.dead += 1
            self.version += 1
            # A row sharing its node with live rows keeps the node's code: that vector is still theirs.
            node = row if self.groups is None else int(self.groups.groups[row])
            self._scrub(row, node if self.groups is None or self.groups.kill(row, self.alive) else None)

    def close(self) -> None:
        """Release the vector file's descriptor (the maps go when the arrays are dropped)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()

    def _scrub(self, row: int, node: int | None) -> None:
        """Overwrite a dead row's float32 vector and its 8-bit code with zeros: a forgotten memory leaves no vector.

        Node ``i`` (row ``i``, or the group of identical rows ``i``) has its float32 vector at
        ``offset + i * dim * 4`` of ``vectors.npy``. faiss writes an ``IndexHNSWSQ`` as its graph followed
        by the quantiser and the codes, so node ``i``'s code is at ``size - (nodes - i) * code_size``.
        ``node`` None (other rows of the group live on, and the vector is theirs too) scrubs nothing. The
        bytes at each place are checked against the mapped row before anything is written, and a file of
        another layout is left alone (the next rebuild drops the row). Dead rows are never returned, so the
        zeros are never read.
        """
        if node is None:
            return
        width = self.meta.dim * 4
        self._zero(self._vector_path, self._offset + node * width, self.vectors[node].tobytes(), row)
        code = self._code_size
        with contextlib.suppress(OSError):
            at = self._path.stat().st_size - (self._nodes - node) * code
            self._zero(self._path, at, self._codes[node * code : (node + 1) * code].tobytes(), row)

    @staticmethod
    def _zero(path: Path, offset: int, expected: bytes, row: int) -> None:
        try:
            with path.open("r+b") as f:
                f.seek(max(offset, 0))
                if offset < 0 or f.read(len(expected)) != expected:
                    log.warning("vector index %s has an unexpected layout: row %d not scrubbed", path, row)
                    return
                f.seek(offset)
                f.write(bytes(len(expected)))
        except OSError as exc:
            log.warning("cannot scrub row %d of vector index %s: %s", row, path, exc)

    def read_range(self, start: int, stop: int) -> _F32:
        """The float32 vectors of rows ``start`` to ``stop`` in one ``os.pread`` (a rebuild's sequential read)."""
        if self.groups is not None:
            return self._fetch_nodes(np.asarray(self.groups.groups[start:stop]))
        width = self.meta.dim * 4
        want = (stop - start) * width
        chunk = os.pread(self._fd, want, self._offset + start * width)
        if len(chunk) != want:
            raise CorruptStoreError(f"vector file {self._vector_path} is shorter than its description")
        return np.frombuffer(chunk, dtype=np.float32).reshape(stop - start, self.meta.dim)

    def fetch(self, rows: _I64) -> _F32:
        """The float32 vectors of ``rows`` (in that order)."""
        return self._fetch_nodes(rows if self.groups is None else np.asarray(self.groups.groups[rows]))

    def scores(self, query: _F32, rows: _I64 | None) -> _F32:
        """Exact cosines of ``rows`` (every row when None), read through the map."""
        if self.groups is None:
            on: _F32 = np.einsum("ij,j->i", self.vectors if rows is None else self.vectors[rows], query)
            return on
        nodes = np.asarray(self.groups.groups if rows is None else self.groups.groups[rows])
        if rows is None or nodes.size > self._nodes:
            every: _F32 = np.einsum("ij,j->i", self.vectors, query)[nodes]
            return every
        unique, back = np.unique(nodes, return_inverse=True)
        scored: _F32 = np.einsum("ij,j->i", self.vectors[unique], query)[back.reshape(-1)]
        return scored

    def _fetch_nodes(self, rows: _I64) -> _F32:
        """The float32 vectors of graph nodes ``rows`` (in that order), read with ``os.pread``.

        Not through the map: pages read here stay in the page cache, outside this process's
        resident memory, which a re-ranked head of a few dozen rows per search would otherwise
        grow by 4 KB each.
        """
        width = self.meta.dim * 4
        out = np.empty((rows.size, self.meta.dim), dtype=np.float32)
        view = out.data.cast("B")
        for i, row in enumerate(rows.tolist()):
            chunk = os.pread(self._fd, width, self._offset + row * width)
            if len(chunk) != width:
                raise CorruptStoreError(f"vector file {self._vector_path} is shorter than its description")
            view[i * width : (i + 1) * width] = chunk
        return out

    def live_rows(self) -> Iterator[int]:
        """Row numbers still alive."""
        return (int(i) for i in np.flatnonzero(self.alive))

    def id_of(self, row: int) -> str:
        """The memory id of a row."""
        return bytes(self.ids[row]).decode()

    def search(self, query: _F32, k: int, allowed: _Bool | None, passing: int) -> tuple[_I64, _F32]:
        """Up to ``k`` (row, cosine) pairs from the graph, best first, among ``allowed`` rows.

        The graph ranks on 8-bit codes; its ``k`` rows are then re-scored exactly on their
        float32 vectors, so the scores are true cosines (ask for a head deeper than needed:
        the codes' order near the cut-off is the least sure). ``passing`` is how many rows
        ``allowed`` admits: the search breadth grows as the filter narrows, because the
        graph walk visits rows it then discards. With groups of identical rows the walk is
        over groups, each scored by one live row of it, and each found group gives every
        row of it ``allowed`` admits.
        """
        groups = self.groups
        if groups is None:
            found = self._walk(query, k, allowed, passing)
            scored = found
        else:
            nodes = None if allowed is None else groups.allowed(allowed, self.alive)
            found = self._walk(query, k, nodes, passing if nodes is None else int(np.count_nonzero(nodes)))
            assert groups.rep is not None
            scored = found
        exact: _F32 = np.einsum("ij,j->i", self._fetch_nodes(scored), query) if found.size else np.empty(0, np.float32)
        order = np.argsort(-exact, kind="stable")
        if groups is None:
            return found[order], exact[order]
        return groups.expand(found[order], exact[order], allowed, self.alive, k)

    def _walk(self, query: _F32, k: int, allowed: _Bool | None, passing: int) -> _I64:
        """The graph's ``k`` best nodes among ``allowed`` (``passing`` of them), by 8-bit codes, unordered."""
        faiss = _faiss()
        ef = max(_EF_SEARCH, k)
        selector = None
        if allowed is not None:
            share = max(passing, 1) / self._nodes
            ef = min(_EF_MAX, max(ef, int(ef / share**0.5)))
            bits = np.packbits(allowed, bitorder="little")
            selector = faiss.IDSelectorBitmap(self._nodes, faiss.swig_ptr(bits))
        params = faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        _approx, found = self._index.search(query.reshape(1, -1), k, params=params)
        nodes: _I64 = found[0][found[0] >= 0].astype(np.int64)
        return nodes

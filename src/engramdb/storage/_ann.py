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

The graph walks over 8-bit codes (a quarter of the float32 bytes), and only its head is re-ranked
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
from engramdb.storage._ann_exact import MaskCache, distinct
from engramdb.storage._ann_fill import fill_sparse
from engramdb.storage._ann_groups import Groups, find_groups, load_groups, save_groups
from engramdb.storage._ann_links import link_islands
from engramdb.storage._ann_rows import VectorSource

__all__ = [
    "ANN_DEFAULT_THRESHOLD",
    "AnnBase",
    "AnnMeta",
    "Overlay",
    "Snapshot",
    "ann_available",
    "build_generation",
    "migrate_generation",
    "prewarm",
    "read_meta",
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


def _read_overlay(directory: Path, n: int) -> Overlay:
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


class AnnBase:
    """One memory-mapped generation: the 8-bit graph and the data of its rows.

    Rows are never added: rows replaced or forgotten since the build are marked dead
    (``alive``), and the vector cache keeps newer rows in a small exact delta beside it.
    Filter data that may change (agent, kind, public) is copied into memory; ids, rids
    and seqs are memory-mapped. Float32 vectors are read from ``source`` by seq.
    """

    def __init__(self, root: Path, meta: AnnMeta, source: VectorSource) -> None:
        faiss = _faiss()
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
            self.ids: npt.NDArray[np.bytes_] = np.load(directory / "ids.npy", mmap_mode="r")
            self._sorted_ids: npt.NDArray[np.bytes_] = np.load(directory / "sorted_ids.npy", mmap_mode="r")
            self._order: _I64 = np.load(directory / "order.npy", mmap_mode="r")
            self.rids: _I64 = np.load(directory / "rids.npy", mmap_mode="r")
            #: Each row's seq in the store's ``vectors`` table: where its float32 vector is read.
            self.seqs: _I64 = np.load(directory / "seqs.npy", mmap_mode="r")
            self.agents: _I32 = np.array(np.load(directory / "agents.npy"), dtype=np.int32)
            self.kinds: _I32 = np.array(np.load(directory / "kinds.npy"), dtype=np.int32)
            self.public: _Bool = np.array(np.load(directory / "public.npy"), dtype=np.bool_)
        except (OSError, ValueError) as exc:
            raise CorruptStoreError(f"unreadable vector index {directory}: {exc}") from exc
        n = meta.rows
        nodes = n if self.groups is None else int(self._index.ntotal)
        arrays = (self.ids, self._sorted_ids, self._order, self.rids, self.seqs, self.agents, self.kinds, self.public)
        if self._index.ntotal != nodes or self._index.d != meta.dim or any(len(a) != n for a in arrays):
            raise CorruptStoreError(f"vector index {directory} does not match its description")
        storage = faiss.downcast_index(self._index.storage)
        self._code_size = int(storage.code_size)
        trained = faiss.vector_to_array(storage.sq.trained).astype(np.float32)
        if self._code_size != meta.dim or trained.size != 2 * meta.dim:
            raise CorruptStoreError(f"vector index {directory} is not an 8-bit index of {meta.dim} dimensions")
        #: QT_8bit decodes code c of dimension j as vmin[j] + (c + 0.5) / 255 * vdiff[j]: a code's cosine with a
        #: query is a constant plus codes @ (query * vdiff / 255), and only the order matters to a ranking.
        self._step: _F32 = trained[meta.dim :] / 255.0
        #: The graph's codes (a view of the mapped file), by node.
        self._codes: npt.NDArray[np.uint8] = faiss.rev_swig_ptr(storage.codes.data(), nodes * self._code_size)
        self._source = source
        self._nodes = nodes
        self._path = directory / _GRAPH
        self.meta = meta
        self.n = n
        self.alive: _Bool = np.ones(n, dtype=np.bool_)
        self.dead = 0
        #: Moves whenever a row's liveness or filter data changes (masks made before are stale).
        self.version = 0
        #: Filter masks over these rows, by version (see MaskCache).
        self.masks = MaskCache()
        self._by_rid: _I32 | None = None
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

    def rows_of_rids(self, rids: _I64) -> _I64:
        """The live rows of memory keys ``rids``, ascending (a table by key, made at first use: 4 bytes a key)."""
        if self._by_rid is None:
            self._by_rid = np.full(int(self.rids.max(initial=-1)) + 1, -1, dtype=np.int32)
            self._by_rid[self.rids] = np.arange(self.n, dtype=np.int32)
        rows = self._by_rid[rids[(rids >= 0) & (rids < self._by_rid.size)]].astype(np.int64)
        rows = distinct(rows[rows >= 0])
        return rows[self.alive[rows]]

    def kill(self, row: int) -> None:
        """Mark a row dead (its memory was replaced, moved to the delta, or forgotten) and scrub its code."""
        if self.alive[row]:
            self.alive[row] = False
            self.dead += 1
            self.version += 1
            # A row sharing its node with live rows keeps the node's code: that vector is still theirs.
            node = row if self.groups is None else int(self.groups.groups[row])
            if self.groups is None or self.groups.kill(row, self.alive):
                self._scrub(row, node)

    def close(self) -> None:
        """Nothing held open (the maps go when the arrays are dropped; the source is its owner's)."""

    def _scrub(self, row: int, node: int) -> None:
        """Overwrite a dead node's 8-bit code with zeros: a forgotten memory leaves no trace of its vector.

        faiss writes an ``IndexHNSWSQ`` as its graph followed by the quantiser and the codes, so node
        ``i``'s code is at ``size - (nodes - i) * code_size``. The bytes there are checked against the
        mapped code before anything is written, and a file of another layout is left alone (the next
        rebuild drops the row). Dead rows are never returned, so the zeros are never read. The float32
        vector is SQLite's, deleted there (``secure_delete``).
        """
        code = self._code_size
        try:
            at = self._path.stat().st_size - (self._nodes - node) * code
            expected = self._codes[node * code : (node + 1) * code].tobytes()
            with self._path.open("r+b") as f:
                f.seek(max(at, 0))
                if at < 0 or f.read(len(expected)) != expected:
                    log.warning("vector index %s has an unexpected layout: row %d not scrubbed", self._path, row)
                    return
                f.seek(at)
                f.write(bytes(len(expected)))
        except OSError as exc:
            log.warning("cannot scrub row %d of vector index %s: %s", row, self._path, exc)

    def fetch(self, rows: _I64) -> tuple[_F32, _Bool]:
        """The float32 vectors of ``rows`` (in that order) from the store, and which were found."""
        return self._source.vectors(np.asarray(self.seqs[rows], dtype=np.int64), self.meta.dim)

    def _exact_nodes(self, query: _F32, nodes: _I64) -> tuple[_I64, _F32]:
        """The nodes whose vector is still in the store, with their exact cosines (unordered)."""
        if self.groups is None:
            rows = nodes
        else:
            assert self.groups.rep is not None
            rows = self.groups.rep[nodes]
            nodes, rows = nodes[rows >= 0], rows[rows >= 0]
        vectors, found = self.fetch(rows)
        exact: _F32 = np.einsum("ij,j->i", vectors[found], query)
        return nodes[found], exact

    def _approx(self, query: _F32, nodes: _I64) -> _F32:
        """``nodes``' cosines with ``query`` on their 8-bit codes, up to a constant (for ranking only)."""
        codes = self._codes.reshape(self._nodes, self._code_size)[nodes]
        # einsum, not matmul: BLAS's threads cost 25 ms wall for 2,000 rows on busy cores, einsum 0.18 ms.
        approx: _F32 = np.einsum("ij,j->i", codes, query * self._step)
        return approx

    def live_rows(self) -> Iterator[int]:
        """Row numbers still alive."""
        return (int(i) for i in np.flatnonzero(self.alive))

    def id_of(self, row: int) -> str:
        """The memory id of a row."""
        return bytes(self.ids[row]).decode()

    def scan(self, query: _F32, rows: _I64, limit: int, head: int) -> tuple[_I64, _F32]:
        """The best ``limit`` of ``rows`` (best first, exact cosines): all ranked on their codes, then the
        best ``head`` of them re-ranked on their float32 vectors, as a graph walk's head is."""
        if not rows.size:
            return rows, np.empty(0, dtype=np.float32)
        nodes = rows if self.groups is None else distinct(np.asarray(self.groups.groups)[rows])
        if nodes.size > head:
            nodes = nodes[np.argpartition(-self._approx(query, nodes), head - 1)[:head]]
        nodes, exact = self._exact_nodes(query, nodes)
        if self.groups is None:
            kept, scores = nodes, exact
        else:  # every row of ``rows`` in a kept node, with its node's score
            order = np.argsort(nodes)
            of_row = np.asarray(self.groups.groups)[rows]
            at = np.minimum(np.searchsorted(nodes[order], of_row), max(nodes.size - 1, 0))
            hit = nodes[order][at] == of_row if nodes.size else np.zeros(rows.size, dtype=np.bool_)
            kept, scores = rows[hit], exact[order][at][hit]
        best = np.argsort(-scores, kind="stable")[:limit]
        return kept[best].astype(np.int64), scores[best]

    def search(
        self, query: _F32, k: int, allowed: _Bool | None, passing: int, *, key: tuple[object, ...] | None = None
    ) -> tuple[_I64, _F32]:
        """Up to ``k`` (row, cosine) pairs from the graph, best first, among ``allowed`` rows.

        The graph ranks on 8-bit codes; its ``k`` rows are then re-scored exactly on their
        float32 vectors, so the scores are true cosines (ask for a head deeper than needed:
        the codes' order near the cut-off is the least sure). ``passing`` is how many rows
        ``allowed`` admits: the search breadth grows as the filter narrows, because the
        graph walk visits rows it then discards. With groups of identical rows the walk is
        over groups, each scored by one live row of it, and each found group gives every
        row of it ``allowed`` admits. ``key``: the cache key of ``allowed`` in :attr:`masks` (its nodes' mask is
        kept there too: at 1M rows making it is a pass over every row, ~1 ms).
        """
        groups = self.groups
        if groups is None:
            found = self._walk(query, k, allowed, passing)
        elif allowed is None:
            found = self._walk(query, k, None, passing)
        else:

            def make() -> tuple[_Bool | None, int]:
                nodes = groups.allowed(allowed, self.alive)
                return nodes, int(np.count_nonzero(nodes))

            nodes, count = make() if key is None else self.masks.get(("nodes", *key), make)
            found = self._walk(query, k, nodes, count)
        found, exact = self._exact_nodes(query, found)
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

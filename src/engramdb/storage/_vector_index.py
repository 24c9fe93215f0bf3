"""The vector cache of a SQLite store: an exact numpy scan, and past a size threshold an HNSW index.

Small stores keep one float32 matrix of the current embedding model's vectors in memory, with
per-row arrays of what the visibility filter needs (memory key, agent, kind, public flag), so a
filtered top-k search is one matrix-vector product, a boolean mask and an ``argpartition``.

Past ``ann_threshold`` vectors (when the store is a file and faiss is installed) a persisted
HNSW index (:mod:`engramdb.storage._ann`, memory-mapped from a sidecar directory) answers
instead, and the in-memory matrix shrinks to a *delta*: rows written since the index was built.
Rows the index holds that were replaced or forgotten since are marked dead in it. A search
merges the graph's answer with an exact scan of the delta; a selective filter scans just its
rows exactly. When the delta or the dead rows grow past a share of the index, it is rebuilt on
a background thread; until an index is ready (first crossing, a stale or damaged sidecar) the
exact scan keeps answering, so results are never wrong, only slower.

The owning store keeps the cache in step with the ``vectors`` table:

* its own writes are applied directly (:meth:`VectorIndex.put`, :meth:`VectorIndex.remove`);
* other processes' writes are noticed by comparing a :class:`SyncState` (the ``vec_epoch``
  counter, bumped by triggers on every vector replace/delete and on agent/kind/visibility
  changes, and the largest vector ``seq``) before each search: a larger ``seq`` alone means
  appends (load just those rows), anything else a reload; :meth:`VectorIndex.resume` first
  offers a persisted index that reflects an earlier state of the same epoch.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, Final, ParamSpec, TypeVar

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I64 as _I64

from engramdb._threads import Background
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.storage._ann import (
    ANN_DEFAULT_THRESHOLD,
    MIGRATE_FORMATS,
    AnnMeta,
    Overlay,
    Snapshot,
    ann_available,
    build_generation,
    drop_float32_copy,
    migrate_generation,
    prewarm,
    read_meta,
    snapshot_path,
    write_overlay,
)
from engramdb.storage._ann_base import AnnBase
from engramdb.storage._ann_exact import Codes, ExactRows, IndexRow, RowFilter
from engramdb.storage._ann_rows import SQLiteVectors
from engramdb.storage._ann_snapshot import fill_snapshot, overlay_rows, take_snapshot
from engramdb.storage._btree_pages import PageHints

__all__ = [
    "ANN_DEFAULT_THRESHOLD",
    "IndexOp",
    "IndexRow",
    "SyncState",
    "VectorIndex",
    "attrs_op",
    "put_op",
    "remove_op",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The graph's head re-ranked on float32 vectors: max(_HEAD_FACTOR * limit, _HEAD_MIN) rows. Measured for
#: limit 50 (26k real MiniLM vectors, R@10 / R@50 against the exact scan; 1M rows, ms p50 at load ~15):
#: factor 2 0.997 / 0.987, 5.4 ms; 3 0.998 / 0.990, 6.0 ms; 4 0.999 / 0.994, 10.1 ms (the flat graph: 0.997 / 0.987).
_HEAD_FACTOR: Final = 3
_HEAD_MIN: Final = 64


def rerank_depth(limit: int) -> int:
    """The rows re-ranked on float32 vectors for a search of ``limit``."""
    return max(_HEAD_FACTOR * limit, _HEAD_MIN)


#: Rebuild the index once the delta or the dead rows pass this share of it (and _MIN_REBUILD rows).
_REBUILD_SHARE: Final = 0.05
_MIN_REBUILD: Final = 10_000


def _locked(method: Callable[Concatenate[VectorIndex, _P], _R]) -> Callable[Concatenate[VectorIndex, _P], _R]:
    """Run a method under the index's own lock.

    The index has a lock of its own, apart from the store's connection lock, so a
    numpy scan can run while another thread runs a keyword query on the connection.
    Lock order is always connection, then index.
    """

    @functools.wraps(method)
    def wrapper(self: VectorIndex, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


@dataclass(frozen=True, slots=True)
class SyncState:
    """What the cache reflects: the model searched, the vector epoch and the largest seq."""

    model_id: str | None
    epoch: int
    max_seq: int


@dataclass(slots=True)
class _Build:
    """A background index build: its thread, what changed since its snapshot, how to cancel it."""

    thread: threading.Thread
    generation: int
    cancel: threading.Event
    changed: set[str]


class VectorIndex:
    """The vector cache of one store (see the module docstring).

    ``sidecar``: the directory of the persisted HNSW index (None: exact scan only, e.g. an
    in-memory store); ``database``: the SQLite file whose ``vectors`` rows the index re-scores on
    (required with a sidecar); ``ann_threshold``: vectors above which the index is used (None: never); ``pages``:
    where that file's rows lie, so a search asks for the pages of the rows it re-scores together (a cold disk).
    """

    def __init__(
        self,
        sidecar: Path | None = None,
        *,
        database: Path | None = None,
        ann_threshold: int | None = ANN_DEFAULT_THRESHOLD,
        pages: PageHints | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self.state: SyncState | None = None
        usable = sidecar is not None and database is not None and ann_threshold is not None and ann_available()
        self._root = sidecar if usable else None
        #: The float32 vectors of the index's rows: SQLite's own (the sidecar keeps no copy).
        self._source = SQLiteVectors(database, pages=pages) if usable and database is not None else None
        self._threshold = ann_threshold if ann_threshold is not None else 0
        self._codes_agent = Codes()
        self._codes_kind = Codes()
        # Made at first use (its arrays import numpy): a store opened only to list memories never needs it.
        self._exact_rows: ExactRows | None = None
        self._base: AnnBase | None = None
        self._build: _Build | None = None
        #: Bumped whenever the contents are replaced wholesale; a build of an older generation is not adopted.
        self._generation = 0
        #: The index's rows or the delta changed since the sidecar was last written (persist at close).
        self._dirty = False
        #: The contents generation whose build failed (e.g. a read-only directory): not retried for it.
        self._failed = -1
        #: The import thread, joined by close() (see engramdb._threads).
        self._background = Background()
        if self._root is not None and (self._root / "CURRENT").exists():
            # Importing faiss takes 0.3-1.8 s: start it now, so the first search finds it loaded.
            self._background.start("engramdb-ann-import", prewarm)

    @property
    def _exact(self) -> ExactRows:
        rows = self._exact_rows
        if rows is None:
            with self._lock:
                rows = self._exact_rows
                if rows is None:
                    rows = self._exact_rows = ExactRows(self._codes_agent, self._codes_kind)
        return rows

    @_exact.setter
    def _exact(self, rows: ExactRows) -> None:
        self._exact_rows = rows

    def __len__(self) -> int:
        base = self._base
        return len(self._exact) + (base.n - base.dead if base is not None else 0)

    @property
    def dim(self) -> int:
        """The vectors' dimension (0 while empty)."""
        return self._base.meta.dim if self._base is not None else self._exact.dim

    @property
    def uses_ann(self) -> bool:
        """Whether searches are answered by the HNSW index (else by the exact scan)."""
        return self._base is not None

    def _reset(self) -> None:
        self._generation += 1
        self._dirty = False
        self._base = None
        self._codes_agent.clear()
        self._codes_kind.clear()
        self._exact_rows = None  # a fresh one at the next use

    @_locked
    def invalidate(self) -> None:
        """Forget everything; the next search reloads."""
        self.state = None
        self._reset()

    def close(self) -> None:
        """Persist changes to the sidecar, forget everything and stop a background build (waits for its step)."""
        with self._lock:
            build = self._build
            self._persist()
            self.invalidate()
        if build is not None:
            build.cancel.set()
            build.thread.join()
        self._background.stop()
        if self._source is not None:
            self._source.close()

    def _persist(self) -> None:
        """Write the index's changes since its build as an overlay, so the next open adopts the sidecar.

        Without it any forget or update (which moves the vector epoch) would make the next open
        rebuild the index. Best effort: a failed write only costs that rebuild.
        """
        base, state = self._base, self.state
        if self._root is None or base is None or state is None or not self._dirty:
            return
        delta = self._exact.columns()
        meta = AnnMeta(
            generation=base.meta.generation,
            model_id=state.model_id,
            epoch=state.epoch,
            max_seq=state.max_seq,
            rows=base.n,
            dim=base.meta.dim,
            agents=self._codes_agent.names(),
            kinds=self._codes_kind.names(),
        )
        arrays = {
            "ids": delta.ids,
            "rids": delta.rids,
            "agents": delta.agents,
            "kinds": delta.kinds,
            "public": delta.public,
            "vectors": delta.matrix,
        }
        overlay = Overlay(base.alive, base.agents, base.kinds, base.public, arrays)
        with contextlib.suppress(OSError, ValueError):
            write_overlay(self._root, meta, overlay)
            self._dirty = False

    # -- loading ---------------------------------------------------------------------------------
    @_locked
    def resume(self, state: SyncState) -> None:
        """Adopt the persisted index if it reflects an earlier state of ``state``'s model and epoch.

        Only when nothing is loaded. The caller then loads the rows appended since
        (``self.state`` tells which) or, if nothing was adopted, everything.
        """
        if self.state is not None or self._root is None or self._source is None:
            return
        root, source = self._root, self._source
        meta = read_meta(root)
        legacy = read_meta(root, formats=MIGRATE_FORMATS) if meta is None else None
        meta = meta or legacy
        if (
            meta is None
            or meta.model_id != state.model_id
            or meta.epoch != state.epoch
            or meta.max_seq > state.max_seq
            or meta.rows < 1
        ):
            return
        try:
            if legacy is not None:
                # A sidecar with its own float32 copy: keep the graph, look up each row's seq, drop the copy.
                ids = np.load(root / meta.generation / "ids.npy", mmap_mode="r")
                migrate_generation(root, meta, source.seqs_of(meta.model_id, np.asarray(ids)))
            else:
                drop_float32_copy(root / meta.generation)  # a migration cut short after its CURRENT
            base = AnnBase(root, meta, source)
            delta = overlay_rows(base, meta, source)
        except (CorruptStoreError, OSError, ValueError):
            return  # damaged or half-deleted: the caller loads from SQLite and the index is rebuilt
        self._reset()
        self._codes_agent.extend(meta.agents)
        self._codes_kind.extend(meta.kinds)
        self._exact.clear(dim=meta.dim)
        self._base = base
        self._exact.append(delta)
        base.delta = None
        self.state = SyncState(meta.model_id, meta.epoch, meta.max_seq)

    @_locked
    def reconcile(self, rows: Iterable[tuple[str, str, str, str]], state: SyncState) -> bool:
        """Catch up with another process's forgets and updates without rebuilding the index.

        ``rows``: ``(memory_id, agent, kind, visibility)`` of every vector of ``state``'s model
        that existed when this index last looked (``seq`` up to its ``max_seq``). Rows missing
        from them were forgotten or re-embedded (a new vector has a new ``seq``: the caller
        appends it next), and kind or visibility changes are taken over. At a million
        memories this is one pass of seconds (bench/RESULTS.md, 3h), where a rebuild takes
        many minutes and the exact scan meanwhile holds every vector in memory.
        Returns False, changing nothing, when it cannot (no index, another model, or a
        memory moved to another agent): the caller then reloads everything.
        """
        cached, base = self.state, self._base
        if cached is None or base is None or cached.model_id != state.model_id:
            return False
        present = {memory_id: (agent, kind, visibility) for memory_id, agent, kind, visibility in rows}
        gone: list[str] = []
        changed: list[tuple[str, str, str]] = []
        live = np.flatnonzero(base.alive)
        agents, kinds = self._codes_agent.names(), self._codes_kind.names()
        # Column-wise over the mapped arrays: at a million rows a per-row lookup costs seconds.
        current = [
            (raw.decode(), (agents[a], kinds[k], "public" if pub else "private"))
            for raw, a, k, pub in zip(
                base.ids[live].tolist(),
                base.agents[live].tolist(),
                base.kinds[live].tolist(),
                base.public[live].tolist(),
                strict=True,
            )
        ]
        current += self._exact.attributes()
        for memory_id, (agent, kind, visibility) in current:
            now = present.get(memory_id)
            if now is None:
                gone.append(memory_id)
            elif now[0] != agent:
                return False  # the row's agent code is part of the mapped index: reload
            elif now[1:] != (kind, visibility):
                changed.append((memory_id, now[1], now[2]))
        self.remove(gone)
        for memory_id, kind, visibility in changed:
            self.set_attributes(memory_id, kind=kind, visibility=visibility)
        self.state = SyncState(state.model_id, state.epoch, cached.max_seq)
        return True

    @_locked
    def load(self, rows: Iterable[IndexRow], state: SyncState) -> None:
        """Replace the contents with ``rows`` (a full reload)."""
        self._reset()
        self.append(rows)
        self.state = state

    @_locked
    def append(self, rows: Iterable[IndexRow]) -> None:
        """Add rows for memories not in the index (rows already present are replaced)."""
        batch = list(rows)
        if self._base is not None:
            self._check_dim(batch)
            for row in batch:
                self._forget_base(row[0])
        self._exact.append(batch)
        self._note(r[0] for r in batch)
        self._dirty = self._dirty or (self._base is not None and bool(batch))

    def _check_dim(self, rows: Sequence[IndexRow]) -> None:
        if self._base is not None and any(len(r[5]) != 4 * self._base.meta.dim for r in rows):
            raise CorruptStoreError("stored vectors of one model have different dimensions")

    def _forget_base(self, memory_id: str) -> None:
        if self._base is not None:
            row = self._base.row_of(memory_id)
            if row is not None:
                self._base.kill(row)

    def _note(self, memory_ids: Iterable[str]) -> None:
        """Record memories changed while a build of the current contents runs (its snapshot predates them)."""
        build = self._build
        if build is not None and build.generation == self._generation:
            build.changed.update(memory_ids)

    # -- own writes ------------------------------------------------------------------------------
    @_locked
    def put(self, rows: Sequence[IndexRow]) -> None:
        """Insert or replace rows (the store's own writes)."""
        for row in rows:
            self._forget_base(row[0])
        self._check_dim(rows)
        self._exact.put(rows)
        self._note(r[0] for r in rows)
        self._dirty = self._dirty or self._base is not None

    @_locked
    def set_attributes(self, memory_id: str, *, kind: str, visibility: str) -> None:
        """Update the filter data of one row (after an update of the memory)."""
        self._exact.set_attributes(memory_id, kind=kind, visibility=visibility)
        base = self._base
        if base is not None:
            row = base.row_of(memory_id)
            if row is not None:
                base.kinds[row] = self._codes_kind.code(kind)
                base.public[row] = visibility == "public"
                base.version += 1
        self._note([memory_id])
        self._dirty = self._dirty or self._base is not None

    @_locked
    def remove(self, memory_ids: Iterable[str]) -> None:
        """Drop rows."""
        ids = list(memory_ids)
        for memory_id in ids:
            self._forget_base(memory_id)
        self._exact.remove(ids)
        self._note(ids)
        self._dirty = self._dirty or self._base is not None

    def _row(self, memory_id: str) -> IndexRow | None:
        """The current row of a memory (from the delta or the index), or None."""
        row = self._exact.row(memory_id)
        base = self._base
        if row is not None or base is None:
            return row
        i = base.row_of(memory_id)
        if i is None:
            return None
        vector, found = base.fetch(np.array([i], dtype=np.int64))
        if not found[0]:
            return None  # forgotten or re-embedded since: the store's next change tells the index
        return (
            memory_id,
            int(base.rids[i]),
            self._codes_agent.name(int(base.agents[i])),
            self._codes_kind.name(int(base.kinds[i])),
            "public" if base.public[i] else "private",
            vector.tobytes(),
        )

    # -- search ----------------------------------------------------------------------------------
    @_locked
    def search(
        self,
        query: _F32,
        *,
        limit: int,
        agent: str | None,
        include_public: bool,
        also_rids: _I64 | None = None,
        kinds: Sequence[str] | None = None,
        only_rids: _I64 | None = None,
        depth: int | None = None,
        only_key: object = None,
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (id, cosine) pairs, best first, among rows passing the filter.

        Rows pass if they belong to ``agent`` (any agent when None), or are public
        (when ``include_public``), or their rid is in ``also_rids``; and their kind is
        in ``kinds`` (when given) and their rid in ``only_rids`` (when given). ``depth``: how many rows the
        8-bit codes put first are re-ranked on their float32 vectors (default :func:`rerank_depth` of ``limit``;
        never fewer than ``limit``). ``only_key``: a name for ``only_rids`` and ``also_rids`` together, under
        which the filter's mask over the index's rows is kept for the next search naming them.
        """
        if len(self) == 0 or limit <= 0:
            return []
        if query.shape != (self.dim,):
            raise ValidationError(f"query vector has dimension {query.shape[-1]}, the store's vectors have {self.dim}")
        flt = RowFilter(agent, include_public, also_rids, kinds, only_rids, only_key)
        base = self._base
        if base is None:
            found = self._exact.search(query, limit=limit, flt=flt)
        else:
            found = self._search_ann(base, query, limit, flt, max(limit, depth or rerank_depth(limit)))
        self._maybe_build()
        return found

    def _search_ann(
        self, base: AnnBase, query: _F32, limit: int, flt: RowFilter, depth: int
    ) -> list[tuple[str, float]]:
        """The index's best rows merged with the delta's (exact) best rows."""
        merged = base.search_filtered(
            query, limit, flt, depth, agent_codes=self._codes_agent, kind_codes=self._codes_kind
        )
        merged += self._exact.search(query, limit=limit, flt=flt)
        merged.sort(key=lambda pair: -pair[1])
        return merged[:limit]

    # -- background builds -----------------------------------------------------------------------
    def _needs_build(self) -> bool:
        if self._root is None or self._build is not None or self.state is None or self._failed == self._generation:
            return False
        base = self._base
        if base is None:
            return len(self._exact) > self._threshold
        stale = max(_MIN_REBUILD, int(_REBUILD_SHARE * base.n))
        return len(self._exact) > stale or base.dead > stale

    def _maybe_build(self) -> None:
        """Start a background build when the exact scan has grown past the threshold, or the delta too big."""
        if not self._needs_build():
            return
        build = _Build(
            threading.Thread(target=self._run_build, name="engramdb-ann-build", daemon=True),
            self._generation,
            threading.Event(),
            set(),
        )
        self._build = build
        build.thread.start()

    def wait_for_index(self, timeout: float | None = None) -> bool:
        """Wait for a running background build; True once none runs (for tests and benchmarks)."""
        build = self._build
        if build is not None:
            build.thread.join(timeout)
            return not build.thread.is_alive()
        return True

    def _run_build(self) -> None:
        build = self._build
        if build is None or self._root is None:
            return
        try:
            taken = self._snapshot(build)
            if taken is None:
                return
            assert self._source is not None
            snap = fill_snapshot(self._source, *taken, build.cancel)
            if snap is None:
                return
            meta = build_generation(self._root, snap, build.cancel)
            if meta is not None:
                self._adopt(build, meta)
        except (OSError, ValueError, RuntimeError, CorruptStoreError, MemoryError):
            # The exact scan (or the previous index) keeps answering; no retry until the contents are reloaded.
            with self._lock:
                self._failed = build.generation
        finally:
            with self._lock:
                if self._build is build:
                    self._build = None

    def _snapshot(self, build: _Build) -> tuple[Snapshot, _I64] | None:
        """Capture every current row for the build (under the lock: writes wait a moment); see take_snapshot."""
        assert self._root is not None
        with self._lock:
            state = self.state
            if state is None or build.generation != self._generation:
                return None
            meta = AnnMeta(
                generation="",
                model_id=state.model_id,
                epoch=state.epoch,
                max_seq=state.max_seq,
                rows=0,
                dim=self.dim,
                agents=self._codes_agent.names(),
                kinds=self._codes_kind.names(),
            )
            return take_snapshot(snapshot_path(self._root), meta, self._base, self._exact.columns())

    def _adopt(self, build: _Build, meta: AnnMeta) -> None:
        """Switch to the new index; rows changed since its snapshot go to the new delta."""
        assert self._root is not None
        assert self._source is not None
        fresh = AnnBase(self._root, meta, self._source)
        with self._lock:
            if build.generation != self._generation or self.state is None:
                return  # reloaded meanwhile: the sidecar still serves the next open
            current = [self._row(memory_id) for memory_id in build.changed]
            for memory_id in build.changed:
                row = fresh.row_of(memory_id)
                if row is not None:
                    fresh.kill(row)
            delta = ExactRows(self._codes_agent, self._codes_kind)
            delta.clear(dim=meta.dim)
            delta.append(r for r in current if r is not None)
            self._base, self._exact = fresh, delta
            self._dirty = bool(build.changed)


#: One committed change, applied to the index given the model it holds (see the store's write path).
IndexOp = Callable[[VectorIndex, str | None], None]


def put_op(row: IndexRow, model_id: str) -> IndexOp:
    """Insert or replace a row, if it belongs to the model the index holds."""

    def op(index: VectorIndex, current: str | None) -> None:
        if model_id == current:
            index.put([row])
        else:  # replaced by another model's vector: no longer searchable
            index.remove([row[0]])

    return op


def remove_op(memory_id: str) -> IndexOp:
    """Drop a memory's row."""
    return lambda index, _current: index.remove([memory_id])


def attrs_op(memory_id: str, kind: str, visibility: str) -> IndexOp:
    """Update the filter data of a memory's row."""
    return lambda index, _current: index.set_attributes(memory_id, kind=kind, visibility=visibility)

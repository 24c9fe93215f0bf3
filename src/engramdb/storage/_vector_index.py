"""An in-memory float32 matrix of a store's vectors, searched exactly with numpy.

One matrix holds the vectors of the store's current embedding model, with per-row
arrays of what the visibility filter needs (memory key, agent, kind, public flag),
so a filtered top-k search is one matrix-vector product, a boolean mask and an
``argpartition``. The owning store keeps it in step with the ``vectors`` table:

* its own writes are applied directly (:meth:`VectorIndex.put`, :meth:`VectorIndex.remove`);
* other processes' writes are noticed by comparing a :class:`SyncState` (the
  ``vec_epoch`` counter, bumped by triggers on every vector replace/delete and on
  agent/kind/visibility changes, and the largest vector ``seq``) before each search:
  a larger ``seq`` alone means appends (load just those rows), anything else a reload.

Not thread-safe by itself: the store calls it under its lock.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from engramdb.errors import CorruptStoreError, ValidationError

__all__ = ["IndexOp", "IndexRow", "SyncState", "VectorIndex", "attrs_op", "put_op", "remove_op"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


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


_F32 = npt.NDArray[np.float32]
_I64 = npt.NDArray[np.int64]
_I32 = npt.NDArray[np.int32]

#: (memory id, memory rid, agent, kind, visibility, float32 vector bytes): one vector with its filter data.
IndexRow = tuple[str, int, str, str, str, bytes]


@dataclass(frozen=True, slots=True)
class SyncState:
    """What the cached matrix reflects: the model searched, the vector epoch and the largest seq."""

    model_id: str | None
    epoch: int
    max_seq: int


class VectorIndex:
    """The cached vector matrix of one store (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.state: SyncState | None = None
        self._clear(dim=0)

    def _clear(self, *, dim: int) -> None:
        self.dim = dim
        self._n = 0
        self._matrix: _F32 = np.empty((0, dim), dtype=np.float32)
        self._rids: _I64 = np.empty(0, dtype=np.int64)
        self._agents: _I32 = np.empty(0, dtype=np.int32)
        self._kinds: _I32 = np.empty(0, dtype=np.int32)
        self._public: npt.NDArray[np.bool_] = np.empty(0, dtype=np.bool_)
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}
        self._agent_codes: dict[str, int] = {}
        self._kind_codes: dict[str, int] = {}

    def __len__(self) -> int:
        return self._n

    @_locked
    def invalidate(self) -> None:
        """Forget everything; the next search reloads."""
        self.state = None
        self._clear(dim=0)

    # -- loading ---------------------------------------------------------------------------------
    @_locked
    def load(self, rows: Iterable[IndexRow], state: SyncState) -> None:
        """Replace the contents with ``rows`` (a full reload)."""
        self._clear(dim=0)
        self.append(rows)
        self.state = state

    @_locked
    def append(self, rows: Iterable[IndexRow]) -> None:
        """Add rows for memories not in the index (rows already present are replaced)."""
        pending: dict[str, IndexRow] = {}
        for row in rows:
            if row[0] in self._row_of:
                self.put([row])
            else:
                pending[row[0]] = row
        if not pending:
            return
        # Columns at once (zip) rather than row by row: a full load is 100k+ rows.
        ids, rids, agents, kinds, visibilities, blobs = zip(*pending.values(), strict=True)
        count = len(ids)
        if self._n == 0:
            self._clear(dim=len(blobs[0]) // 4)
        row_bytes = 4 * self.dim
        if any(len(b) != row_bytes for b in blobs):
            raise CorruptStoreError("stored vectors of one model have different dimensions")
        start, stop = self._n, self._n + count
        self._reserve(stop)
        # Copy each blob straight into the matrix's memory: one copy, no joined intermediate.
        view = self._matrix[start:stop].data.cast("B")
        for i, blob in enumerate(blobs):
            view[i * row_bytes : (i + 1) * row_bytes] = blob
        self._rids[start:stop] = rids
        self._agents[start:stop] = self._codes(self._agent_codes, agents)
        self._kinds[start:stop] = self._codes(self._kind_codes, kinds)
        self._public[start:stop] = [v == "public" for v in visibilities]
        self._row_of.update(zip(ids, range(start, stop), strict=True))
        self._ids.extend(ids)
        self._n = stop

    @classmethod
    def _codes(cls, codes: dict[str, int], values: Sequence[str]) -> _I32:
        for value in dict.fromkeys(values):
            cls._code(codes, value)
        return np.fromiter((codes[v] for v in values), dtype=np.int32, count=len(values))

    def _reserve(self, size: int) -> None:
        # Grow geometrically (with headroom) so a stream of small appends costs amortised O(1)
        # copies; by a quarter, not double, because the matrix can be hundreds of megabytes.
        capacity = self._matrix.shape[0]
        if size <= capacity:
            return
        new = max(size + size // 8, capacity + capacity // 4) + 1024
        matrix = np.empty((new, self.dim), dtype=np.float32)
        matrix[: self._n] = self._matrix[: self._n]
        self._matrix = matrix
        for name in ("_rids", "_agents", "_kinds", "_public"):
            old = getattr(self, name)
            grown = np.zeros(new, dtype=old.dtype)
            grown[: self._n] = old[: self._n]
            setattr(self, name, grown)

    @staticmethod
    def _code(codes: dict[str, int], value: str) -> int:
        code = codes.get(value)
        if code is None:
            code = codes[value] = len(codes)
        return code

    # -- own writes ------------------------------------------------------------------------------
    @_locked
    def put(self, rows: Sequence[IndexRow]) -> None:
        """Insert or replace rows (the store's own writes)."""
        for row in rows:
            i = self._row_of.get(row[0])
            if i is None:
                self.append([row])
                continue
            if len(row[5]) != 4 * self.dim:
                raise CorruptStoreError("stored vectors of one model have different dimensions")
            self._matrix[i] = np.frombuffer(row[5], dtype=np.float32)
            self._rids[i] = row[1]
            self._agents[i] = self._code(self._agent_codes, row[2])
            self._kinds[i] = self._code(self._kind_codes, row[3])
            self._public[i] = row[4] == "public"

    @_locked
    def set_attributes(self, memory_id: str, *, kind: str, visibility: str) -> None:
        """Update the filter data of one row (after an update of the memory)."""
        i = self._row_of.get(memory_id)
        if i is not None:
            self._kinds[i] = self._code(self._kind_codes, kind)
            self._public[i] = visibility == "public"

    @_locked
    def remove(self, memory_ids: Iterable[str]) -> None:
        """Drop rows; the last row moves into the hole so the matrix stays dense."""
        for memory_id in memory_ids:
            i = self._row_of.pop(memory_id, None)
            if i is None:
                continue
            last = self._n - 1
            if i != last:
                moved = self._ids[last]
                self._matrix[i] = self._matrix[last]
                for arr in (self._rids, self._agents, self._kinds, self._public):
                    arr[i] = arr[last]
                self._ids[i] = moved
                self._row_of[moved] = i
            self._ids.pop()
            self._n = last

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
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (id, cosine) pairs, best first, among rows passing the filter.

        Rows pass if they belong to ``agent`` (any agent when None), or are public
        (when ``include_public``), or their rid is in ``also_rids``; and their kind is
        in ``kinds`` (when given) and their rid in ``only_rids`` (when given).
        """
        n = self._n
        if n == 0 or limit <= 0:
            return []
        if query.shape != (self.dim,):
            raise ValidationError(f"query vector has dimension {query.shape[-1]}, the store's vectors have {self.dim}")
        mask: npt.NDArray[np.bool_] | None = None
        if agent is not None:
            code = self._agent_codes.get(agent, -1)
            mask = self._agents[:n] == code
            if include_public:
                mask |= self._public[:n]
            if also_rids is not None and also_rids.size:
                mask |= np.isin(self._rids[:n], also_rids)
        if kinds is not None:
            codes = [self._kind_codes[k] for k in kinds if k in self._kind_codes]
            kind_mask = np.isin(self._kinds[:n], np.asarray(codes, dtype=np.int32))
            mask = kind_mask if mask is None else mask & kind_mask
        if only_rids is not None:
            rid_mask = np.isin(self._rids[:n], only_rids)
            mask = rid_mask if mask is None else mask & rid_mask

        if mask is None:
            rows: npt.NDArray[np.intp] | None = None
            scores = _dot(self._matrix[:n], query)
        else:
            rows = np.flatnonzero(mask)
            if rows.size == 0:
                return []
            # A selective filter scores only its rows; a broad one scores all rows at full
            # speed (one contiguous product) and picks its rows afterwards.
            selective = rows.size * 4 < n
            scores = _dot(self._matrix[rows], query) if selective else _dot(self._matrix[:n], query)[rows]
        k = min(limit, scores.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
        top = top[np.argsort(-scores[top], kind="stable")]
        picked = top if rows is None else rows[top]
        return [(self._ids[int(i)], float(s)) for i, s in zip(picked, scores[top], strict=True)]


def _dot(matrix: _F32, query: _F32) -> _F32:
    """Every row's dot product with ``query``, on the calling thread.

    Not ``matrix @ query``: that is a BLAS call, which OpenBLAS splits over all cores and whose
    threads spin-wait for each other. The scan is bound by memory bandwidth, so the extra
    thread gains little on an idle machine, but when the cores are busy (the search's own
    keyword query runs on a second thread, a background embedder on both cores, other
    processes) the waiting costs up to 30x: measured at 10k rows under load ~17, 36.7 ms p50
    through BLAS against 1.3 ms here, and 84 against 76 ms at 100k rows (same process, interleaved).
    """
    scores: _F32 = np.einsum("ij,j->i", matrix, query)
    return scores


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

"""The exact part of the vector cache: an in-memory float32 matrix scanned with numpy.

:class:`ExactRows` holds every vector of a small store, or, once the HNSW index of
:mod:`engramdb.storage._ann` answers, only the rows written since that index was built
(the delta). :class:`RowFilter` turns a search's visibility filter into a boolean mask over
per-row arrays, the same way for this matrix and for the index's rows, so both give exactly
the rows the filter admits. Not thread-safe: :class:`~engramdb.storage._vector_index.VectorIndex`
calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I32 as _I32
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import Bool as _Bool
    from engramdb.storage._arrays import npt

from engramdb.errors import CorruptStoreError

__all__ = ["Codes", "Columns", "ExactRows", "IndexRow", "MaskCache", "RowData", "RowFilter", "distinct", "dot"]


#: (memory id, memory rid, agent, kind, visibility, float32 vector bytes): one vector with its filter data.
IndexRow = tuple[str, int, str, str, str, bytes]


class Codes:
    """Small integer codes for agent or kind names (row arrays store codes, not strings)."""

    def __init__(self) -> None:
        self._code: dict[str, int] = {}
        self._names: list[str] = []

    def clear(self) -> None:
        """Forget every code."""
        self._code.clear()
        self._names.clear()

    def extend(self, names: Iterable[str]) -> None:
        """Assign codes to ``names`` in order (restoring a persisted table)."""
        for name in names:
            self.code(name)

    def code(self, name: str) -> int:
        """The code of ``name``, assigned on first sight."""
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self._names)
            self._names.append(name)
        return code

    def get(self, name: str) -> int:
        """The code of ``name``, or -1 (matches no row) if it has none."""
        return self._code.get(name, -1)

    def codes(self, names: Sequence[str]) -> _I32:
        """The codes of ``names`` as an array."""
        return np.fromiter((self.code(n) for n in names), dtype=np.int32, count=len(names))

    def name(self, code: int) -> str:
        """The name with ``code``."""
        return self._names[code]

    def names(self) -> tuple[str, ...]:
        """Every name, in code order."""
        return tuple(self._names)


def distinct(values: _I64) -> _I64:
    """``np.unique(values)`` (sorted, each once) by a sort: numpy 2's hashing unique takes ~0.6 ms for 2,000 row
    keys, a sort and a comparison ~0.08."""
    if values.size < 2:
        return values.copy()
    ordered = np.sort(values)
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _member(values: _I64, keys: _I64) -> _Bool:
    """``np.isin(values, keys)`` for row keys, through a table indexed by key: O(n) where isin sorts both
    (~4 ms for a user's 2,000 keys against 100k rows, mostly the sort)."""
    if not keys.size or not values.size:
        return np.zeros(values.size, dtype=bool)
    low, high = min(int(values.min()), int(keys.min())), max(int(values.max()), int(keys.max()))
    if low < 0 or high > 4 * (values.size + keys.size) + 1_000_000:
        return np.isin(values, keys)  # keys too sparse for a table
    table = np.zeros(high + 1, dtype=bool)
    table[keys] = True
    found: _Bool = table[values]
    return found


class RowData(Protocol):
    """Per-row filter data of an index's rows (its memory keys, agent and kind codes, public flags)."""

    rids: _I64
    agents: _I32
    kinds: _I32
    public: _Bool


@dataclass(frozen=True, slots=True)
class RowFilter:
    """A search's visibility filter (see VectorIndex.search for its meaning)."""

    agent: str | None
    include_public: bool
    also_rids: _I64 | None
    kinds: Sequence[str] | None
    only_rids: _I64 | None
    #: Names ``only_rids`` (and ``also_rids``) exactly, for the mask cache (None: not cached).
    only_key: object = None

    def mask(
        self, n: int, *, rids: _I64, agents: _I32, kinds: _I32, public: _Bool, agent_codes: Codes, kind_codes: Codes
    ) -> _Bool | None:
        """Which of the first ``n`` rows pass (None: all of them, no filter)."""
        mask: _Bool | None = None
        if self.agent is not None:
            mask = agents[:n] == agent_codes.get(self.agent)
            if self.include_public:
                mask |= public[:n]
            if self.also_rids is not None and self.also_rids.size:
                mask |= _member(rids[:n], self.also_rids)
        if self.kinds is not None:
            codes = np.asarray([c for c in (kind_codes.get(k) for k in self.kinds) if c >= 0], dtype=np.int32)
            kind_mask = np.isin(kinds[:n], codes)
            mask = kind_mask if mask is None else mask & kind_mask
        if self.only_rids is not None:
            rid_mask = _member(rids[:n], self.only_rids)
            mask = rid_mask if mask is None else mask & rid_mask
        return mask

    def rows(self, rows: _I64, data: RowData, *, agent_codes: Codes, kind_codes: Codes) -> _I64:
        """Which of ``rows`` of ``data`` pass, as :meth:`mask` would say of them: the rows of a short
        ``only_rids`` are looked up and tested alone, where a mask is a pass over every row (~3 ms at 1M rows)."""
        if self.agent is not None:
            keep = data.agents[rows] == agent_codes.get(self.agent)
            if self.include_public:
                keep |= data.public[rows]
            if self.also_rids is not None and self.also_rids.size:
                keep |= np.isin(data.rids[rows], self.also_rids)
            rows = rows[keep]
        if self.kinds is not None:
            codes = np.asarray([c for c in (kind_codes.get(k) for k in self.kinds) if c >= 0], dtype=np.int32)
            rows = rows[np.isin(data.kinds[rows], codes)]
        return rows


class MaskCache:
    """The last few filters' masks over an index's rows, for filters by agent, visibility and liveness alone.

    One agent asking again and again builds the same mask over every row of the index each time (~1.3 ms of
    CPU at 1M rows). Each index holds its own cache, keyed by the index's ``version`` (which moves whenever a
    row's visibility or liveness changes), so a stale mask is never used. Bounded by bytes, not by count:
    fifty agents taking turns (a server's load) found none of theirs among the last 8 and built a mask each
    search (bench/RESULTS.md, issue 27, fourth round); 64 MB keeps 64 masks of 1M rows, 640 of 100k. The bytes
    are summed over what is kept: a tenant walking the graph keeps two masks of different sizes (its rows', its
    nodes'), and a bound by count from the newest mask's size kept 64 of them at 1M rows, 32 tenants' pairs, so
    fifty taking turns built both each search again.
    """

    _MIN = 8
    _BYTES = 64 << 20

    def __init__(self) -> None:
        self._masks: dict[tuple[object, ...], tuple[_Bool | None, int]] = {}
        self._bytes = 0

    def get(self, key: tuple[object, ...], make: Callable[[], tuple[_Bool | None, int]]) -> tuple[_Bool | None, int]:
        """The mask and passing count under ``key`` (made by ``make`` when absent). Callers must not change it."""
        found = self._masks.pop(key, None)
        if found is None:
            found = make()
            self._bytes += _nbytes(found[0])
            while len(self._masks) >= self._MIN and self._bytes > self._BYTES:
                self._bytes -= _nbytes(self._masks.pop(next(iter(self._masks)))[0])
        self._masks[key] = found  # most recent last
        return found

    @property
    def nbytes(self) -> int:
        """The bytes of the masks kept."""
        return self._bytes

    @staticmethod
    def cacheable(flt: RowFilter) -> bool:
        """Whether ``flt`` is decided by agent, visibility, liveness and a named key set alone."""
        if flt.kinds is not None:
            return False
        return flt.only_key is not None or (flt.only_rids is None and (flt.also_rids is None or not flt.also_rids.size))


def _nbytes(mask: _Bool | None) -> int:
    """What keeping ``mask`` costs: its array and, roughly, its key and entry (so tiny masks are bounded too)."""
    return _ENTRY_BYTES + (0 if mask is None else int(mask.nbytes))


_ENTRY_BYTES: Final = 256


@dataclass(frozen=True, slots=True)
class Columns:
    """Copies of every row's data, in row order (what an index build takes from the matrix)."""

    matrix: _F32
    ids: npt.NDArray[np.bytes_]
    rids: _I64
    agents: _I32
    kinds: _I32
    public: _Bool


class ExactRows:
    """A dense float32 matrix of vectors with per-row filter arrays, searched exactly."""

    def __init__(self, agent_codes: Codes, kind_codes: Codes) -> None:
        # The code tables are shared with the owning VectorIndex (and its HNSW rows).
        self._agent_codes = agent_codes
        self._kind_codes = kind_codes
        self.clear(dim=0)

    def clear(self, *, dim: int) -> None:
        """Drop every row; the next rows have ``dim`` dimensions (0: taken from the first row)."""
        self.dim = dim
        self._n = 0
        self._matrix: _F32 = np.empty((0, dim), dtype=np.float32)
        self._rids: _I64 = np.empty(0, dtype=np.int64)
        self._agents: _I32 = np.empty(0, dtype=np.int32)
        self._kinds: _I32 = np.empty(0, dtype=np.int32)
        self._public: _Bool = np.empty(0, dtype=np.bool_)
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}

    def __len__(self) -> int:
        return self._n

    def append(self, rows: Iterable[IndexRow]) -> None:
        """Add rows for memories not held (rows already present are replaced)."""
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
        if self._n == 0 and self.dim == 0:
            self.clear(dim=len(blobs[0]) // 4)
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
        self._agents[start:stop] = self._agent_codes.codes(agents)
        self._kinds[start:stop] = self._kind_codes.codes(kinds)
        self._public[start:stop] = [v == "public" for v in visibilities]
        self._row_of.update(zip(ids, range(start, stop), strict=True))
        self._ids.extend(ids)
        self._n = stop

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

    def put(self, rows: Sequence[IndexRow]) -> None:
        """Insert or replace rows."""
        for row in rows:
            i = self._row_of.get(row[0])
            if i is None:
                self.append([row])
                continue
            if len(row[5]) != 4 * self.dim:
                raise CorruptStoreError("stored vectors of one model have different dimensions")
            self._matrix[i] = np.frombuffer(row[5], dtype=np.float32)
            self._rids[i] = row[1]
            self._agents[i] = self._agent_codes.code(row[2])
            self._kinds[i] = self._kind_codes.code(row[3])
            self._public[i] = row[4] == "public"

    def set_attributes(self, memory_id: str, *, kind: str, visibility: str) -> None:
        """Update the filter data of one row, if held."""
        i = self._row_of.get(memory_id)
        if i is not None:
            self._kinds[i] = self._kind_codes.code(kind)
            self._public[i] = visibility == "public"

    def attributes(self) -> list[tuple[str, tuple[str, str, str]]]:
        """Every held row's (id, (agent, kind, visibility))."""
        agent, kind = self._agent_codes.name, self._kind_codes.name
        return [
            (
                memory_id,
                (agent(int(self._agents[i])), kind(int(self._kinds[i])), "public" if self._public[i] else "private"),
            )
            for i, memory_id in enumerate(self._ids[: self._n])
        ]

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

    def row(self, memory_id: str) -> IndexRow | None:
        """The held row of a memory, or None."""
        i = self._row_of.get(memory_id)
        if i is None:
            return None
        return (
            memory_id,
            int(self._rids[i]),
            self._agent_codes.name(int(self._agents[i])),
            self._kind_codes.name(int(self._kinds[i])),
            "public" if self._public[i] else "private",
            self._matrix[i].tobytes(),
        )

    def columns(self) -> Columns:
        """Every row's data (views of the matrix: read them before the next change)."""
        n = self._n
        ids = np.array([i.encode() for i in self._ids], dtype=np.bytes_) if n else np.empty(0, dtype="S1")
        return Columns(
            self._matrix[:n].reshape(n, self.dim),
            ids,
            self._rids[:n],
            self._agents[:n],
            self._kinds[:n],
            self._public[:n],
        )

    def search(self, query: _F32, *, limit: int, flt: RowFilter) -> list[tuple[str, float]]:
        """Top ``limit`` (id, cosine) pairs, best first, among rows passing ``flt``."""
        n = self._n
        if n == 0 or limit <= 0:
            return []
        mask = flt.mask(
            n,
            rids=self._rids,
            agents=self._agents,
            kinds=self._kinds,
            public=self._public,
            agent_codes=self._agent_codes,
            kind_codes=self._kind_codes,
        )
        if mask is None:
            rows: npt.NDArray[np.intp] | None = None
            scores = dot(self._matrix[:n], query)
        else:
            rows = np.flatnonzero(mask)
            if rows.size == 0:
                return []
            # A selective filter scores only its rows; a broad one scores all rows at full
            # speed (one contiguous product) and picks its rows afterwards.
            selective = rows.size * 4 < n
            scores = dot(self._matrix[rows], query) if selective else dot(self._matrix[:n], query)[rows]
        k = min(limit, scores.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
        top = top[np.argsort(-scores[top], kind="stable")]
        picked = top if rows is None else rows[top]
        return [(self._ids[int(i)], float(s)) for i, s in zip(picked, scores[top], strict=True)]


def dot(matrix: _F32, query: _F32) -> _F32:
    """Every row's dot product with ``query``, on the calling thread.

    Not ``matrix @ query``: that is a BLAS call, which OpenBLAS splits over all cores and whose
    threads spin-wait for each other. The scan is bound by memory bandwidth, so the extra
    thread gains little on an idle machine, but when the cores are busy (the search's own
    keyword query runs on a second thread, a background embedder on both cores, other
    processes) the waiting costs many times the scan (bench/RESULTS.md, "Figures moved out of the
    source": BLAS against this einsum, same process, interleaved).
    """
    scores: _F32 = np.einsum("ij,j->i", matrix, query)
    return scores

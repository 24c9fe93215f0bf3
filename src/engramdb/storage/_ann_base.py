"""One generation of the HNSW sidecar, memory-mapped, answering searches (see :mod:`engramdb.storage._ann`).

:mod:`._ann` writes a generation (the graph over 8-bit codes and its rows' data) and its overlays; this module reads
one back and searches it (a short key set looked up by key, a narrow filter scanned, a wide one walked on the
graph): the graph's head and a filter's rows are re-ranked on the float32 vectors SQLite holds. The vector cache
(:mod:`._vector_index`) merges that answer with its delta of newer rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
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
from engramdb.storage._ann import EF_MAX, EF_SEARCH, GRAPH_FILE, AnnMeta, load_faiss, read_overlay
from engramdb.storage._ann_exact import Codes, MaskCache, RowFilter, distinct
from engramdb.storage._ann_groups import Groups, load_groups
from engramdb.storage._ann_rows import VectorSource

__all__ = ["AnnBase"]

#: A filter admitting at most this many of the index's rows is scanned exactly (gathering that
#: many mapped vectors costs about what a graph walk does; below it the graph gains nothing).
_EXACT_ROWS: Final = 8_192

#: The logger the index always used (before it had a module of its own).
log = logging.getLogger("engramdb.storage._ann")


class AnnBase:
    """One memory-mapped generation: the 8-bit graph and the data of its rows.

    Rows are never added: rows replaced or forgotten since the build are marked dead
    (``alive``), and the vector cache keeps newer rows in a small exact delta beside it.
    Filter data that may change (agent, kind, public) is copied into memory; ids, rids
    and seqs are memory-mapped. Float32 vectors are read from ``source`` by seq.
    """

    def __init__(self, root: Path, meta: AnnMeta, source: VectorSource) -> None:
        faiss = load_faiss()
        directory = root / meta.generation
        try:
            # IO_FLAG_MMAP_IFC maps the graph and the codes, so opening reads nothing; plain IO_FLAG_MMAP
            # would read the HNSW graph into memory.
            self._index = faiss.read_index(str(directory / GRAPH_FILE), faiss.IO_FLAG_MMAP_IFC)
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
        self._path = directory / GRAPH_FILE
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
                over = read_overlay(root / meta.overlay, n)
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

    def search_filtered(
        self, query: _F32, limit: int, flt: RowFilter, depth: int, *, agent_codes: Codes, kind_codes: Codes
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` (id, cosine) pairs of this generation's live rows passing ``flt``, best first.

        A short key set is looked up by key, a filter admitting few rows is scanned on its codes, a wider one walks
        the graph; each re-ranks its ``depth`` best on float32 vectors. ``agent_codes``/``kind_codes``: the names
        behind this generation's agent and kind codes (the owning cache's).
        """

        def make() -> tuple[_Bool | None, int]:
            mask = flt.mask(
                self.n,
                rids=self.rids,
                agents=self.agents,
                kinds=self.kinds,
                public=self.public,
                agent_codes=agent_codes,
                kind_codes=kind_codes,
            )
            if self.dead:
                mask = self.alive.copy() if mask is None else mask & self.alive
            return mask, self.n if mask is None else int(np.count_nonzero(mask))

        cacheable = MaskCache.cacheable(flt)
        key = (self.version, flt.agent, flt.include_public, flt.only_key)
        rows: _I64
        scores: _F32
        if flt.only_rids is not None and flt.only_rids.size <= _EXACT_ROWS:
            # A short key set (one user's rows): its rows looked up by key and tested alone, not a mask of every row.
            found = flt.rows(self.rows_of_rids(flt.only_rids), self, agent_codes=agent_codes, kind_codes=kind_codes)
            rows, scores = self.scan(query, found, limit, depth)
        else:
            mask, passing = self.masks.get(key, make) if cacheable else make()
            if passing == 0:
                rows, scores = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            elif passing <= _EXACT_ROWS or passing <= limit:
                rows, scores = self._scan_mask(query, mask, limit, depth)
            else:
                # Re-rank a deeper head than asked exactly: the 8-bit codes' order near the cut-off is the least sure.
                allowed = None if passing == self.n else mask
                rows, scores = self.search(query, depth, allowed, passing, key=key if cacheable else None)
                if rows.size < min(limit, passing):  # the walk ran out (a narrow filter): scan exactly
                    rows, scores = self._scan_mask(query, mask, limit, depth)
        # The search reads these rows next (their memories): asked for now, they come from the disk side by side.
        self._source.ahead(np.asarray(self.rids[rows[:limit]], dtype=np.int64))
        return [(self.id_of(int(r)), float(s)) for r, s in zip(rows[:limit], scores[:limit], strict=True)]

    def _scan_mask(self, query: _F32, mask: _Bool | None, limit: int, depth: int) -> tuple[_I64, _F32]:
        """Top ``limit`` of the rows passing ``mask``: every one ranked on its 8-bit code, the head of them on its
        float32 vector (exact cosines, as a walk's head)."""
        rows = np.arange(self.n) if mask is None else np.flatnonzero(mask)
        return self.scan(query, rows.astype(np.int64), limit, depth)

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
        faiss = load_faiss()
        ef = max(EF_SEARCH, k)
        selector = None
        if allowed is not None:
            share = max(passing, 1) / self._nodes
            ef = min(EF_MAX, max(ef, int(ef / share**0.5)))
            bits = np.packbits(allowed, bitorder="little")
            selector = faiss.IDSelectorBitmap(self._nodes, faiss.swig_ptr(bits))
        params = faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        _approx, found = self._index.search(query.reshape(1, -1), k, params=params)
        nodes: _I64 = found[0][found[0] >= 0].astype(np.int64)
        return nodes

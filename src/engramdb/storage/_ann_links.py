"""Closed islands in the HNSW graph, found and linked to the rest after a build.

faiss keeps a new node's level-0 links with HNSW's diversity heuristic: a candidate is dropped when it is
closer to a neighbour already kept than to the node. A tight group of near-duplicates (the same fact
remembered many times, a log line repeated with small changes) is closer to itself than to anything else, so
its members keep links only among themselves and the group becomes an island: a walk that descends into it
from the upper levels finds only its members and stops, short of the rows asked for (the store then scans
every vector exactly), and a walk from elsewhere never reaches its members.

:func:`link_islands` finds every node that the graph's largest strongly connected part cannot reach, or that
cannot reach it (SciPy over the level-0 links: all a connected graph costs), and gives
one node of each such group the missing links: from it to its nearest node in that part, and from the nearest such
node with a free slot back to it. Walks then leave and enter the islands as they do any other region (how many
groups a real corpus has, and what linking them costs: bench/RESULTS.md, "Figures moved out of the source").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I32 as _I32
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import Bool as _Bool

__all__ = ["link_islands"]


#: Island nodes looked up in one batch (a graph search each, then an exact scan for the few it misses).
_BATCH: Final = 4_096
#: Rows of the float32 matrix scanned per step when a graph search cannot find an island's nearest outside node.
_SCAN_ROWS: Final = 65_536
#: Nodes of the connected part considered for an island's links (the nearest with a free slot takes the link in).
_CANDIDATES: Final = 8
#: Breadth of the graph search that finds an island node's nearest node in the connected part.
_EF_LINK: Final = 64


def _level0(hnsw: Any, faiss: Any, n: int) -> tuple[_I32, _I64, int]:
    """All level-0 link slots (a copy of faiss's array), each node's first slot, and the slots per node."""
    neighbors = faiss.vector_to_array(hnsw.neighbors)
    offsets = faiss.vector_to_array(hnsw.offsets).astype(np.int64)
    cum = faiss.vector_to_array(hnsw.cum_nneighbor_per_level).astype(np.int64)
    starts = offsets[:n] + cum[0]
    return neighbors, starts, int(cum[1] - cum[0])


def _outside_groups(table: _I32) -> tuple[_I64, _Bool, _Bool, _Bool]:
    """The groups cut off from the largest strongly connected part of the level-0 links.

    Returns (representatives, unreachable, trapped, cut): one node of each strongly connected group outside
    the largest, whether the largest part cannot reach it (``unreachable``) or it cannot reach the largest
    part (``trapped``), and every node outside the largest part (``cut``).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    n, width = table.shape
    src = np.repeat(np.arange(n, dtype=np.int64), width)
    dst = table.ravel().astype(np.int64)
    keep = dst >= 0
    graph = csr_matrix((np.ones(int(keep.sum()), dtype=np.int8), (src[keep], dst[keep])), shape=(n, n))
    _, label = connected_components(graph, directed=True, connection="strong")
    giant = int(np.argmax(np.bincount(label)))
    cut = label != giant
    if not cut.any():
        empty = np.empty(0, dtype=np.bool_)
        return np.empty(0, dtype=np.int64), empty, empty, cut
    root = int(np.argmin(cut))
    reached = np.zeros(n, dtype=np.bool_)
    reached[breadth_first_order(graph, root, directed=True, return_predecessors=False)] = True
    escapes = np.zeros(n, dtype=np.bool_)
    escapes[breadth_first_order(graph.T.tocsr(), root, directed=True, return_predecessors=False)] = True
    # The first node of each cut-off group stands for it: one link each way reconnects the whole group,
    # since every member reaches, and is reached from, every other.
    nodes = np.flatnonzero(cut)
    _, first = np.unique(label[nodes], return_index=True)
    reps = nodes[first].astype(np.int64)
    return reps, ~reached[reps], ~escapes[reps], cut


def _nearest_inside(index: Any, faiss: Any, vectors: _F32, reps: _I64, inside: _Bool) -> _I64:
    """Each representative's :data:`_CANDIDATES` nearest nodes among ``inside`` (-1: none found), best first.

    A graph search (restricted to ``inside``) finds them; a representative whose walk stays inside
    another island gets its single nearest ``inside`` node by an exact scan instead.
    """
    bits = np.packbits(inside, bitorder="little")
    selector = faiss.IDSelectorBitmap(inside.size, faiss.swig_ptr(bits))
    params = faiss.SearchParametersHNSW(sel=selector, efSearch=_EF_LINK)
    out = np.full((reps.size, _CANDIDATES), -1, dtype=np.int64)
    for start in range(0, reps.size, _BATCH):
        part = reps[start : start + _BATCH]
        _, found = index.search(np.ascontiguousarray(vectors[part], dtype=np.float32), _CANDIDATES, params=params)
        out[start : start + part.size] = found
    missing = np.flatnonzero(out[:, 0] < 0)
    if missing.size:
        query = np.ascontiguousarray(vectors[reps[missing]], dtype=np.float32)
        best = np.full(missing.size, -np.inf, dtype=np.float32)
        every = np.arange(missing.size)
        for start in range(0, vectors.shape[0], _SCAN_ROWS):
            rows = np.asarray(vectors[start : start + _SCAN_ROWS], dtype=np.float32)
            scores = query @ rows.T
            scores[:, ~inside[start : start + rows.shape[0]]] = -np.inf
            top = np.argmax(scores, axis=1)
            better = scores[every, top] > best
            best[better] = scores[every, top][better]
            out[missing[better], 0] = start + top[better]
    return out


def _put_link(neighbors: _I32, start: int, width: int, target: int, *, replace: bool) -> bool:
    """Add ``target`` to one node's level-0 links, in a free slot, else (``replace``) in place of its last one.

    Returns whether the link is there now.
    """
    slots = neighbors[start : start + width]
    if (slots == target).any():
        return True
    free = np.flatnonzero(slots < 0)
    if free.size:
        slots[free[0]] = target
    elif replace:
        slots[width - 1] = target  # the last kept link is the farthest
    return bool(free.size) or replace


def link_islands(index: Any, faiss: Any, vectors: _F32) -> int:
    """Link the level-0 islands of ``index`` (an ``IndexHNSW*`` just built over ``vectors``) to the rest.

    Returns how many groups were linked (0: the graph was connected and is unchanged).
    """
    hnsw = index.hnsw
    n = int(index.ntotal)
    if n < 2:
        return 0
    neighbors, starts, width = _level0(hnsw, faiss, n)
    table = neighbors[starts[:, None] + np.arange(width)[None, :]]
    reps, unreachable, trapped, cut = _outside_groups(table)
    if not reps.size:
        return 0
    # The link must lead into the connected part, not into another island.
    inside = ~cut
    nearest = _nearest_inside(index, faiss, vectors, reps, inside)
    for rep, near, into, out in zip(reps, nearest, unreachable, trapped, strict=True):
        found = [int(c) for c in near if c >= 0]
        if not found:
            continue
        if out:
            _put_link(neighbors, int(starts[rep]), width, found[0], replace=True)
        # Into the group from the nearest node with a free slot: a hub near many groups would
        # otherwise give each new link the slot of the one before.
        if into and not any(_put_link(neighbors, int(starts[c]), width, int(rep), replace=False) for c in found):
            _put_link(neighbors, int(starts[found[0]]), width, int(rep), replace=True)
    faiss.copy_array_to_vector(neighbors, hnsw.neighbors)
    return int(reps.size)

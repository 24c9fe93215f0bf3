"""Free level-0 slots of sparse HNSW nodes, filled with their nearest rows after a build.

faiss keeps a node's level-0 links with HNSW's diversity heuristic: a candidate is dropped when it is closer to
a link already kept than to the node. Many nodes keep far fewer than the 32 slots, and a walk through them has
few ways on. :func:`fill_sparse` gives every node with fewer than half its level-0 slots in use its nearest rows
(found by searching the graph itself, best first) in its free slots, never replacing a link faiss kept. A graph
with no such node costs one pass over the link table and is left unchanged.
What it buys is measured in bench/RESULTS.md, section 3l ("HNSW level-0 quality on near-duplicate data").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import npt

__all__ = ["fill_sparse"]


#: Sparse nodes looked up per graph search call (faiss spreads one call over the cores).
_BATCH: Final = 4_096
#: Rows asked of the graph per sparse node, per level-0 slot: its free slots plus the links and itself the
#: search also returns (48 for M 16's 32 slots, 96 for M 32's 64).
_FILL_PER_SLOT: Final = 1.5
#: Breadth of that search (the rows searched for are graph nodes, so a narrow walk finds them).
_FILL_EF: Final = 64


def _sparse_nodes(table: npt.NDArray[np.int32]) -> _I64:
    """Nodes using fewer than half of their level-0 slots."""
    used = (table >= 0).sum(axis=1)
    return np.flatnonzero(used < table.shape[1] // 2).astype(np.int64)


def fill_sparse(index: Any, faiss: Any, vectors: _F32) -> int:
    """Fill the free level-0 slots of the sparse nodes of ``index`` (an ``IndexHNSW*`` built over ``vectors``).

    Returns how many links were added (0: no node was sparse, the graph is unchanged).
    """
    from engramdb.storage._ann_links import _level0

    n = int(index.ntotal)
    if n < 2:
        return 0
    neighbors, starts, width = _level0(index.hnsw, faiss, n)
    table = neighbors[starts[:, None] + np.arange(width)[None, :]]
    nodes = _sparse_nodes(table)
    if not nodes.size:
        return 0
    wanted = int(_FILL_PER_SLOT * width)
    params = faiss.SearchParametersHNSW(efSearch=max(_FILL_EF, wanted))
    k = min(wanted, n)
    # All searched before any link is added: links given to one batch would otherwise steer the next.
    found = np.empty((nodes.size, k), dtype=np.int64)
    for start in range(0, nodes.size, _BATCH):
        part = nodes[start : start + _BATCH]
        _, found[start : start + part.size] = index.search(
            np.ascontiguousarray(vectors[part], dtype=np.float32), k, params=params
        )
    added = 0
    for start in range(0, nodes.size, _BATCH):
        stop = min(start + _BATCH, nodes.size)
        added += _place(
            neighbors, starts[nodes[start:stop]], table[nodes[start:stop]], found[start:stop], nodes[start:stop]
        )
    if added:
        faiss.copy_array_to_vector(neighbors, index.hnsw.neighbors)
    return added


def _place(
    neighbors: npt.NDArray[np.int32], starts: _I64, links: npt.NDArray[np.int32], found: _I64, nodes: _I64
) -> int:
    """Put each node's new candidates (``found``, best first) into its free slots; returns how many were put."""
    width = links.shape[1]
    # A candidate is new: a row, not the node itself, not already linked.
    valid = (found >= 0) & (found != nodes[:, None]) & ~(found[:, :, None] == links[:, None, :]).any(axis=2)
    rank = np.cumsum(valid, axis=1) - 1
    free = width - (links >= 0).sum(axis=1)
    put = valid & (rank < free[:, None])
    # The r-th new candidate takes the r-th free slot (faiss fills slots from the front; a stable sort keeps that).
    free_first = np.argsort(links >= 0, axis=1, kind="stable")
    b, j = np.nonzero(put)
    neighbors[starts[b] + free_first[b, rank[b, j]]] = found[b, j]
    return int(b.size)

"""Sparse HNSW nodes (engramdb.storage._ann_fill): their free level-0 slots filled with their nearest rows.

faiss's neighbour heuristic leaves a near-duplicate with little more than its original at level 0 (compare.py's
100k rows: a median of 4 of 32 slots in use). The tests make such nodes by hand (their links cut to one) on data
with neighbourhoods, fill them, and check that the slots hold the true nearest rows and that walks find them;
a graph whose nodes are all at least half full must come out unchanged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from ann_helpers import built_store, level0_table, store_graph, with_copies

from engramdb.storage import _ann
from engramdb.storage._ann import ann_available
from engramdb.storage._ann_fill import fill_sparse
from engramdb.storage._ann_links import link_islands
from engramdb.storage.base import Filter

pytestmark = pytest.mark.skipif(not ann_available(), reason="faiss is not installed")

DIM = 32
ROWS = 3_000


def _clustered(seed: int, rows: int = ROWS) -> npt.NDArray[np.float32]:
    """Unit rows around 60 centres: every row has close neighbours, as real embeddings do."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(60, DIM))
    x = centres[rng.integers(0, 60, rows)] + 0.35 * rng.normal(size=(rows, DIM))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def _nearest(vectors: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
    """Each row's ``k`` nearest other rows, exactly."""
    scores = vectors[rows] @ vectors.T
    scores[np.arange(rows.size), rows] = -np.inf
    return np.argsort(-scores, axis=1)[:, :k]


def test_sparse_nodes_get_their_nearest_rows_and_walks_find_them() -> None:
    vectors = _clustered(1)
    faiss = _ann.load_faiss()
    index = store_graph(vectors)
    neighbors, starts, width = level0_table(index)
    # Hand-made sparse nodes: every third node keeps only its first level-0 link.
    sparse = np.arange(0, ROWS, 3, dtype=np.int64)
    for node in sparse:
        neighbors[starts[node] + 1 : starts[node] + width] = -1
    faiss.copy_array_to_vector(neighbors, index.hnsw.neighbors)  # type: ignore[attr-defined]
    full_before = neighbors.copy()

    added = fill_sparse(index, faiss, vectors)

    neighbors, starts, width = level0_table(index)
    assert added > 0
    links = neighbors[starts[sparse][:, None] + np.arange(width)[None, :]]
    # Every sparse node's slots are now in use, the link it kept is still first, no node links to itself.
    assert (links >= 0).all()
    assert np.array_equal(links[:, 0], full_before[starts[sparse]])
    assert not (links == sparse[:, None]).any()
    # The slots hold the node's true nearest rows: nearly all of its exact 10 nearest.
    want = _nearest(vectors, sparse, 10)
    held = np.mean([len(set(w.tolist()) & set(row.tolist())) / 10 for w, row in zip(want, links, strict=True)])
    assert held >= 0.9
    # Nodes at least half full before (faiss leaves some sparse by itself: those are filled too) are untouched.
    cells = starts[:, None] + np.arange(width)[None, :]
    half = (full_before[cells] >= 0).sum(axis=1) >= width // 2
    assert half.any()
    assert np.array_equal(neighbors[cells[half]], full_before[cells[half]])
    # Walks from near the sparse nodes find the true nearest rows.
    rng = np.random.default_rng(5)
    queries = vectors[sparse[:200]] + 0.05 * rng.normal(size=(200, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    _, found = index.search(queries, 10, params=faiss.SearchParametersHNSW(efSearch=64))  # type: ignore[attr-defined]
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    recall = np.mean([len(set(f.tolist()) & set(e.tolist())) / 10 for f, e in zip(found, exact, strict=True)])
    assert recall >= 0.95


def _groups(seed: int) -> npt.NDArray[np.float32]:
    """300 originals in 48 dimensions, then 30 copies of each at cosine ~0.9 (compare.py's corpus in small)."""
    rng = np.random.default_rng(seed)
    originals = rng.normal(size=(300, 48))
    originals /= np.linalg.norm(originals, axis=1, keepdims=True)
    return with_copies(originals, 30, rng, rounds=False)


def test_on_near_duplicate_groups_the_walks_head_comes_closer_to_the_exact_scan() -> None:
    """The store's walk (head of 150 re-ranked exactly, top 50) misses fewer of the exact top 50 once filled."""
    vectors = _groups(1)
    faiss = _ann.load_faiss()
    index = store_graph(vectors)
    link_islands(index, faiss, vectors)
    rng = np.random.default_rng(2)
    queries = vectors[:200] + 0.6 * rng.normal(size=(200, 48)).astype(np.float32) / np.sqrt(48)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :50]

    def short_heads() -> int:
        params = faiss.SearchParametersHNSW(efSearch=150)
        _, found = index.search(queries, 150, params=params)  # type: ignore[attr-defined]
        short = 0
        for query, row, want in zip(queries, found, exact, strict=True):
            head = row[row >= 0]
            top = head[np.argsort(-(vectors[head] @ query))[:50]]
            short += set(top.tolist()) != set(want.tolist())
        return short

    before = short_heads()
    assert fill_sparse(index, faiss, vectors) > 0
    after = short_heads()
    assert after < before * 0.75


def test_a_graph_with_every_node_half_full_is_left_as_it_is() -> None:
    vectors = _clustered(2, rows=1_500)
    faiss = _ann.load_faiss()
    index = store_graph(vectors)
    neighbors, starts, width = level0_table(index)
    # Every node gets its width // 2 exact nearest rows (no node sparse), the rest of its slots free.
    nearest = _nearest(vectors, np.arange(len(vectors), dtype=np.int64), width // 2)
    for node, row in enumerate(nearest):
        neighbors[starts[node] : starts[node] + width] = -1
        neighbors[starts[node] : starts[node] + row.size] = row
    faiss.copy_array_to_vector(neighbors, index.hnsw.neighbors)  # type: ignore[attr-defined]
    before = faiss.vector_to_array(index.hnsw.neighbors).copy()  # type: ignore[attr-defined]

    assert fill_sparse(index, faiss, vectors) == 0

    assert np.array_equal(faiss.vector_to_array(index.hnsw.neighbors), before)  # type: ignore[attr-defined]


def test_the_store_builds_its_graph_with_sparse_nodes_filled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the store: near-duplicate groups leave sparse nodes; the persisted graph has them filled."""
    vectors = with_copies(_clustered(3, rows=120), 30, np.random.default_rng(9), rounds=False)
    filled = []

    def recorded(index: object, faiss: object, rows: npt.NDArray[np.float32]) -> int:
        filled.append(fill_sparse(index, faiss, rows))
        return filled[-1]

    monkeypatch.setattr(_ann, "fill_sparse", recorded)
    store, index, mems = built_store(tmp_path / "s", vectors)
    try:
        assert len(filled) == 1
        assert filled[0] > 0
        base = index._base
        assert base is not None
        neighbors, starts, width = level0_table(base._index)  # the graph read back from disk
        used = (neighbors[starts[:, None] + np.arange(width)[None, :]] >= 0).sum(axis=1)
        assert (used >= width // 2).all()
        # The vector channel agrees with the exact scan on the copies' top 10.
        ids = [m.id for m in mems]
        exact = np.argsort(-(vectors[:50] @ vectors.T), axis=1)[:, :10]
        for q, want in zip(vectors[:50], exact, strict=True):
            found = store.search.vector_candidates(q, Filter(agent=None), limit=10)
            assert {c.id for c in found} == {ids[i] for i in want}
    finally:
        store.close()

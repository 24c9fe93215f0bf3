"""Closed islands in the HNSW graph (engramdb.storage._ann_links): linked to the rest after a build.

faiss's neighbour heuristic can leave a group of near-duplicates (the same fact stored many times with small
changes) linked only among itself: compare.py's 100k rows (turns and their perturbed copies) gave 58 such
islands, and a walk that descends into one finds only its members and comes back short. Small random data
does not reliably make faiss build islands, so the tests make them: groups of near-duplicate rows whose
members' level-0 links are rewritten to point only inside the group (incoming links are kept, so walks do
enter them), exactly the shape found in the 100k graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from ann_helpers import built_store, level0_table, store_graph, with_copies

from engramdb.storage import _ann
from engramdb.storage._ann import ann_available
from engramdb.storage._ann_links import _outside_groups, link_islands
from engramdb.storage.base import Filter

pytestmark = pytest.mark.skipif(not ann_available(), reason="faiss is not installed")

DIM = 48
GROUPS = 150
COPIES = 30
#: The walk asks for the head the store re-ranks (3 x limit 50): more rows than any group holds.
HEAD = 150


def _groups(seed: int = 7) -> npt.NDArray[np.float32]:
    """GROUPS originals, then COPIES perturbed copies of each (in copy order, as a store fills)."""
    rng = np.random.default_rng(seed)
    originals = rng.normal(size=(GROUPS, DIM)).astype(np.float32)
    originals /= np.linalg.norm(originals, axis=1, keepdims=True)
    return with_copies(originals, COPIES, rng, rounds=True)


def _close(index: object, groups: range) -> None:
    """Make each group in ``groups`` a closed island: its members link only to each other at level 0."""
    faiss = _ann.load_faiss()
    neighbors, starts, width = level0_table(index)
    for g in groups:
        members = [g] + [GROUPS + c * GROUPS + g for c in range(COPIES)]
        for m in members:
            inside = [x for x in members if x != m][:width]
            slots = np.full(width, -1, dtype=neighbors.dtype)
            slots[: len(inside)] = inside
            neighbors[starts[m] : starts[m] + width] = slots
    faiss.copy_array_to_vector(neighbors, index.hnsw.neighbors)  # type: ignore[attr-defined]


def _cut_off(index: object) -> int:
    neighbors, starts, width = level0_table(index)
    reps, _, _, _ = _outside_groups(neighbors[starts[:, None] + np.arange(width)[None, :]])
    return int(reps.size)


def _short_walks(index: object, queries: npt.NDArray[np.float32]) -> int:
    """Walks that return fewer rows than asked for (the store then scans every row exactly)."""
    faiss = _ann.load_faiss()
    params = faiss.SearchParametersHNSW(efSearch=max(_ann.EF_SEARCH, HEAD))
    _, found = index.search(queries, HEAD, params=params)  # type: ignore[attr-defined]
    return int(((found >= 0).sum(axis=1) < HEAD).sum())


def test_closed_islands_are_linked_and_walks_come_back_full() -> None:
    vectors = _groups()
    faiss = _ann.load_faiss()
    index = store_graph(vectors)
    _close(index, range(0, GROUPS, 5))
    queries = vectors[:GROUPS]  # each original: its own group is its nearest rows
    assert _cut_off(index) >= GROUPS // 5
    assert _short_walks(index, queries) > 0  # a walk into an island finds only its COPIES + 1 members

    assert link_islands(index, faiss, vectors) >= GROUPS // 5

    assert _cut_off(index) == 0
    assert _short_walks(index, queries) == 0


def test_a_connected_graph_is_left_as_it_is() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(2_000, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    faiss = _ann.load_faiss()
    index = faiss.IndexHNSWSQ(16, faiss.ScalarQuantizer.QT_8bit, _ann._HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add(vectors)
    before = faiss.vector_to_array(index.hnsw.neighbors).copy()
    if _cut_off(index):
        pytest.skip("this faiss build left a random graph cut off")
    assert link_islands(index, faiss, vectors) == 0
    assert np.array_equal(faiss.vector_to_array(index.hnsw.neighbors), before)


def test_the_store_builds_its_graph_with_islands_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the store: the persisted graph is the linked one, and a search for an original finds its group."""
    vectors = _groups(seed=11)
    linked = []

    def islands_then_link(index: object, faiss: object, rows: npt.NDArray[np.float32]) -> int:
        _close(index, range(0, GROUPS, 5))  # as faiss may leave them
        linked.append(link_islands(index, faiss, rows))
        return linked[-1]

    monkeypatch.setattr(_ann, "link_islands", islands_then_link)
    store, index, mems = built_store(tmp_path / "s", vectors)
    try:
        assert len(linked) == 1
        assert linked[0] >= GROUPS // 5
        base = index._base
        assert base is not None
        assert _short_walks(base._index, vectors[:GROUPS]) == 0  # the graph read back from disk has the links
        ids = [m.id for m in mems]
        for g in range(0, GROUPS, 5):
            group = {ids[g]} | {ids[GROUPS + c * GROUPS + g] for c in range(COPIES)}
            found = store.search.vector_candidates(vectors[g], Filter(agent=None), limit=COPIES + 1)
            assert {c.id for c in found} == group
    finally:
        store.close()

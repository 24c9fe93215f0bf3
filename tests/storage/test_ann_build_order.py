"""The HNSW build adds rows in a random order (engramdb.storage._ann._insertion_chunks), then renumbers the graph.

In store order a near-duplicate is added after its original and keeps only it as a level-0 link, so each group
hangs off one node and walks miss rows the exact scan finds (compare.py's 100k rows: 0.40 of the exact top 50
against 0.86 in a random order). The graph's node i must still be row i after the build: the tests check the
codes and the links row by row, and that walks agree better with the exact scan than in store order.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from ann_helpers import level0_table, with_copies

from engramdb.storage import _ann
from engramdb.storage._ann import AnnMeta, Snapshot, ann_available, build_generation
from engramdb.storage._ann_base import AnnBase

pytestmark = pytest.mark.skipif(not ann_available(), reason="faiss is not installed")

DIM = 48
GROUPS = 300
COPIES = 30


def _store_order(seed: int) -> npt.NDArray[np.float32]:
    """GROUPS originals, then COPIES rounds of one noisy copy (cosine ~0.9) of each: the order a store fills in."""
    rng = np.random.default_rng(seed)
    originals = rng.normal(size=(GROUPS, DIM))
    originals /= np.linalg.norm(originals, axis=1, keepdims=True)
    return with_copies(originals, COPIES, rng, rounds=True)


class _Rows:
    """The float32 rows by seq (seq i is row i), as the store's vectors table serves them to the index."""

    def __init__(self, vectors: npt.NDArray[np.float32]) -> None:
        self._vectors = vectors

    def vectors(self, seqs: npt.NDArray[np.int64], dim: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        assert dim == self._vectors.shape[1]
        return self._vectors[seqs], np.ones(seqs.size, dtype=np.bool_)

    def seqs_of(self, model_id: str | None, ids: npt.NDArray[np.bytes_]) -> npt.NDArray[np.int64]:
        return np.array([int(bytes(i)[1:]) for i in ids], dtype=np.int64)

    def ahead(self, rids: npt.NDArray[np.int64]) -> None:
        pass  # in memory: nothing to ask the disk for


def _build(root: Path, vectors: npt.NDArray[np.float32]) -> AnnBase:
    n = len(vectors)
    path = root / "snapshot.npy"
    root.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    meta = AnnMeta("", "model", 0, n, n, DIM, ("a",), ("k",))
    snap = Snapshot(
        meta,
        path,
        np.array([f"m{i}".encode() for i in range(n)]),
        np.arange(1, n + 1, dtype=np.int64),
        np.zeros(n, dtype=np.int32),
        np.zeros(n, dtype=np.int32),
        np.zeros(n, dtype=np.bool_),
        np.arange(n, dtype=np.int64),
    )
    built = build_generation(root, snap, threading.Event())
    assert built is not None
    return AnnBase(root, built, _Rows(vectors))


def _misses(base: AnnBase, vectors: npt.NDArray[np.float32], queries: npt.NDArray[np.float32]) -> int:
    """Queries whose re-ranked head of 150 (the store's, for limit 50) is not the exact top 50."""
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :50]
    misses = 0
    for query, want in zip(queries, exact, strict=True):
        rows, _ = base.search(query, 150, None, base.n)
        misses += set(rows[:50].tolist()) != set(want.tolist())
    return misses


def test_the_graph_is_renumbered_to_row_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ann, "_ADD_CHUNK", 500)  # several chunks
    vectors = _store_order(1)
    base = _build(tmp_path / "side", vectors)
    faiss = _ann.load_faiss()
    storage = faiss.downcast_index(base._index.storage)
    # Node i holds row i's code ...
    codes = faiss.vector_to_array(storage.codes).reshape(base.n, -1)
    assert np.array_equal(codes, storage.sa_encode(vectors))
    # ... and its links lead to rows near it (links numbered the wrong way would average a cosine of ~0).
    neighbors, starts, width = level0_table(base._index)
    table = neighbors[starts[:, None] + np.arange(width)[None, :]]
    held = table >= 0
    node = np.repeat(np.arange(base.n)[:, None], width, axis=1)
    assert held.any(axis=1).all()
    assert np.einsum("ij,ij->i", vectors[node[held]], vectors[table[held]]).mean() > 0.3
    rows, scores = base.search(vectors[5], 10, None, base.n)
    assert rows[0] == 5
    assert scores[0] == pytest.approx(1.0, abs=1e-5)


def test_walks_agree_with_the_exact_scan_better_than_in_store_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ann, "_ADD_CHUNK", 200)  # ~2% of the rows per chunk, as 2,048 of compare.py's 100k
    monkeypatch.setattr(_ann, "fill_sparse", lambda *_: 0)  # the insertion order alone
    vectors = _store_order(2)
    rng = np.random.default_rng(3)
    queries = vectors[:GROUPS] + 0.6 * rng.normal(size=(GROUPS, DIM)).astype(np.float32) / np.sqrt(DIM)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    shuffled = _misses(_build(tmp_path / "shuffled", vectors), vectors, queries)

    def in_store_order(n: int) -> list[npt.NDArray[np.int64]]:
        return [np.arange(s, min(s + 200, n), dtype=np.int64) for s in range(0, n, 200)]

    monkeypatch.setattr(_ann, "_insertion_chunks", in_store_order)
    ordered = _misses(_build(tmp_path / "ordered", vectors), vectors, queries)
    assert shuffled < ordered * 0.75

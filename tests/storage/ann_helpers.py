"""Shared pieces of the HNSW graph tests (test_ann_links, test_ann_fill, test_ann_build_order).

Near-duplicate groups (an original row and noisy copies of it at cosine ~0.9, compare.py's 100k corpus in
small), the graph exactly as the store builds it, its level-0 link table, and a store whose graph was built,
persisted and adopted through the real path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
from storage_helpers import MODEL, memory

from engramdb.models import Memory
from engramdb.storage import _ann
from engramdb.storage._ann_links import _level0
from engramdb.storage._vector_index import VectorIndex
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite

F32 = npt.NDArray[np.float32]


def with_copies(originals: npt.NDArray[np.floating], copies: int, rng: np.random.Generator, *, rounds: bool) -> F32:
    """``originals`` (unit rows), then ``copies`` noisy copies of each at cosine ~0.9 to it.

    ``rounds``: the copies come in rounds of one copy of every original (the order a store fills in), else
    each original's copies together.
    """
    dim = originals.shape[1]
    sigma = np.sqrt((1 / 0.9**2 - 1) / dim)
    base = np.tile(originals, (copies, 1)) if rounds else np.repeat(originals, copies, axis=0)
    out = base + rng.normal(0.0, sigma, size=base.shape)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return np.concatenate([originals, out]).astype(np.float32)


def store_graph(vectors: F32) -> object:
    """The graph as the store builds it (8-bit codes, inner product, the store's M and efConstruction)."""
    faiss = _ann.load_faiss()
    index = faiss.IndexHNSWSQ(vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, _ann._HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = _ann._EF_CONSTRUCTION
    index.train(vectors)
    index.add(vectors)
    return index


def level0_table(index: object) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], int]:
    """The graph's level-0 link slots (a copy), each node's first slot, and the slots per node."""
    return _level0(index.hnsw, _ann.load_faiss(), index.ntotal)  # type: ignore[attr-defined]


def built_store(path: Path, vectors: F32) -> tuple[Store, VectorIndex, list[Memory]]:
    """A SQLite store holding one memory per row of ``vectors``, its HNSW graph built, persisted and adopted."""
    store = open_sqlite(path, ann_threshold=1_000)
    try:
        mems = [memory(f"m {i}") for i in range(len(vectors))]
        for start in range(0, len(mems), 1_000):
            store.memories.add(mems[start : start + 1_000], vectors[start : start + 1_000], model_id=MODEL, actor="t")
        index = store.search._index  # type: ignore[attr-defined]
        assert isinstance(index, VectorIndex)
        store.search.vector_candidates(vectors[0], Filter(agent=None), limit=10)  # starts the build
        assert index.wait_for_index(timeout=120)
        store.search.vector_candidates(vectors[0], Filter(agent=None), limit=10)  # adopts it
        assert index.uses_ann
    except BaseException:
        store.close()
        raise
    return store, index, mems

"""The vector cache's exact scan returns what a plain numpy reference returns, filtered or not."""

from __future__ import annotations

import numpy as np

from engramdb.storage._vector_index import VectorIndex


def test_scan_matches_a_numpy_reference_with_and_without_filters() -> None:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(3000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    agents = ["a" if i % 5 else "b" for i in range(3000)]
    index = VectorIndex()
    index.append((f"m{i}", i + 1, agents[i], "note", "private", vecs[i].tobytes()) for i in range(3000))
    query = vecs[7] + 0.1 * vecs[8]
    query /= np.linalg.norm(query)
    sims = vecs @ query
    expected_all = [f"m{i}" for i in np.argsort(-sims)[:20]]
    assert [m for m, _ in index.search(query, limit=20, agent=None, include_public=False)] == expected_all
    b_rows = np.array(
        [i for i in range(3000) if agents[i] == "b"]
    )  # a selective filter (a fifth: scores only its rows)
    expected_b = [f"m{i}" for i in b_rows[np.argsort(-sims[b_rows])[:20]]]
    found = index.search(query, limit=20, agent="b", include_public=False)
    assert [m for m, _ in found] == expected_b
    assert np.allclose([s for _, s in found], np.sort(sims[b_rows])[::-1][:20], atol=1e-5)

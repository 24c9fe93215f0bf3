"""The query path's embedding options on the real model: a small batch shared out among workers, same vectors."""

from __future__ import annotations

import threading

import numpy as np

from engramdb.embeddings import LocalEmbedder

QUERIES = [
    "what did Caroline do at the lake last weekend?",
    "when is the party",
    "which book did Melanie recommend",
    "how long has she been painting",
    "where did they go hiking in June",
    "who gave the talk on adoption?",
]


def test_a_small_batch_is_shared_out_among_the_workers_with_the_default_vectors() -> None:
    default = LocalEmbedder()
    spread = LocalEmbedder(workers=2, threads=2)
    seen: list[tuple[str, int]] = []
    run = spread._run

    def recording(session: object, batch: list[list[int]]) -> np.ndarray:
        seen.append((threading.current_thread().name, len(batch)))
        return run(session, batch)

    spread._run = recording  # type: ignore[method-assign]
    try:
        expected = default.embed(QUERIES)
        # Six texts, far below one batch of 64: each of the two workers gets three.
        np.testing.assert_allclose(spread.embed(QUERIES), expected, atol=1e-6)
        assert sorted(size for _, size in seen) == [3, 3]
        assert all(name.startswith("engramdb-embed") for name, _ in seen)
        # A single query is not split: it runs on the calling thread (one core), with the default's vector.
        seen.clear()
        np.testing.assert_allclose(spread.embed(QUERIES[:1]), expected[:1], atol=1e-6)
        assert seen == [(threading.current_thread().name, 1)]
    finally:
        spread.close()
        default.close()


def test_one_worker_keeps_whole_batches() -> None:
    embedder = LocalEmbedder(batch_size=4)
    sizes: list[int] = []
    run = embedder._run

    def recording(session: object, batch: list[list[int]]) -> np.ndarray:
        sizes.append(len(batch))
        return run(session, batch)

    embedder._run = recording  # type: ignore[method-assign]
    embedder.embed(QUERIES)
    assert sorted(sizes) == [2, 4]

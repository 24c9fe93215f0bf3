"""``CachedEmbedder.prime``: known vectors of the same model stand in for the model (an import reusing vectors)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from engramdb.embeddings import CachedEmbedder
from engramdb.embeddings.base import Embedder
from engramdb.errors import EmbeddingError


class Counting:
    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_primed_texts_are_not_embedded_and_come_back_unit_norm(embedder: Embedder) -> None:
    assert isinstance(embedder, CachedEmbedder)
    counting = Counting(embedder.inner)
    cache = CachedEmbedder(counting, size=8)
    known = embedder.embed(["alpha beta", "gamma delta"])
    assert cache.prime(["alpha beta", "gamma delta"], 2.5 * known) == 2
    out = cache.embed(["gamma delta", "something new", "alpha beta"])
    assert counting.calls == [["something new"]]
    np.testing.assert_allclose(out[0], known[1], atol=1e-6)
    np.testing.assert_allclose(out[2], known[0], atol=1e-6)
    assert cache.cache_info().hits == 2


def test_prime_keeps_at_most_size_and_checks_shapes(embedder: Embedder) -> None:
    cache = CachedEmbedder(Counting(embedder), size=1)
    vectors = np.ones((2, embedder.dim), dtype=np.float32)
    assert cache.prime(["a", "b"], vectors) == 1
    assert cache.cache_info().size == 1
    with pytest.raises(EmbeddingError, match="shape"):
        cache.prime(["a", "b"], vectors[:1])
    with pytest.raises(EmbeddingError, match="shape"):
        cache.prime(["a"], np.ones((1, embedder.dim + 1), dtype=np.float32))

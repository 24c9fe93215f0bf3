"""CachedEmbedder around the real local model: what reaches the model, what comes back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from embedding_helpers import CountingEmbedder

from engramdb.embeddings import CachedEmbedder, CacheInfo, Embedder, LocalEmbedder
from engramdb.errors import ConfigError, EmbeddingError, ValidationError

TEXTS = ["deploy failed: missing index", "use exponential backoff", "the token expired"]


@pytest.fixture
def counting(local_embedder: LocalEmbedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


def test_same_vectors_as_the_wrapped_embedder(counting: CountingEmbedder, local_embedder: LocalEmbedder) -> None:
    cached = CachedEmbedder(counting)
    np.testing.assert_array_equal(cached.embed(TEXTS), local_embedder.embed(TEXTS))
    assert cached.model_id == local_embedder.model_id
    assert cached.dim == local_embedder.dim
    assert isinstance(cached, Embedder)


def test_hits_are_not_recomputed_and_misses_go_in_one_call(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting)
    first = cached.embed(TEXTS)
    assert counting.calls == [TEXTS]
    second = cached.embed([TEXTS[2], "a new text", TEXTS[0], "another new one"])
    assert counting.calls[1:] == [["a new text", "another new one"]]
    np.testing.assert_array_equal(second[0], first[2])
    np.testing.assert_array_equal(second[2], first[0])
    cached.embed(list(reversed(TEXTS)))
    assert len(counting.calls) == 2  # all hits: the model is not called at all
    assert cached.cache_info() == CacheInfo(hits=5, misses=5, size=5, maxsize=4096)


def test_duplicates_in_one_call_are_embedded_once(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting)
    vectors = cached.embed(["same", "other", "same", "same"])
    assert counting.calls == [["same", "other"]]
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_array_equal(vectors[0], vectors[3])


def test_least_recently_used_is_evicted(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting, size=2)
    cached.embed(["a"])
    cached.embed(["b"])
    cached.embed(["a"])  # a is now the most recent
    cached.embed(["c"])  # evicts b
    assert counting.texts_embedded == 3
    cached.embed(["a", "c"])
    assert counting.texts_embedded == 3
    cached.embed(["b"])
    assert counting.calls[-1] == ["b"]
    assert cached.cache_info().size == 2


def test_size_zero_caches_nothing(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting, size=0)
    cached.embed(TEXTS)
    cached.embed(TEXTS)
    assert counting.texts_embedded == 2 * len(TEXTS)


def test_results_are_private_copies(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting)
    first = cached.embed(TEXTS)
    expected = first.copy()
    first[:] = 0.0  # the caller may scribble on its result...
    np.testing.assert_array_equal(cached.embed(TEXTS), expected)  # ...the cache is unharmed


def test_empty_and_invalid_input(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting)
    assert cached.embed([]).shape == (0, 384)
    assert counting.calls == []
    with pytest.raises(ValidationError):
        cached.embed("one string")
    with pytest.raises(ConfigError):
        CachedEmbedder(counting, size=-1)


def test_clear(counting: CountingEmbedder) -> None:
    cached = CachedEmbedder(counting)
    cached.embed(TEXTS)
    cached.cache_clear()
    assert cached.cache_info() == CacheInfo(hits=0, misses=0, size=0, maxsize=4096)
    cached.embed(TEXTS)
    assert counting.texts_embedded == 2 * len(TEXTS)


def test_persistent_cache_survives_a_new_process_instance(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    path = tmp_path / "cache" / "embeddings.sqlite"
    first_inner = CountingEmbedder(local_embedder)
    with CachedEmbedder(first_inner, size=16, path=path) as cached:
        expected = cached.embed(TEXTS)
    assert path.is_file()
    second_inner = CountingEmbedder(local_embedder)
    with CachedEmbedder(second_inner, size=16, path=path) as cached:
        np.testing.assert_array_equal(cached.embed(TEXTS), expected)
        assert second_inner.calls == []
        cached.embed([*TEXTS, "one more"])
        assert second_inner.calls == [["one more"]]
        assert cached.cache_info().hits == 2 * len(TEXTS)


def test_persistent_cache_is_keyed_by_model(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    path = tmp_path / "embeddings.sqlite"
    with CachedEmbedder(CountingEmbedder(local_embedder), path=path) as cached:
        cached.embed(TEXTS)
    other_model = CountingEmbedder(local_embedder, model_id="some-other-model")
    with CachedEmbedder(other_model, path=path) as cached:
        cached.embed(TEXTS)
    assert other_model.calls == [TEXTS]


def test_a_damaged_cache_file_is_reported(tmp_path: Path, counting: CountingEmbedder) -> None:
    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(b"definitely not a sqlite database" * 100)
    with pytest.raises(EmbeddingError, match="embedding cache"):
        CachedEmbedder(counting, path=path)


def test_threads_share_the_cache_safely(local_embedder: LocalEmbedder) -> None:
    counting = CountingEmbedder(local_embedder)
    cached = CachedEmbedder(counting, size=8)  # small: threads evict each other's entries
    texts = [f"note {i}" for i in range(24)]
    expected = local_embedder.embed(texts)

    def work(k: int) -> None:
        for _ in range(3):
            picks = [(k * 5 + j) % len(texts) for j in range(7)]
            got = cached.embed([texts[p] for p in picks])
            np.testing.assert_allclose(got, expected[picks], atol=1e-6)

    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(work, k) for k in range(6)]:
            future.result()  # re-raises a failed assertion from the worker
    assert cached.cache_info().size <= 8

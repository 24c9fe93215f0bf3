"""QueryCache around the real local model: repeated queries skip the model, bounded, thread-safe."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from embedding_helpers import CountingEmbedder

from engramdb.embeddings import LocalEmbedder, QueryCache
from engramdb.embeddings.query import MAX_CACHED_CHARS
from engramdb.errors import ConfigError, ValidationError

QUERIES = ["why did the deploy fail?", "how do we retry a 503", "who owns the billing service"]


@pytest.fixture
def counting(local_embedder: LocalEmbedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


def test_the_same_vector_as_the_model_and_a_repeat_skips_it(
    counting: CountingEmbedder, local_embedder: LocalEmbedder
) -> None:
    cache = QueryCache(counting, size=8)
    first = cache.embed_query(QUERIES[0])
    np.testing.assert_array_equal(first, local_embedder.embed([QUERIES[0]])[0])
    assert first.shape == (local_embedder.dim,)
    assert first.dtype == np.float32
    again = cache.embed_query(QUERIES[0])
    np.testing.assert_array_equal(again, first)
    assert counting.calls == [[QUERIES[0]]]
    info = cache.cache_info()
    assert (info.hits, info.misses, info.size, info.maxsize) == (1, 1, 1, 8)


def test_vectors_handed_out_are_read_only(counting: CountingEmbedder) -> None:
    vector = QueryCache(counting).embed_query(QUERIES[1])
    with pytest.raises(ValueError, match="read-only"):
        vector[0] = 1.0


def test_least_recently_used_is_evicted_at_the_bound(counting: CountingEmbedder) -> None:
    cache = QueryCache(counting, size=2)
    cache.embed_query(QUERIES[0])
    cache.embed_query(QUERIES[1])
    cache.embed_query(QUERIES[0])  # refreshes 0: 1 is now the oldest
    cache.embed_query(QUERIES[2])  # evicts 1
    assert cache.cache_info().size == 2
    cache.embed_query(QUERIES[0])
    assert counting.texts_embedded == 3
    cache.embed_query(QUERIES[1])
    assert counting.texts_embedded == 4


def test_a_model_change_is_never_served_a_stale_vector(local_embedder: LocalEmbedder) -> None:
    counting = CountingEmbedder(local_embedder, model_id="model-a")
    cache = QueryCache(counting)
    cache.embed_query(QUERIES[0])
    counting.model_id = "model-b"
    cache.embed_query(QUERIES[0])
    assert counting.texts_embedded == 2


def test_size_zero_caches_nothing_and_long_queries_are_not_kept(counting: CountingEmbedder) -> None:
    off = QueryCache(counting, size=0)
    off.embed_query(QUERIES[0])
    off.embed_query(QUERIES[0])
    assert counting.texts_embedded == 2
    cache = QueryCache(counting, size=4)
    pasted = "a pasted document " * (MAX_CACHED_CHARS // 10)
    cache.embed_query(pasted)
    cache.embed_query(pasted)
    assert counting.texts_embedded == 4
    assert cache.cache_info().size == 0


def test_clear_forgets_entries_and_counters(counting: CountingEmbedder) -> None:
    cache = QueryCache(counting)
    cache.embed_query(QUERIES[0])
    cache.embed_query(QUERIES[0])
    cache.cache_clear()
    info = cache.cache_info()
    assert (info.hits, info.misses, info.size) == (0, 0, 0)
    cache.embed_query(QUERIES[0])
    assert counting.texts_embedded == 2


def test_bad_input_and_settings_are_refused(counting: CountingEmbedder) -> None:
    with pytest.raises(ValidationError, match="must be a string"):
        QueryCache(counting).embed_query(["a list"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        QueryCache(counting, size=-1)


def test_concurrent_callers_agree_and_the_bound_holds(local_embedder: LocalEmbedder) -> None:
    queries = [f"question number {i % 12}" for i in range(96)]
    expected = {q: local_embedder.embed([q])[0] for q in set(queries)}
    cache = QueryCache(local_embedder, size=5)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(cache.embed_query, queries))
    for query, vector in zip(queries, results, strict=True):
        np.testing.assert_allclose(vector, expected[query], atol=1e-6)
    info = cache.cache_info()
    assert info.size <= 5
    assert info.hits + info.misses == len(queries)

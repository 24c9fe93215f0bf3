"""LocalEmbedder's speed and truncation options, on the real model: what changes vectors and what does not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from engramdb.embeddings import LocalEmbedder, count_tokens
from engramdb.embeddings.local import DEFAULT_MODEL_ID
from engramdb.errors import ConfigError

WORDS = ["the", "river", "mountain", "quiet", "green", "house", "music", "light", "stone", "water"]


def words(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


# Lengths out of order, several batches of 4, one past the model's 256-token limit.
TEXTS = [f"turn {i}: {words((i * 37) % 300)}" for i in range(30)]


def test_concurrent_workers_give_the_default_vectors_in_input_order(local_embedder: LocalEmbedder) -> None:
    expected = local_embedder.embed(TEXTS)
    embedder = LocalEmbedder(workers=2, batch_size=4)
    try:
        assert embedder.model_id == DEFAULT_MODEL_ID  # same vectors, so the same id
        np.testing.assert_allclose(embedder.embed(TEXTS), expected, atol=1e-5)
        # Callers sharing the embedder share its workers too.
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(lambda k: embedder.embed(TEXTS[k::3]), range(3)))
        for k in range(3):
            np.testing.assert_allclose(results[k], expected[k::3], atol=1e-5)
    finally:
        embedder.close()
    # Closing only stops idle threads: the next call starts them again.
    np.testing.assert_allclose(embedder.embed(TEXTS[:9]), expected[:9], atol=1e-5)
    embedder.close()


def test_truncation_changes_only_long_texts_and_the_model_id(local_embedder: LocalEmbedder) -> None:
    short = LocalEmbedder(max_tokens=128)
    assert short.model_id == f"{DEFAULT_MODEL_ID}-max128"
    fits, long_text = words(120), words(200)
    assert count_tokens(fits) <= 126 < count_tokens(long_text)
    cut_fits, cut_long, prefix = short.embed([fits, long_text, words(126)])
    full_fits, full_long = local_embedder.embed([fits, long_text])
    np.testing.assert_allclose(cut_fits, full_fits, atol=1e-5)
    # [CLS] + 126 tokens + [SEP]: the long text is read up to its 126th token, as that prefix is.
    np.testing.assert_allclose(cut_long, prefix, atol=1e-5)
    assert not np.allclose(cut_long, full_long, atol=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers must be at least 1"),
        ({"max_tokens": 8}, "max_tokens must be within"),
        ({"max_tokens": 513}, "max_tokens must be within"),
    ],
)
def test_bad_options_are_config_errors(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LocalEmbedder(**kwargs)  # type: ignore[arg-type]

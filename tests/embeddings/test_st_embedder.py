"""SentenceTransformerEmbedder: a real run needs torch (absent here), the missing-package path does not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.st import SentenceTransformerEmbedder
from engramdb.errors import ConfigError, EmbeddingError


def _st_installed() -> bool:
    try:
        return importlib.util.find_spec("sentence_transformers") is not None
    except (ImportError, ValueError):
        return False


def test_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    with pytest.raises(EmbeddingError, match=r"pip install 'engramdb\[sentence-transformers\]'"):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2")


def test_missing_package_through_the_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    settings = load_settings({}, home=str(tmp_path), embedder="sentence-transformers:all-MiniLM-L6-v2")
    with pytest.raises(EmbeddingError, match="sentence-transformers"):
        make_embedder(settings)


def test_a_model_name_is_required() -> None:
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(" ")


@pytest.mark.skipif(not _st_installed(), reason="sentence-transformers (and torch) are not installed")
def test_real_model_from_the_local_cache() -> None:
    embedder = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    try:
        vectors = embedder.embed(["The weather is lovely today.", "It's so sunny outside!"])
    except EmbeddingError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 is not in the local Hugging Face cache: {exc}")
    assert embedder.model_id == "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2"
    assert vectors.shape == (2, embedder.dim) == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.6660, abs=0.01)  # the published value

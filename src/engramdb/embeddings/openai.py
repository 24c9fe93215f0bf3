"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint.

Works with OpenAI itself and with local servers that speak the same protocol
(Ollama, vLLM, LM Studio, llama.cpp's server, text-embeddings-inference). Needs the
``openai`` extra (``pip install 'engramdb[openai]'``, which brings httpx); httpx is
imported when the first request is made, so constructing the embedder is free.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from engramdb._retry import backoff_delay, retry_after
from engramdb.embeddings._common import check_texts, normalise, one_line
from engramdb.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIEmbedder"]

#: Statuses worth another try: rate limited, or a gateway/server that is (re)starting.
_RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
_MAX_RETRY_WAIT: Final = 10.0


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise EmbeddingError("the OpenAI-compatible embedder needs httpx: pip install 'engramdb[openai]'") from exc
    return httpx


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible embeddings endpoint, L2-normalised, in input order.

    ``base_url`` is the API root, e.g. ``https://api.openai.com/v1`` or Ollama's
    ``http://localhost:11434/v1``; requests go to ``{base_url}/embeddings``. ``dim``
    is learned from the first response unless given (reading :attr:`dim` before any
    embedding makes one small request). Texts are sent ``batch_size`` at a time;
    429/502/503/504 answers are retried ``retries`` times with backoff. Every
    failure is an :class:`~engramdb.errors.EmbeddingError` with a one-line message.
    Thread-safe.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://localhost:11434/v1",
        api_key: str | None = None,
        timeout: float = 60.0,
        batch_size: int = 64,
        dim: int | None = None,
        retries: int = 2,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("the OpenAI-compatible embedder needs a model name, e.g. 'openai:nomic-embed-text'")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"openai_base_url must start with http:// or https://, not {base_url!r}")
        if batch_size < 1:
            raise ConfigError("batch_size must be at least 1")
        if timeout <= 0:
            raise ConfigError("timeout must be positive")
        if retries < 0:
            raise ConfigError("retries must not be negative")
        if dim is not None and dim < 1:
            raise ConfigError("dim must be at least 1")
        self.model = model.strip()
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        #: The server decides pooling and normalisation for a model name, so the name is the id.
        self.model_id = f"openai:{self.model}"
        self.timeout = timeout
        self.batch_size = batch_size
        self.retries = retries
        self._api_key = api_key
        self._dim = dim
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # Never show the API key.
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def dim(self) -> int:
        """Vector dimension: given, learned from the first response, or probed now."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        self._dim = value

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: shape (len(texts), dim), float32, unit-norm rows, in input order."""
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        parts = [self._embed_batch(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    # -- one request ----------------------------------------------------------------------------
    def _client_or_new(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                httpx = _import_httpx()
                headers = {"Accept": "application/json", "User-Agent": "engramdb"}
                if self._api_key:
                    headers["Authorization"] = f"Bearer {self._api_key}"
                self._client = httpx.Client(headers=headers, timeout=self.timeout)
            return self._client

    def _embed_batch(self, batch: list[str]) -> npt.NDArray[np.float32]:
        payload = self._post({"model": self.model, "input": batch})
        matrix = _parse_embeddings(payload, len(batch), url=self.url)
        with self._lock:
            if self._dim is None:
                self._dim = matrix.shape[1]
            dim = self._dim
        if matrix.shape[1] != dim:
            raise EmbeddingError(f"{self.url} returned {matrix.shape[1]}-d vectors, expected {dim}-d")
        return normalise(matrix)

    def _post(self, body: dict[str, Any]) -> Any:
        client = self._client_or_new()
        httpx = _import_httpx()
        for attempt in range(self.retries + 1):
            try:
                response = client.post(self.url, json=body)
            except httpx.ConnectError as exc:
                raise EmbeddingError(
                    f"cannot connect to {self.url}: {one_line(exc)} (is the embedding server running?)"
                ) from exc
            except httpx.TimeoutException as exc:
                raise EmbeddingError(f"{self.url} did not answer within {self.timeout:g}s") from exc
            except httpx.HTTPError as exc:
                raise EmbeddingError(f"request to {self.url} failed: {one_line(exc)}") from exc
            if response.status_code in _RETRY_STATUSES and attempt < self.retries:
                server_wait = retry_after(response.headers.get("Retry-After"), now=datetime.now(UTC))
                time.sleep(backoff_delay(attempt, base=0.5, cap=_MAX_RETRY_WAIT, server_wait=server_wait))
                continue
            if response.status_code >= 400:
                detail = _error_detail(response)
                raise EmbeddingError(
                    f"{self.url} returned HTTP {response.status_code}" + (f": {detail}" if detail else "")
                )
            try:
                return response.json()
            except ValueError as exc:
                raise EmbeddingError(
                    f"{self.url} returned malformed JSON (HTTP {response.status_code}): {one_line(exc, limit=120)}"
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the HTTP connection pool. A later :meth:`embed` opens a new one."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _parse_embeddings(payload: Any, expected: int, *, url: str) -> npt.NDArray[np.float64]:
    """The ``data`` of an embeddings response as a (expected, dim) matrix ordered by ``index``."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError(f"{url} returned JSON without a 'data' list: not an embeddings response")
    if len(data) != expected:
        raise EmbeddingError(f"{url} returned {len(data)} embeddings for {expected} texts")
    rows: list[npt.NDArray[np.float64] | None] = [None] * expected
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise EmbeddingError(f"{url} returned a malformed embedding at position {position}")
        # Servers may answer out of order; 'index' says which input a vector belongs to.
        index = item.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected:
            raise EmbeddingError(f"{url} returned an embedding with invalid index {index!r}")
        if rows[index] is not None:
            raise EmbeddingError(f"{url} returned two embeddings for index {index}")
        rows[index] = _vector(item.get("embedding"), url=url, index=index)
    vectors = [row for row in rows if row is not None]
    if len({row.shape[0] for row in vectors}) != 1:
        raise EmbeddingError(f"{url} returned vectors of different lengths in one response")
    return np.stack(vectors)


def _vector(value: Any, *, url: str, index: int) -> npt.NDArray[np.float64]:
    if isinstance(value, str):
        # encoding_format="base64": little-endian float32. Some servers default to it.
        try:
            vector = np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4").astype(np.float64)
        except (binascii.Error, ValueError) as exc:
            raise EmbeddingError(f"{url} returned an undecodable base64 embedding at index {index}") from exc
    else:
        if not isinstance(value, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value
        ):
            raise EmbeddingError(f"{url} returned an embedding that is not a list of numbers at index {index}")
        vector = np.asarray(value, dtype=np.float64)
    if vector.ndim != 1 or vector.size == 0:
        raise EmbeddingError(f"{url} returned an empty embedding at index {index}")
    if not np.all(np.isfinite(vector)):
        raise EmbeddingError(f"{url} returned an embedding with NaN or infinite values at index {index}")
    if not np.any(vector):
        raise EmbeddingError(f"{url} returned an all-zero embedding at index {index}: it has no direction")
    return vector


def _error_detail(response: httpx.Response) -> str:
    """The server's own error message, shortened to one line ('' if there is none)."""
    try:
        body = response.json()
    except ValueError:
        text = response.text
    else:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            error = error.get("message")
        if error is None and isinstance(body, dict):
            error = body.get("detail") or body.get("message")
        text = str(error) if error is not None else response.text
    text = " ".join(text.split())
    return text[:197] + "..." if len(text) > 200 else text

"""Test helpers for the embedding tests: a counting wrapper and a real OpenAI-compatible HTTP server."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import numpy.typing as npt

from engramdb.embeddings.base import Embedder

FAKE_DIM = 8


class CountingEmbedder:
    """Passes calls to a real embedder and records the texts of every call."""

    def __init__(self, inner: Embedder, *, model_id: str | None = None) -> None:
        self.inner = inner
        self.model_id = model_id or inner.model_id
        self.dim = inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def texts_embedded(self) -> int:
        return sum(len(call) for call in self.calls)


def fake_vector(text: str) -> list[float]:
    """A deterministic, deliberately un-normalised vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    values = np.random.default_rng(seed).normal(size=FAKE_DIM) * 3.0
    return [float(v) for v in values]


def expected_vector(text: str) -> npt.NDArray[np.float32]:
    vector = np.asarray(fake_vector(text), dtype=np.float64)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


@dataclass
class FakeServer:
    """State of the loopback embeddings server; tests set ``mode`` to script its answers."""

    url: str
    mode: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    failures_left: int = 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


def make_handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output clean
            pass

        def _send(self, status: int, body: bytes, *, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            state.requests.append(request)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if self.path != "/v1/embeddings":
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            mode = state.mode
            if mode == "flaky" and state.failures_left > 0:
                state.failures_left -= 1
                self._send(503, b'{"error": "loading model"}', headers={"Retry-After": "0"})
                return
            if mode == "http500":
                self._send(500, b'{"error": {"message": "model \\"x\\" not loaded\\n try again", "type": "server"}}')
                return
            if mode == "http401":
                self._send(401, b'{"error": {"message": "Incorrect API key provided"}}')
                return
            if mode == "malformed":
                self._send(200, b'{"data": [{"embedding": [0.1, 0.2')
                return
            if mode == "slow":
                time.sleep(1.0)
            texts = request["input"]
            data: list[dict[str, Any]] = []
            for i, text in enumerate(texts):
                embedding: Any = fake_vector(text)
                if mode == "base64":
                    embedding = base64.b64encode(np.asarray(embedding, dtype="<f4").tobytes()).decode()
                if mode == "zero":
                    embedding = [0.0] * FAKE_DIM
                data.append({"object": "embedding", "index": i, "embedding": embedding})
            if mode == "shuffled":
                data.reverse()
            if mode == "wrong_count":
                data = data[:-1]
            body = {"object": "list", "data": data, "model": request["model"], "usage": {"prompt_tokens": 1}}
            self._send(200, json.dumps(body).encode())

    return Handler

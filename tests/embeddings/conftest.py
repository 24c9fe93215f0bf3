"""Fixtures for the embedding tests: the real local model, and a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from embedding_helpers import FakeServer, make_handler

from engramdb.embeddings.local import LocalEmbedder


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    """The bundled model, uncached, loaded once for the whole session."""
    embedder = LocalEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A real HTTP server on 127.0.0.1 speaking the OpenAI embeddings protocol."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    state = FakeServer(url=f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = make_handler(state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

"""Fixtures of the client tests: one real ``engram serve`` per session, and the API on every backend.

``api`` is the same public API on each of: an embedded SQLite store, PostgreSQL, and the remote
client of a running ``engram serve`` (its store is SQLite); ``agent`` is a fresh agent name, so the
tests sharing the session's server never see each other's memories.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from engram_server import SERVER, EngramServer
from pg_server import SERVER as PG

from engramdb import Engram
from engramdb.embeddings.base import Embedder

API_BACKENDS = ("embedded", "postgres", "remote")


@pytest.fixture(scope="session", autouse=True)
def _stop_engram_server() -> Iterator[None]:
    yield
    SERVER.stop()


@pytest.fixture(scope="session")
def server() -> EngramServer:
    """The session's ``engram serve`` (started on first use)."""
    return SERVER.get()


@pytest.fixture
def remote(server: EngramServer) -> Iterator[Any]:
    """A remote client of the session's server."""
    with Engram(server.url) as mem:
        yield mem


@pytest.fixture
def agent() -> str:
    """A fresh agent name for one test."""
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture(params=API_BACKENDS)
def api(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Any]:
    """The public API on each backend: embedded SQLite, PostgreSQL, and the remote client."""
    if request.param == "remote":
        with Engram(request.getfixturevalue("server").url) as mem:
            yield mem
        return
    location = PG.get().new_database() if request.param == "postgres" else str(tmp_path / "store")
    with Engram(location, embedder=embedder) as mem:
        yield mem

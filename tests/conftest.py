"""Shared fixtures: real stores on disk, the real embedding model (loaded once per session).

``backend_mem`` gives a fresh :class:`Engram` on each backend (SQLite in a temp dir, PostgreSQL in a fresh
database of the session's throwaway server from ``tests/storage/pg_server.py``). Without a usable
PostgreSQL the postgres case is skipped, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent / "storage"))

from pg_server import SERVER

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder

# Property tests assert behaviour, never timings (speed is bench/'s job): Hypothesis's per-example deadline only
# made them flaky on a loaded machine.
settings.register_profile("engramdb", deadline=None)
settings.load_profile("engramdb")

#: The backends ``backend_mem`` runs on.
BACKEND_NAMES = ("sqlite", "postgres")


@pytest.fixture(scope="session", autouse=True)
def _stop_postgres_server_at_end() -> Iterator[None]:
    """Stops the session's PostgreSQL test server (if a test started it) when the session ends."""
    yield
    SERVER.stop()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default local embedder, shared so the model loads once."""
    return make_embedder(load_settings({}))


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Engram]:
    """A fresh on-disk store with the real model."""
    with Engram(tmp_path / "store", embedder=embedder) as m:
        yield m


def backend_location(backend: str, tmp_path: Path) -> str:
    """A fresh, empty location on ``backend`` (postgres: a new database; skipped, or failed in CI, if unavailable)."""
    if backend == "postgres":
        return SERVER.get().new_database()
    return str(tmp_path / "store")


@pytest.fixture(params=BACKEND_NAMES)
def backend_mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Engram]:
    """A fresh :class:`Engram` on each backend with the shared real embedder."""
    location = backend_location(request.param, tmp_path)
    with Engram(location, embedder=embedder) as m:
        yield m

"""Fixtures for the storage suite. ``store`` runs every contract test once per backend in ``BACKENDS``.

A backend entry makes a fresh, empty location for one test. To add one (e.g. Postgres),
add a function that returns its location (skipping with ``pytest.skip`` when the server
is not available) and list it in ``BACKENDS``: the whole contract suite then runs on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pg_server import SERVER, PgServer
from storage_helpers import StoreFactory

from engramdb.config import load_settings
from engramdb.storage.base import Store


def _sqlite_location(tmp_path: Path) -> str:
    return str(tmp_path / "store")


def _postgres_location(tmp_path: Path) -> str:
    # A fresh database on the session's server (started on first use; skipped, or failed in CI, if unavailable).
    return SERVER.get().new_database()


#: Backend name -> a function making a fresh location for one test.
BACKENDS: dict[str, Callable[[Path], str]] = {
    "sqlite": _sqlite_location,
    "postgres": _postgres_location,
}


@pytest.fixture(scope="session", autouse=True)
def _stop_postgres_server() -> Iterator[None]:
    """Stops the session's PostgreSQL test server (if a test started it) when the session ends."""
    yield
    SERVER.stop()


@pytest.fixture(scope="session")
def postgres_server() -> PgServer:
    """The session's PostgreSQL test server (initdb + pg_ctl in a temp dir, trust auth, fsync off)."""
    return SERVER.get()


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A fresh location on each backend."""
    backend: str = request.param
    location = BACKENDS[backend](tmp_path)
    factory = StoreFactory(backend, location, load_settings({}, home=tmp_path / "home"))
    yield factory
    factory.close_all()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    """An open, empty store on each backend (closed after the test)."""
    return store_factory.open()

"""Fixtures of the shared-session tests: the session's Redis server and a fresh database for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis_server import SERVER


@pytest.fixture(scope="session", autouse=True)
def _stop_redis_server_at_end() -> Iterator[None]:
    """Stops the session's Redis test server (if a test started it) when the session ends."""
    yield
    SERVER.stop()


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The URL of an empty database of the test server (flushed after the test)."""
    import redis

    url = SERVER.get().url()
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()

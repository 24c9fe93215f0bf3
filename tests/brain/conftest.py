"""Fixtures of the brain tests: a chat-completions server on loopback (``server``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llm_server import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A scripted OpenAI-protocol server on 127.0.0.1, stopped after the test."""
    s = FakeServer()
    yield s
    s.stop()

"""Shared fixtures: real stores on disk, the real embedding model (loaded once per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default local embedder, shared so the model loads once."""
    return make_embedder(load_settings({}))


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Engram]:
    """A fresh on-disk store with the real model."""
    with Engram(tmp_path / "store", embedder=embedder) as m:
        yield m

"""Fixtures of the integration tests: a store's folder that outlives one Engram, to reopen it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder


@pytest.fixture
def reopen(tmp_path: Path, embedder: Embedder) -> Callable[[], AbstractContextManager[Engram]]:
    """Opens the same on-disk store (``tmp_path / "store"``) each time it is called: a process restart."""

    @contextmanager
    def open_store() -> Iterator[Engram]:
        with Engram(tmp_path / "store", embedder=embedder) as mem:
            yield mem

    return open_store

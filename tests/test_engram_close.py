"""Engram.close(): everything an instance opened is released, also when opening fails halfway."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.errors import ModelMismatchError, StorageError


def _engram_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("engram")}


def _settled(before: set[threading.Thread]) -> set[str]:
    """The library's threads started since ``before`` still alive: none, as soon as the close returns (it joins
    them; a 5 s grace here failed on a loaded machine)."""
    return {t.name for t in _engram_threads() - before}


def test_a_failed_open_leaves_no_worker_running_and_the_store_usable(tmp_path: Path):
    with Engram(tmp_path, embedder="static") as mem:
        mem.remember("retry with backoff fixes 429s", agent="alice")
    before = _engram_threads()
    # The store holds another model's vectors: the check runs after the store, the vector queue and the
    # reads are open, and all of them must be released before the error reaches the caller.
    with pytest.raises(ModelMismatchError):
        Engram(tmp_path, embedder="local")
    assert _settled(before) == set()
    with Engram(tmp_path, embedder="static") as mem:
        assert mem.count(agent="alice") == 1


def test_close_is_idempotent_and_the_store_is_closed(tmp_path: Path):
    mem = Engram(tmp_path, embedder="static", vectors="background")
    mem.remember("the deploy needs the VPN", agent="alice")
    mem.close()
    mem.close()
    with pytest.raises(StorageError):
        mem.count(agent="alice")

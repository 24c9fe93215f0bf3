"""Processes writing the same new keys at the same instant: one memory per key, on every backend.

A keyed ``remember`` looks up the key's holder and then writes; without a lock around both,
two processes could each find the key free and each add a memory.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from storage_helpers import StoreFactory

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.pipeline import key_of
from engramdb.storage.base import Filter

PROCESSES = 6
KEYS = 30


def _write_keys(location: str, home: str, start_at: float) -> int:
    """In a child process: at ``start_at``, write a value for each key; the number written."""
    with Engram(location, settings=load_settings({}, home=Path(home))) as mem:
        mem.remember("warm up the model and the connection", agent="warmup")
        time.sleep(max(0.0, start_at - time.time()))
        for n in range(KEYS):
            mem.remember(f"value of key {n} from process {os.getpid()}", agent="shared", key=f"k{n}")
    return KEYS


def test_one_memory_per_key_when_processes_race(store_factory: StoreFactory, tmp_path: Path) -> None:
    store_factory.open().close()  # the schema exists before the race
    start_at = time.time() + 8.0  # every child has opened the store and loaded the model by then
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=PROCESSES, mp_context=context) as pool:
        futures = [
            pool.submit(_write_keys, store_factory.location, str(tmp_path / "home"), start_at) for _ in range(PROCESSES)
        ]
        assert [f.result(timeout=300) for f in futures] == [KEYS] * PROCESSES
    with Engram(store_factory.location, settings=load_settings({}, home=tmp_path / "home")) as mem:
        held = mem.store.memories.list(Filter(agent="shared"), limit=10 * KEYS * PROCESSES)
        assert Counter(key_of(m) for m in held) == Counter({f"k{n}": 1 for n in range(KEYS)})
        for memory in held:
            # Every process's value was written: the first created the memory, the others superseded it.
            assert len(mem.history(memory.id)) == PROCESSES

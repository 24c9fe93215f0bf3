"""The open-time scan for memories without a vector of the current model (``vectors.iter_stale``), on both backends:
it answers nothing at once when every memory has one, and otherwise finds exactly the memories lacking one (no
vector, or one of another model) however the counts of the two compare.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from storage_helpers import MODEL, memory, unit_vectors

from engramdb.storage.base import Store
from engramdb.storage.sqlite import open_sqlite


def stale_ids(store: Store, model_id: str = MODEL) -> set[str]:
    return {memory_id for batch in store.vectors.iter_stale(model_id, batch=2) for memory_id, _ in batch}


def test_the_stale_scan_finds_exactly_the_memories_without_a_current_vector(store: Store) -> None:
    assert stale_ids(store) == set()  # an empty store
    ms = [memory(f"note {i}") for i in range(6)]
    store.memories.add(ms, unit_vectors(6), model_id=MODEL, actor="t")
    assert stale_ids(store) == set()
    assert stale_ids(store, "other-model") == {m.id for m in ms}
    # Another model's vector for two of them: as many vectors as memories, yet two are stale.
    store.vectors.set([ms[0].id, ms[1].id], unit_vectors(2, seed=5), model_id="other-model")
    assert stale_ids(store) == {ms[0].id, ms[1].id}
    assert store.vectors.count_stale(MODEL) == 2
    store.vectors.set([ms[0].id, ms[1].id], unit_vectors(2, seed=6), model_id=MODEL)
    assert stale_ids(store) == set()
    later = [memory("without a vector")]
    store.memories.add(later, unit_vectors(1), model_id=MODEL, actor="t", unvectored=frozenset({0}))
    assert stale_ids(store) == {later[0].id}


def test_the_count_does_not_wait_for_another_thread_s_write_and_sees_this_thread_s(tmp_path: Path) -> None:
    """At open the count reads every vector row (seconds at 1M memories): on SQLite it reads on a connection of its
    own, so it neither waits for the store's lock nor makes searches wait; inside this thread's write it still sees
    that write."""
    store = open_sqlite(tmp_path / "s", warm=False)
    try:
        ms = [memory(f"note {i}") for i in range(4)]
        store.memories.add(ms, unit_vectors(4), model_id=MODEL, actor="t")
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with store.atomic():  # the store's lock, on another thread, until released
                holding.set()
                release.wait(timeout=30)

        other = threading.Thread(target=hold)
        other.start()
        try:
            assert holding.wait(timeout=30)
            assert store.vectors.count_stale(MODEL) == 0  # answered while the lock is held elsewhere
            assert store.vectors.count_stale("other-model") == 4
            assert other.is_alive()
        finally:
            release.set()
            other.join(timeout=30)
        with store.atomic():  # this thread's own write, not committed yet: the count sees it
            store.memories.add([memory("no vector yet")], unit_vectors(1), model_id=MODEL, actor="t",
                               unvectored=frozenset({0}))  # fmt: skip
            assert store.vectors.count_stale(MODEL) == 1
    finally:
        store.close()


def test_a_store_opened_by_a_relative_path_counts_on_its_own_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_sqlite("relative")
    try:
        ms = [memory(f"note {i}") for i in range(3)]
        store.memories.add(ms, unit_vectors(3), model_id=MODEL, actor="t")
        assert store.vectors.count_stale(MODEL) == 0
        assert store.vectors.count_stale("other-model") == 3
    finally:
        store.close()

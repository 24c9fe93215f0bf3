"""The open-time scan for memories without a vector of the current model (``vectors.iter_stale``), on both backends:
it answers nothing at once when every memory has one, and otherwise finds exactly the memories lacking one (no
vector, or one of another model) however the counts of the two compare.
"""

from __future__ import annotations

from storage_helpers import MODEL, memory, unit_vectors

from engramdb.storage.base import Store


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

"""Identical rows share one node of the HNSW graph (engramdb.storage._ann_groups), and every one of them is found.

Real SQLite files, the graph built, persisted and adopted through the store's own path; the truth is a numpy
scan of the same vectors. Texts that repeat (each ~13 times in bench/tenants.py's corpus) embed to the same
vector: a search must hand out every copy the filter admits, with its exact score, and forgetting some copies
must leave the others found.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import DIM, MODEL, NOW, memory, unit_vectors

from engramdb.storage import _ann_base, _vector_index
from engramdb.storage._ann import ann_available, read_meta, sidecar_dir
from engramdb.storage._ann_groups import find_groups
from engramdb.storage._vector_index import VectorIndex
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite

pytestmark = pytest.mark.skipif(not ann_available(), reason="faiss is not installed")

F32 = npt.NDArray[np.float32]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=40), st.booleans())
def test_groups_are_exactly_the_byte_equal_rows(picks: list[int], signed_zero: bool) -> None:
    table = unit_vectors(7, dim=4, seed=3)
    if signed_zero:
        table[5] = 0.0
        table[6] = -0.0  # equal as numbers, not as bytes: two groups
    rows = np.ascontiguousarray(table[picks], dtype=np.float32)
    found = find_groups(rows)
    distinct = {rows[i].tobytes() for i in range(len(picks))}
    if len(distinct) == len(picks):
        assert found is None
        return
    assert found is not None
    groups, leaders = found
    assert leaders.size == len(distinct)
    for i in range(len(picks)):
        for j in range(len(picks)):
            assert (groups[i] == groups[j]) == (rows[i].tobytes() == rows[j].tobytes())
        assert leaders[groups[i]] == min(j for j in range(len(picks)) if rows[j].tobytes() == rows[i].tobytes())


class Repeated:
    """A store whose 1,200 rows are 150 distinct vectors 8 times each, over 3 agents; and the numpy truth."""

    def __init__(self, path: Path) -> None:
        self.path = path
        base = unit_vectors(150, dim=DIM, seed=11)
        self.vecs: dict[str, F32] = {}
        self.agent: dict[str, str] = {}
        mems = [memory(f"turn {i % 150}", agent="abc"[i % 3]) for i in range(1_200)]
        vectors = np.ascontiguousarray(base[[i % 150 for i in range(1_200)]], dtype=np.float32)
        self.store = open_sqlite(path, ann_threshold=500)
        self.store.memories.add(mems, vectors, model_id=MODEL, actor="t")
        for m, v in zip(mems, vectors, strict=True):
            self.vecs[m.id], self.agent[m.id] = v, m.agent
        self.search(base[0], 10)
        index = self.store.search._index  # type: ignore[attr-defined]
        assert isinstance(index, VectorIndex)
        assert index.wait_for_index(timeout=120)
        self.search(base[0], 10)
        assert index.uses_ann
        self.index = index

    def reopen(self) -> None:
        self.store.close()
        self.store = open_sqlite(self.path, ann_threshold=500)

    def search(self, q: F32, limit: int, agent: str | None = None) -> list[tuple[str, float]]:
        found = self.store.search.vector_candidates(q, Filter(agent=agent, include_shared=False), limit=limit)
        for c in found:  # every copy carries its own exact cosine
            assert c.score == pytest.approx(float(self.vecs[c.id] @ q), abs=1e-5)
        return [(c.id, c.score) for c in found]

    def kth(self, q: F32, limit: int, agent: str | None = None) -> float:
        sims = sorted((float(v @ q) for i, v in self.vecs.items() if agent is None or self.agent[i] == agent))
        return sims[-limit]


def _queries() -> F32:
    return unit_vectors(12, dim=DIM, seed=99)


def test_one_node_per_distinct_vector_and_every_copy_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = Repeated(tmp_path / "s")
    meta = read_meta(sidecar_dir(tmp_path / "s" / "engram.db"))
    assert meta is not None
    assert meta.rows == 1_200
    base = w.index._base  # type: ignore[attr-defined]
    assert base.groups is not None
    assert base.groups.starts.size - 1 == 150  # the graph holds the distinct vectors only
    generation = next(sidecar_dir(tmp_path / "s" / "engram.db").glob("g-*"))
    assert not (generation / "vectors.npy").exists()  # no float32 copy: each row's vector seq instead
    assert np.load(generation / "seqs.npy").shape == (1_200,)
    monkeypatch.setattr(_ann_base, "_EXACT_ROWS", 10)  # every search below walks the graph
    for q in _queries():
        for agent in (None, "a"):
            found = w.search(q, 24, agent)
            assert len(found) == 24
            assert len({i for i, _ in found}) == 24
            assert all(agent is None or w.agent[i] == agent for i, _ in found)
            # Ties among copies are equal scores: the 24th found is the exact 24th.
            assert found[-1][1] == pytest.approx(w.kth(q, 24, agent), abs=1e-5)


def test_forgetting_copies_leaves_the_others_found_and_scrubs_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = Repeated(tmp_path / "s")
    monkeypatch.setattr(_ann_base, "_EXACT_ROWS", 10)
    q = _queries()[0]
    top = w.search(q, 8)
    assert len({s for _, s in top}) == 1  # the eight copies of the nearest vector
    graph = next(sidecar_dir(tmp_path / "s" / "engram.db").glob("g-*/hnsw_sq.faiss"))
    code_bytes = graph.read_bytes()
    for memory_id, _ in top[:7]:  # the first is the group's representative: scored by the next live copy
        w.store.memories.delete(memory_id, actor="t", at=NOW)
        del w.vecs[memory_id]
    assert graph.read_bytes() == code_bytes  # the vector is still the last copy's: its code stays
    survivor = top[7][0]
    assert w.search(q, 1) == [(survivor, top[7][1])]
    w.reopen()  # the overlay carries which copies died: the survivor is the representative again
    assert w.search(q, 1) == [(survivor, top[7][1])]
    assert w.search(q, 9)[1][1] < top[7][1]
    w.store.memories.delete(survivor, actor="t", at=NOW)
    del w.vecs[survivor]
    assert survivor not in {i for i, _ in w.search(q, 20)}
    assert graph.read_bytes() != code_bytes  # the last copy gone: its code is scrubbed
    w.store.close()


def test_a_store_of_distinct_vectors_keeps_a_node_per_row(tmp_path: Path) -> None:
    store: Store = open_sqlite(tmp_path / "s", ann_threshold=500)
    vectors = unit_vectors(800, dim=DIM, seed=5)
    store.memories.add([memory(f"m {i}") for i in range(800)], vectors, model_id=MODEL, actor="t")
    store.search.vector_candidates(vectors[0], Filter(agent=None), limit=5)
    index = store.search._index  # type: ignore[attr-defined]
    assert index.wait_for_index(timeout=120)
    store.search.vector_candidates(vectors[0], Filter(agent=None), limit=5)
    assert index.uses_ann
    assert index._base.groups is None
    assert not list(sidecar_dir(tmp_path / "s" / "engram.db").glob("g-*/groups.npy"))
    store.close()


def test_a_rebuild_over_a_grouped_index_reads_each_row_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The rebuild's snapshot reads the old generation's rows through their groups (one float32 row per group).
    monkeypatch.setattr(_vector_index, "_MIN_REBUILD", 50)
    w = Repeated(tmp_path / "s")
    old = read_meta(sidecar_dir(tmp_path / "s" / "engram.db"))
    gone = sorted(w.vecs)[:200]
    for memory_id in gone:
        w.store.memories.delete(memory_id, actor="t", at=NOW)
        del w.vecs[memory_id]
    w.search(_queries()[0], 10)  # starts the rebuild
    assert w.index.wait_for_index(timeout=120)
    meta = read_meta(sidecar_dir(tmp_path / "s" / "engram.db"))
    assert old is not None
    assert meta is not None
    assert meta.generation != old.generation
    assert meta.rows == 1_000
    distinct = len({v.tobytes() for v in w.vecs.values()})
    assert w.index._base.groups.starts.size - 1 == distinct  # type: ignore[attr-defined]
    monkeypatch.setattr(_ann_base, "_EXACT_ROWS", 10)
    for q in _queries():
        found = w.search(q, 16)  # scores checked against each row's own vector inside
        assert not {i for i, _ in found} & set(gone)
        assert found[-1][1] == pytest.approx(w.kth(q, 16), abs=1e-5)
    w.store.close()


def test_a_tenants_cached_mask_follows_visibility_and_forgetting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The graph path keeps each filter's mask over the index's rows; a change to a row's visibility or a forget
    # must show in the very next search of the same tenant, never a mask made before it.
    w = Repeated(tmp_path / "s")
    monkeypatch.setattr(_ann_base, "_EXACT_ROWS", 10)
    q = _queries()[1]
    flt = Filter(agent="b", include_shared=True)
    before = {c.id for c in w.store.search.vector_candidates(q, flt, limit=200)}
    assert before
    assert all(w.agent[i] == "b" for i in before)
    assert {c.id for c in w.store.search.vector_candidates(q, flt, limit=200)} == before  # from the cache
    best_a = next(i for i, _ in w.search(q, 50, "a"))
    w.store.memories.update(best_a, {"visibility": "public"}, vector=None, model_id=MODEL, actor="t", at=NOW)
    shared = {c.id for c in w.store.search.vector_candidates(q, flt, limit=200)}
    assert best_a in shared
    w.store.memories.delete(best_a, actor="t", at=NOW)
    del w.vecs[best_a]
    assert best_a not in {c.id for c in w.store.search.vector_candidates(q, flt, limit=200)}
    gone = sorted(before)[0]
    w.store.memories.delete(gone, actor="t", at=NOW)
    del w.vecs[gone]
    assert gone not in {c.id for c in w.store.search.vector_candidates(q, flt, limit=200)}
    w.store.close()


def _as_format(root: Path, written: int) -> dict[str, object]:
    """Turn the store's format-5 sidecar into one an older version wrote: a float32 file of each graph node's
    vector (``vectors.npy``) and no seqs. Returns the format-5 ``CURRENT`` it had."""
    current: dict[str, object] = json.loads((root / "CURRENT").read_text())
    generation = root / str(current["generation"])
    seqs = np.load(generation / "seqs.npy")
    groups = generation / "groups.npy"
    with sqlite3.connect(root.parent / "engram.db") as conn:
        by_seq = {
            seq: np.frombuffer(blob, dtype=np.float32) for seq, blob in conn.execute("SELECT seq, vec FROM vectors")
        }
    rows = [by_seq[int(s)] for s in seqs]
    if groups.exists():  # one float32 row per group (format 4), in node order
        starts = np.load(generation / "starts.npy")
        members = np.load(generation / "members.npy")
        rows = [rows[int(members[int(starts[g])])] for g in range(starts.size - 1)]
    np.save(generation / "vectors.npy", np.asarray(rows, dtype=np.float32))
    (generation / "seqs.npy").unlink()
    (root / "CURRENT").write_text(json.dumps({**current, "format": written}))
    return current


@pytest.mark.parametrize(("written", "grouped"), [(2, False), (4, True), (4, False)])
def test_an_older_sidecar_is_migrated_in_place_to_one_copy_of_each_vector(
    tmp_path: Path, written: int, grouped: bool
) -> None:
    # Formats 2 and 4 kept a float32 copy of every vector beside the graph. Opened now, the graph is kept (no
    # rebuild), each row's seq is looked up, and the copy deleted: searches give every row with its exact score.
    if grouped:
        w = Repeated(tmp_path / "s")
        store, vecs = w.store, w.vecs
    else:
        store = open_sqlite(tmp_path / "s", ann_threshold=500)
        vectors = unit_vectors(800, dim=DIM, seed=6)
        mems = [memory(f"m {i}") for i in range(800)]
        store.memories.add(mems, vectors, model_id=MODEL, actor="t")
        vecs = {m.id: v for m, v in zip(mems, vectors, strict=True)}
        store.search.vector_candidates(vectors[0], Filter(agent=None), limit=5)
        assert store.search._index.wait_for_index(timeout=120)  # type: ignore[attr-defined]
    store.close()
    root = sidecar_dir(tmp_path / "s" / "engram.db")
    current = _as_format(root, written)
    generation = root / str(current["generation"])
    assert (generation / "vectors.npy").exists()
    store = open_sqlite(tmp_path / "s", ann_threshold=500)
    index = store.search._index  # type: ignore[attr-defined]
    q = next(iter(vecs.values()))
    found = store.search.vector_candidates(q, Filter(agent=None), limit=20)
    assert index.uses_ann  # adopted at once: no rebuild
    assert found[0].score == pytest.approx(1.0, abs=1e-5)
    for c in found:
        assert c.score == pytest.approx(float(vecs[c.id] @ q), abs=1e-5)
    truth = sorted((float(v @ q) for v in vecs.values()), reverse=True)
    assert [c.score for c in found] == pytest.approx(truth[:20], abs=1e-5)
    meta = read_meta(root)
    assert meta is not None
    assert meta.generation == current["generation"]
    assert json.loads((root / "CURRENT").read_text())["format"] == 5
    assert not (generation / "vectors.npy").exists()
    ids = np.load(generation / "ids.npy")
    with sqlite3.connect(tmp_path / "s" / "engram.db") as conn:
        want = dict(conn.execute("SELECT memory_id, seq FROM vectors").fetchall())
    assert np.load(generation / "seqs.npy").tolist() == [want[bytes(i).decode()] for i in ids]
    store.close()


def _built_and_closed(path: Path, *, seed: int) -> F32:
    """A closed store of 800 distinct vectors whose index was built and persisted; returns the vectors."""
    store: Store = open_sqlite(path, ann_threshold=500)
    vectors = unit_vectors(800, dim=DIM, seed=seed)
    store.memories.add([memory(f"m {i}") for i in range(800)], vectors, model_id=MODEL, actor="t")
    store.search.vector_candidates(vectors[0], Filter(agent=None), limit=5)
    assert store.search._index.wait_for_index(timeout=120)  # type: ignore[attr-defined]
    store.close()
    return vectors


def test_a_migration_cut_short_after_its_current_deletes_the_float32_copy_at_open(tmp_path: Path) -> None:
    vectors = _built_and_closed(tmp_path / "s", seed=7)
    root = sidecar_dir(tmp_path / "s" / "engram.db")
    generation = root / str(json.loads((root / "CURRENT").read_text())["generation"])
    np.save(generation / "vectors.npy", vectors)  # the old copy, left by a crash before its deletion
    store = open_sqlite(tmp_path / "s", ann_threshold=500)
    found = store.search.vector_candidates(vectors[3], Filter(agent=None), limit=5)
    assert found[0].score == pytest.approx(1.0, abs=1e-5)
    assert store.search._index.uses_ann  # type: ignore[attr-defined]
    assert not (generation / "vectors.npy").exists()
    store.close()


@pytest.mark.parametrize("written", [3, 1])
def test_a_format_3_or_1_sidecar_is_rebuilt(tmp_path: Path, written: int) -> None:
    # Format 3 (a node per group over a float32 row per row) lived one commit, format 1 was IndexHNSWFlat: rebuilt.
    vectors = _built_and_closed(tmp_path / "s", seed=6)
    root = sidecar_dir(tmp_path / "s" / "engram.db")
    current = json.loads((root / "CURRENT").read_text())
    (root / "CURRENT").write_text(json.dumps({**current, "format": written}))
    store = open_sqlite(tmp_path / "s", ann_threshold=500)
    found = store.search.vector_candidates(vectors[3], Filter(agent=None), limit=5)
    assert found[0].score == pytest.approx(1.0, abs=1e-5)
    index = store.search._index  # type: ignore[attr-defined]
    assert not index.uses_ann  # the exact scan answers while it is rebuilt
    assert index.wait_for_index(timeout=120)
    store.search.vector_candidates(vectors[3], Filter(agent=None), limit=5)
    assert index.uses_ann
    meta = read_meta(root)
    assert meta is not None
    assert meta.generation != current["generation"]
    store.close()

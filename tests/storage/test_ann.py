"""The HNSW index of the SQLite store (engramdb.storage._ann): past its threshold it answers like the exact scan.

Real SQLite files and seeded random unit vectors (16 dimensions, where an HNSW graph finds the
true neighbours); the exact answer is a numpy reference over the same vectors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from storage_helpers import DIM, MODEL, NOW, memory, unit_vectors

from engramdb.config import load_settings
from engramdb.errors import ConfigError
from engramdb.storage import _ann_base, _vector_index, open_store
from engramdb.storage._ann import ann_available, read_meta, sidecar_dir
from engramdb.storage._vector_index import VectorIndex
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite

pytestmark = pytest.mark.skipif(not ann_available(), reason="faiss is not installed")

THRESHOLD = 500


def _open(path: Path) -> Store:
    return open_sqlite(path, ann_threshold=THRESHOLD)


def _index(store: Store) -> VectorIndex:
    index = store.search._index  # type: ignore[attr-defined]
    assert isinstance(index, VectorIndex)
    return index


class World:
    """A store plus the numpy truth of what it holds: id -> (vector, agent, kind)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = _open(path)
        self.vecs: dict[str, npt.NDArray[np.float32]] = {}
        self.agent: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        self._seed = 0

    def add(self, n: int, *, agent_b_every: int = 10) -> list[str]:
        self._seed += 1
        vecs = unit_vectors(n, dim=DIM, seed=self._seed)
        mems = [
            memory(f"m {i}", agent="b" if i % agent_b_every == 0 else "a", kind="knowledge" if i % 3 else "decision")
            for i in range(n)
        ]
        self.store.memories.add(mems, vecs, model_id=MODEL, actor="t")
        for m, v in zip(mems, vecs, strict=True):
            self.vecs[m.id], self.agent[m.id], self.kind[m.id] = v, m.agent, m.kind
        return [m.id for m in mems]

    def truth(self, q: npt.NDArray[np.float32], limit: int, keep: set[str] | None = None) -> list[str]:
        ids = [i for i in self.vecs if keep is None or i in keep]
        sims = np.array([self.vecs[i] @ q for i in ids])
        return [ids[j] for j in np.argsort(-sims, kind="stable")[:limit]]

    def search(self, q: npt.NDArray[np.float32], limit: int, flt: Filter | None = None) -> list[str]:
        found = self.store.search.vector_candidates(q, flt or Filter(agent=None), limit=limit)
        for c in found:  # scores are true cosines, never approximations
            assert c.score == pytest.approx(float(self.vecs[c.id] @ q), abs=1e-5)
        return [c.id for c in found]

    def built(self) -> VectorIndex:
        index = _index(self.store)
        assert index.wait_for_index(timeout=120)
        return index


def _query(seed: int) -> npt.NDArray[np.float32]:
    return unit_vectors(1, dim=DIM, seed=1000 + seed)[0]


def _recall(found: list[str], truth: list[str]) -> float:
    return len(set(found) & set(truth)) / len(truth)


def test_threshold_crossing_switches_to_the_index_with_true_scores(tmp_path: Path) -> None:
    w = World(tmp_path / "s")
    w.add(400)
    w.search(_query(0), 10)
    assert not _index(w.store).uses_ann
    assert w.built() is not None
    assert read_meta(sidecar_dir(tmp_path / "s" / "engram.db")) is None  # below the threshold: no sidecar
    w.add(400)
    assert w.search(_query(1), 10) == w.truth(_query(1), 10)  # the exact scan answers while the index builds
    index = w.built()
    assert index.uses_ann
    meta = read_meta(sidecar_dir(tmp_path / "s" / "engram.db"))
    assert meta is not None
    assert meta.rows == 800
    recalls = [_recall(w.search(_query(s), 10), w.truth(_query(s), 10)) for s in range(20)]
    assert np.mean(recalls) >= 0.95
    w.store.close()


def test_filtered_search_gives_exactly_the_filtered_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = World(tmp_path / "s")
    w.add(1200)
    w.search(_query(0), 10)
    assert w.built().uses_ann
    b_rows = {i for i, a in w.agent.items() if a == "b"}
    facts = {i for i, k in w.kind.items() if k == "decision"}
    for s in range(5):
        q = _query(s)
        # Selective filters (few rows pass) are scanned exactly: identical to the reference.
        assert w.search(q, 10, Filter(agent="b")) == w.truth(q, 10, b_rows)
        assert w.search(q, 10, Filter(agent=None, kinds=("decision",))) == w.truth(q, 10, facts)
        some = sorted(w.vecs)[:50]
        assert w.search(q, 10, Filter(agent=None, ids=tuple(some))) == w.truth(q, 10, set(some))
    # Broad filters walk the graph (made to here by lowering the exact-scan bound): only passing rows.
    monkeypatch.setattr(_ann_base, "_EXACT_ROWS", 10)
    recalls = []
    for s in range(10):
        q = _query(s)
        found = w.search(q, 10, Filter(agent="a", kinds=("knowledge",)))
        keep = {i for i in w.vecs if w.agent[i] == "a" and w.kind[i] == "knowledge"}
        assert set(found) <= keep
        assert len(found) == 10
        recalls.append(_recall(found, w.truth(q, 10, keep)))
    assert np.mean(recalls) >= 0.95
    w.store.close()


def _sq_code(graph: Path, vector: npt.NDArray[np.float32]) -> bytes:
    """The 8-bit code the sidecar's quantiser gives ``vector``."""
    import faiss

    index = faiss.read_index(str(graph))
    storage = faiss.downcast_index(index.storage)  # owned by index: keep it alive meanwhile
    code = bytes(storage.sa_encode(vector.reshape(1, -1)).tobytes())
    del storage, index
    return code


def _sidecar_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_forget_update_and_new_writes_are_followed(tmp_path: Path) -> None:
    w = World(tmp_path / "s")
    w.add(800)
    q = _query(3)
    w.search(q, 5)
    assert w.built().uses_ann
    top = w.search(q, 5)[0]
    graph = next(sidecar_dir(tmp_path / "s" / "engram.db").glob("g-*/hnsw_sq.faiss"))
    vector = w.store.vectors.get([top], model_id=MODEL)[top].astype(np.float32)
    forgotten = vector.tobytes()
    code = _sq_code(graph, vector)
    # The sidecar keeps no float32 copy (the one copy is SQLite's row), only the vector's 8-bit code.
    assert not list(graph.parent.glob("vectors.npy"))
    assert forgotten not in _sidecar_bytes(graph.parent.parent)
    assert code in graph.read_bytes()
    w.store.memories.delete(top, actor="t", at=NOW)
    del w.vecs[top]
    assert top not in w.search(q, 20)
    # The forgotten memory's 8-bit code is scrubbed from the sidecar.
    assert code not in graph.read_bytes()
    # A new vector for an indexed memory: found with its new score, once.
    moved = w.truth(-q, 1)[0]
    new = (q + 0.01 * _query(9)) / np.linalg.norm(q + 0.01 * _query(9))
    w.store.memories.update(moved, {"content": "moved"}, vector=new, model_id=MODEL, actor="t", at=NOW)
    w.vecs[moved] = new.astype(np.float32)
    found = w.search(q, 20)
    assert found[0] == moved
    assert found.count(moved) == 1
    # A kind change is seen by the kind filter; a memory written after the build is found.
    w.store.memories.update(moved, {"kind": "episode"}, vector=None, model_id=MODEL, actor="t", at=NOW)
    assert w.search(q, 5, Filter(agent=None, kinds=("episode",))) == [moved]
    (fresh,) = w.add(1)
    assert w.search(w.vecs[fresh], 1) == [fresh]
    w.store.close()
    # Reopened: the changes were written beside the index (an overlay), so it is adopted, not rebuilt.
    w.store = _open(tmp_path / "s")
    assert w.search(q, 20)[0] == moved
    assert top not in w.search(q, 20)
    assert _index(w.store).uses_ann
    assert w.search(q, 5, Filter(agent=None, kinds=("episode",))) == [moved]
    assert w.search(w.vecs[fresh], 1) == [fresh]
    w.store.close()


@pytest.mark.parametrize("damage", ["missing", "corrupt", "stale", "format1"])
def test_a_missing_corrupt_or_stale_sidecar_is_rebuilt_and_search_stays_right(tmp_path: Path, damage: str) -> None:
    w = World(tmp_path / "s")
    w.add(800)
    w.search(_query(0), 10)
    assert w.built().uses_ann
    w.store.close()
    root = sidecar_dir(tmp_path / "s" / "engram.db")
    meta = read_meta(root)
    assert meta is not None
    if damage == "missing":
        import shutil

        shutil.rmtree(root)
    elif damage == "corrupt":
        (root / meta.generation / "hnsw_sq.faiss").write_bytes(b"not an index")
    elif damage == "format1":  # a sidecar of the flat-graph format: rebuilt, never read as the new one
        current = json.loads((root / "CURRENT").read_text())
        (root / "CURRENT").write_text(json.dumps({**current, "format": 1}))
        assert read_meta(root) is None
    else:  # another writer forgot a memory: the sidecar still lists it
        other = open_sqlite(tmp_path / "s", ann_threshold=None)
        gone = w.truth(_query(1), 1)[0]
        other.memories.delete(gone, actor="t", at=NOW)
        other.close()
        del w.vecs[gone]
    w.store = _open(tmp_path / "s")
    for s in range(3):  # before the rebuild: the exact scan, identical to the reference
        assert w.search(_query(s), 10) == w.truth(_query(s), 10)
    assert w.built().uses_ann
    for s in range(3):
        assert _recall(w.search(_query(s), 10), w.truth(_query(s), 10)) >= 0.9
    w.store.close()


def test_reopen_uses_the_sidecar_and_finds_another_process_appends(tmp_path: Path) -> None:
    w = World(tmp_path / "s")
    w.add(800)
    w.search(_query(0), 10)
    assert w.built().uses_ann
    w.store.close()
    w.store = _open(tmp_path / "s")
    w.search(_query(0), 10)
    index = _index(w.store)
    assert index.uses_ann  # adopted at once, no rebuild
    # Another process appends; this process finds the new memory at its next search.
    script = textwrap.dedent(
        f"""
        from datetime import UTC, datetime
        import numpy as np
        from engramdb.models import Memory
        from engramdb.storage.sqlite import open_sqlite
        s = open_sqlite({str(tmp_path / "s")!r}, ann_threshold=None)
        v = np.zeros({DIM}, dtype=np.float32); v[0] = 1.0
        now = datetime.now(UTC)
        m = Memory(id="elsewhere-1", agent="a", kind="knowledge", content="elsewhere", created_at=now, updated_at=now)
        s.memories.add([m], v[None, :], model_id={MODEL!r}, actor="t")
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    probe = np.zeros(DIM, dtype=np.float32)
    probe[0] = 1.0
    w.vecs["elsewhere-1"] = probe
    assert w.search(probe, 1) == ["elsewhere-1"]
    assert index.uses_ann
    w.store.close()
    # Reopened once more: the sidecar (older than the append) plus the appended row.
    w.store = _open(tmp_path / "s")
    assert w.search(probe, 1) == ["elsewhere-1"]
    assert _index(w.store).uses_ann
    w.store.close()


def test_the_setting_reaches_the_store(tmp_path: Path) -> None:
    env = {"ENGRAM_HOME": str(tmp_path)}
    assert load_settings(env).ann_threshold == 20_000
    assert load_settings({**env, "ENGRAM_ANN_THRESHOLD": "0"}).ann_threshold == 0
    with pytest.raises(ConfigError, match="ann_threshold"):
        load_settings(env, ann_threshold=-1)
    for threshold, expected in ((0, False), (30, True)):
        store = open_store(str(tmp_path / f"s{threshold}"), settings=load_settings(env, ann_threshold=threshold))
        store.memories.add([memory(f"m {i}") for i in range(40)], unit_vectors(40), model_id=MODEL, actor="t")
        store.search.vector_candidates(_query(0), Filter(agent=None), limit=5)
        index = _index(store)
        assert index.wait_for_index(timeout=60)
        assert index.uses_ann is expected
        store.close()


def test_a_rebuild_over_an_index_keeps_its_live_rows_and_drops_forgotten_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rebuild once 50 rows changed (instead of 10,000): the new snapshot reads the old generation's float32 file.
    monkeypatch.setattr(_vector_index, "_MIN_REBUILD", 50)
    w = World(tmp_path / "s")
    w.add(800)
    w.search(_query(0), 10)
    first = w.built()
    assert first.uses_ann
    old = read_meta(sidecar_dir(tmp_path / "s" / "engram.db"))
    gone = sorted(w.vecs)[:60]
    for memory_id in gone:
        w.store.memories.delete(memory_id, actor="t", at=NOW)
        del w.vecs[memory_id]
    w.search(_query(1), 10)  # starts the rebuild
    index = w.built()
    meta = read_meta(sidecar_dir(tmp_path / "s" / "engram.db"))
    assert old is not None
    assert meta is not None
    assert meta.generation != old.generation
    assert meta.rows == 740
    for s in range(5):
        found = w.search(_query(s), 20)
        assert not set(found) & set(gone)
        assert _recall(found, w.truth(_query(s), 20)) >= 0.9
    assert index.uses_ann
    w.store.close()


def test_another_process_forgets_and_updates_are_followed_without_a_rebuild(tmp_path: Path) -> None:
    w = World(tmp_path / "s")
    w.add(800)
    q = _query(4)
    w.search(q, 5)
    index = w.built()
    base = index._base  # the adopted graph: the same object later means no rebuild
    assert base is not None
    gone, kept = w.search(q, 2)
    moved = w.truth(-q, 1)[0]
    new = np.zeros(DIM, dtype=np.float32)
    new[0] = 1.0
    script = textwrap.dedent(
        f"""
        from datetime import UTC, datetime
        import numpy as np
        from engramdb.storage.sqlite import open_sqlite
        s = open_sqlite({str(tmp_path / "s")!r}, ann_threshold=None)
        now = datetime.now(UTC)
        s.memories.delete({gone!r}, actor="t", at=now)
        s.memories.update({kept!r}, {{"kind": "episode", "visibility": "public"}}, vector=None,
                          model_id={MODEL!r}, actor="t", at=now)
        v = np.zeros({DIM}, dtype=np.float32); v[0] = 1.0
        s.memories.update({moved!r}, {{"content": "moved"}}, vector=v, model_id={MODEL!r}, actor="t", at=now)
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    del w.vecs[gone]
    w.vecs[moved] = new
    found = w.search(q, 20)
    assert gone not in found
    assert found[0] == kept
    # The kind and visibility changes reach the filters: agent b sees a's memory now that it is public.
    assert w.search(q, 5, Filter(agent=None, kinds=("episode",))) == [kept]
    assert kept in w.search(q, 5, Filter(agent="b" if w.agent[kept] == "a" else "a"))
    # The re-embedded memory is found by its new vector, once.
    probe = w.search(new, 3)
    assert probe[0] == moved
    assert probe.count(moved) == 1
    assert index.uses_ann
    assert index._base is base  # followed row by row, not rebuilt
    w.store.close()

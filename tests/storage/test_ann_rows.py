"""The index's float32 rows read from the store's own ``vectors`` table by seq (engramdb.storage._ann_rows).

A real SQLite store: any set of seqs (present, forgotten, never used, of another dimension) comes back as exactly
the stored bytes of the rows present, in the order asked, on both read paths (one aggregate row, or a row each).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import DIM, MODEL, NOW, memory, unit_vectors

from engramdb.storage._ann_rows import SQLiteVectors
from engramdb.storage.base import Store
from engramdb.storage.sqlite import open_sqlite


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes], list[str]]:
    """A store of 300 vectors (40 forgotten, 5 of another model and dimension); seq -> stored bytes, and ids."""
    path = tmp_path_factory.mktemp("rows") / "s"
    store: Store = open_sqlite(path, ann_threshold=None)
    mems = [memory(f"m {i}") for i in range(300)]
    store.memories.add(mems, unit_vectors(300, seed=4), model_id=MODEL, actor="t")
    others = [memory(f"o {i}") for i in range(5)]
    store.memories.add(others, unit_vectors(5, dim=DIM * 2, seed=5), model_id="other", actor="t")
    for m in mems[::7][:40]:
        store.memories.delete(m.id, actor="t", at=NOW)
    store.close()
    import sqlite3

    with sqlite3.connect(path / "engram.db") as conn:
        rows = dict(conn.execute("SELECT seq, vec FROM vectors WHERE model_id = ?", (MODEL,)).fetchall())
        ids = [i for (i,) in conn.execute("SELECT memory_id FROM vectors WHERE model_id = ? ORDER BY seq", (MODEL,))]
    return path / "engram.db", rows, ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=-3, max_value=420), unique=True, max_size=120), st.booleans())
def test_any_seqs_give_exactly_the_stored_rows(
    stored: tuple[Path, dict[int, bytes], list[str]], seqs: list[int], one_row: bool
) -> None:
    database, rows, _ = stored
    source = SQLiteVectors(database)
    try:
        source.vectors(np.zeros(0, dtype=np.int64), DIM)  # connects
        source._utf8 = one_row  # both read paths
        vectors, found = source.vectors(np.array(seqs, dtype=np.int64), DIM)
    finally:
        source.close()
    assert vectors.shape == (len(seqs), DIM)
    for i, seq in enumerate(seqs):
        assert found[i] == (seq in rows)
        assert vectors[i].tobytes() == (rows[seq] if seq in rows else bytes(4 * DIM))


def test_seqs_of_ids_by_lookup_and_by_one_pass(
    stored: tuple[Path, dict[int, bytes], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    database, rows, ids = stored
    want = dict(zip(ids, sorted(rows), strict=True))
    distinct = dict.fromkeys([*ids[::3], "missing-id", *ids[1::5]])  # an index's ids are distinct
    asked = np.array([i.encode() for i in distinct], dtype=np.bytes_)
    source = SQLiteVectors(database)
    try:
        looked_up = source.seqs_of(MODEL, asked)
        from engramdb.storage import _ann_rows

        monkeypatch.setattr(_ann_rows, "_STREAM_IDS", 0)  # every id: one pass over the memory_id index
        streamed = source.seqs_of(MODEL, asked)
    finally:
        source.close()
    expected = [want.get(bytes(i).decode(), -1) for i in asked]
    assert looked_up.tolist() == expected
    assert streamed.tolist() == expected

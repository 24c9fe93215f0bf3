"""SQLite's ``vector_counts`` (schema step 7): rows per model and dimension kept by triggers, read by the open's
stale count and by every vector write's dimension check instead of every vector row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import MODEL, memory, unit_vectors

from engramdb.storage import _sqlite_schema
from engramdb.storage.sqlite import open_sqlite

NOW_AT = "2026-01-02T03:04:05.000000+00:00"


def _counts(database: Path) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(the triggers' counts without empty rows, a GROUP BY over the vectors)."""
    conn = sqlite3.connect(database)
    try:
        kept = {(m, d): n for m, d, n in conn.execute("SELECT model_id, dim, n FROM vector_counts") if n}
        real = {(m, d): n for m, d, n in conn.execute("SELECT model_id, dim, count(*) FROM vectors GROUP BY 1, 2")}
    finally:
        conn.close()
    return kept, real


_OPS = st.lists(
    st.tuples(st.sampled_from(["add", "set", "delete"]), st.integers(0, 5), st.sampled_from([MODEL, "other"])),
    max_size=12,
)


@settings(max_examples=25, deadline=None)
@given(ops=_OPS)
def test_the_counts_equal_the_vectors_after_any_writes(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("counts")
    store = open_sqlite(folder, warm=False)
    live: list[str] = []
    try:
        for n, (op, pick, model) in enumerate(ops):
            if op == "add" or not live:
                m = memory(f"note {n}")
                store.memories.add([m], unit_vectors(1, seed=n), model_id=MODEL, actor="t")
                live.append(m.id)
            elif op == "set":
                store.vectors.set([live[pick % len(live)]], unit_vectors(1, seed=n), model_id=model)
            else:
                store.memories.delete(live.pop(pick % len(live)), actor="t", at=memory("x").created_at)
        kept, real = _counts(folder / "engram.db")
        assert kept == real
        assert store.vectors.count_stale(MODEL) == len(live) - real.get((MODEL, 16), 0)
    finally:
        store.close()


def test_a_step_6_store_is_counted_when_it_migrates(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    conn = sqlite3.connect(folder / "engram.db", isolation_level=None)
    _sqlite_schema.migrate(conn, location="old", migrations=_sqlite_schema.MIGRATIONS[:6])
    for i in range(5):
        conn.execute(
            "INSERT INTO memories (id, agent, kind, content, tags, metadata, created_at, updated_at, visibility) "
            "VALUES (?, 'alice', 'knowledge', ?, '[]', '{}', ?, ?, 'private')",
            (f"m{i}", f"note {i}", NOW_AT, NOW_AT),
        )
        model, dim = (MODEL, 16) if i < 3 else ("other", 8)
        vec = np.ones(dim, dtype=np.float32) / np.sqrt(dim)
        conn.execute(
            "INSERT INTO vectors (memory_id, model_id, dim, vec) VALUES (?, ?, ?, ?)",
            (f"m{i}", model, dim, vec.tobytes()),
        )
    conn.close()
    store = open_sqlite(folder, warm=False)
    try:
        kept, real = _counts(folder / "engram.db")
        assert kept == real == {(MODEL, 16): 3, ("other", 8): 2}
        assert store.vectors.count_stale(MODEL) == 2
        check = sqlite3.connect(folder / "engram.db")
        indexes = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        check.close()
        assert "vectors_model_count" not in indexes  # its disk is given back
    finally:
        store.close()

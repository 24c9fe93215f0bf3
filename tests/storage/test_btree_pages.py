"""Where a table's rows lie in the database file (issue 27, cold first searches): the leaf map read from a b-tree's
interior pages names the page of every row (checked against SQLite's own ``dbstat`` and against the leaf's cells),
any bytes give a map or None and never raise, a file that vanishes or shrinks under the hints is tolerated, closed
hints ask for nothing, and searching with the hints answers exactly as searching without them."""

from __future__ import annotations

import dataclasses
import os
import random
import sqlite3
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import MODEL, memory, unit_vectors

from engramdb.storage import _btree_pages
from engramdb.storage._btree_pages import PageHints, database_fd, read_leaf_map
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _residency import evict  # the bench's eviction (fsync, then DONTNEED), from its folder

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds SQLite's descriptor in /proc")


def _varint(page: bytes, at: int) -> tuple[int, int]:
    value = 0
    for j in range(9):
        byte = page[at + j]
        if j == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + j + 1
    raise AssertionError("unreachable")


def _leaf_rowids(path: Path, page_no: int, page_size: int) -> list[int]:
    """The rowids of a table leaf's cells, parsed here independently of the module under test."""
    with path.open("rb") as fh:
        fh.seek((page_no - 1) * page_size)
        page = fh.read(page_size)
    at = 100 if page_no == 1 else 0
    assert page[at] == 0x0D, f"page {page_no} is not a table leaf"
    (cells,) = struct.unpack(">H", page[at + 3 : at + 5])
    out = []
    for k in range(cells):
        (cell,) = struct.unpack(">H", page[at + 8 + 2 * k : at + 10 + 2 * k])
        _, after = _varint(page, cell)  # payload size
        out.append(_varint(page, after)[0])
    return out


def _table(path: Path, *, page_size: int, sizes: list[int], deleted: set[int], seed: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA page_size = {page_size}")
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, name TEXT UNIQUE, body BLOB)")
        order = list(range(1, len(sizes) + 1))
        random.Random(seed).shuffle(order)
        conn.execute("BEGIN")
        for k in order:
            conn.execute("INSERT INTO t VALUES (?, ?, ?)", (k, f"n{k:08d}", os.urandom(sizes[k - 1])))
        conn.executemany("DELETE FROM t WHERE k = ?", [(k,) for k in sorted(deleted)])
        conn.execute("COMMIT")
    finally:
        conn.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    page_size=st.sampled_from([512, 1024, 4096, 8192]),
    sizes=st.lists(st.integers(min_value=0, max_value=900), min_size=1, max_size=2_500),
    drop=st.floats(min_value=0.0, max_value=0.5),
    seed=st.integers(min_value=0, max_value=1_000),
)
def test_the_leaf_map_names_the_page_of_every_row(page_size: int, sizes: list[int], drop: float, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.db"
        rng = random.Random(seed)
        deleted = {k for k in range(1, len(sizes) + 1) if rng.random() < drop}
        _table(path, page_size=page_size, sizes=sizes, deleted=deleted, seed=seed)
        conn = sqlite3.connect(path)
        try:
            roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_schema").fetchall())
            leaves = {
                name: {
                    p
                    for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (name,))
                }
                for name in roots
            }
            keys = [k for (k,) in conn.execute("SELECT k FROM t")]
            fd = database_fd(path)
            assert fd is not None
            table = read_leaf_map(fd, roots["t"])
            index = read_leaf_map(fd, roots["sqlite_autoindex_t_1"])
        finally:
            conn.close()
        assert table is not None
        assert index is not None
        # A single-page tree is its own leaf (dbstat calls a lone root a leaf too).
        assert set(table.pages.tolist()) == (leaves["t"] or {roots["t"]})
        assert set(index.pages.tolist()) == (leaves["sqlite_autoindex_t_1"] or {roots["sqlite_autoindex_t_1"]})
        assert table.page_size == page_size
        for key in keys:
            (page,) = table.leaves_of(np.array([key], dtype=np.int64)).tolist()
            assert key in _leaf_rowids(path, page, page_size)
        assert table.leaves_of(np.array(keys, dtype=np.int64)).size <= table.pages.size


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.binary(max_size=6_000),
    header=st.booleans(),
    page_size=st.sampled_from([0, 1, 512, 1024, 3000]),
    root=st.integers(min_value=-3, max_value=20),
)
def test_any_bytes_give_a_map_or_none_and_never_raise(
    tmp_path_factory: pytest.TempPathFactory, body: bytes, header: bool, page_size: int, root: int
) -> None:
    path = tmp_path_factory.mktemp("bytes") / "f"
    if header:
        head = bytearray(b"SQLite format 3\x00" + bytes(84))
        head[16:18] = struct.pack(">H", page_size)
        body = bytes(head) + body
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        found = read_leaf_map(fd, root)
    finally:
        os.close(fd)
    if found is not None:
        last = len(body) // found.page_size
        assert found.pages.size
        assert int(found.pages.min()) >= 1
        assert int(found.pages.max()) <= last
        assert found.keys.size in (0, found.pages.size - 1)
        found.leaves_of(np.array([0, 1, 2**40], dtype=np.int64))  # any key finds some leaf


def _hinted_store(path: Path, rows: int = 3_000) -> tuple[sqlite3.Connection, PageHints]:
    _table(path, page_size=1024, sizes=[300] * rows, deleted=set(), seed=1)
    conn = sqlite3.connect(path)  # holds the file open, as a store's connection does
    conn.execute("CREATE TABLE memories (rid INTEGER PRIMARY KEY, id TEXT UNIQUE)")
    conn.executemany("INSERT INTO memories VALUES (?, ?)", [(k, f"m{k}") for k in range(1, rows + 1)])
    conn.commit()
    hints = PageHints(path)
    hints.load()
    _evict(path)
    return conn, hints


def _evict(path: Path) -> None:
    """The file's folder out of the page cache (synced first: a dirty page stays), so the hints have pages to ask
    for."""
    evict(path.parent)


def test_hints_ask_for_pages_out_of_the_cache_and_not_for_cached_ones(tmp_path: Path) -> None:
    path = tmp_path / "engram.db"
    conn, hints = _hinted_store(path)
    try:
        keys = np.arange(1, 3_000, 11, dtype=np.int64)
        assert hints.ahead("memories", keys) > 0  # evicted: asked for
        conn.execute("SELECT count(*) FROM memories WHERE rid % 11 = 1").fetchone()  # every leaf read: cached now
        assert hints.ahead("memories", keys) == 0
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["shrunk", "emptied", "vanished"])
def test_hints_tolerate_a_file_that_shrinks_or_vanishes(tmp_path: Path, how: str) -> None:
    path = tmp_path / "engram.db"
    conn, hints = _hinted_store(path)
    try:
        keys = np.arange(1, 3_000, 7, dtype=np.int64)
        assert hints.ahead("memories", keys) > 0
        _evict(path)
        if how == "vanished":
            path.unlink()
        else:
            os.truncate(path, 0 if how == "emptied" else path.stat().st_size // 3)
        assert hints.ahead("memories", keys) >= 0
        hints.load()  # the maps read again from what is left: none, or fewer
        assert hints.ahead("memories", keys) >= 0
        assert hints.ahead("nothing such", keys) == 0
    finally:
        conn.close()


def test_closed_hints_ask_for_nothing_and_a_load_after_close_reads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "engram.db"
    conn, hints = _hinted_store(path)
    try:
        keys = np.arange(1, 3_000, dtype=np.int64)
        assert hints.ahead("memories", keys) > 0
        _evict(path)
        hints.close()
        assert hints.ahead("memories", keys) == 0
        assert hints.load() == []
        assert hints.ahead("memories", keys) == 0
    finally:
        conn.close()


def _ann_store(path: Path) -> None:
    """1,500 rows over five agents and three users, the HNSW index built and saved; postings saved at close."""
    vectors = unit_vectors(1_500, seed=3)
    words = ["lake", "river", "stone", "pine", "cloud", "ember"]
    items = [
        dataclasses.replace(
            memory(f"{words[i % 6]} {words[(i * 7) % 6]} note {i}", agent=f"t{i % 5}"),
            user=None if i % 4 == 0 else f"u{i % 3}",
        )
        for i in range(1_500)
    ]
    store = open_sqlite(path, ann_threshold=1_000, warm=False)
    with store:
        store.memories.add(items, vectors, model_id=MODEL, actor="t")
        index = store.search._index  # type: ignore[attr-defined]
        store.search.vector_candidates(vectors[0], Filter(agent=None), limit=10)  # starts the build
        assert index.wait_for_index(timeout=120)
        store.search.vector_candidates(vectors[0], Filter(agent=None), limit=10)  # adopts it
        assert index.uses_ann


def _answers(path: Path) -> list[list[tuple[str, float]]]:
    queries = unit_vectors(6, seed=11)
    filters = [Filter(agent="t0"), Filter(agent="t3"), Filter(agent="t1", users=(None, "u2")), Filter(agent=None)]
    out = []
    with open_sqlite(path, ann_threshold=1_000, warm=False) as store:
        index = store.search.keyword_index  # type: ignore[attr-defined]
        index.min_memories = 0
        store.search.keyword_candidates(["lake"], Filter(agent=None), limit=1)  # starts its load (or build)
        # Every query below ranks from the index: answers taken from FTS5 while it loads may order equal scores
        # (this store has many) apart from the index's, which would differ by timing, not by the hints.
        assert index.wait(timeout=120)
        assert store.search._pages is not None  # type: ignore[attr-defined]
        store.search._pages.load()  # type: ignore[attr-defined]
        evict(path)  # the store's files cold, so the hints have pages to ask for
        for flt in filters:
            for i, vector in enumerate(queries):
                found = store.search.keyword_candidates(["lake", "note", ["pine", "ember"][i % 2]], flt, limit=20)
                found += store.search.vector_candidates(vector, flt, limit=20)
                out.append([(c.id, round(c.score, 9)) for c in found])
    return out


def test_searches_answer_the_same_with_and_without_the_hints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s"
    _ann_store(path)
    asked: list[int] = []
    real = PageHints.ahead

    def counting(self: PageHints, table: str, keys: object) -> int:
        got = real(self, table, keys)  # type: ignore[arg-type]
        asked.append(got)
        return got

    monkeypatch.setattr(PageHints, "ahead", counting)
    hinted = _answers(path)
    assert sum(asked) > 0  # the hints were taken: pages of rows were asked for
    monkeypatch.setattr(PageHints, "ahead", lambda self, table, keys: 0)
    monkeypatch.setattr(_btree_pages, "read_leaf_map", lambda fd, root, **kw: None)
    assert _answers(path) == hinted


def test_a_search_of_any_store_makes_every_read_ahead_of_the_process_wait(tmp_path: Path) -> None:
    first, second = PageHints(tmp_path / "a.db"), PageHints(tmp_path / "b.db")
    second.searching()
    assert first.busy()
    assert second.busy()

"""The keyword postings saved beside the database: a reopened store ranks from them at once, exactly as FTS5.

Real SQLite files throughout. A saved file is only a head start: it is caught up with writes made since,
a file of another store or a damaged one is rebuilt, and a forgotten memory's terms leave it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import MODEL, NOW, add, memory
from test_keyword_speedpath import _QUERIES, _assert_same, _both, _texts

from engramdb.storage import _kw_index
from engramdb.storage._kw_persist import DamagedPostings, load_postings, postings_path, save_postings
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import open_sqlite


def _open(location: Path) -> Store:
    store = open_sqlite(location)
    store.search.keyword_index.min_memories = 0  # this small store uses the index too
    return store


def _fill(location: Path, seed: int = 0) -> None:
    """A 600-memory store whose postings were built, then saved at close."""
    with _open(location) as store:
        add(store, [memory(t, agent="alice" if i % 5 else "bob") for i, t in enumerate(_texts(600, seed))], seed=seed)
        _both(store, ["caroline"], Filter(agent="alice"))


def _saved(location: Path) -> Path:
    return postings_path(str(location / "engram.db"))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the builds from FTS5 (a loaded file is not one)."""
    calls: list[int] = []
    original = _kw_index.build

    def counting(conn: Any) -> Any:
        calls.append(1)
        return original(conn)

    monkeypatch.setattr(_kw_index, "build", counting)
    return calls


def test_a_reopened_store_ranks_from_its_saved_postings_exactly_as_fts5(tmp_path: Path, builds: list[int]) -> None:
    _fill(tmp_path / "s")
    assert _saved(tmp_path / "s").exists()
    builds.clear()
    with _open(tmp_path / "s") as store:
        for flt in (Filter(agent=None), Filter(agent="alice"), Filter(agent="bob")):
            for terms in _QUERIES:
                _assert_same(*_both(store, terms, flt))
        assert builds == []  # loaded, not built


def test_saved_postings_catch_up_with_writes(tmp_path: Path, builds: list[int]) -> None:
    _fill(tmp_path / "s")
    with _open(tmp_path / "s") as store:  # writes while the index is not in use: the file falls behind
        store.search.keyword_index.min_memories = None
        add(store, [memory("quokka caroline at the lake", agent="alice") for _ in range(3)], seed=1)
        changed = store.search.keyword_candidates(["guitar"], Filter(agent="alice"), limit=1)[0].id
        store.memories.update(changed, {"content": "wombat only"}, vector=None, model_id=MODEL, actor="t", at=NOW)
    builds.clear()
    with _open(tmp_path / "s") as store:
        flt = Filter(agent="alice")
        for terms in [*_QUERIES, ["quokka"], ["wombat"]]:
            _assert_same(*_both(store, terms, flt))
        assert changed not in {c.id for c in _both(store, ["guitar"], flt)[1]}
        assert [c.id for c in _both(store, ["wombat"], flt)[1]] == [changed]
    assert builds == []  # caught up, not rebuilt
    saved = load_postings(_saved(tmp_path / "s"))  # written anew at close, with the writes
    assert saved is not None
    assert "quokka" in saved.terms
    assert "wombat" in saved.terms


def test_another_stores_file_is_not_trusted(tmp_path: Path) -> None:
    _fill(tmp_path / "a", seed=0)
    _fill(tmp_path / "b", seed=5)  # as many memories and writes: only the postings differ
    shutil.copy(_saved(tmp_path / "b"), _saved(tmp_path / "a"))
    with _open(tmp_path / "a") as store:
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, Filter(agent="alice")))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_damaged_file_is_rebuilt(tmp_path: Path, damage: str, builds: list[int]) -> None:
    _fill(tmp_path / "s")
    path = _saved(tmp_path / "s")
    body = path.read_bytes()
    path.write_bytes({"garbage": b"not a zip" * 100, "truncated": body[: len(body) // 2], "empty": b""}[damage])
    builds.clear()
    with _open(tmp_path / "s") as store:
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, Filter(agent="alice")))
        assert builds == [1]


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=2_000), cut=st.integers(min_value=0, max_value=4_000))
def test_loading_any_bytes_gives_postings_or_none(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, cut: int
) -> None:
    # A real file, cut short and followed by arbitrary bytes: never an exception, never postings out of range.
    root = tmp_path_factory.mktemp("kw")
    real = _real_file(tmp_path_factory)
    path = root / "engram.db.kw"
    path.write_bytes(real[:cut] + data)
    saved = load_postings(path)
    if saved is not None:
        for term in saved.terms:
            try:
                docs, counts = saved.terms[term]
            except DamagedPostings:
                continue  # found when the term is first decoded: the index then rebuilds
            assert docs.size == counts.size
            assert not docs.size or (int(docs.max()) < saved.doc_len.size and int(docs.min()) >= 0)
            assert not docs.size or bool((docs[1:] > docs[:-1]).all())


_REAL: dict[str, bytes] = {}


def _real_file(factory: pytest.TempPathFactory) -> bytes:
    if "body" not in _REAL:
        location = factory.mktemp("real") / "s"
        with _open(location) as store:
            add(store, [memory(t, agent="alice") for t in _texts(50)])
            _both(store, ["caroline"], Filter(agent="alice"))
        _REAL["body"] = _saved(location).read_bytes()
    return _REAL["body"]


def test_forgetting_deletes_the_saved_postings_at_once(tmp_path: Path) -> None:
    _fill(tmp_path / "s")
    with _open(tmp_path / "s") as store:
        # The warm-up over first: a load it began could otherwise still be writing the file when it is checked.
        assert store.search.background.wait(timeout=60)
        store.search.keyword_index.min_memories = None  # no search follows: only the forget itself acts
        gone = store.search.keyword_candidates(["guitar"], Filter(agent="alice"), limit=1)[0].id
        with sqlite3.connect(tmp_path / "s" / "engram.db") as conn:
            rid = conn.execute("SELECT rid FROM memories WHERE id = ?", (gone,)).fetchone()[0]
        assert _saved(tmp_path / "s").exists()
        store.memories.delete(gone, actor="t", at=NOW)
        assert not _saved(tmp_path / "s").exists()
    with _open(tmp_path / "s") as store:  # rebuilt (no file), then saved: without the forgotten row
        _both(store, ["guitar"], Filter(agent="alice"))
    saved = load_postings(_saved(tmp_path / "s"))
    assert saved is not None
    assert all(rid not in docs for docs, _ in saved.terms.values())


def test_a_close_right_after_a_forget_does_not_write_the_forgotten_terms_back(tmp_path: Path) -> None:
    _fill(tmp_path / "s")
    with _open(tmp_path / "s") as store:
        assert store.search.background.wait(timeout=60)
        _both(store, ["guitar"], Filter(agent="alice"))
        assert store.search.keyword_index.wait(timeout=30)
        gone = store.search.keyword_candidates(["guitar"], Filter(agent="alice"), limit=1)[0].id  # from the index
        with sqlite3.connect(tmp_path / "s" / "engram.db") as conn:
            rid = conn.execute("SELECT rid FROM memories WHERE id = ?", (gone,)).fetchone()[0]
        store.memories.delete(gone, actor="t", at=NOW)  # no search after it: the index never catches up
    saved = load_postings(_saved(tmp_path / "s"))
    assert saved is None or all(rid not in docs for docs, _ in saved.terms.values())


def test_a_file_saved_before_another_process_forgot_is_dropped_at_the_next_open(tmp_path: Path) -> None:
    _fill(tmp_path / "s")
    with _open(tmp_path / "s") as first:
        # Its warm-up over first: the warm-up's rehearsal is a search, which, run late (a loaded machine), caught the
        # postings up with the forget below before the close saved them (the row gone from the file; failed so).
        assert first.search.background.wait(timeout=60)
        _both(first, ["guitar"], Filter(agent="alice"))
        # Loaded before the forget below deletes the file (a search meanwhile may have answered from FTS5), and
        # swapped in by a search after it, so that the close saves them: they hold every row.
        assert first.search.keyword_index.wait(timeout=30)
        _both(first, ["guitar"], Filter(agent="alice"))
        assert first.search.keyword_index._postings is not None  # type: ignore[attr-defined]
        # The other process keeps plain FTS5: a load or build of its own, racing the forget, could write the
        # file anew (from the database, without the row) before the first store saves.
        with open_sqlite(tmp_path / "s") as second:
            second.search.keyword_index.min_memories = None
            gone = second.search.keyword_candidates(["guitar"], Filter(agent="alice"), limit=1)[0].id
            with sqlite3.connect(tmp_path / "s" / "engram.db") as conn:
                rid = conn.execute("SELECT rid FROM memories WHERE id = ?", (gone,)).fetchone()[0]
            second.memories.delete(gone, actor="t", at=NOW)
        first.search.keyword_index._saved_key = None  # type: ignore[attr-defined]  # as if it had written since
    before = load_postings(_saved(tmp_path / "s"))  # the first store saved what it held: the forgotten row too
    assert before is not None
    assert any(rid in docs for docs, _ in before.terms.values())
    with _open(tmp_path / "s") as store:
        _assert_same(*_both(store, ["guitar"], Filter(agent="alice")))
        assert not _saved(tmp_path / "s").exists()
    after = load_postings(_saved(tmp_path / "s"))
    assert after is not None
    assert all(rid not in docs for docs, _ in after.terms.values())


_postings = st.lists(
    st.tuples(
        st.text(alphabet="abcdefgh", min_size=1, max_size=6),
        st.lists(st.integers(min_value=0, max_value=999), min_size=1, max_size=40, unique=True),
    ),
    max_size=30,
    unique_by=lambda t: t[0],
)


@settings(max_examples=60, deadline=None)
@given(postings=_postings)
def test_saved_postings_come_back_exactly(tmp_path_factory: pytest.TempPathFactory, postings: list[Any]) -> None:
    # Keys are written as running differences in each term's narrowest width: loading gives back the same arrays.
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("rt") / "engram.db.kw"
    terms = [
        (t, np.array(sorted(keys), dtype=np.int32), np.arange(1, len(keys) + 1, dtype=np.int32)) for t, keys in postings
    ]
    save_postings(
        path,
        seq=7,
        anchor="m-1",
        rows=1000,
        tokens=5,
        structure=b"\x01",
        terms=iter(terms),
        doc_len=np.ones(1000, dtype=np.int32),
    )
    saved = load_postings(path)
    assert saved is not None
    assert (saved.seq, saved.anchor, saved.rows, saved.tokens, saved.structure) == (7, "m-1", 1000, 5, b"\x01")
    assert set(saved.terms) == {t for t, _, _ in terms}
    for t, docs, counts in terms:
        assert saved.terms[t][0].tolist() == docs.tolist()
        assert saved.terms[t][1].tolist() == counts.tolist()


def _write_format(path: Path, saved: Any, version: int) -> None:
    """``saved`` written as main wrote it before format 3: a deflated ``.npz`` (format 2: keys as running
    differences; format 1: keys as they are)."""
    np = pytest.importorskip("numpy")
    names = sorted(saved.terms)
    docs = [np.asarray(saved.terms[t][0], dtype=np.int32) for t in names]
    flat = np.concatenate(docs)
    meta = {
        "format": version,
        "seq": saved.seq,
        "anchor": saved.anchor,
        "rows": saved.rows,
        "tokens": saved.tokens,
        "structure": saved.structure.hex(),
        "terms": names,
    }
    with open(path, "wb") as fh:
        np.savez_compressed(
            fh,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            offsets=np.concatenate([[0], np.cumsum([d.size for d in docs])]),
            docs=np.diff(flat, prepend=np.int32(0)) if version == 2 else flat,
            counts=np.concatenate([np.asarray(saved.terms[t][1], dtype=np.int32) for t in names]),
            doc_len=saved.doc_len,
        )


def test_a_format_2_file_still_opens_and_is_written_anew_at_close(tmp_path: Path, builds: list[int]) -> None:
    location = tmp_path / "s"
    _fill(location)
    path = _saved(location)
    saved = load_postings(path)
    assert saved is not None
    assert saved.current
    _write_format(path, saved, 2)
    assert path.read_bytes()[:2] == b"PK"
    older = load_postings(path)
    assert older is not None
    assert not older.current
    builds.clear()
    with _open(location) as store:
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, Filter(agent="alice")))
    assert builds == []  # loaded, not built
    assert path.read_bytes()[:8] == b"ENGRAMKW"  # written anew, in the current format, at close
    again = load_postings(path)
    assert again is not None
    assert again.current
    assert set(again.terms) == set(saved.terms)
    for term in saved.terms:
        assert again.terms[term][0].tolist() == saved.terms[term][0].tolist()
        assert again.terms[term][1].tolist() == saved.terms[term][1].tolist()


def test_a_format_1_file_is_rebuilt(tmp_path: Path, builds: list[int]) -> None:
    location = tmp_path / "s"
    _fill(location)
    path = _saved(location)
    saved = load_postings(path)
    assert saved is not None
    _write_format(path, saved, 1)
    assert load_postings(path) is None
    builds.clear()
    with _open(location) as store:
        _both(store, ["caroline"], Filter(agent="alice"))
    assert builds == [1]
    assert load_postings(path) is not None  # written anew, in the current format, at close


_wide_postings = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=8),
        st.lists(
            st.one_of(st.integers(0, 300), st.integers(0, 70_000), st.integers(0, 400_000)),
            min_size=1,
            max_size=30,
            unique=True,
        ),
        st.one_of(st.integers(1, 3), st.integers(1, 300), st.integers(1, 2**20)),
    ),
    max_size=12,
    unique_by=lambda t: t[0],
)


@settings(max_examples=60, deadline=None)
@given(postings=_wide_postings)
def test_keys_and_counts_of_every_width_come_back_exactly(
    tmp_path_factory: pytest.TempPathFactory, postings: list[Any]
) -> None:
    # Each term is stored in the narrowest width of its largest key difference and count (1, 2 or 4 bytes).
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("wide") / "engram.db.kw"
    rows = max((max(keys) for _, keys, _ in postings), default=0) + 1
    terms = [
        (t, np.array(sorted(keys), dtype=np.int64), np.full(len(keys), top, dtype=np.int64) - np.arange(len(keys)) % 2)
        for t, keys, top in postings
    ]
    lengths = np.zeros(rows, dtype=np.int64)
    lengths[-1] = 70_000
    save_postings(path, seq=1, anchor="a", rows=rows, tokens=9, structure=b"", terms=iter(terms), doc_len=lengths)
    saved = load_postings(path)
    assert saved is not None
    assert saved.doc_len.tolist() == lengths.tolist()
    assert list(saved.terms) == [t for t, _, _ in terms]
    for t, docs, counts in terms:
        assert saved.terms[t][0].tolist() == docs.tolist()
        assert saved.terms[t][1].tolist() == counts.tolist()


def _layout(path: Path) -> tuple[int, dict[str, Any]]:
    """Where a saved file's sections start (the file's own header)."""
    body = path.read_bytes()
    size = int.from_bytes(body[12:16], "little")
    start = 20 + size  # magic, format, header length, header CRC, then the header
    return start + -start % 64, json.loads(body[20:start])["sections"]


def test_a_damaged_term_is_found_when_first_read_and_the_index_rebuilt(tmp_path: Path, builds: list[int]) -> None:
    _fill(tmp_path / "s")
    path = _saved(tmp_path / "s")
    start, sections = _layout(path)
    body = bytearray(path.read_bytes())
    body[start + sections["c1"][0]] ^= 0x7F  # a count of the first term stored in one byte
    path.write_bytes(bytes(body))
    saved = load_postings(path)
    assert saved is not None  # the header and tables are intact: the term is checked when first decoded
    damaged = []
    for term in saved.terms:
        try:
            saved.terms[term]
        except DamagedPostings:
            damaged.append(term)
    assert len(damaged) == 1
    builds.clear()
    with _open(tmp_path / "s") as store:
        store.search.postings_budget = None  # every query term is ranked, the damaged one too
        words = sorted({w for terms in _QUERIES for w in terms} | {damaged[0]})
        for flt in (Filter(agent="alice"), Filter(agent=None)):
            _assert_same(*_both(store, words, flt))
            for terms in _QUERIES:
                _assert_same(*_both(store, terms, flt))
        assert builds == [1]
    fresh = load_postings(path)
    assert fresh is not None
    assert all(fresh.terms[t][0].size for t in fresh.terms)  # every term reads back


def test_the_postings_load_while_the_store_s_lock_is_held(tmp_path: Path) -> None:
    # At open the store's lock may be held for seconds (the open's own checks at 1M memories): the postings do
    # not wait for it.
    _fill(tmp_path / "s")
    store = open_sqlite(tmp_path / "s", warm=False)
    try:
        index = store.search.keyword_index
        index.min_memories = 0
        assert not index.ready()
        with store.atomic():  # holds the store's lock (and a write transaction) on this thread
            store.search.warm_keywords(tmp_path / "s" / "engram.db")
            assert index.wait(timeout=30)
    finally:
        store.close()


_WRITES = st.lists(st.sampled_from(["add", "update", "forget"]), max_size=4)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 40), size=st.integers(20, 120), writes=_WRITES, during=st.booleans())
def test_a_reopened_store_answers_as_fts5_and_as_before_closing(
    tmp_path_factory: pytest.TempPathFactory, seed: int, size: int, writes: list[str], during: bool
) -> None:
    """Whatever the store and the writes made while it was closed (by a program not using the index), a reopened
    store's keyword channel answers as FTS5 does, and as before closing when nothing was written; ``during``: also
    while the saved postings are still loading (searches then answer from FTS5, the same)."""
    location = tmp_path_factory.mktemp("re") / "s"
    queries = [(terms, flt) for terms in _QUERIES[:5] for flt in (Filter(agent=None), Filter(agent="bob"))]
    texts = _texts(size, seed)
    with _open(location) as store:
        add(store, [memory(t, agent="alice" if i % 3 else "bob") for i, t in enumerate(texts)], seed=seed)
        before = [_both(store, terms, flt)[1] for terms, flt in queries]
    if writes:
        with open_sqlite(location, warm=False) as other:
            other.search.keyword_index.min_memories = None
            for i, write in enumerate(writes):
                some = other.search.keyword_candidates(["caroline", "guitar", "lake"], Filter(agent=None), limit=5)
                if write == "add" or not some:
                    add(other, [memory(f"quokka {texts[i]}", agent="bob")], seed=seed + i + 1)
                elif write == "update":
                    other.memories.update(some[0].id, {"content": f"wombat {i}"}, vector=None, model_id=MODEL,
                                          actor="t", at=NOW)  # fmt: skip
                else:
                    other.memories.delete(some[-1].id, actor="t", at=NOW)
    gate = threading.Event()
    real = _kw_index.load_postings

    def held(path: Path) -> Any:
        gate.wait(timeout=30)  # the load is held up until the searches below have run
        return real(path)

    with pytest.MonkeyPatch.context() as mp:
        if during:
            mp.setattr(_kw_index, "load_postings", held)
            mp.setattr(_kw_index, "_LOAD_WAIT_SECONDS", 0.0)
        else:
            gate.set()
        store = _open(location)
        try:
            index = store.search.keyword_index
            for (terms, flt), earlier in zip(queries, before, strict=True):
                now = store.search.keyword_candidates(terms, flt, limit=20)
                assert not during or not index.ready()  # answered while loading
                index.min_memories = None
                plain = store.search.keyword_candidates(terms, flt, limit=20)
                index.min_memories = 0
                _assert_same(plain, now)
                if not writes:
                    _assert_same(earlier, now)
            gate.set()
            assert index.wait(timeout=30)
            for terms, flt in queries:
                _assert_same(*_both(store, terms, flt))
        finally:
            gate.set()
            store.close()


def test_a_store_opened_by_a_relative_path_loads_its_postings_at_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builds: list[int]
) -> None:
    _fill(tmp_path / "s")
    builds.clear()
    monkeypatch.chdir(tmp_path)
    store = open_sqlite("s", warm=False)
    try:
        index = store.search.keyword_index
        index.min_memories = 0
        store.search.warm_keywords(Path("s") / "engram.db")
        assert index.wait(timeout=30)
        for terms in _QUERIES:
            _assert_same(*_both(store, terms, Filter(agent="alice")))
        assert builds == []
    finally:
        store.close()


@pytest.fixture
def reopened(tmp_path: Path, builds: list[int]) -> Iterator[tuple[Store, threading.Event]]:
    """A filled store reopened without its warm-up (its postings saved beside it), builds counted from here, and a
    gate by which a test holds a step of the load up (opened at the end)."""
    _fill(tmp_path / "s")
    builds.clear()
    store = open_sqlite(tmp_path / "s", warm=False)
    gate = threading.Event()
    try:
        store.search.keyword_index.min_memories = 0
        yield store, gate
    finally:
        gate.set()
        store.close()


def test_a_load_that_ends_while_a_search_looks_at_the_store_is_not_followed_by_a_build(
    reopened: tuple[Store, threading.Event], monkeypatch: pytest.MonkeyPatch, builds: list[int]
) -> None:
    # The search found no postings yet, and the load ended before it asked for one: it must use the loaded postings,
    # not start a build (one did under load, a build of seconds at 100k memories: test_a_format_2_file failed so).
    store, gate = reopened
    index = store.search.keyword_index
    real_load, real_size = _kw_index.load_postings, _kw_index.max_rid

    def held(path: Path) -> Any:
        gate.wait(timeout=30)
        return real_load(path)

    def looked(conn: sqlite3.Connection) -> int:
        gate.set()  # the load goes on, and ends, while the search looks at the store's size
        assert index.wait(timeout=30)
        return real_size(conn)

    monkeypatch.setattr(_kw_index, "load_postings", held)
    store.search.warm_keywords(Path(store.location) / "engram.db")
    monkeypatch.setattr(_kw_index, "max_rid", looked)
    _assert_same(*_both(store, ["caroline"], Filter(agent="alice")))
    assert index.wait(timeout=30)
    assert builds == []


def test_a_warm_up_that_looks_at_the_store_after_a_search_loaded_the_postings_starts_no_build(
    reopened: tuple[Store, threading.Event], monkeypatch: pytest.MonkeyPatch, builds: list[int]
) -> None:
    # The warm-up's thread saw no postings, then (a loaded machine) looked at the store's size only after the first
    # search had loaded them and used them: it must not build them anew.
    store, gate = reopened
    real = _kw_index.connect_read_only

    def late(path: str) -> sqlite3.Connection:
        gate.wait(timeout=30)
        return real(path)

    monkeypatch.setattr(_kw_index, "connect_read_only", late)
    warm = threading.Thread(target=store.search.warm_keywords, args=(Path(store.location) / "engram.db",))
    warm.start()
    _assert_same(*_both(store, ["caroline"], Filter(agent="alice")))
    gate.set()
    warm.join(timeout=30)
    assert store.search.keyword_index.wait(timeout=30)
    assert builds == []

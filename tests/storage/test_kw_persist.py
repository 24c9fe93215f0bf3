"""The keyword postings saved beside the database: a reopened store ranks from them at once, exactly as FTS5.

Real SQLite files throughout. A saved file is only a head start: it is caught up with writes made since,
a file of another store or a damaged one is rebuilt, and a forgotten memory's terms leave it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import MODEL, NOW, add, memory
from test_keyword_speedpath import _QUERIES, _assert_same, _both, _texts

from engramdb.storage import _kw_index
from engramdb.storage._kw_persist import load_postings, postings_path, save_postings
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
        for docs, counts in saved.terms.values():
            assert docs.size == counts.size
            assert not docs.size or (int(docs.max()) < saved.doc_len.size and int(docs.min()) >= 0)


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


def test_a_file_saved_before_another_process_forgot_is_dropped_at_the_next_open(tmp_path: Path) -> None:
    _fill(tmp_path / "s")
    with _open(tmp_path / "s") as first:
        _both(first, ["guitar"], Filter(agent="alice"))  # its postings hold every row
        with _open(tmp_path / "s") as second:
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
    # Keys are written as running differences and deflated: whatever the terms, loading gives back the same arrays.
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


def test_a_saved_file_is_deflated_and_one_of_the_older_format_is_rebuilt(tmp_path: Path, builds: list[int]) -> None:
    np = pytest.importorskip("numpy")
    location = tmp_path / "s"
    _fill(location)
    path = _saved(location)
    with np.load(path) as data:
        raw = sum(int(data[k].nbytes) for k in data.files)
    assert path.stat().st_size < raw / 2
    # A file written by the first format (plain arrays, keys as they are) is not read: the store builds instead.
    saved = load_postings(path)
    assert saved is not None
    meta = {
        "format": 1,
        "seq": saved.seq,
        "anchor": saved.anchor,
        "rows": saved.rows,
        "tokens": saved.tokens,
        "structure": saved.structure.hex(),
        "terms": sorted(saved.terms),
    }
    docs = [saved.terms[t][0] for t in sorted(saved.terms)]
    with open(path, "wb") as fh:
        np.savez(
            fh,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            offsets=np.concatenate([[0], np.cumsum([d.size for d in docs])]),
            docs=np.concatenate(docs),
            counts=np.concatenate([saved.terms[t][1] for t in sorted(saved.terms)]),
            doc_len=saved.doc_len,
        )
    assert load_postings(path) is None
    builds.clear()
    with _open(location) as store:
        _both(store, ["caroline"], Filter(agent="alice"))
    assert builds == [1]
    assert load_postings(path) is not None  # written anew, in the current format, at close

"""Behaviour only the SQLite backend has: files on disk, refusing foreign files, migrations,
forgetting down to the bytes, and several processes writing one store."""

from __future__ import annotations

import hashlib
import importlib.util
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from storage_helpers import MODEL, NOW, add, later, memory, seed_of, unit_vectors, write_many

from engramdb.config import load_settings
from engramdb.errors import (
    CorruptStoreError,
    NotAStoreError,
    SchemaVersionError,
    StorageError,
    ValidationError,
)
from engramdb.storage import open_store
from engramdb.storage._engine import sql_store
from engramdb.storage._sqlite_schema import MIGRATIONS, SCHEMA_VERSION, Migration, migrate, split_script
from engramdb.storage._sqlite_search import SQLiteSearch
from engramdb.storage.base import Filter, Store
from engramdb.storage.sqlite import DB_FILENAME, SQLiteBackend, open_sqlite


def opened(location: Path | str) -> tuple[SQLiteBackend, Store]:
    """A SQLite backend and the store over it (for tests that need the raw connection)."""
    backend = SQLiteBackend(location)
    return backend, sql_store(backend)


def fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


# -- opening ----------------------------------------------------------------------------------


def test_creates_directory_and_configures_the_database(tmp_path: Path) -> None:
    location = tmp_path / "a" / "b"
    backend, store = opened(location)
    with store:
        assert backend.path == location / DB_FILENAME
        assert backend.path.is_file()
        add(store, [memory("x")])
    raw = sqlite3.connect(location / DB_FILENAME)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("PRAGMA page_size").fetchone()[0] == 8192
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        raw.close()


def test_connection_pragmas(tmp_path: Path) -> None:
    backend, store = opened(tmp_path)
    with store, backend.transaction() as conn:
        assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_a_file_instead_of_a_directory_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes")
    before = fingerprint(path)
    with pytest.raises(NotAStoreError, match="not an engramdb store directory"):
        open_sqlite(path)
    assert fingerprint(path) == before


def test_a_store_name_the_file_system_refuses_gets_a_storage_error(tmp_path: Path) -> None:
    # A folder name over 255 bytes: the existence check itself raised a raw OSError (ENAMETOOLONG).
    with pytest.raises(StorageError, match="cannot create store directory"):
        open_sqlite(tmp_path / ("w" * 300))
    with pytest.raises(ValidationError, match="embedded null byte"):
        open_sqlite(tmp_path / "a\x00b")  # a raw ValueError before
    assert list(tmp_path.iterdir()) == []


def test_a_non_sqlite_engram_db_is_refused_untouched(tmp_path: Path) -> None:
    (tmp_path / DB_FILENAME).write_bytes(b"this is not a database at all" * 100)
    before = fingerprint(tmp_path / DB_FILENAME)
    with pytest.raises(NotAStoreError):
        open_sqlite(tmp_path)
    assert fingerprint(tmp_path / DB_FILENAME) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [DB_FILENAME]


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / DB_FILENAME
    raw = sqlite3.connect(db)
    raw.execute("CREATE TABLE customers (name TEXT)")
    raw.execute("INSERT INTO customers VALUES ('ada')")
    raw.commit()
    raw.close()
    before = fingerprint(db)
    with pytest.raises(NotAStoreError, match="not an engramdb store"):
        open_sqlite(tmp_path)
    assert fingerprint(db) == before
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        raw.close()


def test_an_empty_file_is_refused_not_silently_a_new_store(tmp_path: Path) -> None:
    # A new store's database is linked into place complete, so 0 bytes means the data was lost.
    (tmp_path / DB_FILENAME).touch()
    with pytest.raises(CorruptStoreError, match=r"empty .*0 bytes.*restore it from a backup, or delete the directory"):
        open_sqlite(tmp_path)
    assert (tmp_path / DB_FILENAME).stat().st_size == 0


def test_a_damaged_store_raises_corrupt_store_error(tmp_path: Path) -> None:
    with open_sqlite(tmp_path) as store:
        add(store, [memory(f"memory number {i} " * 20) for i in range(300)])
    db = tmp_path / DB_FILENAME
    data = bytearray(db.read_bytes())
    page = 8192
    # Keep page 1 (header and schema) intact; scribble over every other page.
    for start in range(page, len(data), page):
        data[start : start + page] = b"\xa5" * min(page, len(data) - start)
    db.write_bytes(bytes(data))

    def open_and_read() -> None:
        with open_sqlite(tmp_path) as store:
            store.memories.list(Filter(agent=None))
            store.search.keyword_candidates(["memory"], Filter(agent=None), limit=5)

    with pytest.raises(CorruptStoreError, match="damaged"):
        open_and_read()


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    open_sqlite(tmp_path).close()
    raw = sqlite3.connect(tmp_path / DB_FILENAME)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaVersionError, match="newer"):
        open_sqlite(tmp_path)


def test_memory_stores_are_separate_and_ephemeral() -> None:
    backend = SQLiteBackend(":memory:")
    assert backend.path is None
    backend.close()
    with open_sqlite(":memory:") as one, open_sqlite(":memory:") as two:
        vecs = add(one, [memory("only in one")])
        assert one.memories.count(Filter(agent=None)) == 1
        assert two.memories.count(Filter(agent=None)) == 0
        assert len(one.search.vector_candidates(vecs[0], Filter(agent="alice"), limit=5)) == 1
        one.memories.delete(one.memories.list(Filter(agent=None))[0].id, actor="t", at=NOW)


def test_internal_meta_keys_are_protected(tmp_path: Path) -> None:
    with open_sqlite(tmp_path) as store, pytest.raises(ValidationError):
        store.meta.set("vec_epoch", "0")


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    backend, store = opened(tmp_path)
    with store:

        def fail_midway() -> None:
            with backend.transaction() as conn:
                conn.execute("INSERT INTO meta (key, value) VALUES ('x', '1')")
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            fail_midway()
        assert store.meta.get("x") is None


# -- the open_store registry --------------------------------------------------------------------


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    settings = load_settings({}, home=tmp_path / "home", busy_timeout=2.5)
    for location in (str(tmp_path / "s"), ":memory:"):
        store = open_store(location, settings=settings)
        try:
            assert isinstance(store, Store)
            assert isinstance(store.search, SQLiteSearch)
            assert store.location == location
        finally:
            store.close()
    with pytest.raises(StorageError, match="unsupported store URL"):
        open_store("mysql://user:secret@db/x", settings=settings)


@pytest.mark.skipif(
    importlib.util.find_spec("engramdb.storage.postgres") is not None, reason="the postgres backend exists"
)
def test_postgres_without_its_backend_is_a_clear_error(tmp_path: Path) -> None:
    settings = load_settings({}, home=tmp_path)
    with pytest.raises(StorageError, match="postgres backend not installed/available"):
        open_store("postgresql://u:p@localhost/db", settings=settings)


# -- migrations ---------------------------------------------------------------------------------


def test_split_script_keeps_trigger_bodies_whole() -> None:
    script = """
        CREATE TABLE t (a INTEGER);
        CREATE TRIGGER t_ai AFTER INSERT ON t BEGIN
            UPDATE t SET a = a + 1 WHERE rowid = new.rowid;
            SELECT 1;
        END;
        -- a comment
        INSERT INTO t VALUES (';');
    """
    parts = list(split_script(script))
    assert len(parts) == 3
    assert parts[1].startswith("CREATE TRIGGER")
    assert parts[1].endswith("END;")
    assert list(split_script("SELECT 1; SELECT ';';\n-- done")) == ["SELECT 1;", "SELECT ';';"]
    with pytest.raises(ValueError, match="incomplete"):
        list(split_script("SELECT 1; SELECT 2"))


def test_a_new_migration_is_applied_once_and_kept(tmp_path: Path) -> None:
    with open_sqlite(tmp_path) as store:
        add(store, [memory("before the upgrade")])
    step = Migration(
        version=SCHEMA_VERSION + 1,
        description="outcomes",
        script="""
            CREATE TABLE outcomes (memory_id TEXT NOT NULL, reward REAL NOT NULL);
            CREATE INDEX outcomes_memory ON outcomes (memory_id);
        """,
        apply=lambda conn: conn.execute("INSERT INTO outcomes SELECT id, 1.0 FROM memories"),
    )
    raw = sqlite3.connect(tmp_path / DB_FILENAME, isolation_level=None)
    try:
        assert migrate(raw, location="t", migrations=(*MIGRATIONS, step)) == SCHEMA_VERSION + 1
        assert migrate(raw, location="t", migrations=(*MIGRATIONS, step)) == SCHEMA_VERSION + 1
        assert raw.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 1
        with pytest.raises(SchemaVersionError):
            migrate(raw, location="t")
    finally:
        raw.close()


def test_a_failing_migration_changes_nothing(tmp_path: Path) -> None:
    open_sqlite(tmp_path).close()
    step = Migration(version=SCHEMA_VERSION + 1, description="broken", script="CREATE TABLE x (a); SELECT nope;")
    raw = sqlite3.connect(tmp_path / DB_FILENAME, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError):
            migrate(raw, location="t", migrations=(*MIGRATIONS, step))
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name = 'x'").fetchone()[0] == 0
    finally:
        raw.close()


# -- forgetting leaves no bytes behind -----------------------------------------------------------


# No marker may be a possible substring of a hex memory id ("71193" alone once was, by chance).
SECRET = "quokkazebra-71193x the launch code is marmalade"
SECRET_BYTES = [b"quokkazebra", b"marmalade", b"71193x"]


def raw_bytes(location: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(location.iterdir()) if p.name.startswith(DB_FILENAME))


def checkpoint(location: Path) -> None:
    """Move everything into the main file, so forgetting must scrub pages there, not just the log."""
    raw = sqlite3.connect(location / DB_FILENAME)
    try:
        assert raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        raw.close()


def test_forgotten_content_is_gone_from_the_files(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path)
    others = [memory(f"ordinary note {i} about planning and retries") for i in range(200)]
    add(store, others)
    secret = memory(SECRET, tags=("quokkazebra",), metadata={"note": "marmalade"})
    vecs = add(store, [secret], seed=7)
    store.memories.update(
        secret.id, {"content": SECRET + " v2"}, vector=vecs[0], model_id=MODEL, actor="a", at=later(1)
    )
    store.search.keyword_candidates(["quokkazebra"], Filter(agent="alice"), limit=5)
    store.search.vector_candidates(vecs[0], Filter(agent="alice"), limit=5)
    checkpoint(tmp_path)
    db_bytes = (tmp_path / DB_FILENAME).read_bytes()
    assert all(s in db_bytes for s in SECRET_BYTES)  # the test can see it while it is there

    store.memories.delete(secret.id, actor="alice", at=later(2))
    data = raw_bytes(tmp_path)  # the store is still open: forget truncated the log itself
    assert [s for s in SECRET_BYTES if s in data] == []
    assert vecs[0].tobytes() not in data
    store.close()
    data = raw_bytes(tmp_path)
    assert [s for s in SECRET_BYTES if s in data] == []
    with open_sqlite(tmp_path) as again:
        assert again.memories.count(Filter(agent=None)) == 200
        assert again.search.keyword_candidates(["ordinary"], Filter(agent="alice"), limit=300)


def test_forgetting_inside_atomic_scrubs_once_committed(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path)
    secrets = [memory(f"{SECRET} copy {i}") for i in range(3)]
    add(store, [*secrets, memory("something else")])
    checkpoint(tmp_path)
    with store.atomic():
        for m in secrets:
            store.memories.delete(m.id, actor="alice", at=later(1))
    data = raw_bytes(tmp_path)
    assert [s for s in SECRET_BYTES if s in data] == []
    assert store.search.keyword_candidates(["quokkazebra", "else"], Filter(agent="alice"), limit=5)
    store.close()


# -- several processes ---------------------------------------------------------------------------


def test_two_processes_write_one_store_at_once(tmp_path: Path) -> None:
    location = str(tmp_path / "shared")
    parent = open_sqlite(location)
    mine = [memory(f"parent note {i}", agent="parent") for i in range(5)]
    add(parent, mine)
    parent.search.vector_candidates(unit_vectors(1)[0], Filter(agent=None), limit=3)  # cache loaded now

    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    workers = [ctx.Process(target=write_many, args=(location, agent, 200, 5, go)) for agent in ("left", "right")]
    for w in workers:
        w.start()
    go.set()  # both start writing at the same moment (each waits for this after its slow start-up)
    for w in workers:
        w.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]

    assert parent.memories.count(Filter(agent=None)) == 405
    for agent in ("left", "right"):
        vecs = unit_vectors(200, seed=seed_of(agent))
        for i in (0, 99, 199):
            found = parent.search.vector_candidates(vecs[i], Filter(agent=agent), limit=1)
            assert [c.id for c in found] == [f"{agent}-{i}"]
            assert found[0].score == pytest.approx(1.0, abs=1e-5)
    parent.close()

    with open_sqlite(location) as again:
        assert again.memories.count(Filter(agent="left")) == 200
        assert again.memories.count(Filter(agent="right")) == 200
        assert len(again.memories.history("left-17")) == 1
        query = np.asarray(unit_vectors(200, seed=seed_of("right"))[42])
        assert again.search.vector_candidates(query, Filter(agent=None), limit=1)[0].id == "right-42"


def failing_read(backend: SQLiteBackend) -> None:
    with backend.read() as conn:
        conn.execute("SELECT * FROM no_such_table")


def test_a_failed_read_inside_atomic_keeps_the_write_open(tmp_path: Path) -> None:
    backend, store = opened(tmp_path)
    with store:
        vecs = add(store, [memory("kept")])
        with store.atomic():
            store.memories.add([memory("also kept")], None, model_id=MODEL, actor="t")
            with pytest.raises(StorageError):
                failing_read(backend)
            with pytest.raises(StorageError, match="atomic"):
                store.search.vector_candidates(vecs[0], Filter(agent="alice"), limit=5)
            store.memories.add([memory("third")], None, model_id=MODEL, actor="t")
        assert store.memories.count(Filter(agent=None)) == 3

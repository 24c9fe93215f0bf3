"""A full disk: writes fail cleanly, reads keep working, their bookkeeping lands with the next write.

Uses a real full file system: a 3 MiB tmpfs mounted for the test (needs root). Without the
privilege to mount, the database is capped with SQLite's ``PRAGMA max_page_count`` instead,
which fails writes with the same SQLITE_FULL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from reliability_harness import HashEmbedder, doctor_failures, fill_disk, tmpfs

from engramdb import Engram
from engramdb._util import new_id
from engramdb.errors import StorageError
from engramdb.models import AuditRecord, Memory
from engramdb.storage._engine import sql_store
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import SQLiteBackend


def _exhaust(mem: Engram) -> int:
    """Write until a write fails (uses up the log's slack); the number of writes that failed cleanly."""
    for n in range(10_000):
        try:
            mem.remember(f"filling the last pages {n} " * 40, agent="filler", force=True)
        except StorageError:
            return 1
    return 0


def test_reads_work_on_a_full_disk_and_their_bookkeeping_lands_later(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    with tmpfs(fs, "3m") as mounted:
        mem = Engram(str(fs / "store"), embedder=HashEmbedder())
        try:
            kept = mem.remember_many(
                [{"content": f"kept memory {i} about topic {i % 5}", "agent": "a"} for i in range(40)]
            )
            target = kept[0]
            if not mounted:
                pytest.skip("no privilege to mount a tmpfs: the page-cap test below covers the same path")
            filler = fill_disk(fs)
            assert _exhaust(mem) == 1
            # Every read works, although each would write bookkeeping (access counts, read audit entries).
            assert mem.get(target.id).content == target.content
            assert len(mem.list(agent="a", limit=100)) == 40
            hits = mem.search("topic 3", agent="a")
            assert hits
            assert mem.count(agent="a") == 40
            with pytest.raises(StorageError):
                mem.remember("a write on a full disk fails cleanly", agent="a", force=True)
            pending = mem.store.checks.pending()
            assert pending > 0
            filler.unlink()
            mem.remember("space again", agent="a")
            assert mem.store.checks.pending() == 0
            actions = [e.action for e in mem.audit.log(limit=50)]
            assert {"get", "list", "search"} <= set(actions)
            touched = mem.store.memories.get(hits[0].memory.id)
            assert touched is not None
            assert touched.access_count >= 1
            assert mem.audit.verify()
        finally:
            mem.close()
        assert doctor_failures(fs / "store") == []


def test_the_page_cap_fallback_defers_bookkeeping_too(tmp_path: Path) -> None:
    # Where mounting is not allowed: SQLite's max_page_count fails writes with the same SQLITE_FULL.
    backend = SQLiteBackend(tmp_path / "store")
    store = sql_store(backend)
    try:
        now = datetime.now(UTC)
        memories = [_memory(f"memory {i}", now) for i in range(20)]
        store.memories.add(memories, HashEmbedder().embed([m.content for m in memories]), model_id="h", actor="a")
        conn = backend._conn
        assert conn is not None
        conn.execute(f"PRAGMA max_page_count = {int(conn.execute('PRAGMA page_count').fetchone()[0])}")
        with pytest.raises(StorageError) as caught:
            store.memories.add([_memory("x" * 50_000, now)], None, model_id="h", actor="a")
        assert backend.out_of_space(caught.value)
        ids = [m.id for m in memories]
        read = AuditRecord(action="get", agent="a", memory_id=ids[0], at=now, detail={"pad": "y" * 20_000})
        assert store.audit.append([read]) == []  # deferred: the read is not failed for its audit entry
        store.memories.touch(ids, at=now)
        assert store.checks.pending() >= 1
        assert store.memories.count(Filter(agent="a")) == 20
        with pytest.raises(StorageError):  # a write's own audit entry is never deferred
            store.audit.append([AuditRecord(action="update", agent="a", at=now, detail={"pad": "z" * 20_000})])
        conn.execute("PRAGMA max_page_count = 1000000")
        store.meta.set("note", "space again")
        assert store.checks.pending() == 0
        assert [e.action for e in store.audit.events(limit=None)] == ["get"]
    finally:
        store.close()


def _memory(content: str, now: datetime) -> Memory:
    return Memory(id=new_id(), agent="a", kind="knowledge", content=content, created_at=now, updated_at=now)

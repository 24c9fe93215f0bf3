"""Damaged, emptied and vanished stores are found: opening refuses them, or ``engram doctor`` reports them."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import typer
from reliability_harness import HashEmbedder, open_mem, sentence
from typer.testing import CliRunner

from engramdb import Engram
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.interfaces.cli.doctor import doctor
from engramdb.models import HealthReport
from engramdb.services.doctor import Doctor, examine
from engramdb.storage.sqlite import DB_FILENAME, open_sqlite


def _store(path: Path, n: int = 400) -> list[str]:
    with open_mem(path) as mem:
        rng = random.Random(n)
        items = [{"content": sentence(rng, "memory", i, "filler words " * 20), "agent": "a"} for i in range(n)]
        made = mem.remember_many(items, force=True)
    return [m.id for m in made]


def _report(path: Path) -> HealthReport:
    return examine(str(path), embedder=HashEmbedder())


def _failed(report: HealthReport) -> dict[str, str]:
    return {c.name: c.detail for c in report.failed}


def test_a_zero_byte_database_is_refused_with_how_to_recover(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store, 5)
    (store / DB_FILENAME).write_bytes(b"")
    with pytest.raises(CorruptStoreError) as caught:
        open_mem(store)
    message = str(caught.value)
    assert "\n" not in message
    assert "0 bytes" in message
    assert "backup" in message
    assert "delete the directory" in message
    assert (store / DB_FILENAME).stat().st_size == 0  # nothing was written over it


@pytest.mark.parametrize("leftover", ["engram.store", "engram.db-wal"])
def test_a_vanished_database_is_refused(tmp_path: Path, leftover: str) -> None:
    store = tmp_path / "store"
    _store(store, 5)
    (store / DB_FILENAME).unlink()
    for name in ("engram.store", "engram.db-wal"):
        if name != leftover:
            (store / name).unlink(missing_ok=True)
    (store / leftover).touch()
    with pytest.raises(CorruptStoreError, match=f"missing.*{leftover}.*restore it from a backup"):
        open_mem(store)
    assert not (store / DB_FILENAME).exists()


def test_a_new_directory_still_becomes_a_store_and_gets_its_marker(tmp_path: Path) -> None:
    _store(tmp_path / "new", 1)
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == [DB_FILENAME, "engram.store"]


def test_random_bytes_at_90_percent_of_the_file_are_found(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store)
    db = store / DB_FILENAME
    size = db.stat().st_size
    with db.open("r+b") as fh:
        fh.seek(int(size * 0.9))
        fh.write(random.Random(7).randbytes(4096))
    failed = _failed(_report(store))
    assert "database" in failed, failed
    assert "integrity_check" in failed["database"] or "damaged" in failed["database"]


def test_a_keyword_index_out_of_step_is_found(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store, 20)
    raw = sqlite3.connect(store / DB_FILENAME)
    raw.execute("DROP TRIGGER memories_fts_update")
    raw.execute("UPDATE memories SET content = 'changed behind the index' WHERE rid = 3")
    raw.commit()
    raw.close()
    failed = _failed(_report(store))
    assert list(failed) == ["keyword_index"], failed


def test_damaged_vectors_are_found(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = _store(store, 20)
    raw = sqlite3.connect(store / DB_FILENAME)
    twice = (np.ones(64, dtype=np.float32) / 4).tobytes()  # length 2, not 1
    nan = np.full(64, np.nan, dtype=np.float32).tobytes()
    raw.execute("UPDATE vectors SET vec = ? WHERE memory_id = ?", (twice, ids[0]))
    raw.execute("UPDATE vectors SET vec = ? WHERE memory_id = ?", (nan, ids[1]))
    raw.execute("UPDATE vectors SET vec = ?, dim = 3 WHERE memory_id = ?", (b"\0" * 12, ids[2]))
    raw.execute("DELETE FROM vectors WHERE memory_id = ?", (ids[3],))
    raw.commit()
    raw.close()
    failed = _failed(_report(store))
    assert list(failed) == ["vectors"], failed
    detail = failed["vectors"]
    for words in ("not of unit length", "not finite", "wrong dimension", "without a vector"):
        assert words in detail


def test_an_edited_audit_trail_is_found(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store, 5)
    raw = sqlite3.connect(store / DB_FILENAME)
    raw.execute("DROP TRIGGER audit_append_only_update")
    raw.execute("UPDATE audit SET agent = 'mallory' WHERE seq = 2")
    raw.commit()
    raw.close()
    assert "audit_chain" in _failed(_report(store))


def test_synchronous_full_is_offered_and_checked(tmp_path: Path) -> None:
    with open_sqlite(tmp_path / "full", synchronous="FULL") as store:
        assert store.meta.get("model_id") is None
    raw = sqlite3.connect(tmp_path / "full" / DB_FILENAME)
    raw.close()
    with pytest.raises(ValidationError, match="synchronous must be one of NORMAL, FULL"):
        open_sqlite(tmp_path / "other", synchronous="OFF")


def _cli() -> typer.Typer:
    app = typer.Typer(add_completion=False)
    app.command()(doctor)
    return app


def test_engram_doctor_exit_codes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Engram(str(store)) as mem:  # the CLI opens stores with the configured (real) model
        mem.remember_many([{"content": f"note {i} on the release checklist", "agent": "a"} for i in range(30)])
    runner = CliRunner()
    healthy = runner.invoke(_cli(), ["--store", str(store)])
    assert healthy.exit_code == 0, healthy.output
    assert "audit_coverage" in healthy.output
    as_json = runner.invoke(_cli(), ["--store", str(store), "--json"])
    assert as_json.exit_code == 0
    assert '"ok": true' in as_json.output
    raw = sqlite3.connect(store / DB_FILENAME)
    raw.execute("DROP TRIGGER memories_fts_update")
    raw.execute("UPDATE memories SET content = 'edited' WHERE rid = 2")
    raw.commit()
    raw.close()
    damaged = runner.invoke(_cli(), ["--store", str(store)])
    assert damaged.exit_code == 1
    assert "error: keyword_index: out of step" in damaged.output
    os.truncate(store / DB_FILENAME, 0)
    emptied = runner.invoke(_cli(), ["--store", str(store)])
    assert emptied.exit_code == 1
    assert "error: open:" in emptied.output
    assert "0 bytes" in emptied.output


def test_the_doctor_passes_a_healthy_store_on_every_backend(backend_mem: Engram) -> None:
    mem = backend_mem
    made = mem.remember_many([{"content": f"fact {i} about the build pipeline", "agent": "a"} for i in range(6)])
    mem.update(made[0].id, content="the build pipeline runs nightly")
    mem.forget(made[1].id)
    mem.sharing.share([made[2].id], from_agent="a", to_agent="b")
    mem.search("build pipeline", agent="a")
    report = Doctor(mem.store, mem.embedder, mem.settings).run()
    assert report.ok, report.to_dict()
    assert [c.name for c in report.checks] == ["database", "keyword_index", "vectors", "audit_chain", "audit_coverage"]

"""Background failures surface as the library's own error on the next call, never as a traceback on stderr.

Real faults: a full file system (a tmpfs filled up at the moment the background worker writes a vector) and a
damaged store (one zeroed 8 KB page of ``engram.db``), the latter through the real ``engram`` command.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from reliability_harness import HashEmbedder, doctor_failures, fill_disk, tmpfs

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.errors import StorageError

ENGRAM = Path(sys.executable).parent / "engram"


class DiskFillingEmbedder(HashEmbedder):
    """Fills the file system the first time the background worker embeds, once ``armed``: the memory is
    committed, and its vector's write then meets a full disk."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.armed = False
        self.filler: Path | None = None

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.armed and self.filler is None and threading.current_thread().name == "engramdb-vectors":
            self.filler = fill_disk(self.directory)
        return super().embed(texts)


def test_a_full_disk_in_the_background_is_the_next_calls_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fs = tmp_path / "fs"
    with tmpfs(fs, "3m") as mounted:
        if not mounted:
            pytest.skip("needs root to mount a tmpfs (a real full file system)")
        embedder = DiskFillingEmbedder(fs)
        mem = Engram(str(fs / "store"), embedder=embedder)
        try:
            mem.remember_many([{"content": f"note {i} on retries", "agent": "alice"} for i in range(20)])
            mem.flush()
            embedder.armed = True
            stored = mem.remember("the payments service retries 429s with backoff", agent="alice", force=True)
            with pytest.raises(StorageError, match="full"):
                mem.search("how are rate limits retried", agent="alice")
            assert embedder.filler is not None
            embedder.filler.unlink()
            # Reported once; the memory was queued again and gets its vector now that there is room.
            assert mem.flush() is True
            assert stored.id in mem.store.vectors.get([stored.id], model_id=embedder.model_id)
        finally:
            mem.close()
        assert doctor_failures(fs / "store") == []
    assert "Traceback" not in capfd.readouterr().err


def test_closing_after_a_background_failure_prints_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    fs = tmp_path / "fs"
    with tmpfs(fs, "3m") as mounted:
        if not mounted:
            pytest.skip("needs root to mount a tmpfs (a real full file system)")
        embedder = DiskFillingEmbedder(fs)
        embedder.armed = True
        mem = Engram(str(fs / "store"), embedder=embedder)
        mem.remember("written, its vector is not", agent="alice", force=True)
        mem.close()  # the memory stays pending for the next open; close says nothing on stderr
    assert capfd.readouterr().err == ""


def test_engram_memory_list_on_a_damaged_store_fails_with_one_line(tmp_path: Path, embedder: Embedder) -> None:
    """``engram memory list --agent alice`` with one zeroed 8 KB page: exit 1 and one line, no traceback."""
    store = tmp_path / "store"
    with Engram(store, embedder=embedder) as mem:
        mem.remember_many(
            [
                {"content": f"note {i} about the payments service and its retries " * 3, "agent": "alice"}
                for i in range(400)
            ]
        )
    db = store / "engram.db"
    pages = db.stat().st_size // 8192
    assert pages > 60
    damaged = tmp_path / "damaged"
    shutil.copytree(store, damaged)
    with (damaged / "engram.db").open("r+b") as fh:
        fh.seek(2 * pages // 3 * 8192)
        fh.write(b"\0" * 8192)
    result = subprocess.run(
        [str(ENGRAM), "--store", str(damaged), "memory", "list", "--agent", "alice"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "damaged" in lines[0] or "malformed" in lines[0]

"""Read-ahead at open: the warm-up asks the kernel for the store's pages, never changes a file (issue 27)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage._readahead import read_ahead, read_ahead_open, sidecar_files, yield_cpu

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is Linux/BSD only")


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=0, max_value=50_000), max_size=5), budget=st.integers(0, 120_000))
def test_read_ahead_asks_for_the_files_in_order_up_to_the_budget(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], budget: int
) -> None:
    directory = tmp_path_factory.mktemp("files")
    paths = []
    for i, size in enumerate(sizes):
        path = directory / f"f{i}"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    before = _digests(directory)
    asked = read_ahead([*paths, directory / "missing"], budget=budget)
    assert asked == min(budget, sum(sizes))
    assert _digests(directory) == before


def test_sidecar_files_are_every_file_under_the_sidecar(tmp_path: Path) -> None:
    generation = tmp_path / "engram.db.ann" / "g-1"
    generation.mkdir(parents=True)
    (generation / "vectors.npy").write_bytes(b"v")
    (tmp_path / "engram.db.ann" / "CURRENT").write_text("g-1")
    assert sidecar_files(tmp_path / "engram.db.ann") == [
        tmp_path / "engram.db.ann" / "CURRENT",
        generation / "vectors.npy",
    ]
    assert sidecar_files(tmp_path / "absent") == []


def _locked_elsewhere(path: Path) -> bool:
    """Whether another process is refused a lock on ``path`` (this one holds it)."""
    probe = (
        "import fcntl, sys\n"
        "with open(sys.argv[1], 'r+b') as f:\n"
        "    try:\n"
        "        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    except OSError:\n"
        "        sys.exit(3)\n"
    )
    return subprocess.run([sys.executable, "-c", probe, str(path)], check=False).returncode == 3


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the open descriptors through /proc")
def test_reading_a_locked_file_ahead_through_its_open_descriptor_keeps_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "engram.db"
    path.write_bytes(os.urandom(40_000))
    with open(path, "r+b") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)
        assert _locked_elsewhere(path)
        assert read_ahead_open([path, tmp_path / "engram.db-wal"]) == 40_000
        assert read_ahead_open([path], budget=1_000) == 1_000
        assert _locked_elsewhere(path)
        # Why SQLite's files are never opened here: closing any descriptor of the file drops the lock.
        read_ahead([path])
        assert not _locked_elsewhere(path)


def _advised(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files posix_fadvise(WILLNEED) is called on from now on (recorded, then advised as usual)."""
    seen: list[str] = []
    advise = os.posix_fadvise

    def recording(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        advise(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", recording)
    return seen


def _join_warmers() -> None:
    for thread in threading.enumerate():
        if thread.name == "engramdb-warm":
            thread.join(timeout=30)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names the advised files through /proc")
def test_a_warm_open_reads_the_store_ahead_and_a_cold_one_does_not(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        mem.remember("The staging deploy needs the VPN", agent="ops")
    # The first open's warm-up may still be reading ahead after its close: only the later opens are watched.
    _join_warmers()
    seen = _advised(monkeypatch)
    with Engram(tmp_path / "s", embedder=embedder, warm=False) as mem:
        assert [h.memory.content for h in mem.search("staging VPN", agent="ops")] == [
            "The staging deploy needs the VPN"
        ]
    assert seen == []
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        _join_warmers()
        assert str((tmp_path / "s" / "engram.db").resolve()) in seen
        assert [h.memory.content for h in mem.search("staging VPN", agent="ops")] == [
            "The staging deploy needs the VPN"
        ]


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="per-thread nice values are Linux's")
def test_a_background_thread_yields_the_cpu_and_the_caller_keeps_its_priority() -> None:
    seen: list[tuple[bool, int]] = []

    def background() -> None:
        lowered = yield_cpu()
        seen.append((lowered, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    worker = threading.Thread(target=background)
    worker.start()
    worker.join(timeout=30)
    assert seen == [(True, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # only that thread

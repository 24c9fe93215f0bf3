"""Read-ahead at open: the warm-up asks the kernel for the store's pages, never changes a file (issue 27)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage._readahead import Pace, read_ahead, read_ahead_open, read_spans, sidecar_files, yield_cpu

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
    """The warm-up, then the read-ahead it starts: a thread of its own, paced, which may still be reading when the
    warm-up has ended (joining the warm-up alone left the advice unseen on a loaded machine)."""
    for name in ("engramdb-warm", "engramdb-readahead"):
        for thread in threading.enumerate():
            if thread.name == name:
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


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _residency import evict, resident  # noqa: E402  - the bench's mincore, from its folder


def _share_resident(path: Path) -> float:
    flags = resident(path)
    return float(flags.mean()) if flags.size else 0.0


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="mincore through libc (Linux)")
def test_a_file_larger_than_the_kernels_window_is_read_whole(tmp_path: Path) -> None:
    # One WILLNEED for a whole file reads only the device's read-ahead window (8 MB here, 128 KiB by default):
    # the read-ahead asks in pieces, so the whole file comes in.
    path = tmp_path / "big"
    path.write_bytes(os.urandom(24 << 20))
    evict(tmp_path)
    if _share_resident(path) > 0.1:
        pytest.skip("this file system keeps the pages (tmpfs?): nothing to read ahead")
    assert read_ahead([path]) == 24 << 20
    # The last piece asked for may still be on its way: wait for the disk, not a fixed time.
    for _ in range(400):
        if _share_resident(path) == 1.0:
            break
        time.sleep(0.05)
    assert _share_resident(path) == 1.0


def test_a_read_ahead_stops_between_pieces_and_waits_for_the_searches(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(6 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        calls: list[str] = []

        def stopping() -> bool:
            calls.append("stopping?")
            return calls.count("asked") >= 2

        def busy() -> bool:
            calls.append("busy?")
            return calls.count("busy?") <= 3  # a search reads during the first three looks

        advise = os.posix_fadvise

        def recording(fd_: int, offset: int, length: int, advice: int) -> None:
            calls.append("asked")
            advise(fd_, offset, length, advice)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(os, "posix_fadvise", recording)
            asked = read_spans(fd, [(0, 6 << 20)], pace=Pace(stopping=stopping, busy=busy))
        assert calls.count("asked") == 2  # then stopped: the rest is never asked for
        assert 0 < asked < 6 << 20
        assert calls.index("asked") > calls.index("busy?") + 2  # not before the search was done
    finally:
        os.close(fd)


@pytest.mark.parametrize("how", ["shrunk", "vanished"])
def test_a_read_ahead_tolerates_a_file_that_shrinks_or_vanishes_meanwhile(tmp_path: Path, how: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(8 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:

        def busy() -> bool:
            if how == "shrunk":
                os.truncate(path, 100)
            elif path.exists():
                path.unlink()
            return False

        asked = read_spans(fd, [(0, 8 << 20), (12 << 20, 4096)], pace=Pace(busy=busy))
        assert 0 <= asked <= 8 << 20
    finally:
        os.close(fd)

"""The page hints' residency probe (issue 27, ninth round): once a store's pages are known cached the hints stop
probing, and they probe again on evidence: a sampled call, a thread that read from the disk, an idle gap."""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb.storage import _btree_pages
from engramdb.storage._btree_pages import SAMPLE_EVERY, WARM_AFTER, PageHints, thread_reads

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _residency import evict  # the bench's eviction (fsync, then DONTNEED), from its folder

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir() or not hasattr(os, "RWF_NOWAIT"),
    reason="finds SQLite's descriptor in /proc, probes with RWF_NOWAIT",
)

_ROWS = 4_000
_KEYS = np.arange(1, _ROWS, 13, dtype=np.int64)


def _store(path: Path) -> tuple[sqlite3.Connection, PageHints]:
    """A memories table over ~250 pages, its file held open (as a store's connection does), every page cached."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("CREATE TABLE memories (rid INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO memories VALUES (?, ?)", [(k, "x" * 200) for k in range(1, _ROWS + 1)])
    conn.commit()
    hints = PageHints(path)
    hints.load()
    _read_all(path)
    return conn, hints


def _read_all(path: Path) -> None:
    """Every page of the file read (a fresh connection: the holding one may answer from its own cache)."""
    with path.open("rb") as f:
        while f.read(1 << 20):
            pass


def _warm_up(hints: PageHints) -> None:
    for _ in range(WARM_AFTER):
        assert hints.ahead("memories", _KEYS) == 0  # cached: nothing asked
    assert hints.warm


def test_the_probe_stops_once_the_pages_are_known_cached(tmp_path: Path) -> None:
    conn, hints = _store(tmp_path / "engram.db")
    try:
        assert not hints.warm
        _warm_up(hints)
        evict(tmp_path)  # behind the hints' back: no read of this thread shows it
        # Warm: the calls before the sampled one neither probe nor ask, though the pages are out of the cache now.
        assert hints.ahead("memories", _KEYS) == 0
        assert hints.warm
    finally:
        conn.close()


def test_a_sampled_probe_rearms_the_hints_once_pages_left_the_cache(tmp_path: Path) -> None:
    conn, hints = _store(tmp_path / "engram.db")
    try:
        _warm_up(hints)
        evict(tmp_path)
        calls = [(hints.ahead("memories", _KEYS), hints.warm) for _ in range(SAMPLE_EVERY)]
        # The sampled call (or an earlier one, had this thread read from the disk meanwhile) found them out, asked
        # and re-armed the probe; the calls after it probe, and may ask again while those reads are under way.
        assert any(asked > 0 and not warm for asked, warm in calls)
        _read_all(tmp_path / "engram.db")
        _warm_up(hints)  # and warm again once the probes find them cached
    finally:
        conn.close()


def test_a_thread_that_read_from_the_disk_rearms_the_hints(tmp_path: Path) -> None:
    path = tmp_path / "engram.db"
    conn, hints = _store(path)
    try:
        _warm_up(hints)
        evict(tmp_path)
        before = thread_reads()
        reader = sqlite3.connect(path)  # a search's read: SQLite waits for the disk, on this thread
        reader.execute("SELECT body FROM memories WHERE rid = 1").fetchone()
        reader.close()
        if thread_reads() == before:
            pytest.skip("this kernel does not count a thread's reads (RUSAGE_THREAD)")
        assert hints.ahead("memories", _KEYS) > 0  # probed at once: the rows' pages asked for
        assert not hints.warm
    finally:
        conn.close()


def test_an_idle_gap_rearms_the_hints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn, hints = _store(tmp_path / "engram.db")
    try:
        _warm_up(hints)
        monkeypatch.setattr(_btree_pages, "IDLE_SECONDS", 0.2)
        evict(tmp_path)
        assert hints.ahead("memories", _KEYS) == 0  # within the gap: not probed
        time.sleep(0.3)
        assert hints.ahead("memories", _KEYS) > 0
        assert not hints.warm
    finally:
        conn.close()


def test_closing_forgets_the_warm_state(tmp_path: Path) -> None:
    conn, hints = _store(tmp_path / "engram.db")
    try:
        _warm_up(hints)
        hints.close()
        assert not hints.warm
        assert hints.ahead("memories", _KEYS) == 0
    finally:
        conn.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(st.just(-1), st.just(0), st.integers(1, 3 * SAMPLE_EVERY)), min_size=1, max_size=8))
def test_after_any_history_pages_that_left_the_cache_are_asked_for_within_a_sample(
    tmp_path_factory: pytest.TempPathFactory, steps: list[int]
) -> None:
    """Whatever came before (calls while cached, evictions, reads back), once the pages leave the cache one of the
    next SAMPLE_EVERY calls asks for them; no call raises or asks for pages that are cached at a probe."""
    folder = tmp_path_factory.mktemp("probe")
    conn, hints = _store(folder / "engram.db")
    try:
        for step in steps:
            if step == -1:  # behind the hints' back
                evict(folder)
                asked = [hints.ahead("memories", _KEYS) for _ in range(SAMPLE_EVERY)]
                assert any(a > 0 for a in asked)
                assert all(a >= 0 for a in asked)
            elif step == 0:
                _read_all(folder / "engram.db")
            else:
                assert all(hints.ahead("memories", _KEYS) >= 0 for _ in range(step))
    finally:
        conn.close()

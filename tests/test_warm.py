"""The ``warm`` setting: a file store brings its search caches up on threads at open, unless told not to."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder

_WARMERS = {"engramdb-warm", "engramdb-warm-retrieval"}


def _threads_started_by(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads started from now on (recorded, then started as usual)."""
    started: list[str] = []
    start = threading.Thread.start

    def recording(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", recording)
    return started


def test_a_store_opened_without_warming_starts_no_warming_thread_and_still_searches(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        mem.remember("The staging deploy needs the VPN", agent="ops")
    started = _threads_started_by(monkeypatch)
    with Engram(tmp_path / "s", embedder=embedder, warm=False) as mem:
        hits = mem.search("staging deploy VPN", agent="ops")  # the first search loads what it needs itself
    assert [h.memory.content for h in hits] == ["The staging deploy needs the VPN"]
    assert not _WARMERS & set(started)


def test_a_file_store_warms_by_default(tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        mem.remember("The staging deploy needs the VPN", agent="ops")
    started = _threads_started_by(monkeypatch)
    with Engram(tmp_path / "s", embedder=embedder):
        pass
    assert "engramdb-warm" in started


def test_the_warm_setting_is_read_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engramdb.config import load_settings

    monkeypatch.setenv("ENGRAM_WARM", "off")
    assert load_settings().warm is False


def test_opening_starts_the_search_workers_and_a_close_meanwhile_is_clean(tmp_path: Path, embedder: Embedder) -> None:
    """The keyword workers and the access writer start at open, not in the first search; closing at once is fine."""
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        mem.remember("The staging deploy needs the VPN", agent="ops")
    for _ in range(3):
        with Engram(tmp_path / "s", embedder=embedder):
            pass  # closed while its warm-up may still be starting them
    before = {t.ident for t in threading.enumerate()}
    with Engram(tmp_path / "s", embedder=embedder, access_flush_seconds=1.0) as mem:
        for thread in threading.enumerate():
            if thread.name == "engramdb-warm-retrieval":
                thread.join(timeout=30)
        started = {t.name.split("_")[0] for t in threading.enumerate() if t.ident not in before}
        assert {"engram-keyword", "engramdb-access-flush"} <= started
        hits = mem.search("staging deploy VPN", agent="ops")
    assert [h.memory.content for h in hits] == ["The staging deploy needs the VPN"]


_FRESH_OPEN = """
import sys
from engramdb import Engram
from dateparser import timezone_parser

with Engram(sys.argv[1], embedder="static", warm=sys.argv[2] == "on"):
    # Read as Engram(...) returns: the tables a question naming a time needs are built, or not.
    print(timezone_parser._build_tz_regexes.cache_info().currsize)
"""


@pytest.mark.parametrize("warm", ["on", "off"])
def test_a_warm_open_builds_the_date_tables_before_it_returns(tmp_path: Path, warm: str) -> None:
    """In a fresh process: a warm open builds dateparser's tables itself (on a thread beside the first searches
    they held the interpreter ~150 ms); a one-shot open (warm off) builds nothing until a question needs them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_OPEN, str(tmp_path / "s"), warm],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert out.stdout.split()[-1] == ("1" if warm == "on" else "0")


_FAILED_OPEN = """
import sys, threading
from engramdb import Engram
from engramdb.errors import EngramError

open(sys.argv[1], "w").write("not a database")
try:
    Engram(sys.argv[1], embedder="static")
except EngramError:
    pass
print(sorted(t.name for t in threading.enumerate() if t.name.startswith("engram")))
"""


def test_an_open_that_fails_leaves_no_table_builder_running(tmp_path: Path) -> None:
    """In a fresh process the tables' builder starts before the store opens; a failed open still joins it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", _FAILED_OPEN, str(tmp_path / "store.db")],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert out.stdout.split("\n")[-2] == "[]"


def _warmed_up() -> None:
    for thread in threading.enumerate():
        if thread.name == "engramdb-warm-retrieval":
            thread.join(timeout=60)


@pytest.mark.parametrize("warm", [True, False])
def test_a_warm_open_loads_the_model_before_the_first_search(tmp_path: Path, warm: bool) -> None:
    """The query embedding's model is read by the warm-up (a fresh process's first search paid 0.7-1.2 s for it),
    and not by a one-shot open."""
    with Engram(tmp_path / "s", embedder="static", warm=warm) as mem:
        _warmed_up()
        inner = mem.embedder.inner  # type: ignore[attr-defined]
        assert (inner._table is not None) is warm
        assert [h.memory.content for h in mem.search("anything", agent="ops")] == []


class _Counting:
    """A user's own embedder with no ``load`` (a remote one, say): the warm-up must never call it."""

    model_id = "counting-3"
    dim = 3

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)


def test_the_warm_up_never_calls_an_embedder_it_cannot_load(tmp_path: Path) -> None:
    counting = _Counting()
    with Engram(tmp_path / "s", embedder=counting):
        _warmed_up()
        assert counting.calls == 0

"""Eight writer processes on one store at once (with searches between writes): no errors, every write counted."""

from __future__ import annotations

from pathlib import Path

from reliability_harness import doctor_failures, run_writers

PROCESSES = 8
PER_PROCESS = 20


def test_eight_writer_processes_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    errors, stored, _ = run_writers(store, processes=PROCESSES, count=PER_PROCESS)
    assert errors == 0
    assert stored == PROCESSES * PER_PROCESS
    assert doctor_failures(store) == []

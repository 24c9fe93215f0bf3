"""SIGKILL during every kind of write: every acknowledged write survives, and the doctor finds the store healthy.

Healthy includes "every change has its audit entry", so a write whose audit entry could be
cut off by a kill (a two-step commit) fails here. Kinds run in parallel, each on its own store.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from reliability_harness import KINDS, KillResult, kill_once, prepare

KILLS_PER_KIND = 3


def _kill_cycles(kind: str, root: Path) -> list[KillResult]:
    workdir = root / kind
    store = workdir / "store"
    prepare(store, kind, workdir, files=40)
    rng = random.Random(f"kills-{kind}")
    # The first kill may land in the worker's cold first write; the later ones count their delay from a write
    # the run acknowledged, so that every kind has acknowledged writes to check however slow the machine is.
    return [kill_once(store, kind, workdir, rng=rng, after_ack=cycle > 0) for cycle in range(KILLS_PER_KIND)]


def test_sigkill_during_each_kind_of_write_loses_no_acknowledged_write(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=len(KINDS)) as pool:
        results = dict(zip(KINDS, pool.map(lambda k: _kill_cycles(k, tmp_path), KINDS), strict=True))
    problems = {kind: [(r.lost[:3], r.unhealthy) for r in runs if not r.ok] for kind, runs in results.items()}
    assert not any(problems.values()), problems
    for kind, runs in results.items():
        assert runs[-1].acked > 0, f"{kind}: the worker acknowledged no write before the kills"


@pytest.mark.parametrize("kind", ["forget"])
def test_the_kill_check_sees_a_change_without_its_audit_entry(tmp_path: Path, kind: str) -> None:
    # The same check after a forget committed in two steps (delete, then audit): it must fail.
    from datetime import UTC, datetime

    from reliability_harness import open_mem, verify

    store = tmp_path / "store"
    with open_mem(store) as mem:
        m = mem.remember("to be forgotten without an audit entry", agent="w")
        mem.store.memories.delete(m.id, actor="w", at=datetime.now(UTC))
    result = verify(store, kind, tmp_path / "no-ledger.jsonl")
    assert any(line.startswith("audit_coverage:") and m.id in line for line in result.unhealthy)

"""Reliability benchmark: the long version of ``tests/reliability`` (SIGKILLs during writes, concurrent writers).

For each kind of write (remember, remember_many, update, forget, share, import, cleanup) a
worker process repeats that write on its own store and logs every acknowledged one; it is
SIGKILLed at a random moment ``--kills`` times (default 100). After each kill the store is
reopened: acknowledged writes lost and doctor failures (integrity, keyword index, vectors,
audit chain, a change without its audit entry) are counted. Then ``--writers`` processes write
to one store at once. Prints a table and writes bench/results/reliability.json.

    python bench/reliability.py                    # 100 kills per kind, 8 writers x 50
    python bench/reliability.py --kills 10 --kinds forget cleanup      # quick
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sqlite3
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reliability"))

from reliability_harness import KINDS, KillResult, kill_once, prepare, run_writers

RESULTS = Path(__file__).parent / "results" / "reliability.json"


def kill_kind(kind: str, root: Path, kills: int, seed: int) -> dict[str, Any]:
    """``kills`` kill-and-reopen cycles of one kind of write on one store."""
    workdir = root / kind
    store = workdir / "store"
    started = time.perf_counter()
    # Enough work that no worker runs out before the last kill.
    prepare(store, kind, workdir, files=max(40, kills * 4), pool=max(600, kills * 60))
    rng = random.Random(f"{seed}-{kind}")
    runs: list[KillResult] = [kill_once(store, kind, workdir, rng=rng) for _ in range(kills)]
    lost = sum(len(r.lost) for r in runs)
    return {
        "kind": kind,
        "kills": len(runs),
        "acknowledged": runs[-1].acked if runs else 0,
        "lost": lost,
        "unhealthy_reopens": sum(1 for r in runs if r.unhealthy),
        "worker_ran_out": sum(1 for r in runs if r.finished),
        "problems": [p for r in runs for p in (r.lost[:2] + r.unhealthy)][:10],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=100, help="kills per kind of write (default 100)")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    parser.add_argument("--writers", type=int, default=8, help="concurrent writer processes (default 8)")
    parser.add_argument("--per-writer", type=int, default=50, help="memories each writer stores (default 50)")
    parser.add_argument("--parallel", type=int, default=4, help="kinds run at once (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    console = Console()
    with tempfile.TemporaryDirectory(prefix="engram-reliability-") as tmp:
        root = Path(tmp)
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            rows = list(pool.map(lambda k: kill_kind(k, root, args.kills, args.seed), args.kinds))
        errors, stored, seconds = run_writers(root / "writers", processes=args.writers, count=args.per_writer)

    table = Table(title=f"SIGKILL during writes ({args.kills} per kind)", title_justify="left")
    for column in ("write", "kills", "acknowledged", "lost", "unhealthy reopens", "seconds"):
        table.add_column(column, justify="left" if column == "write" else "right")
    for row in rows:
        table.add_row(
            row["kind"],
            str(row["kills"]),
            str(row["acknowledged"]),
            str(row["lost"]),
            str(row["unhealthy_reopens"]),
            str(row["seconds"]),
        )
    console.print(table)
    expected = args.writers * args.per_writer
    console.print(
        f"{args.writers} writer processes x {args.per_writer}: {errors} errors, {stored}/{expected} memories stored, "
        f"{seconds:.1f} s ({stored / seconds:.0f} writes/s)"
    )
    for row in rows:
        for problem in row["problems"]:
            console.print(f"[red]{row['kind']}[/red]: {problem}")

    result = {
        "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "kills_per_kind": args.kills,
        "kills": rows,
        "writers": {
            "processes": args.writers,
            "per_process": args.per_writer,
            "errors": errors,
            "stored": stored,
            "expected": expected,
            "seconds": round(seconds, 1),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"written to {args.out}")
    bad = sum(r["lost"] + r["unhealthy_reopens"] for r in rows) + errors + (expected - stored)
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()

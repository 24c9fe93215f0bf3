"""Every way to reach the memory, side by side in one run: the CLI with and without a server, REST against
in-process calls, the remote client's throughput, and 50 agents on several server workers under load.

One driver over the two scripts that measure them, run one after the other on the same machine state:

* ``bench/cli_latency.py``: ``engram`` calls (``memory search|record|list|show|history``, ``audit log``,
  ``keys list``, ``--help``) each a fresh process, with ``--store`` (no server) and with ``ENGRAM_URL`` (through
  a running ``engram serve``); ``mem.search|remember|count`` in-process and through the remote client (the
  difference is the REST overhead; calls per second its sequential throughput);
* ``bench/load.py``: one PostgreSQL (pgvector) and one Redis, ``--workers`` ``engram serve`` processes, 50
  simulated agents (``AsyncEngram``, mixed reads and writes, several users each): throughput, p50/p99, errors,
  acknowledged writes lost, isolation violations.

Their results go into one file, with the machine's load before and after each part, and one table is printed
(the rows bench/RESULTS.md quotes).

    nice -n 10 python bench/surface.py            # -> bench/results/surface.json (~5-10 minutes on 2 cores)
    nice -n 10 python bench/surface.py --quick    # fewer calls, 20 agents x 10 operations (smoke run, ~2 min)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _report import write_json  # noqa: E402

#: The CLI rows of the table: (what, the cli_latency row without a server, the row through a server).
CLI_ROWS = (
    ("`memory search ... --json`", "cli local: memory search --json", "cli server: memory search --json"),
    ("`memory search` (table)", "cli local: memory search (table)", "cli server: memory search (table)"),
    ("`memory record CONTENT --json`", "cli local: memory record --json", "cli server: memory record --json"),
    (
        "`memory record --context/--action/--outcome`",
        "cli local: memory record outcome",
        "cli server: memory record outcome",
    ),
    ("`memory list`", "cli local: memory list", "cli server: memory list"),
    ("`memory show ID`", "cli local: memory show", "cli server: memory show"),
    ("`memory history ID`", "cli local: memory history", "cli server: memory history"),
    ("`audit log`", "cli local: audit log", None),
    ("`keys list`", "cli local: keys list", None),
    ("`--help`", "cli: --help", None),
    ("`python -c pass` (the floor)", "python -c pass", None),
)


def _part(script: str, args: list[str]) -> tuple[dict[str, Any], dict[str, float]]:
    """Run ``bench/SCRIPT ARGS`` (its output shown as it comes); its JSON result and what the part took."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = Path(out.name)
    load_before, start = os.getloadavg()[0], time.perf_counter()
    try:
        subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--out", str(path)], check=True)
        result: dict[str, Any] = json.loads(path.read_text())
    finally:
        path.unlink(missing_ok=True)
    timing = {
        "seconds": round(time.perf_counter() - start, 1),
        "load_before": round(load_before, 1),
        "load_after": round(os.getloadavg()[0], 1),
    }
    return result, timing


def _ms(row: dict[str, Any] | None, key: str = "p50_ms") -> str:
    if row is None or row.get(key) is None:
        return ""
    return f"{row[key]:.0f}" if row[key] >= 100 else f"{row[key]:.1f}"


def table(result: dict[str, Any]) -> str:
    """The markdown tables of one run (what bench/RESULTS.md shows)."""
    rows = result["cli"]["rows"]
    lines = [
        "| `engram` command (a fresh process each call) | no server: p50 ms | CPU ms "
        "| through a server: p50 ms | CPU ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for what, local, served in CLI_ROWS:
        mine, far = rows.get(local), rows.get(served) if served else None
        lines.append(f"| {what} | {_ms(mine)} | {_ms(mine, 'cpu_ms')} | {_ms(far)} | {_ms(far, 'cpu_ms')} |")
    lines += [
        "",
        "| call | in-process p50 ms | remote client p50 ms | REST overhead ms | remote calls/s (sequential) |",
        "|---|---:|---:|---:|---:|",
    ]
    for call in ("search", "remember", "count"):
        near, far = rows[f"in-process: {call}"], rows[f"remote client: {call}"]
        overhead = rows[f"REST overhead: {call}"]["p50_ms"]
        lines.append(f"| `mem.{call}` | {_ms(near)} | {_ms(far)} | {overhead:+.1f} | {far['calls_per_s']} |")
    load = result["load"]
    setup = load["setup"]
    lines += [
        "",
        f"| {setup['agents']} agents x {setup['ops']} ops, {setup['workers']} workers (PostgreSQL + Redis) "
        "| calls | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    for op, p in [*load["by_op"].items(), ("**all**", load["all"])]:
        lines.append(f"| {op} | {p['n']} | {p.get('p50', '')} | {p.get('p99', '')} |")
    lines += [
        "",
        f"{load['calls']} calls in {load['seconds']} s = **{load['throughput_per_s']} calls/s**; errors "
        f"{load['errors']}; acknowledged writes lost {load['acknowledged_writes_lost']} (of "
        f"{load['writes_acknowledged']}); content differs {load['content_differs']}; count mismatches "
        f"{load['count_mismatch']}; isolation violations {load['isolation_violations']}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer CLI runs and API calls, a small load test")
    parser.add_argument("--cli-rounds", type=int, default=5, help="runs of each CLI call (hyperfine)")
    parser.add_argument("--workers", type=int, default=3, help="engram serve workers of the load test")
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--ops", type=int, default=40, help="operations per agent")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "surface.json"))
    opts = parser.parse_args()

    cli_args = ["--quick"] if opts.quick else ["--cli-rounds", str(opts.cli_rounds)]
    load_args = (
        ["--quick"]
        if opts.quick
        else ["--workers", str(opts.workers), "--agents", str(opts.agents), "--ops", str(opts.ops)]
    )
    cli, cli_timing = _part("cli_latency.py", cli_args)
    load, load_timing = _part("load.py", load_args)
    result = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "quick": opts.quick,
            "parts": {"cli_latency": cli_timing, "load": load_timing},
        },
        "cli": cli,
        "load": load,
    }
    write_json(Path(opts.out), result)
    print()
    print(table(result))
    print(
        f"\nCLI part {cli_timing['seconds']} s (load {cli_timing['load_before']} -> {cli_timing['load_after']}), "
        f"load test {load_timing['seconds']} s (load {load_timing['load_before']} -> {load_timing['load_after']}); "
        f"written to {opts.out}"
    )


if __name__ == "__main__":
    main()

"""CLI and remote-client latency: with and without a server, and REST against in-process calls, in one run.

One store is seeded (``--seed`` memories of three agents), copied, and measured four ways:

* ``cli local``: ``engram memory search`` / ``engram memory record`` with ``--store`` (each call opens
  the store and loads the model in a fresh process), and the commands that need no model (``list``,
  ``show``, ``history``, ``audit log``, ``keys list``, ``--help``);
* ``cli server``: the same commands with ``ENGRAM_URL`` set (a fresh process that talks to a running
  ``engram serve`` over loopback): ``--json`` calls of ``memory search|record`` take the short way
  (``interfaces/cli/_fast.py``, standard library only), the rest the full command line;
* ``in-process``: ``mem.search`` / ``mem.remember`` on an open embedded :class:`~engramdb.Engram`;
* ``remote client``: the same calls on ``Engram("http://...")`` to that server (one kept-alive connection):
  the difference to in-process is the REST overhead; calls per second is its sequential throughput.

    python bench/cli_latency.py                 # -> bench/results/cli_latency.json
    python bench/cli_latency.py --quick         # fewer calls, for a smoke run

The CLI calls are timed by hyperfine (``-N``, no shell) when it is installed (``apt-get install
hyperfine``), else by this script, interleaved round by round; ``python -c pass`` is the floor of any
fresh Python process on the machine at that moment. The package is byte-compiled first and the calls may write
bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment), as in an installed copy: otherwise
every call would compile the library's ~150 modules it imports from source again.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import engramdb
from engramdb import Engram

QUERIES = ("authentication failure", "retry the flaky test", "database migration", "deploy to staging")
_MAIN = "from engramdb.interfaces.cli import main; main()"
RECORD = ["memory", "record", "--agent", "agent0", "--type", "decision", "--context", "ctx", "--action", "retry"]
RECORD += ["--outcome", "success", "--json"]


def _seed(store: str, n: int) -> None:
    topics = ("auth token expired", "flaky integration test", "schema migration", "staging deploy", "cache miss")
    items = [
        {"content": f"{topics[i % len(topics)]}: note {i} about step {i % 7}", "agent": f"agent{i % 3}"}
        for i in range(n)
    ]
    with Engram(store) as mem:
        mem.remember_many(items, force=True)
        mem.flush()


def _hyperfine(args: list[str], env: dict[str, str], runs: int) -> tuple[list[float], float]:
    """Seconds per run of ``engram ARGS`` as hyperfine measures them (one warm-up run), and the mean CPU
    seconds (user + system) per run: what the call costs, whatever the machine's load adds to the wall time."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = (
            shlex.join([sys.executable, "-c", _MAIN, *args]) if args else shlex.join([sys.executable, "-c", "pass"])
        )
        done = subprocess.run(
            ["hyperfine", "-N", "--warmup", "1", "--runs", str(runs), "--export-json", out.name, command],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"engram {' '.join(args)} failed: {done.stderr.strip()[-800:]}")
        result = json.loads(Path(out.name).read_text())["results"][0]
    return result["times"], result["user"] + result["system"]


def _cli(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MAIN, *args], env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"engram {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return elapsed


def _serve(store: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "serve", "--store", store, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("engram serve did not start")


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] * 1000, 1),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1),
    }


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=2000, help="memories in the store")
    parser.add_argument("--out", default="bench/results/cli_latency.json")
    parser.add_argument("--cli-rounds", type=int, default=10, help="runs of each CLI call")
    parser.add_argument("--no-hyperfine", dest="hyperfine", action="store_false", help="time the CLI calls here")
    opts = parser.parse_args()
    opts.hyperfine = opts.hyperfine and shutil.which("hyperfine") is not None
    cli_rounds, api_calls = (3, 30) if opts.quick else (opts.cli_rounds, 200)

    work = Path(tempfile.mkdtemp(prefix="cli-latency-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_") and k != "PYTHONDONTWRITEBYTECODE"}
    compileall.compile_dir(Path(engramdb.__file__).parent, quiet=1)
    proc: subprocess.Popen[bytes] | None = None
    try:
        local_store, served_store = str(work / "local"), str(work / "served")
        _seed(local_store, opts.seed)
        shutil.copytree(local_store, served_store)
        proc, url = _serve(served_store, base)
        remote_env = {**base, "ENGRAM_URL": url}
        samples: dict[str, list[float]] = {}
        cpu: dict[str, float] = {}

        def add(name: str, value: float) -> None:
            samples.setdefault(name, []).append(value)

        with Engram(local_store) as mem:
            some = mem.list(agent="agent0", limit=1)[0].id
        cases: list[tuple[str, list[str], dict[str, str]]] = []
        for where, env, store in (("cli local", base, ["--store", local_store]), ("cli server", remote_env, [])):
            search = ["memory", "search", QUERIES[0], "--agent", "agent0", *store]
            cases += [
                (f"{where}: memory search --json", [*search, "--json"], env),
                (f"{where}: memory search (table)", search, env),
                (
                    f"{where}: memory record --json",
                    ["memory", "record", "a fact", "--agent", "a3", *store, "--json"],
                    env,
                ),
                (f"{where}: memory record outcome", [*RECORD, *store], env),
                (f"{where}: memory list", ["memory", "list", "--agent", "agent0", *store], env),
                (f"{where}: memory show", ["memory", "show", some, *store], env),
                (f"{where}: memory history", ["memory", "history", some, *store], env),
            ]
        cases += [
            ("cli local: audit log", ["audit", "log", "--limit", "5", "--store", local_store], base),
            ("cli local: keys list", ["keys", "list", "--store", local_store], base),
            ("cli: --help", ["--help"], base),
            ("python -c pass", [], base),
        ]
        if opts.hyperfine:
            for name, args, env in cases:
                samples[name], cpu[name] = _hyperfine(args, env, cli_rounds)
        else:
            for _ in range(cli_rounds):
                for name, args, env in cases:
                    add(
                        name,
                        _cli(args, env)
                        if args
                        else _timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)),
                    )

        with Engram(local_store) as mem, Engram(url) as remote:
            for who in (mem, remote):  # warm: the model's first query, the connection
                who.search("warm up", agent="agent1")
            for i in range(api_calls):
                query = QUERIES[i % len(QUERIES)]
                add("in-process: search", _timed(lambda q=query: mem.search(q, agent="agent1")))
                add("remote client: search", _timed(lambda q=query: remote.search(q, agent="agent1")))
                add("in-process: remember", _timed(lambda i=i: mem.remember(f"fact {i}", agent="agent2", force=True)))
                add(
                    "remote client: remember",
                    _timed(lambda i=i: remote.remember(f"fact {i}", agent="agent2", force=True)),
                )
                add("in-process: count", _timed(lambda: mem.count(agent="agent2")))
                add("remote client: count", _timed(lambda: remote.count(agent="agent2")))
    finally:
        if proc is not None:  # also when a measurement failed: the server must not outlive the run
            proc.terminate()
            proc.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)

    rows = {name: _stats(values) for name, values in samples.items()}
    for name, seconds in cpu.items():
        rows[name]["cpu_ms"] = round(seconds * 1000, 1)
    for call in ("search", "remember", "count"):
        local, far = rows[f"in-process: {call}"], rows[f"remote client: {call}"]
        rows[f"REST overhead: {call}"] = {"p50_ms": round(far["p50_ms"] - local["p50_ms"], 1)}
        rows[f"remote client: {call}"]["calls_per_s"] = round(1000 / far["mean_ms"], 1)
    print(f"{'measure':36} {'n':>4} {'p50 ms':>9} {'p90 ms':>9} {'cpu ms':>8} {'calls/s':>8}")
    for name, row in rows.items():
        print(
            f"{name:36} {row.get('n', ''):>4} {row['p50_ms']:>9} {row.get('p90_ms', ''):>9} "
            f"{row.get('cpu_ms', ''):>8} {row.get('calls_per_s', ''):>8}"
        )
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_1min": os.getloadavg()[0],
        "seeded_memories": opts.seed,
        "cli_rounds": cli_rounds,
        "cli_timer": "hyperfine -N" if opts.hyperfine else "subprocess, interleaved",
        "bytecode": "compiled",
        "api_calls": api_calls,
    }
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"\nload {meta['load_1min']:.1f}; written to {opts.out}")


if __name__ == "__main__":
    main()

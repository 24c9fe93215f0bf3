"""Issue 27: the first searches after opening a store whose files are not in the OS page cache.

For each store of bench/tenants.py (built there, cached under ``~/.cache/engramdb-bench/tenants``; this bench
never builds one): the store's files are synced and dropped from the page cache (``posix_fadvise(DONTNEED)``,
these files only; ``--cached`` skips it), what is still resident is checked with ``mincore``, and a fresh process
(``--src`` chooses the code: a copy of another tree's ``src/``) opens the store and measures ``Engram(...)``'s
time, the single first search, the first five (their median), the p50 of ``--questions`` more (``later``: after
the open's warm-up finished and 10 unmeasured searches) and the warm p50 (the same questions asked again, so every
page they read is in the cache: the reference the first searches are compared with), each with the process's CPU,
the bytes it read from the disk (``/proc/self/io``) and its major page faults. ``--trace`` also prints which files
(and, for the database, which tables and indexes: a page map from SQLite's ``dbstat``, made once per store, cached
in ``/tmp``) each of the first searches brought into the page cache, by ``mincore`` before and after it (with
``--no-readahead`` the open reads nothing ahead, so what a search needs shows alone).

    python bench/cold.py --memories 100000 --scopes agent,user --runs 2 --label now
    python bench/cold.py --memories 100000 --tenants 50 --trace --no-readahead
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _report import write_json
from _residency import PAGE, evict, resident, resident_bytes, store_files

CACHE = Path.home() / ".cache" / "engramdb-bench" / "tenants"
MAPS = Path("/tmp/cold-maps")
_DB_PAGE = 8192


def _dir(memories: int, scope: str, n: int) -> Path:
    return CACHE / (f"{memories}-{n}" if scope == "agent" else f"{memories}-u{n}")


def _owner(scope: str, n: int, i: int) -> str:
    return f"{'t' if scope == 'agent' else 'u'}{i % n}"


def page_map(directory: Path) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Per database page (8 KiB, from 1), the index into the returned names of the table or index it belongs to."""
    cached = MAPS / f"{directory.name}.npz"
    if cached.exists():
        got = np.load(cached)
        return list(got["names"]), got["owner"]
    conn = sqlite3.connect(f"file:{directory / 'engram.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, pageno FROM dbstat").fetchall()
    finally:
        conn.close()
    names = sorted({r[0] for r in rows})
    index = {n: i for i, n in enumerate(names)}
    owner = np.full(max(r[1] for r in rows) + 1, -1, dtype=np.int32)
    for name, pageno in rows:
        owner[pageno] = index[name]
    MAPS.mkdir(exist_ok=True)
    np.savez(cached, names=np.array(names), owner=owner)
    return names, owner


def _io() -> tuple[int, int]:
    """Bytes this process had read from the disk, and its major page faults."""
    read = 0
    with open("/proc/self/io", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("read_bytes:"):
                read = int(line.split()[1])
    return read, resource.getrusage(resource.RUSAGE_SELF).ru_majflt


def _sched() -> tuple[int, int]:
    """The calling thread's time on a CPU and waiting for one (ns, /proc/thread-self/schedstat)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as fh:
            run, wait, _ = fh.read().split()
        return int(run), int(wait)
    except (OSError, ValueError):
        return 0, 0


def _snapshot(files: list[Path]) -> dict[Path, np.ndarray[Any, Any]]:
    return {p: resident(p) for p in files}


def _diff(before: dict[Path, Any], after: dict[Path, Any], directory: Path, pmap: Any) -> dict[str, int]:
    """OS pages brought in between two snapshots, per file (the database's per table or index)."""
    out: dict[str, int] = {}
    for path, now in after.items():
        old = before.get(path, np.zeros(0, dtype=bool))
        new = now.copy()
        new[: min(len(old), len(new))] &= ~old[: len(new)]
        if not new.any():
            continue
        rel = str(path.relative_to(directory))
        if path.name == "engram.db" and pmap is not None:
            names, owner = pmap
            pages = np.flatnonzero(new) * PAGE // _DB_PAGE + 1
            for db_page in np.unique(pages):
                name = names[owner[db_page]] if db_page < len(owner) and owner[db_page] >= 0 else "(new pages)"
                out[f"db:{name}"] = out.get(f"db:{name}", 0) + 1
        else:
            out[rel.rsplit("/", maxsplit=1)[-1]] = int(new.sum()) * PAGE // 4096
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def timeline(directory: Path, open_store: Any, seconds: float = 6.0) -> dict[str, Any]:
    """How soon after ``open_store()`` (no search) each table's pages are in the page cache: the seconds at which
    50 / 90 / 99 % of them were resident, polled with ``mincore`` every 50 ms (None: not within ``seconds``)."""
    names, owner = page_map(directory)
    db = directory / "engram.db"
    wanted = {n: np.flatnonzero(owner == names.index(n)) for n in ("vectors", "memories", "history") if n in names}
    marks = (0.5, 0.9, 0.99)
    reached: dict[str, dict[str, float | None]] = {n: {str(m): None for m in marks} for n in wanted}
    t0 = time.perf_counter()
    mem = open_store()
    opened = time.perf_counter() - t0
    try:
        while time.perf_counter() - t0 < seconds:
            now = time.perf_counter() - t0
            flags = resident(db)
            for n, pages in wanted.items():
                # Database page p (from 1) is OS pages (p - 1) * 2 and the next (8 KiB pages, 4 KiB OS pages).
                first = (pages - 1) * (_DB_PAGE // PAGE)
                first = first[first < flags.size]
                share = float(flags[first].mean()) if first.size else 0.0
                for m in marks:
                    if share >= m and reached[n][str(m)] is None:
                        reached[n][str(m)] = round(now, 3)
            if all(v is not None for r in reached.values() for v in r.values()):
                break
            time.sleep(0.05)
    finally:
        mem.close()
    return {"open_s": opened, "resident_at_s": reached}


def child(args: argparse.Namespace) -> None:
    """One store, opened in this fresh process: prints its measures as one JSON line."""
    from _data import load_locomo
    from engramdb import Engram
    from engramdb.storage import sqlite as sqlite_mod

    scope, n = args.scope, args.n
    directory = _dir(args.memories, scope, n)
    if args.no_readahead:
        sqlite_mod.read_ahead = lambda *a, **k: 0  # type: ignore[attr-defined]
        sqlite_mod.read_ahead_open = lambda *a, **k: 0  # type: ignore[attr-defined]
        if hasattr(sqlite_mod.SQLiteBackend, "_read_ahead"):
            sqlite_mod.SQLiteBackend._read_ahead = lambda self: None  # type: ignore[attr-defined]
    if args.timeline:
        print(json.dumps(timeline(directory, lambda: Engram(directory, embedder="static", vectors="sync"))))
        return
    qtexts = [q.text for c in load_locomo() for q in c.questions][: 15 + args.questions]
    files = store_files(directory)
    pmap = page_map(directory) if args.trace else None
    out: dict[str, Any] = {"resident_at_open": resident_bytes(files)[0]}
    t0, m0 = time.perf_counter(), time.monotonic()
    mem = Engram(directory, embedder="static", vectors="sync")
    out["open_s"] = time.perf_counter() - t0
    try:
        mem.embedder.embed(qtexts)  # cached: the query embedding is excluded below
        plain = mem._plain_store.search

        def ask(i: int) -> dict[str, float]:
            r0, f0 = _io()
            s0 = _sched()
            c0, w0, h0 = time.process_time(), time.perf_counter(), time.thread_time()
            if scope == "agent":
                mem.search(qtexts[i], agent=_owner(scope, n, i), limit=10)
            else:
                mem.search(qtexts[i], agent="a", user=_owner(scope, n, i), limit=10)
            w1, c1, h1 = time.perf_counter(), time.process_time(), time.thread_time()
            s1 = _sched()
            r1, f1 = _io()
            ms = 1000 * (w1 - w0)
            # Off a CPU and not waiting for one: the disk, a lock, the keyword worker (the load does not count here).
            blocked = ms - (s1[0] - s0[0] + s1[1] - s0[1]) / 1e6
            cpu = 1000 * (c1 - c0)
            # The searching thread's own CPU (the keyword channel's worker excluded): the rest of ``cpu`` is the
            # process's other threads meanwhile (the open's warm-up and read-ahead, the keyword worker).
            own = 1000 * (h1 - h0)
            return {
                "ms": ms,
                "cpu": cpu,
                "thread_cpu": own,
                "read_kb": (r1 - r0) / 1024,
                "majflt": f1 - f0,
                "blocked": blocked,
            }

        first = []
        traces = []
        for i in range(5):
            before = _snapshot(files) if args.trace else {}
            first.append(ask(i))
            if args.trace:
                traces.append(_diff(before, _snapshot(files), directory, pmap))
        out["first_at_s"] = time.perf_counter() - t0 - sum(f["ms"] for f in first) / 1000
        out["first"] = first
        if traces:
            out["trace"] = traces
        deadline = time.monotonic() + 120
        while "tenants" not in plain.warmed and time.monotonic() < deadline:
            time.sleep(0.05)
        plain.keyword_index.wait(60)
        out["ready_s"] = {k: v - m0 for k, v in plain.warmed.items()}
        for i in range(5, 15):
            ask(i)
        later = [ask(i) for i in range(15, 15 + args.questions)]
        out["later"] = {k: statistics.median(w[k] for w in later) for k in later[0]}
        # The same questions again: every page they read is in the cache now (the warm reference).
        warm = [ask(i) for i in range(15, 15 + args.questions)]
        out["warm"] = {k: statistics.median(w[k] for w in warm) for k in warm[0]}
        out["resident_at_end"] = resident_bytes(files)[0]
    finally:
        mem.close()
    print(json.dumps(out))


def run_one(args: argparse.Namespace, memories: int, scope: str, n: int, src: str) -> dict[str, Any]:
    directory = _dir(memories, scope, n)
    if not (directory / "done").exists():
        raise SystemExit(f"{directory}: not built (python bench/tenants.py --memories {memories} builds it)")
    if args.trace or args.timeline:
        page_map(directory)  # reads the whole database once: made before the eviction
    left, total = (0, 0) if args.cached else evict(directory)
    time.sleep(args.settle)
    cmd = [sys.executable, __file__, "--child", "--memories", str(memories), "--scope", scope, "--n", str(n),
           "--questions", str(args.questions)]  # fmt: skip
    cmd += ["--trace"] if args.trace else []
    cmd += ["--no-readahead"] if args.no_readahead else []
    cmd += ["--timeline"] if args.timeline else []
    env = {**os.environ, "PYTHONPATH": src}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"child failed: {proc.stderr[-3000:]}")
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    res["evicted_left_bytes"], res["files_bytes"] = left, total
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", default="100000")
    parser.add_argument("--tenants", default="1,50,1000")
    parser.add_argument("--scopes", default="agent")
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--src", default="", help="comma-separated src/ trees to alternate (default: PYTHONPATH)")
    parser.add_argument("--cached", action="store_true", help="do not evict (the files' pages stay as they are)")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between the eviction and the open")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--no-readahead", action="store_true")
    parser.add_argument("--timeline", action="store_true", help="no searches: when the tables' pages are resident")
    parser.add_argument("--label", default="now")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scope", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.memories = int(args.memories)
        child(args)
        return
    srcs = [s for s in args.src.split(",") if s] or [os.environ.get("PYTHONPATH", "")]
    spreads = [(s, int(n)) for s in args.scopes.split(",") for n in args.tenants.split(",")]
    results: list[dict[str, Any]] = []
    load0 = os.getloadavg()[0]
    for memories in (int(m) for m in args.memories.split(",")):
        for run in range(args.runs):
            for scope, n in spreads:
                for src in srcs:
                    res = run_one(args, memories, scope, n, src)
                    res.update(memories=memories, scope=scope, n=n, src=src, run=run, load=os.getloadavg()[0])
                    results.append(res)
                    if args.timeline:
                        print(
                            f"{memories} {n} {scope}s [{Path(src).parent.name or src}] open {res['open_s']:.2f} s; "
                            f"resident (s from the open's start, at 50/90/99 %): {res['resident_at_s']}; "
                            f"load {res['load']:.1f}",
                            flush=True,
                        )
                        continue
                    f, w = res["first"], res["warm"]
                    med = statistics.median(x["ms"] for x in f)
                    blocked = " / ".join(f"{x['blocked']:.0f}" for x in f)
                    print(
                        f"{memories} {n} {scope}s [{Path(src).parent.name or src}] open {res['open_s']:.2f} s; first "
                        f"{f[0]['ms']:.1f} ms ({f[0]['ms'] / w['ms']:.1f}x; cpu {f[0]['cpu']:.1f}); first-5 median "
                        f"{med:.1f} ({med / w['ms']:.1f}x); first-5 blocked {blocked}; later p50 "
                        f"{res['later']['ms']:.1f}; warm p50 {w['ms']:.2f} (cpu {w['cpu']:.1f}); evicted, left "
                        f"{res['evicted_left_bytes'] / 1e6:.1f} of {res['files_bytes'] / 1e6:.0f} MB; "
                        f"load {res['load']:.1f}",
                        flush=True,
                    )
                    for i, t in enumerate(res.get("trace", [])):
                        print(f"   search {i + 1} brought in (4 KiB pages): {t}", flush=True)
    out = {"args": vars(args), "load": f"{load0:.1f}-{os.getloadavg()[0]:.1f}", "results": results}
    write_json(Path(__file__).parent / "results" / f"cold_{args.label}.json", out)


if __name__ == "__main__":
    main()

"""The first searches after a PostgreSQL server starts, against the steady ones: code A and code B alternated.

``bench/scale_pg.py`` times ``Engram.search`` on a fresh ``Engram`` right after it restarted the server, and its
interleaved pass later in the same run is faster (bench/RESULTS.md, issue 26). This bench isolates that: for each
round and each source tree (``--src name=path``, alternated, order swapped each round) it restarts the kept server
(``--resume``, a data directory ``scale_pg.py --keep`` left: its shared buffers empty, the OS page cache as it is),
opens ``Engram(url)`` in a new process on that tree, and times ``--passes`` passes over the same questions (each
question under agent ``i % agents``, limit 10, the query vector precomputed): pass 1 is the first minute of a
process on a freshly started server, the later passes its steady state. Per pass: ``Engram.search`` p50 / p95 /
mean, the vector and keyword channels' p50 as they ran inside it, the client's and the server's CPU per search (far
steadier than wall time on a loaded machine), and the open's seconds. The load average is
written beside every figure.

    nice -n 10 python bench/pg_first_pass.py --resume DIR --src base=/tmp/base/src,new=src --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
RESULTS_DIR = BENCH / "results"


def _server_cpu(postmaster: int) -> float:
    """CPU seconds (user + system) of the server's processes: the postmaster's children, read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        # After the command's closing parenthesis: state, ppid, ..., utime and stime (fields 14 and 15 of stat).
        if int(fields[1]) == postmaster or int(entry.name) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _child(spec_path: str) -> None:
    """Run in a fresh process on the tree under test: open, then time the passes; print one JSON line."""
    import functools
    import threading

    from engramdb import Engram

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    data = np.load(spec["vectors"])
    queries: list[str] = spec["queries"]
    vectors = {q: data[i] for i, q in enumerate(queries)}

    class Embedder:
        model_id = spec["model_id"]
        dim = int(data.shape[1])

        def embed(self, texts: list[str]) -> Any:
            return np.vstack([vectors[t] for t in texts]).astype(np.float32)

    phases: dict[str, list[float]] = {}
    lock = threading.Lock()
    postmaster = int((Path(spec["data"]) / "postmaster.pid").read_text(encoding="utf-8").split()[0])

    def timed(obj: Any, name: str, label: str) -> None:
        inner = getattr(obj, name)

        @functools.wraps(inner)
        def call(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                with lock:
                    phases.setdefault(label, []).append((time.perf_counter() - t) * 1000)

        setattr(obj, name, call)

    t0 = time.perf_counter()
    mem = Engram(spec["url"], embedder=Embedder())  # type: ignore[arg-type]
    opened = time.perf_counter() - t0
    out: dict[str, Any] = {"open_s": round(opened, 3), "passes": []}
    try:
        search = mem._recall._searcher._store.search
        timed(search, "keyword_candidates", "keyword_channel")
        timed(search, "vector_candidates", "vector_channel")
        time.sleep(float(spec["pause"]))
        for _ in range(int(spec["passes"])):
            phases.clear()
            before = os.getloadavg()[0]
            cpu, server = time.process_time(), _server_cpu(postmaster)
            ms: list[float] = []
            for i, q in enumerate(queries):
                t = time.perf_counter()
                mem.search(q, agent=f"agent-{i % spec['agents']}", limit=10)
                ms.append((time.perf_counter() - t) * 1000)
            n = len(queries)
            entry: dict[str, Any] = {
                # CPU per search moves far less with the machine's load than wall time: the client process's (all
                # its threads) and the server's (every backend and worker of this server).
                "client_cpu_ms": round((time.process_time() - cpu) * 1000 / n, 2),
                "server_cpu_ms": round((_server_cpu(postmaster) - server) * 1000 / n, 2),
                "p50_ms": round(statistics.median(ms), 2),
                "p95_ms": round(float(np.percentile(ms, 95)), 2),
                "mean_ms": round(statistics.fmean(ms), 2),
                "first_ms": round(ms[0], 2),
                "first10_mean_ms": round(statistics.fmean(ms[:10]), 2),
            }
            for label, values in phases.items():
                entry[f"{label}_p50_ms"] = round(statistics.median(values), 2)
            entry["load1"] = [round(before, 2), round(os.getloadavg()[0], 2)]
            out["passes"].append(entry)
    finally:
        mem.close()
    print(json.dumps(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resume", required=True, help="a server data directory kept by scale_pg.py --keep")
    parser.add_argument("--src", required=True, help="name=path,... source trees alternated (path: holds engramdb/)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument(
        "--processes", type=int, default=1, help="processes one after the other per server start (2: a warm server)"
    )
    parser.add_argument(
        "--prewarm-extension",
        action="store_true",
        help="CREATE EXTENSION pg_prewarm in the store first (the store's warm-up then reads its hottest relations)",
    )
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between the open and the first search")
    parser.add_argument("--lme-questions", type=int, default=60)
    parser.add_argument("--embedding-cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "pg_first_pass.json")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    import scale_pg
    from engramdb.config import load_settings
    from engramdb.embeddings import make_embedder

    _, _, questions = scale_pg.load_turns(args.lme_questions, args.embedding_cache)
    rng = np.random.default_rng(7)  # scale_pg.py's choice of questions
    chosen = rng.choice(len(questions), size=min(args.queries, len(questions)), replace=False)
    queries = [questions[int(i)] for i in chosen]
    embedder = make_embedder(load_settings())
    trees = dict(item.split("=", 1) for item in args.src.split(","))
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "runs": []}
    with tempfile.TemporaryDirectory(prefix="pg-first-pass-") as scratch:
        vec_path = Path(scratch) / "vectors.npy"
        np.save(vec_path, np.asarray(embedder.embed(queries), dtype=np.float32))
        names = list(trees)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                server = scale_pg.start_server(None, Path(args.resume))
                try:
                    if args.prewarm_extension:
                        import psycopg

                        with psycopg.connect(server.url("scale"), autocommit=True) as conn:
                            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
                    spec = Path(scratch) / "spec.json"
                    spec.write_text(
                        json.dumps(
                            {
                                "url": server.url("scale"),
                                "data": str(Path(args.resume) / "data"),
                                "queries": queries,
                                "vectors": str(vec_path),
                                "model_id": embedder.model_id,
                                "agents": args.agents,
                                "passes": args.passes,
                                "pause": args.pause,
                            }
                        ),
                        encoding="utf-8",
                    )
                    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(trees[name]).resolve()), str(BENCH)])}
                    command = [
                        sys.executable,
                        __file__,
                        "--resume",
                        args.resume,
                        "--src",
                        args.src,
                        "--child",
                        str(spec),
                    ]
                    done = [
                        subprocess.run(
                            command,
                            capture_output=True,
                            text=True,
                            env=env,
                            check=False,
                        )
                        for _ in range(args.processes)
                    ]
                finally:
                    server.stop(keep=True)
                for p, child in enumerate(done):
                    if child.returncode != 0:
                        raise SystemExit(f"{name}: {child.stderr[-3000:]}")
                    run = {"round": r, "src": name, "process": p, **json.loads(child.stdout.strip().splitlines()[-1])}
                    results["runs"].append(run)
                    print(json.dumps(run), flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The cost of each embedding model (issue 21, models): query embedding, ingest rate, disk, side by side in one run.

For each embedder name (``--embedders``, default ``local,mpnet,mpnet:fp32``; ``mpnet`` (the int8 ONNX graph) and
``mpnet:fp32`` (numpy) need the ``mpnet`` extra):

- query embedding: every recall dev set question embedded alone, as a new search embeds it (p50 / p95 ms);
- ingest: ``remember_many`` of ``--turns`` LoCoMo turns into a store file, vectors written before the clock
  stops (``flush``), in memories/s;
- disk: that store's files (database, WAL, sidecars) after closing, per memory, and per 100k by proportion.

Each embedder is loaded (and the mpnet model unpacked) before its clock starts. Recall is bench/recall.py's.

    python bench/models.py                              # local, mpnet and mpnet:fp32, 300 turns
    python bench/models.py --embedders local --turns 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _data import load_locomo
from _recall_data import load_recall_set
from _report import write_json
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder

RESULTS = Path(__file__).resolve().parent / "results"


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(name: str, home: Path, turns: list[str], questions: list[str]) -> dict[str, Any]:
    settings = load_settings({}, home=str(home), embedder=name, embed_cache_size=0)
    embedder = make_embedder(settings)
    embedder.embed(["load the model first"])
    times = []
    for q in questions:
        started = time.perf_counter()
        embedder.embed([q])
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    with tempfile.TemporaryDirectory(prefix="models-bench-") as tmp:
        store = Path(tmp) / "store"
        store.mkdir()
        with Engram(str(store / "m.db"), home=str(home), embedder=embedder) as mem:
            started = time.perf_counter()
            mem.remember_many([{"content": t, "agent": "bench", "kind": "conversation"} for t in turns])
            mem.flush()
            seconds = time.perf_counter() - started
        size = _folder_bytes(store)
    return {
        "model_id": embedder.model_id,
        "dim": embedder.dim,
        "query_ms_p50": round(statistics.median(times), 1),
        "query_ms_p95": round(times[int(0.95 * (len(times) - 1))], 1),
        "queries": len(times),
        "ingest_per_s": round(len(turns) / seconds, 1),
        "turns": len(turns),
        "disk_bytes_per_memory": round(size / len(turns)),
        "disk_mb_per_100k": round(size / len(turns) * 100_000 / 1e6),
        "load_1min": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedders", default="local,mpnet,mpnet:fp32")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--home", type=Path, default=Path.home() / ".cache" / "engramdb-bench" / "home")
    parser.add_argument("--out", type=Path, default=RESULTS / "models.json")
    args = parser.parse_args(argv)
    turns = [d.content for c in load_locomo() for d in c.docs][: args.turns]
    questions = [q.text for q in load_recall_set().split("dev")]
    results = {name: measure(name, args.home, turns, questions) for name in args.embedders.split(",") if name}
    for name, row in results.items():
        print(name, row)
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

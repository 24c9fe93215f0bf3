"""The storage path of ``remember_many`` alone, as ``bench/compare.py`` measures it (used by ``bench/ingest.py``).

Every LoCoMo turn's vector is known before the clock starts (the benchmark's embedding cache file,
``~/.cache/engramdb-bench/embeddings.sqlite``, filled by ``bench/compare.py``; a text missing there is
embedded by the model first, outside the clock), so what is timed is validation, redaction, the rows,
FTS5, history, the audit chain and the background vector write: ``remember_many(kind="conversation")``
then ``flush()``, on real SQLite files. Two layouts: one store per conversation (compare.py's), and
every turn in one store.

``--trees name=SRC,...`` compares source trees (for example a copy of the tree before a change):
each run is a fresh process with that tree first on ``PYTHONPATH``, the trees alternate within each
round (and which goes first alternates between rounds), and the 1-minute load average is recorded
beside every run, so old and new see the same minutes of a shared machine.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _data import load_locomo

CACHE = Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"
LAYOUTS = ("per_conversation", "one_store")


def run_once(layout: str) -> dict[str, Any]:
    """One timed ingest of every LoCoMo turn in this process (whatever engramdb it imports)."""
    import engramdb
    from compare import Lookup  # here: it imports engramdb, which must come from the tree this run measures
    from engramdb import Engram
    from engramdb.config import load_settings
    from engramdb.embeddings import CachedEmbedder, make_embedder

    raw = make_embedder(load_settings())
    convs = [(c.sample_id, [(d.id, d.content) for d in c.docs]) for c in load_locomo()]
    texts = [t for _, docs in convs for _, t in docs]
    shared = CachedEmbedder(raw, size=0, path=CACHE)
    table = dict(zip(texts, shared.embed(texts), strict=True))
    shared.close()
    lookup = Lookup(raw, table)
    embedder = CachedEmbedder(lookup, size=50_000)
    groups = convs if layout == "per_conversation" else [("all", [d for _, docs in convs for d in docs])]
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="ingest-storage-") as tmp:
        start = time.perf_counter()
        for name, docs in groups:
            with Engram(Path(tmp) / name, embedder=embedder) as mem:
                items = [
                    {"content": t, "agent": "bench", "kind": "conversation", "metadata": {"turn": i}} for i, t in docs
                ]
                mem.remember_many(items)
                mem.flush()
        seconds = time.perf_counter() - start
    return {
        "engramdb": str(Path(engramdb.__file__).parent),
        "layout": layout,
        "memories": len(texts),
        "seconds": round(seconds, 3),
        "memories_per_s": round(len(texts) / seconds, 1),
        "load1": load,
        "misses": lookup.misses,
    }


def compare_trees(trees: dict[str, str], rounds: int) -> dict[str, Any]:
    """Interleaved runs of :func:`run_once` per tree and layout, each in a fresh process; medians per cell."""
    runs: list[dict[str, Any]] = []
    script = Path(__file__).with_name("ingest.py")
    for rnd in range(rounds):
        for layout in LAYOUTS:
            order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
            for name in order:
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([trees[name], str(script.parent)])}
                out = subprocess.run(
                    [sys.executable, str(script), "--storage-child", layout],
                    env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                run = {"tree": name, "round": rnd + 1, **json.loads(out.stdout.strip().splitlines()[-1])}
                runs.append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)
    summary = {
        layout: {
            name: {
                "median_per_s": statistics.median(r["memories_per_s"] for r in cell),
                "runs_per_s": [r["memories_per_s"] for r in cell],
                "load1": [r["load1"] for r in cell],
            }
            for name in trees
            if (cell := [r for r in runs if r["tree"] == name and r["layout"] == layout])
        }
        for layout in LAYOUTS
    }
    return {"trees": trees, "rounds": rounds, "summary": summary, "runs": runs}

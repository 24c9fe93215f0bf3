"""Related words on PostgreSQL: `Engram.search` with them on and off, alternated query by query (3 rounds).

Usage: python bench/pg_related_ab.py URL LME_QUESTIONS EMBEDDING_CACHE (a kept bench/scale_pg.py store, its
--lme-questions and --embedding-cache).
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import numpy as np

from _embedded_side import engram_search_of, settle
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from scale_pg import QueryEmbedder, load_turns

_texts, _base, questions = load_turns(int(sys.argv[2]), Path(sys.argv[3]))
rng = np.random.default_rng(7)
queries = [questions[int(i)] for i in rng.choice(len(questions), size=min(100, len(questions)), replace=False)]
qvecs = dict(zip(queries, make_embedder(load_settings()).embed(queries), strict=True))
mem = Engram(sys.argv[1], embedder=QueryEmbedder(qvecs))
mem.search(queries[0], agent="agent-0", limit=10)
settle(engram_search_of(mem))
hy = mem._recall._searcher
credit = hy.related_credit
times: dict[str, list[float]] = {"on": [], "off": []}
for rnd in range(3):
    for i, q in enumerate(queries):
        for mode in ("on", "off") if (i + rnd) % 2 == 0 else ("off", "on"):
            hy.related_credit = credit if mode == "on" else 0.0
            t0 = time.perf_counter()
            mem.search(q, agent=f"agent-{i % 10}", limit=10)
            times[mode].append(1000 * (time.perf_counter() - t0))
for k, v in times.items():
    v.sort()
    print(f"{k} p50 {statistics.median(v):.2f} p95 {v[int(0.95 * len(v))]:.2f} n {len(v)}")
mem.close()

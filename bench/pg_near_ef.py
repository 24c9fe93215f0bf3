"""How wide a near-duplicate lookup must search on PostgreSQL: ``hnsw.ef_search``, time and near-duplicates found.

A batch write checks each mergeable memory for near-duplicates (cosine >= 0.95) among its agent's memories of its kind
(``storage/_pg_nearest.py``, ``NEAR_EF_SEARCH``). On a kept server of bench/scale_pg.py (``--resume``), this takes
stored ``knowledge`` vectors, moves each a little (noise 0.01 a dimension), and looks up its 5 nearest under that
filter through the store's own lookup (``vector_candidates_many`` with ``near``) at several ``NEAR_EF_SEARCH`` values
and at a search's breadth: the time per lookup (round trip included), and how many of the near-duplicates an exact
scan of the filter's rows finds (cosine >= 0.95) each one finds too.

    nice -n 10 python bench/pg_near_ef.py --resume /tmp/pgwrite-1m --database scale
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres
from scale_pg import start_server


def run(args: Any) -> dict[str, Any]:
    import engramdb.storage._pg_nearest as nearest

    server = start_server(None, Path(args.resume))
    out: dict[str, Any] = {"args": vars(args)}
    try:
        url = server.url(args.database)
        with psycopg.connect(url, autocommit=True) as conn:
            register_vector(conn)
            sample = conn.execute(
                "SELECT v.embedding, m.agent FROM vectors v JOIN memories m ON m.id = v.memory_id "
                "WHERE m.kind = 'knowledge' AND m.rid %% %s = 0 LIMIT %s",
                (args.every, args.queries),
            ).fetchall()
        rng = np.random.default_rng(1)
        queries = []
        for emb, agent in sample:
            v = np.asarray(emb.to_numpy(), dtype=np.float32)
            v = v + rng.normal(scale=args.noise, size=v.shape).astype(np.float32)
            flt = Filter(agent=agent, kinds=("knowledge",), include_shared=False)
            queries.append((v / np.linalg.norm(v), flt))
        # The store's own lookups (the batch write's: one at a time here, to time each), and as truth the same
        # filters scanned exactly (a store whose exact-scan threshold is above its size).
        with open_postgres(url, pool_size=1, exact_search_below=10**12) as exact:
            truth = [
                {c.id for c in exact.search.vector_candidates(v, f, limit=5) if c.score >= args.threshold}
                for v, f in queries
            ]
        out["near_duplicates"] = sum(len(t) for t in truth)
        out["by_ef"] = {}
        with open_postgres(url, pool_size=1) as store:
            for ef in args.ef:
                nearest.NEAR_EF_SEARCH = ef  # type: ignore[misc]
                near = None if ef == 0 else args.threshold  # 0: as wide as a search (400-800)
                ms: list[float] = []
                found = 0
                for (v, f), t in zip(queries, truth, strict=True):
                    began = time.perf_counter()
                    got = store.search.vector_candidates_many([(v, f)], limit=5, near=near)[0]
                    ms.append((time.perf_counter() - began) * 1000)
                    found += len({c.id for c in got if c.score >= args.threshold} & t)
                label = "search breadth" if ef == 0 else str(ef)
                out["by_ef"][label] = {
                    "p50_ms": round(statistics.median(ms), 1),
                    "mean_ms": round(statistics.mean(ms), 1),
                    "found": found,
                }
                print(f"ef {label}: {out['by_ef'][label]} of {out['near_duplicates']}", flush=True)
    finally:
        server.stop(keep=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resume", required=True, help="a kept server directory of bench/scale_pg.py (--keep)")
    parser.add_argument("--database", default="scale")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--every", type=int, default=997, help="sample every n-th row (by rid)")
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200, 0, 40, 200], help="0: a search's breadth")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "pg_near_ef.json"))
    args = parser.parse_args(argv)
    result = run(args)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

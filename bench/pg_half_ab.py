"""A PostgreSQL store's vector search through full-precision and half-precision HNSW graphs (schema step 9), on one
store.

"old" orders each graph part by ``embedding::vector(dim)`` (the graphs before step 9), "new" by
``embedding::halfvec(dim)`` (the store's graphs since). The old graph is built beside the store's for the run
(``--build-full``; dropped after it unless ``--keep-full``). Measured, alternated question by question:

* server work: the vector statement a search sends (an agent's, depth 50; ``--kind`` adds a kind filter), captured
  from ``vector_candidates`` and run again under ``EXPLAIN (ANALYZE, TIMING OFF, BUFFERS)``: execution time, buffers
  found in shared buffers and buffers read;
* the vector channel and whole ``Engram.search`` calls (query vectors precomputed), old and new in one process;
* how many of old's top 10 new returns (the answers may differ where two graphs walk differently).

Usage, on a store kept by ``bench/scale_pg.py --keep`` and started by hand, migrated to step 9:
``python bench/pg_half_ab.py --url postgresql://postgres@127.0.0.1:PORT/scale --embedding-cache FILE --build-full``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_pg as sp
from _report import spread
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.storage import _pg_nearest as nearest
from engramdb.storage.base import Filter

NEW_ORDER = nearest.graph_order
FULL_GRAPH = "bench_full_precision_graph"


def old_order(model: Any) -> sql.Composable:
    """The graphs' order before schema step 9."""
    return sql.SQL("v.embedding::vector({dim}) <=> %s::vector({dim})").format(dim=sql.Literal(model.dim))


FORMS = {"old": old_order, "new": NEW_ORDER}


def explain(conn: psycopg.Connection[Any], statement: str, params: Any, settings: Any) -> tuple[float, int, int]:
    """Execution ms, buffers hit and read of ``statement`` under the search's HNSW settings."""
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', %s, false)", settings[:2]
    )
    rows = [str(r[0]) for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) " + statement, params)]
    text = "\n".join(rows)
    found = re.search(r"Execution Time: ([\d.]+)", text)
    top = next(r for r in rows if "Buffers" in r)
    hit, read = re.search(r"shared hit=(\d+)", top), re.search(r"read=(\d+)", top)
    return (
        float(found.group(1)) if found else 0.0,
        int(hit.group(1)) if hit else 0,
        int(read.group(1)) if read else 0,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--embedding-cache", required=True)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--kind", action="store_true", help="searches filtered by agent and kind")
    parser.add_argument("--build-full", action="store_true", help="build the full-precision graph for the run")
    parser.add_argument("--keep-full", action="store_true", help="leave the full-precision graph on the store")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    _, _, questions = sp.load_turns(60, Path(args.embedding_cache))
    rng = np.random.default_rng(7)
    queries = [questions[int(i)] for i in rng.choice(len(questions), size=args.questions, replace=False)]
    qv = dict(zip(queries, make_embedder(load_settings()).embed(queries), strict=True))
    admin = psycopg.connect(args.url, autocommit=True)
    register_vector(admin)
    if args.build_full:
        model, dim = admin.execute("SELECT model_id, dim FROM vector_indexes").fetchone() or ("", 0)
        started = time.perf_counter()
        admin.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON vectors "
                "USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
                "WHERE model_id = {model} AND dim = {dim}"
            ).format(name=sql.Identifier(FULL_GRAPH), dim=sql.Literal(dim), model=sql.Literal(model))
        )
        print(f"full-precision graph built in {time.perf_counter() - started:.1f} s", flush=True)

    def flt_of(i: int) -> Filter:
        return Filter(agent=f"agent-{i % args.agents}", kinds=("knowledge",) if args.kind else None)

    # What each form's statement is, captured as the store sends it.
    captured: dict[str, list[tuple[str, Any, Any]]] = {name: [] for name in FORMS}
    original = psycopg.Connection.execute
    settings: list[Any] = [None]
    sink: list[tuple[str, Any, Any]] = []

    def recording(self: Any, query: Any, params: Any = None, *rest: Any, **kw: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self)
        if text.startswith("SELECT set_config('hnsw.ef_search'"):
            settings[0] = params
        elif text.startswith("SELECT * FROM ((SELECT"):
            sink.append((text, params, settings[0]))
        return original(self, query, params, *rest, **kw)

    mem = Engram(args.url, embedder=sp.QueryEmbedder(qv))
    search = mem._plain_store.search  # the store's channels, as hybrid search calls them
    times: dict[str, dict[str, list[float]]] = {name: {"vector": [], "search": []} for name in FORMS}
    overlap = 0
    load = [sp.load1()]
    try:
        for form in FORMS.values():  # both graphs read once before timing
            nearest.graph_order = form
            for i, q in enumerate(queries[:20]):
                search.vector_candidates(qv[q], flt_of(i), limit=50)
        for r in range(args.rounds):
            for i, q in enumerate(queries):
                top: dict[str, list[str]] = {}
                for name in ("old", "new") if (i + r) % 2 == 0 else ("new", "old"):
                    nearest.graph_order = FORMS[name]
                    psycopg.Connection.execute = recording  # type: ignore[method-assign]
                    sink.clear()
                    started = time.perf_counter()
                    found = search.vector_candidates(qv[q], flt_of(i), limit=50)
                    times[name]["vector"].append((time.perf_counter() - started) * 1000)
                    psycopg.Connection.execute = original  # type: ignore[method-assign]
                    if r == 0:
                        captured[name].extend(sink)
                    top[name] = [c.id for c in found[:10]]
                    started = time.perf_counter()
                    mem.search(q, agent=flt_of(i).agent, kind="knowledge" if args.kind else None, limit=10)
                    times[name]["search"].append((time.perf_counter() - started) * 1000)
                overlap += len(set(top["old"]) & set(top["new"]))
        load.append(sp.load1())
        server: dict[str, list[tuple[float, int, int]]] = {name: [] for name in FORMS}
        for k in range(len(captured["old"])):
            for name in ("old", "new") if k % 2 == 0 else ("new", "old"):
                statement, params, hnsw = captured[name][k]
                server[name].append(explain(admin, statement, params, hnsw))
        load.append(sp.load1())
    finally:
        psycopg.Connection.execute = original  # type: ignore[method-assign]
        nearest.graph_order = NEW_ORDER
        mem.close()
        if args.build_full and not args.keep_full:
            admin.execute(sql.SQL("DROP INDEX IF EXISTS {name}").format(name=sql.Identifier(FULL_GRAPH)))
    out = {
        "questions": len(queries),
        "rounds": args.rounds,
        "kind": args.kind,
        "load1": load,
        "top10_agreement": round(overlap / (10 * len(queries) * args.rounds), 4),
    }
    for name in FORMS:
        out[name] = {
            "vector_channel_ms": spread(times[name]["vector"]),
            "engram_search_ms": spread(times[name]["search"]),
            "statement_execution_ms": spread([s[0] for s in server[name]]),
            "buffers_hit_p50": statistics.median(s[1] for s in server[name]),
            "buffers_read_p50": statistics.median(s[2] for s in server[name]),
        }
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

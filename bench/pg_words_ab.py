"""The keyword channel of a PostgreSQL store with and without ``memory_words`` (schema step 8), on one store.

"old" ranks every arm of the visibility rule from ``memories`` through ``memories_agent_tsv`` (created for the run and
dropped after it, as step 8 leaves the store); "new" ranks the reader's own matches from ``memory_words``. Both send
the same statement shape otherwise. Measured, alternated question by question:

* server work: each keyword statement a search sends (the question's words, depth 50), captured from
  ``keyword_candidates`` and run again under ``EXPLAIN (ANALYZE, TIMING OFF, BUFFERS)``: execution time and buffers;
* whole ``Engram.search`` calls (query vectors precomputed), old and new in one process.

Answers must be identical (checked). Usage, on a store kept by ``bench/scale_pg.py --keep`` and started by hand:
``python bench/pg_words_ab.py --url postgresql://postgres@127.0.0.1:PORT/scale --embedding-cache FILE``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_pg as sp
from _report import spread
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.retrieval.text import query_terms
from engramdb.storage import _pg_search as pg_search
from engramdb.storage.base import Filter
from engramdb.storage.postgres import PostgresBackend

NEW_ARMS = pg_search._visible_arms


def old_arms(flt: Filter, f: Any, *, indexed: bool) -> list[tuple[str, str, str, tuple[Any, ...]]]:
    """The same arms, every one read from ``memories``."""
    return [
        ("memories m" if source.startswith("memory_words") else source, "m", where.replace("w.", "m."), params)
        for source, _, where, params in NEW_ARMS(flt, f, indexed=indexed)
    ]


def statements(url: str, queries: list[str], agents: int) -> dict[str, list[tuple[str, Any]]]:
    """The keyword statements each form sends for ``queries`` (after the store's lexeme sample is taken)."""
    backend = PostgresBackend(url, pool_size=1)
    captured: list[tuple[str, Any]] = []
    execute = psycopg.Connection.execute

    def capture(self: Any, query: Any, params: Any = None, *a: Any, **k: Any) -> Any:
        if "ts_rank_cd" in str(query):
            captured.append((str(query), params))
        return execute(self, query, params, *a, **k)

    out: dict[str, list[tuple[str, Any]]] = {}
    try:
        backend.search.keyword_candidates(["warm"], Filter(agent="agent-0"), limit=50)
        backend.search.lexemes.wait(120)  # type: ignore[attr-defined]
        psycopg.Connection.execute = capture  # type: ignore[method-assign]
        for name, arms in (("old", old_arms), ("new", NEW_ARMS)):
            pg_search._visible_arms = arms  # type: ignore[assignment]
            captured.clear()
            answers = [
                [(c.id, c.score) for c in backend.search.keyword_candidates(query_terms(q), flt, limit=50)]
                for i, q in enumerate(queries)
                for flt in (Filter(agent=f"agent-{i % agents}"),)
            ]
            out[name] = list(captured)
            out[name + "_answers"] = answers  # type: ignore[assignment]
    finally:
        psycopg.Connection.execute = execute  # type: ignore[method-assign]
        pg_search._visible_arms = NEW_ARMS
        backend.close()
    return out


def explained(conn: psycopg.Connection[Any], statement: str, params: Any) -> tuple[float, int]:
    text = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, TIMING OFF, BUFFERS) " + statement, params))
    found = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", text)
    buffers = int(found.group(1)) + int(found.group(2) or 0) if found else 0
    ms = re.search(r"Execution Time: ([\d.]+)", text)
    return (float(ms.group(1)) if ms else 0.0), buffers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--embedding-cache", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    _, _, questions = sp.load_turns(60, args.embedding_cache)
    rng = np.random.default_rng(7)
    queries = [questions[int(i)] for i in rng.choice(len(questions), size=args.questions, replace=False)]
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load1_before": sp.load1()}
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute("CREATE INDEX IF NOT EXISTS memories_agent_tsv ON memories USING gin (agent, tsv)")
        try:
            sent = statements(args.url, queries, args.agents)
            assert sent["old_answers"] == sent["new_answers"], "old and new answers differ"
            server: dict[str, list[tuple[float, int]]] = {"old": [], "new": []}
            for r in range(args.rounds):
                for i, (old, new) in enumerate(zip(sent["old"], sent["new"], strict=True)):
                    for name, (statement, params) in (("old", old), ("new", new))[:: 1 if (i + r) % 2 else -1]:
                        server[name].append(explained(conn, statement, params))
            result["server"] = {
                name: {"execution_ms": spread([t for t, _ in v]), "buffers": spread([float(b) for _, b in v])}
                for name, v in server.items()
            }
            result["statements"] = len(sent["new"])
            emb = make_embedder(load_settings())
            vectors = dict(zip(queries, emb.embed(queries), strict=True))
            mem = Engram(args.url, embedder=sp.QueryEmbedder(vectors))  # type: ignore[arg-type]
            times: dict[str, list[float]] = {"old": [], "new": []}
            try:
                for q in queries[:10]:
                    mem.search(q, agent="agent-0", limit=10)
                for r in range(args.rounds):
                    for i, q in enumerate(queries):
                        for name in ("old", "new")[:: 1 if (i + r) % 2 else -1]:
                            pg_search._visible_arms = old_arms if name == "old" else NEW_ARMS  # type: ignore[assignment]
                            start = time.perf_counter()
                            mem.search(q, agent=f"agent-{i % args.agents}", limit=10)
                            times[name].append((time.perf_counter() - start) * 1000)
            finally:
                pg_search._visible_arms = NEW_ARMS
                mem.close()
            result["engram_search_ms"] = {name: spread(v) for name, v in times.items()}
        finally:
            conn.execute("DROP INDEX IF EXISTS memories_agent_tsv")
    result["load1_after"] = sp.load1()
    print(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

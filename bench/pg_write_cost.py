"""What one memory's write costs the PostgreSQL server, by schema variant, alternated batch by batch on one server.

The write path's server side is the schema's: the rows a batch writes (memories, tags, history, a staged vector) and
what the triggers, foreign keys and indexes add to them. This bench copies a kept store (``bench/scale_pg.py
--keep``) into one database per variant on the same server (``CREATE DATABASE ... TEMPLATE``), changes each copy
by its variant's SQL, then writes batches of real turns into them in turn (variant A's batch, B's, ..., again),
each batch one transaction as the store writes it (one ``COPY`` per table, foreign keys and triggers firing), and
reports per variant: memories/s of the batches (p50 and mean), WAL bytes a memory (and of them, full page images:
a page's first change after a checkpoint writes the whole page), and blocks read from outside the server's buffers a
memory. Client code and rows are the same for every variant: only the schema differs.

Variants: ``asis`` (the store as kept), ``step12`` (schema step 12 of this code applied to a step-11 store), and
``step12-<name>`` with one more change from :data:`EXTRA` (measured only, never a schema step).

    python bench/pg_write_cost.py --resume DIR --variants asis,step12 --batches 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_pg as sp
from _pg_bulk import MEM_COLS, MODEL_ID
from engramdb.storage._checks import as_unit_rows
from engramdb.storage._codecs import created_history, memory_row, tag_rows
from engramdb.storage._pg_schema import MIGRATIONS

#: Changes on top of step 12, to see what else a write pays for (by name after ``step12-``).
EXTRA: dict[str, str] = {
    # The GIN index of ``memories`` (others' open rows and searches without a reader find their matches by it).
    "nogin": "DROP INDEX memories_tsv",
    # The foreign key of staged vectors (a key-share lock on the memory's row for each staged vector).
    "nostagedfk": "ALTER TABLE vectors_staged DROP CONSTRAINT vectors_staged_memory_id_fkey",
}


def _variant_sql(name: str) -> str:
    step12 = next(m.script for m in MIGRATIONS if m.version == 12)
    if name == "asis":
        return ""
    if name == "step12":
        return step12 + "; UPDATE engram_schema SET version = 12"
    if name.startswith("step12-"):
        return step12 + "; UPDATE engram_schema SET version = 12; " + EXTRA[name.removeprefix("step12-")]
    raise SystemExit(f"unknown variant {name!r}")


def _write(conn: Any, memories: list[Any], vecs: Any) -> None:
    unit = as_unit_rows(vecs, rows=len(memories))
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(f"COPY memories ({MEM_COLS}) FROM STDIN") as cp:
            for m in memories:
                cp.write_row(memory_row(m))
        with cur.copy("COPY memory_tags (memory_id, tag) FROM STDIN") as cp:
            for m in memories:
                for row in tag_rows(m.id, m.tags):
                    cp.write_row(row)
        with cur.copy("COPY history (memory_id, action, at, actor, before, after) FROM STDIN") as cp:
            for m in memories:
                cp.write_row(created_history(m, actor="bench"))
        copy_staged = (
            "COPY vectors_staged (memory_id, agent, open, model_id, dim, embedding) FROM STDIN WITH (FORMAT BINARY)"
        )
        with cur.copy(copy_staged) as cp:
            cp.set_types(["text", "text", "bool", "text", "int4", "vector"])
            for m, v in zip(memories, unit, strict=True):
                cp.write_row((m.id, m.agent, m.visibility != "private", MODEL_ID, int(v.shape[0]), v))


def _counter(conn: Any) -> tuple[int, int, int]:
    """WAL inserted so far (bytes), the database's blocks read from outside the shared buffers, and the server's full
    page images written to WAL so far (a page's first change after a checkpoint; the server's, not the database's)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn, (SELECT blks_read FROM pg_stat_database "
        "WHERE datname = current_database()), (SELECT wal_fpi FROM pg_stat_wal)"
    ).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def run(args: Any) -> dict[str, Any]:
    import psycopg
    from pgvector.psycopg import register_vector

    texts, base, _ = sp.load_turns(args.lme_questions, Path(args.embedding_cache) if args.embedding_cache else None)
    variants = [v for v in args.variants.split(",") if v]
    server = sp.start_server(None, Path(args.resume))
    out: dict[str, Any] = {"args": vars(args), "at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            for v in variants:
                name = f"cost_{v.replace('-', '_')}"
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                t = time.perf_counter()
                conn.execute(f"CREATE DATABASE {name} TEMPLATE {args.database}")
                print(f"{name}: copied in {time.perf_counter() - t:.0f}s", flush=True)
        conns = {}
        for v in variants:
            c = psycopg.connect(server.url(f"cost_{v.replace('-', '_')}"), autocommit=True)
            if _variant_sql(v):
                c.execute(_variant_sql(v))
            c.execute("VACUUM ANALYZE")
            register_vector(c)
            conns[v] = c
        rng = np.random.default_rng(11)
        per: dict[str, dict[str, list[float]]] = {v: {"s": [], "wal": [], "read": [], "fpi": []} for v in variants}
        for b in range(args.batches):
            start = args.offset + b * args.batch
            memories, vecs = sp.make_batch(texts, base, start, args.batch, args.agents, rng, args)
            # Each variant writes the same rows (ids are new per database); the order rotates batch by batch.
            order = variants[b % len(variants) :] + variants[: b % len(variants)]
            for v in order:
                conn = conns[v]
                wal0, read0, fpi0 = _counter(conn)
                t = time.perf_counter()
                _write(conn, memories, vecs)
                took = time.perf_counter() - t
                wal1, read1, fpi1 = _counter(conn)
                per[v]["s"].append(took)
                per[v]["wal"].append((wal1 - wal0) / args.batch)
                per[v]["read"].append((read1 - read0) / args.batch)
                per[v]["fpi"].append((fpi1 - fpi0) / args.batch)
            if b % 5 == 4:
                print(f"  {b + 1} batches, load1 {sp.load1()}", flush=True)
        out["load1_after"] = sp.load1()
        out["variants"] = {
            v: {
                "memories_per_s_p50": round(args.batch / statistics.median(r["s"]), 1),
                "memories_per_s_mean": round(args.batch * len(r["s"]) / sum(r["s"]), 1),
                "wal_bytes_per_memory_p50": round(statistics.median(r["wal"])),
                "blocks_read_per_memory_mean": round(statistics.fmean(r["read"]), 2),
                "full_page_images_per_memory_mean": round(statistics.fmean(r["fpi"]), 2),
                "batches": len(r["s"]),
            }
            for v, r in per.items()
        }
        for v, row in out["variants"].items():
            print(f"{v}: {row}", flush=True)
        for c in conns.values():
            c.close()
        if not args.keep_copies:
            with psycopg.connect(server.url(), autocommit=True) as conn:
                for v in variants:
                    conn.execute(f"DROP DATABASE IF EXISTS cost_{v.replace('-', '_')}")
    finally:
        server.stop(keep=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resume", required=True, help="a server directory kept by scale_pg.py --keep (a copy)")
    parser.add_argument("--database", default="scale")
    parser.add_argument("--variants", default="asis,step12")
    parser.add_argument("--batches", type=int, default=20, help="batches per variant")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--offset", type=int, default=5_000_000, help="where the written turns start")
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--lme-questions", type=int, default=20)
    parser.add_argument("--blend", type=float, default=0.35)
    parser.add_argument("--noise", type=float, default=0.25)
    parser.add_argument("--embedding-cache", default=None)
    parser.add_argument("--keep-copies", action="store_true", help="keep the variants' databases")
    parser.add_argument("--out", default="bench/results/pg_write_cost.json")
    args = parser.parse_args()
    out = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Many writer processes on one PostgreSQL store: ``remember_many`` throughput, nothing lost, searches meanwhile.

Starts a private PostgreSQL server (durable settings: fsync and synchronous_commit on, as
bench/scale_pg.py), bulk-loads ``--base`` memories (bench/_pg_bulk.py: the store's own rows
by COPY), then measures:

* idle search latency: ``Engram.search`` p50/p95 from one process (query vectors precomputed);
* ``--writers`` processes, each an ``Engram`` calling ``remember_many`` with ``--batch`` items
  for ``--seconds`` (``--kinds mixed``: half ``conversation`` turns, half ``knowledge``, which are
  checked for near-duplicates before the write, a vector search each; or one kind), the
  memories/s they commit together, and the same searches meanwhile;
* nothing lost: every id a writer got back is in the store, with its vector once the
  writers' background queues drained, and the audit chain verifies.

Embeddings: the writers' embedder returns the turn's cached real all-MiniLM-L6-v2 vector (blended
and noised per copy, as scale_pg's synthetic data) for each text, so the figure is the store's write
path without the model. The real model embeds ~440 sentences/s on this whole 2-core machine
(the project's design notes), which bounds a real deployment's write rate there, not the store.

    nice -n 10 python bench/pg_writers.py --base 100000 --writers 4 --seconds 60
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from _cpu_split import CpuSplit
from _pg_bulk import MODEL_ID, BulkLoader, scalar
from _pg_explain import ExplainLog
from _report import pct
from engramdb import Engram
from engramdb.storage.postgres import open_postgres
from scale_pg import KINDS, Vec, load1, load_turns, make_batch, start_server, synth

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class TurnEmbedder:
    """The cached real vector of each text's turn (``text (note N)`` is copy N of that turn), no model run."""

    model_id = MODEL_ID
    dim = 384

    def __init__(self, texts: Sequence[str], base: Vec, queries: dict[str, Vec] | None = None) -> None:
        self._queries = queries or {}
        self._row = {t: i for i, t in enumerate(texts)}
        self._base = base
        self._rng = np.random.default_rng(7)

    def embed(self, texts: Sequence[str]) -> Vec:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        n = len(self._base)
        for j, text in enumerate(texts):
            if text in self._queries:
                out[j] = self._queries[text]
                continue
            turn, _, copy = text.rpartition(" (note ")
            row = self._row.get(turn if copy else text)
            if row is None:  # not a bench text: a stable vector from its hash
                seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
                v = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
                out[j] = v / np.linalg.norm(v)
                continue
            index = row + n * (int(copy.rstrip(")")) if copy else 0)
            out[j] = synth(self._base, index, self._rng, blend=0.3, noise=0.35)
        return out


def _writer(url: str, wid: int, args: Any, texts: list[str], base: Vec, start: Any, stop: Any, out: Any) -> None:
    """Call ``remember_many`` with ``args.batch`` items until ``stop`` is set; report ids and timings."""
    mem = Engram(url, embedder=TurnEmbedder(texts, base), access_flush_seconds=0.0)  # type: ignore[arg-type]
    waits: list[float] = []
    store = mem._pipeline._store
    if hasattr(store, "_give_way"):  # the seconds each batch gave way to searches (code before it has no such wait)
        real = store._give_way

        def give_way(seconds: float) -> float:
            waited = float(real(seconds))
            waits.append(waited)
            return waited

        object.__setattr__(store, "_give_way", give_way)
    n = len(texts)
    ids: list[str] = []
    calls: list[float] = []
    i = 50_000_000 * (wid + 1) + args.offset
    start.wait()
    began = time.perf_counter()
    try:
        while not stop.is_set():
            items = []
            for j in range(i, i + args.batch):
                items.append(
                    {
                        "content": f"{texts[j % n]} (note {j // n})",
                        "agent": f"agent-{j % args.agents}",
                        "kind": KINDS[(j // args.agents) % 2] if args.kinds == "mixed" else args.kinds,
                        "tags": ["bench", f"writer-{wid}"],
                    }
                )
            i += args.batch
            t = time.perf_counter()
            written = mem.remember_many(items)
            calls.append((time.perf_counter() - t) * 1000)
            ids.extend(m.id for m in written)
        window = time.perf_counter() - began
        t = time.perf_counter()
        mem.close()  # drains this process's vector queue
        out.put(
            {
                "wid": wid,
                "ids": ids,
                "calls_ms": calls,
                "window_s": window,
                "drain_s": time.perf_counter() - t,
                "gave_way_s": sum(waits),
                "gave_way_batches": sum(1 for w in waits if w > 0),
            }
        )
    except BaseException as exc:
        out.put({"wid": wid, "error": repr(exc), "ids": ids, "calls_ms": calls, "window_s": 0.0, "drain_s": 0.0})
        raise


def _phases(mem: Engram) -> dict[str, list[float]]:
    """Time the two channels of ``mem``'s searches (ms per call, appended to the returned lists)."""
    import functools
    import threading

    phases: dict[str, list[float]] = {"keyword_channel": [], "vector_channel": []}
    lock = threading.Lock()
    search = mem._recall._searcher._store.search
    for name, label in (("keyword_candidates", "keyword_channel"), ("vector_candidates", "vector_channel")):
        inner = getattr(search, name)

        def call(*a: Any, _inner: Any = inner, _label: str = label, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return _inner(*a, **k)
            finally:
                with lock:
                    phases[_label].append((time.perf_counter() - t) * 1000)

        setattr(search, name, functools.wraps(inner)(call))
    return phases


def _searches(mem: Engram, queries: list[str], agents: int, seconds: float) -> dict[str, Any]:
    """``Engram.search`` over the questions, round and round, for ``seconds``: p50/p95 ms, and each channel's p50."""
    phases = getattr(mem, "_bench_phases", None)
    if phases is None:
        phases = _phases(mem)
        mem._bench_phases = phases  # type: ignore[attr-defined]
    ms: list[float] = []
    cpu: list[float] = []
    for q in queries[:3]:
        mem.search(q, agent="agent-0", limit=10)
    for times in phases.values():
        times.clear()
    before = load1()
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        q = queries[i % len(queries)]
        # The CPU clock outside the timed span: reading it costs up to milliseconds on a loaded machine.
        c = time.thread_time()
        t = time.perf_counter()
        mem.search(q, agent=f"agent-{i % agents}", limit=10)
        ms.append((time.perf_counter() - t) * 1000)
        cpu.append((time.thread_time() - c) * 1000)
        i += 1
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
        "n": len(ms),
        # The searching thread's own CPU time: the rest of a search's time waits for the server or for a core.
        "cpu_p50_ms": round(statistics.median(cpu), 2),
        **{f"{label}_p50_ms": round(statistics.median(t), 2) for label, t in phases.items() if t},
        "load1_before": before,
        "load1_after": load1(),
    }


def _lock_waits(url: str, stop: Any, out: dict[str, Any]) -> None:
    """Every 0.25 s, the sessions waiting for a lock, by what they wait for: what serialises the writers."""
    import psycopg

    samples = 0
    waits: dict[str, int] = {}
    staged: list[int] = []  # vectors staged at each sample: what each search scans exactly
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            # What waits, and the statement waiting (its first words): which statements the writers queue behind.
            rows = conn.execute(
                "SELECT CASE WHEN l.locktype = 'advisory' THEN 'advisory ' || l.classid || ':' || l.objid "
                "ELSE l.locktype || coalesce(' ' || l.relation::regclass::text, '') END "
                "|| ' <- ' || left(regexp_replace(coalesce(a.query, '?'), '\\s+', ' ', 'g'), 60), count(*) "
                "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted GROUP BY 1"
            ).fetchall()
            # And what the active sessions are doing: on a core or ready for one (no wait event), or waiting for an
            # I/O, a buffer or WAL flush (what slows searches that no lock explains).
            rows += conn.execute(
                "SELECT 'active: ' || coalesce(wait_event_type || ':' || wait_event, 'on cpu') || ' <- ' "
                "|| left(regexp_replace(query, '\\s+', ' ', 'g'), 40), count(*) FROM pg_stat_activity "
                "WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend' GROUP BY 1"
            ).fetchall()
            row = conn.execute("SELECT count(*) FROM vectors_staged").fetchone()
            staged.append(int(row[0]) if row else 0)
            samples += 1
            for what, count in rows:
                waits[str(what)] = waits.get(str(what), 0) + int(count)
            time.sleep(0.25)
    out["samples"] = samples
    out["mean_waiting_sessions"] = {k: round(v / max(1, samples), 2) for k, v in sorted(waits.items())}
    if staged:
        out["staged_rows"] = {"mean": round(statistics.fmean(staged)), "max": max(staged)}


def _probe_freshness(url: str, embedder: Any, stop: Any, every: float, delays: list[float]) -> None:
    """Every ``every`` s during the writes, remember a memory from one instance (background vector, as the writers)
    and time until another instance's vector search finds it: how soon a write is found by meaning."""
    from engramdb.config import load_settings
    from engramdb.errors import ConfigError
    from engramdb.storage.base import Filter

    try:  # the searching instance moves no staged vectors itself (the code before staging has no such setting)
        settings = load_settings(pg_vector_mover=False)
    except ConfigError:
        settings = None
    writer = Engram(url, embedder=embedder, access_flush_seconds=0.0)
    store = open_postgres(url, pool_size=2, settings=settings)
    n = 0
    try:
        while not stop.wait(every):
            text = f"freshness probe {n} {time.time_ns()}"
            n += 1
            vector = embedder.embed([text])[0]
            memory = writer.remember(text, agent="agent-probe", kind="conversation")
            t = time.perf_counter()
            while time.perf_counter() - t < 600:
                found = store.search.vector_candidates(vector, Filter(agent="agent-probe"), limit=1)
                if found and found[0].id == memory.id:
                    delays.append(time.perf_counter() - t)
                    break
                time.sleep(0.02)
    finally:
        writer.close()
        store.close()


def _fold_staged(url: str) -> dict[str, Any]:
    """Vectors still staged once the writers are done, and how long one mover (no rest) takes to fold them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if not scalar(conn, "SELECT to_regclass('vectors_staged') IS NOT NULL"):
            return {}
        from engramdb.storage._pg_staging import move_batch, staged_rows

        left = staged_rows(conn)
        t = time.perf_counter()
        while staged_rows(conn):
            if move_batch(conn) is None:
                time.sleep(0.1)
        return {"staged_after_writes": left, "fold_s": round(time.perf_counter() - t, 1)}


def _load_base(url: str, texts: list[str], base: Vec, args: Any) -> dict[str, Any]:
    """The first 1,000 memories through the store (schema, model, HNSW index), the rest by COPY."""
    rng = np.random.default_rng(3)
    store = open_postgres(url, pool_size=1)
    first = min(1000, args.base)
    try:
        memories, vecs = make_batch(texts, base, 0, first, args.agents, rng, args)
        store.memories.add(memories, vecs, model_id=MODEL_ID, actor="bench")
    finally:
        store.close()
    t = time.perf_counter()
    loader = BulkLoader(url)
    loader.drop_indexes()
    done = first
    while done < args.base:
        count = min(20_000, args.base - done)
        loader.add(*make_batch(texts, base, done, count, args.agents, rng, args))
        done += count
    took = loader.rebuild_indexes()
    loader.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return {"rows": done, "load_s": round(time.perf_counter() - t, 1), "index_rebuild_s": took}


def run(args: Any) -> dict[str, Any]:
    import psycopg

    cache = Path(args.embedding_cache) if args.embedding_cache else None
    texts, base, questions = load_turns(args.lme_questions, cache)
    queries = questions[: args.queries]
    print(f"{len(texts)} turns, {len(queries)} queries; embedding the queries with the real model", flush=True)
    from engramdb.config import load_settings
    from engramdb.embeddings import make_embedder

    model = make_embedder(load_settings(embedder="local"))
    qvecs = dict(zip(queries, model.embed(queries), strict=True))
    reader = TurnEmbedder(texts, base, qvecs)
    server = start_server(Path(args.tmp_root) if args.tmp_root else None, Path(args.resume) if args.resume else None)
    out: dict[str, Any] = {"args": vars(args), "at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        url = server.url(args.database)
        if not args.resume:
            with psycopg.connect(server.url(), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {args.database}")
            out["base_load"] = _load_base(url, texts, base, args)
            print(f"base load: {out['base_load']}", flush=True)
        with psycopg.connect(url, autocommit=True) as conn:
            rows_before = int(scalar(conn, "SELECT count(*) FROM memories"))
            audit_before = int(scalar(conn, "SELECT count(*) FROM audit"))
        out["rows_before"] = rows_before
        # One reader for both measurements, opened before the writers start: opening a store with sync vectors
        # embeds what has none yet, which during the writes would be the writers' queued memories.
        searcher = Engram(url, embedder=reader, access_flush_seconds=1.0, vectors="sync")
        explain = ExplainLog(server.root / "log") if args.explain else None
        if explain is not None:
            explain.attach(searcher)
            explain.mark("idle, cold")
        # Twice: the first pass after a server start reads the graphs from disk (cold); then, after ``--warm-seconds``
        # more, the warm reference the searches during the writes are compared with (the idle after them, on a grown
        # store, too).
        out["idle_search"] = _searches(searcher, queries, args.agents, args.search_seconds)
        print(f"idle search (cold): {out['idle_search']}", flush=True)
        if args.warm_seconds > 0:
            _searches(searcher, queries, args.agents, args.warm_seconds)
        if explain is not None:
            explain.mark("idle, warm")
        out["idle_search_warm"] = _searches(searcher, queries, args.agents, args.search_seconds)
        print(f"idle search (warm): {out['idle_search_warm']}", flush=True)

        ctx = mp.get_context("spawn")
        start, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
        procs = [
            ctx.Process(target=_writer, args=(url, w, args, texts, base, start, stop, results))
            for w in range(args.writers)
        ]
        for p in procs:
            p.start()
        time.sleep(8.0)  # the writers open their stores (spawned interpreters import engramdb)
        import threading

        locks: dict[str, Any] = {}
        sampler = threading.Thread(target=_lock_waits, args=(url, stop, locks))
        probes: list[float] = []
        prober = threading.Thread(target=_probe_freshness, args=(url, reader, stop, args.probe_every, probes))
        postmaster = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
        # The bench process holds the searcher (and the freshness probes, a memory every --probe-every s).
        split = CpuSplit(postmaster, {"writers": [p.pid for p in procs if p.pid], "searcher": [os.getpid()]})
        start.set()
        t0 = time.perf_counter()
        split.start()
        if explain is not None:
            explain.mark("during the writes")
        sampler.start()
        if args.probe_every > 0:
            prober.start()
        during = _searches(searcher, queries, args.agents, args.seconds)
        with psycopg.connect(url, autocommit=True) as conn:
            out["cpu_cores_during_writes"] = split.stop(conn, time.perf_counter() - t0)
        if explain is not None:
            explain.mark("end")
            out["search_plans"] = explain.summary()
            print(f"search plans: {out['search_plans']}", flush=True)
        stop.set()
        sampler.join()
        if args.probe_every > 0:
            prober.join()
        searcher.close()
        reports = [results.get(timeout=600) for _ in procs]
        # From the start signal to the last batch each writer committed (the drain of their vector queues after
        # it is reported apart).
        elapsed = max(r["window_s"] for r in reports) or time.perf_counter() - t0
        for p in procs:
            p.join(timeout=60)
        errors = [r["error"] for r in reports if "error" in r]
        fold = _fold_staged(url)
        ids = [i for r in reports for i in r["ids"]]
        calls = [c for r in reports for c in r["calls_ms"]]
        with psycopg.connect(url, autocommit=True) as conn:
            found = int(scalar(conn, "SELECT count(*) FROM memories WHERE id = ANY(%s)", (list(set(ids)),)))
            staged = bool(scalar(conn, "SELECT to_regclass('vectors_staged') IS NOT NULL"))
            vectors = (
                "(SELECT memory_id FROM vectors UNION ALL SELECT memory_id FROM vectors_staged)"
                if staged
                else "vectors"
            )
            with_vector = int(
                scalar(conn, f"SELECT count(*) FROM {vectors} v WHERE v.memory_id = ANY(%s)", (list(set(ids)),))
            )
            rows_after = int(scalar(conn, "SELECT count(*) FROM memories"))
            audit_after = int(scalar(conn, "SELECT count(*) FROM audit"))
        # Idle again once the writers' queues drained: the machine's load drifts over a run (shared cores), so
        # the ratio is given against both idle measurements.
        searcher = Engram(url, embedder=reader, access_flush_seconds=1.0, vectors="sync")
        try:
            out["idle_search_after"] = _searches(searcher, queries, args.agents, args.search_seconds)
        finally:
            searcher.close()
        mem = Engram(url, embedder=reader, vectors="sync")
        try:
            verified = mem.audit.verify()
        finally:
            mem.close()
        out["writers"] = {
            "processes": args.writers,
            "batch": args.batch,
            "seconds": round(elapsed, 1),
            "memories_returned": len(ids),
            "memories_per_s": round(len(ids) / elapsed, 1),
            "distinct_ids": len(set(ids)),
            "new_rows": rows_after - rows_before,
            "returned_ids_stored": found,
            "with_vector_after_drain": with_vector,
            "audit_entries_added": audit_after - audit_before,
            "audit_verifies": verified,
            "remember_many_ms": {"p50": round(statistics.median(calls), 1), "p95": round(pct(calls, 0.95), 1)}
            if calls
            else {},
            "queue_drain_s": round(max(r["drain_s"] for r in reports), 1),
            # Of the writers' time, the share their batches waited for searches (pg_writes_yield).
            "gave_way_share": round(
                sum(r.get("gave_way_s", 0.0) for r in reports) / max(1e-9, elapsed * len(reports)), 3
            ),
            "gave_way_batches": sum(r.get("gave_way_batches", 0) for r in reports),
            "batches": len(calls),
            "errors": errors,
        }
        out["search_during_writes"] = during
        out["found_by_meaning_after_s"] = (
            {"n": len(probes), "p50": round(statistics.median(probes), 3), "max": round(max(probes), 3)}
            if probes
            else {}
        )
        out["fold"] = fold
        out["lock_waits"] = locks
        out["during_over_idle_p50"] = round(during["p50_ms"] / out["idle_search"]["p50_ms"], 2)
        out["during_over_idle_after_p50"] = round(during["p50_ms"] / out["idle_search_after"]["p50_ms"], 2)
        out["during_over_idle_warm_p50"] = round(during["p50_ms"] / out["idle_search_warm"]["p50_ms"], 2)
        # Against the idle passes on either side of the writes (the warm one before, the one after): the machine's
        # load drifts over a run on shared cores, and either one alone moves the ratio with it.
        around = (out["idle_search_warm"]["p50_ms"] + out["idle_search_after"]["p50_ms"]) / 2
        out["during_over_idle_around_p50"] = round(during["p50_ms"] / around, 2)
        print(f"writers: {out['writers']}", flush=True)
        print(f"lock waits: {locks}", flush=True)
        print(f"cpu cores during the writes: {out['cpu_cores_during_writes']}", flush=True)
        print(
            f"search during writes: {during} ({out['during_over_idle_p50']}x idle p50 cold, "
            f"{out['during_over_idle_warm_p50']}x warm, {out['during_over_idle_after_p50']}x idle after, "
            f"{out['during_over_idle_around_p50']}x their mean)",
            flush=True,
        )
    finally:
        server.stop(keep=args.keep or bool(args.resume))  # a resumed directory is the caller's to delete
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=100_000, help="memories loaded before the writers start")
    parser.add_argument("--writers", type=int, default=4, help="writer processes")
    parser.add_argument("--batch", type=int, default=50, help="items per remember_many call")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the writers write")
    parser.add_argument("--search-seconds", type=float, default=20.0, help="idle search measurement")
    parser.add_argument(
        "--warm-seconds", type=float, default=20.0, help="unmeasured searches between the cold and the warm idle pass"
    )
    parser.add_argument(
        "--kinds",
        default="mixed",
        help="'mixed' (half conversation turns, half knowledge, which is checked for near-duplicates) or one kind",
    )
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument(
        "--offset", type=int, default=0, help="where the writers' items start (another offset: none repeat a run's)"
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--lme-questions", type=int, default=60)
    parser.add_argument("--blend", type=float, default=0.3)
    parser.add_argument("--noise", type=float, default=0.35)
    parser.add_argument("--resume", help="a kept server directory (--keep) to measure again, without a new load")
    parser.add_argument("--database", default="writers", help="database name (scale_pg's kept servers: 'scale')")
    parser.add_argument("--keep", action="store_true", help="keep the server's data directory")
    parser.add_argument("--embedding-cache", help="a pinned copy of the turn vector cache (scale_pg's option)")
    parser.add_argument("--tmp-root", help="where a new server's data directory goes (default: the system temp)")
    parser.add_argument(
        "--probe-every", type=float, default=3.0, help="seconds between freshness probes during the writes (0: none)"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="log the searcher's statements with auto_explain (ANALYZE, BUFFERS): plans idle and during the writes",
    )
    parser.add_argument("--out", default=str(RESULTS_DIR / "pg_writers.json"))
    args = parser.parse_args(argv)
    result = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

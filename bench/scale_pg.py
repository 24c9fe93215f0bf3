"""PostgreSQL + pgvector at scale: the store's search over 10k / 100k / 1M memories, with concurrent writers.

Starts a private PostgreSQL server (initdb + pg_ctl in a temp dir, like the tests; as root it runs
as the ``postgres`` user), then grows ONE store through the sizes (``--sizes``), loading each
increment through the store's own write path (batched ``store.memories.add``: rows, tags,
history, vectors, generated ``tsvector``). At each size it measures:

* load rate of the increment, with the model's HNSW index dropped during the load and rebuilt
  after (``CREATE INDEX``, timed: the "HNSW build"); table, keyword (GIN) and HNSW sizes;
* search latency p50/p95 of the vector channel (``store.search.vector_candidates``, depth 50),
  the keyword channel (``keyword_candidates``, depth 50) and the full ``Engram.search``
  (the query vector is precomputed, so query embedding is excluded), and where that search's time goes
  (``search_breakdown``: each phase's p50 and the statements sent per search);
* ANN recall@10 and @50 of the vector channel against the exact scan under the same filter
  (an agent filter: each of ``--agents`` agents owns an equal share; and agent + kind);
* the same searches while ``--writers`` processes insert memories one per transaction
  (as ``remember`` does), with their insert rate; the index is maintained online meanwhile.

Data: the texts are real LoCoMo and LongMemEval turns (bench/_data.py), repeated with a
variation marker to reach the size. Vectors are *real-derived synthetic*: the turn's cached
all-MiniLM-L6-v2 embedding (~/.cache/engramdb-bench/embeddings.sqlite) blended with another
real turn embedding (weight ``--blend``) plus Gaussian noise (norm ``--noise``), renormalised;
the first copy of each turn keeps its real embedding. So the index sees the clustered
structure of real text embeddings, not uniform random vectors (a worst case for HNSW).
Queries: LoCoMo and LongMemEval question texts, embedded by the real model.

Every timing has the 1-minute load average beside it (the machine is shared).

    nice -n 10 python bench/scale_pg.py --sizes 10000,100000,1000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import platform
import pwd
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _data import iter_longmemeval, load_locomo
from _embedded_side import EmbeddedSide, engram_search_of, interleaved, settle
from _pg_bulk import MODEL_ID, BulkLoader, scalar, table_rows
from _report import pct
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.models import Memory
from engramdb.retrieval.text import query_terms
from engramdb.storage._engine import sql_store
from engramdb.storage._pg_sql import filter_sql, pg_statement
from engramdb.storage.base import Candidate, Filter, Store
from engramdb.storage.postgres import PgSearch, PostgresBackend, open_postgres

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEPTH = 50  # the candidate depth Engram.search asks each channel for
KINDS = ("conversation", "knowledge")
#: LoCoMo question text -> its evidence turns' texts (any copy of one counts as found).
GOLD: dict[str, frozenset[str]] = {}
_COPY_MARK = re.compile(r" \(note \d+\)$")
Vec = npt.NDArray[np.float32]
#: The memories columns the store writes (its shared SQL names them with the "m." alias).


# -- the server ------------------------------------------------------------------------------------
def _bin_dir() -> Path:
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted(p for p in root.iterdir() if (p / "bin" / "initdb").exists())
        if versions:
            return versions[-1] / "bin"
    found = shutil.which("initdb")
    if found is None:
        raise SystemExit("PostgreSQL binaries not found: run .ci/install-postgres.sh")
    return Path(found).parent


@dataclass
class Server:
    root: Path
    port: int
    user: str | None
    bin_dir: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def stop(self, *, keep: bool = False) -> None:
        """Stop the server; delete its data directory unless ``keep`` (``--resume`` can measure it again)."""
        self.run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        if keep:
            print(f"server data kept in {self.root} (measure it again with --resume {self.root})", flush=True)
        else:
            shutil.rmtree(self.root, ignore_errors=True)


SERVER_SETTINGS = {
    # Durable defaults (fsync, synchronous_commit on): writers pay a real commit.
    "shared_buffers": "2GB",
    "maintenance_work_mem": "4GB",  # the 1M HNSW graph (~2 GB) must fit, else the build crawls
    "max_parallel_maintenance_workers": "1",  # 2 cores: leader + 1 worker
    "max_parallel_workers_per_gather": "1",
    "max_wal_size": "16GB",
    "checkpoint_timeout": "30min",
    "max_connections": "50",
}


def start_server(tmp_root: Path | None, resume: Path | None = None) -> Server:
    """A fresh server in a new temp directory, or (``resume``) the kept one of an earlier run, on a free port."""
    root = resume if resume is not None else Path(tempfile.mkdtemp(prefix="engram-pgscale-", dir=tmp_root))
    user = "postgres" if os.geteuid() == 0 else None
    if user is not None and resume is None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = Server(root=root, port=port, user=user, bin_dir=_bin_dir())
    init = (
        server.run("initdb", "-D", str(root / "data"), "-A", "trust", "-U", "postgres", "-E", "UTF8")
        if resume is None
        else subprocess.CompletedProcess([], 0, "", "")
    )
    if init.returncode != 0:
        raise SystemExit(f"initdb failed: {init.stderr}")
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 " + " ".join(
        f"-c {k}={v}" for k, v in SERVER_SETTINGS.items()
    )
    started = server.run("pg_ctl", "-D", str(root / "data"), "-l", str(root / "log"), "-o", opts, "-w", "start")
    if started.returncode != 0:
        raise SystemExit(f"pg_ctl start failed: {started.stderr} {(root / 'log').read_text()[-2000:]}")
    return server


# -- data ------------------------------------------------------------------------------------------
def load_turns(lme_questions: int, cache: Path | None = None) -> tuple[list[str], Vec, list[str]]:
    """Distinct real turn texts that have a cached vector, their vectors, and the question texts."""
    texts: dict[str, None] = {}
    questions: list[str] = []
    for conv in load_locomo():
        texts.update(dict.fromkeys(d.content for d in conv.docs))
        by_id = {d.id: d.content for d in conv.docs}
        for q in conv.questions[:15]:
            questions.append(q.text)
            GOLD[q.text] = frozenset(by_id[e] for e in q.evidence if e in by_id)
    for i, q in enumerate(iter_longmemeval()):
        if i >= lme_questions:
            break
        texts.update(dict.fromkeys(d.content for d in q.docs))
        questions.append(q.text)
    # The shared cache grows as other benches embed texts: --embedding-cache pins a copy, so runs see the same turns.
    cache = cache or Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"
    db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    found: dict[bytes, bytes] = dict(
        db.execute("SELECT text_sha256, vector FROM embedding_cache WHERE model_id = ?", (MODEL_ID,)).fetchall()
    )
    db.close()
    kept: list[str] = []
    rows: list[Vec] = []
    for text in texts:
        blob = found.get(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
        if blob is not None:
            kept.append(text)
            rows.append(np.frombuffer(blob, dtype="<f4"))
    if not kept:
        raise SystemExit(f"no cached turn vectors in {cache}: run bench/retrieval.py once first")
    return kept, np.vstack(rows).astype(np.float32), questions


def synth(base: Vec, index: int, rng: np.random.Generator, *, blend: float, noise: float) -> Vec:
    """Copy ``index`` of turn ``index % n``: copy 0 is the real vector, later copies a blend + noise."""
    n, dim = base.shape
    v = base[index % n].copy()
    if index >= n:
        v = v + blend * base[int(rng.integers(n))] + rng.normal(0.0, noise / np.sqrt(dim), dim).astype(np.float32)
        v /= np.linalg.norm(v)
    return v


def advancer(n: int, dim: int) -> Callable[[np.random.Generator, int, int], None]:
    """Move a generator past rows ``start .. stop`` as :func:`synth` would (a kept store goes on with the same data)."""

    def advance(rng: np.random.Generator, start: int, stop: int) -> None:
        for _ in range(max(start, n), stop):
            rng.integers(n)
            rng.normal(0.0, 1.0, dim)

    return advance


def make_batch(
    texts: Sequence[str], base: Vec, start: int, count: int, agents: int, rng: np.random.Generator, args: Any
) -> tuple[list[Memory], Vec]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    memories: list[Memory] = []
    vecs = np.empty((count, base.shape[1]), dtype=np.float32)
    n = len(texts)
    for j in range(count):
        i = start + j
        copy = i // n
        content = texts[i % n] if copy == 0 else f"{texts[i % n]} (note {copy})"
        at = now + timedelta(seconds=i)
        memories.append(
            Memory(
                id=uuid.uuid4().hex,
                agent=f"agent-{i % agents}",
                kind=KINDS[(i // agents) % 2],  # type: ignore[arg-type]
                content=content,
                tags=("bench",),
                created_at=at,
                updated_at=at,
            )
        )
        vecs[j] = synth(base, i, rng, blend=args.blend, noise=args.noise)
    return memories, vecs


def check_bulk_rows(server: Server, texts: list[str], base: Vec, args: Any) -> dict[str, Any]:
    """The bulk path writes exactly the rows ``store.memories.add`` writes: the same memories both ways, compared.

    Two scratch databases; in each, the first batch goes through the store (schema, model, index), then the same
    500 memories through the store in one and through :class:`BulkLoader` in the other. Every column of every
    row must match (identity columns aside). Then the store's own ``doctor`` runs on the bulk-loaded one.
    """
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        for db in ("bulkcheck_store", "bulkcheck_copy"):
            conn.execute(f"CREATE DATABASE {db}")
    rng = np.random.default_rng(5)
    first = make_batch(texts, base, 0, 100, args.agents, rng, args)
    rest = make_batch(texts, base, 100_000, 500, args.agents, rng, args)
    for db in ("bulkcheck_store", "bulkcheck_copy"):
        store = open_postgres(server.url(db), pool_size=1)
        try:
            store.memories.add(first[0], first[1], model_id=MODEL_ID, actor="bench")
            if db == "bulkcheck_store":
                store.memories.add(rest[0], rest[1], model_id=MODEL_ID, actor="bench")
        finally:
            store.close()
    loader = BulkLoader(server.url("bulkcheck_copy"))
    loader.drop_indexes()
    loader.add(rest[0], rest[1])
    loader.rebuild_indexes()
    orphans = loader.orphans()
    loader.close()
    a, b = table_rows(server.url("bulkcheck_store")), table_rows(server.url("bulkcheck_copy"))
    differing = [t for t in a if a[t] != b[t]]
    if differing:
        raise SystemExit(f"the bulk path writes other rows than store.memories.add: {differing}")
    mem = Engram(server.url("bulkcheck_copy"), embedder=QueryEmbedder({}))  # type: ignore[arg-type]
    try:
        report = mem.doctor()
    finally:
        mem.close()
    checks = {c.name: c.ok for c in report.checks}
    # The bulk path writes no audit entries (a bench shortcut): every other check must pass.
    if not all(ok for name, ok in checks.items() if name != "audit_coverage"):
        raise SystemExit(f"the bulk-loaded store fails the store's own doctor: {checks}")
    out = {"rows_identical": {t: len(rows) for t, rows in a.items()}, "orphans": orphans, "doctor": checks}
    print(f"bulk path check: {out}", flush=True)
    return out


# -- measurement helpers ----------------------------------------------------------------------------
def load1() -> float:
    return round(os.getloadavg()[0], 2)


def latency(calls: Sequence[Callable[[], Any]]) -> dict[str, float]:
    """p50/p95/mean in ms over ``calls`` (one warm-up call first), with the load average before and after."""
    calls[0]()
    before = load1()
    ms: list[float] = []
    for call in calls:
        t = time.perf_counter()
        call()
        ms.append((time.perf_counter() - t) * 1000)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "n": len(ms),
        "load1_before": before,
        "load1_after": load1(),
    }


def by_agent(agents: int, kinds: tuple[str, ...] | None = None) -> Callable[[int], Filter]:
    """Query ``i``'s filter: agent ``i % agents`` (each agent owns an equal share), narrowed to ``kinds``."""
    return lambda i: Filter(agent=f"agent-{i % agents}", kinds=kinds)


def vector_calls(
    search: Any, queries: list[str], qvecs: dict[str, Vec], flt: Callable[[int], Filter]
) -> list[Callable[[], Any]]:
    """One vector-channel call (depth :data:`DEPTH`) per query, under query ``i``'s filter."""
    return [(lambda q=q, i=i: search.vector_candidates(qvecs[q], flt(i), limit=DEPTH)) for i, q in enumerate(queries)]


def keyword_calls(search: Any, queries: list[str], flt: Callable[[int], Filter]) -> list[Callable[[], Any]]:
    """One keyword-channel call (depth :data:`DEPTH`) per query, under query ``i``'s filter."""
    return [
        (lambda q=q, i=i: search.keyword_candidates(query_terms(q), flt(i), limit=DEPTH)) for i, q in enumerate(queries)
    ]


def search_latencies(
    url: str, store: Store, queries: list[str], qvecs: dict[str, Vec], agents: int, *, agent_kind: bool = False
) -> dict[str, Any]:
    """Latency of the vector and keyword channels under an agent filter (``agent_kind``: also the vector
    channel under agent + kind), then of the full ``Engram.search`` (query vectors precomputed)."""
    search, agent = store.search, by_agent(agents)
    out: dict[str, Any] = {"vector_ms": latency(vector_calls(search, queries, qvecs, agent))}
    if agent_kind:
        out["vector_agent_kind_ms"] = latency(vector_calls(search, queries, qvecs, by_agent(agents, ("knowledge",))))
    calls = keyword_calls(search, queries, agent)
    calls[0]()
    settle(search)
    out["keyword_ms"] = latency(calls)
    mem = Engram(url, embedder=QueryEmbedder(qvecs))  # type: ignore[arg-type]
    try:
        mem.search(queries[0], agent="agent-0", limit=10)
        settle(engram_search_of(mem))
        out["engram_search_ms"] = latency(
            [(lambda q=q, i=i: mem.search(q, agent=f"agent-{i % agents}", limit=10)) for i, q in enumerate(queries)]
        )
    finally:
        mem.close()
    out["engram_search_breakdown"] = search_breakdown(url, queries, qvecs, agents)
    return out


def search_breakdown(url: str, queries: list[str], qvecs: dict[str, Vec], agents: int) -> dict[str, Any]:
    """Where ``Engram.search`` spends its time: p50/mean per phase and statements sent, over the same queries.

    A second pass after the timed one (the wrappers cost a little). Phases: the keyword channel (in a
    worker thread, overlapping the vector channel), the vector channel, ``get_many`` of the fused head,
    the whole hybrid search, and the bookkeeping transaction (access counts + the audit entry).
    Statements count every ``execute``/``executemany`` and a BEGIN and COMMIT per transaction.
    """
    import functools
    import threading

    import psycopg

    mem = Engram(url, embedder=QueryEmbedder(qvecs))  # type: ignore[arg-type]
    phases: dict[str, list[float]] = {}
    sent = [0]
    lock = threading.Lock()

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

    def counted(cls: Any, name: str, weight: int) -> Callable[[], None]:
        inner = getattr(cls, name)

        def call(*a: Any, **k: Any) -> Any:
            with lock:
                sent[0] += weight
            return inner(*a, **k)

        setattr(cls, name, call)
        return lambda: setattr(cls, name, inner)

    time.sleep(3.0)  # the open's background-vector catch-up scan
    before = load1()
    try:
        recall_ = mem._recall
        searcher = recall_._searcher
        timed(recall_, "_bookkeep", "bookkeeping")
        timed(searcher._store.search, "keyword_candidates", "keyword_channel")
        timed(searcher._store.search, "vector_candidates", "vector_channel")
        timed(searcher._store.memories, "get_many", "get_many")
        timed(searcher, "search", "hybrid_search")
        for q in queries[:5]:
            mem.search(q, agent="agent-0", limit=10)
        settle(searcher._store.search)
        phases.clear()
        undo = [
            counted(psycopg.Connection, "execute", 1),
            counted(psycopg.Cursor, "executemany", 1),
            counted(psycopg.Connection, "transaction", 2),
        ]
        before = load1()
        try:
            for i, q in enumerate(queries):
                t = time.perf_counter()
                mem.search(q, agent=f"agent-{i % agents}", limit=10)
                phases.setdefault("engram_search", []).append((time.perf_counter() - t) * 1000)
        finally:
            for u in undo:
                u()
    finally:
        mem.close()
    out: dict[str, Any] = {
        k: {"p50_ms": round(statistics.median(v), 2), "mean_ms": round(statistics.fmean(v), 2), "n": len(v)}
        for k, v in phases.items()
    }
    out["statements_per_search"] = round(sent[0] / len(queries), 1)
    out["load1_before"], out["load1_after"] = before, load1()
    return out


# A partitioned table or index (``vectors`` and its HNSW index since schema step 5) has no pages of its own: its
# partitions' are summed.
_TOTAL_SIZE = (
    "SELECT COALESCE((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree(to_regclass(%s)) "
    "WHERE isleaf), pg_total_relation_size(to_regclass(%s)))"
)


def sizes(conn_url: str, index_name: str | None) -> dict[str, float]:
    import psycopg

    mb = 1024 * 1024
    with psycopg.connect(conn_url, autocommit=True) as conn:
        out = {
            name: round(int(scalar(conn, _TOTAL_SIZE, (name, name)) or 0) / mb, 1)
            for name in ("memories", "vectors", "history", "memory_tags")
        }
        out["memories_tsv_gin"] = round(int(scalar(conn, "SELECT pg_relation_size('memories_tsv')")) / mb, 1)
        out["memory_terms"] = round(int(scalar(conn, _TOTAL_SIZE, ("memory_terms",) * 2) or 0) / mb, 1)
        if index_name:
            size = scalar(conn, _TOTAL_SIZE.replace("pg_total_relation_size", "pg_relation_size"), (index_name,) * 2)
            out["vectors_hnsw"] = round(int(size) / mb, 1)
        out["database"] = round(int(scalar(conn, "SELECT pg_database_size(current_database())")) / mb, 1)
    return out


def hnsw_index(conn_url: str) -> tuple[str, str] | None:
    """The name and definition of the model's HNSW index (the store created it on first write)."""
    import psycopg

    with psycopg.connect(conn_url, autocommit=True) as conn:
        row = conn.execute("SELECT index_name FROM vector_indexes LIMIT 1").fetchone()
        if row is None:
            return None
        d = conn.execute("SELECT pg_get_indexdef(%s::regclass)", (row[0],)).fetchone()
        return (str(row[0]), str(d[0])) if d is not None else None


# -- concurrent writers -------------------------------------------------------------------------------
def writer(url: str, wid: int, texts: list[str], base: Vec, agents: int, stop: Any, counter: Any, args: Any) -> None:
    """Insert memories one per transaction (as ``remember`` does) until ``stop`` is set."""
    store = open_postgres(url, pool_size=1)
    rng = np.random.default_rng(1000 + wid)
    done = 0
    i = 10_000_000 * (wid + 1)
    try:
        while not stop.is_set():
            memories, vecs = make_batch(texts, base, i, 1, agents, rng, args)
            store.memories.add(memories, vecs, model_id=MODEL_ID, actor=f"writer-{wid}")
            i += 1
            done += 1
            with counter.get_lock():
                counter.value += 1
    finally:
        store.close()


# -- one size ------------------------------------------------------------------------------------------
class QueryEmbedder:
    """The real model's query vectors, precomputed: ``Engram.search`` timings exclude query embedding."""

    model_id = MODEL_ID
    dim = 384

    def __init__(self, vectors: dict[str, Vec]) -> None:
        self._vectors = vectors

    def embed(self, texts: Sequence[str]) -> Vec:
        return np.vstack([self._vectors[t] for t in texts]).astype(np.float32)


def recall(ann: list[Candidate], exact: list[Candidate], k: int) -> float:
    truth = {c.id for c in exact[:k]}
    return len(truth & {c.id for c in ann[:k]}) / max(1, len(truth))


def keyword_gold(store: Store, search: Any, queries: list[str], args: Any) -> dict[str, float]:
    """Of LoCoMo questions, the share whose keyword candidates (depth 50) include a gold turn.

    Over every agent's memories (``Filter(agent=None)``): with an agent filter most gold turns
    belong to another agent. A copy of a gold turn (same text plus a copy mark) counts: copies
    are equally relevant.
    """
    found10: list[float] = []
    found50: list[float] = []
    for q in queries:
        gold = GOLD.get(q)
        if not gold:
            continue
        flt = Filter(agent=None)
        cands = search.keyword_candidates(query_terms(q), flt, limit=DEPTH)
        mems = store.memories.get_many([c.id for c in cands], flt)
        texts = [_COPY_MARK.sub("", mems[c.id].content) for c in cands if c.id in mems]
        found10.append(float(any(t in gold for t in texts[:10])))
        found50.append(float(any(t in gold for t in texts)))
    if not found10:
        return {}
    return {
        "hit@10": round(statistics.fmean(found10), 4),
        "hit@50": round(statistics.fmean(found50), 4),
        "questions": len(found10),
    }


def store_rows(url: str) -> int:
    """The number of memories in the store."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(scalar(conn, "SELECT count(*) FROM memories"))


def numpy_truth(url: str, probes: Sequence[tuple[Filter, Vec]]) -> dict[int, list[Candidate]]:
    """The exact top :data:`DEPTH` of each probe, as the exact scan computes it: the vectors that pass the
    store's own filter SQL, read once per distinct filter, cosine in numpy (float64)."""
    import psycopg
    from pgvector.psycopg import register_vector

    out: dict[int, list[Candidate]] = {}
    groups: dict[Filter, list[int]] = {}
    for n, (flt, _) in enumerate(probes):
        groups.setdefault(flt, []).append(n)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for flt, members in groups.items():
            f = filter_sql(flt)
            rows = (
                conn.cursor(binary=True)
                .execute(
                    pg_statement(
                        "SELECT v.memory_id, v.embedding FROM vectors v JOIN memories m ON m.id = v.memory_id "
                        f"WHERE v.model_id = ? AND {f.where}"
                    ),
                    (MODEL_ID, *f.params),
                )
                .fetchall()
            )
            ids = [r[0] for r in rows]
            mat = np.vstack([np.asarray(r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1]) for r in rows])
            mat = mat.astype(np.float64)
            mat /= np.linalg.norm(mat, axis=1, keepdims=True)
            for n in members:
                q = probes[n][1].astype(np.float64)
                sims = mat @ (q / np.linalg.norm(q))
                top = np.argsort(-sims, kind="stable")[:DEPTH]
                out[n] = [Candidate(ids[j], float(sims[j])) for j in top]
    return out


def measure(
    url: str,
    store: Store,
    backend: PostgresBackend,
    queries: list[str],
    qvecs: dict[str, Vec],
    args: Any,
    *,
    recall_queries: int,
) -> dict[str, Any]:
    search = store.search
    exact = PgSearch(backend, exact_search_below=10**15)
    filters = {"agent": by_agent(args.agents), "agent+kind": by_agent(args.agents, ("knowledge",))}
    out: dict[str, Any] = {}
    truth: dict[tuple[str, int], list[Candidate]] = {}
    big = store_rows(url) > args.numpy_truth_above
    # Recall of the ANN path against the exact scan, same filter.
    for fname, make in filters.items():
        r10: list[float] = []
        r50: list[float] = []
        t0 = time.perf_counter()
        exact_ms: list[float] = []
        rq = list(enumerate(queries[:recall_queries]))
        if not rq:
            continue  # --recall-queries 0: latencies only (the vector path measured before)
        if big:
            # The exact scan takes seconds per query at 1M: the same top 50, computed once per filter in numpy.
            truth.update({(fname, i): c for i, c in numpy_truth(url, [(make(i), qvecs[q]) for i, q in rq]).items()})
        for i, q in rq:
            flt = make(i)
            ann = search.vector_candidates(qvecs[q], flt, limit=DEPTH)
            if not big:
                t = time.perf_counter()
                truth[fname, i] = exact.vector_candidates(qvecs[q], flt, limit=DEPTH)
                exact_ms.append((time.perf_counter() - t) * 1000)
            ex = truth[fname, i]
            r10.append(recall(ann, ex, 10))
            r50.append(recall(ann, ex, 50))
        out[f"recall_{fname}"] = {
            "recall@10": round(statistics.fmean(r10), 4),
            "recall@50": round(statistics.fmean(r50), 4),
            "queries": len(r10),
            "exact_scan_p50_ms": round(statistics.median(exact_ms), 1) if exact_ms else None,
            "truth": "numpy over the filter's vectors" if big else "the store's exact scan",
            "seconds": round(time.perf_counter() - t0, 1),
            "load1": load1(),
        }
        print(f"    recall {fname}: {out[f'recall_{fname}']}", flush=True)
    agent_filter = filters["agent"]
    # hnsw.ef_search: the HNSW path forced (exact_search_below=0), recall and latency per setting.
    sweep: dict[str, Any] = {}
    for ef in args.ef_sweep:
        probe = PgSearch(backend, exact_search_below=0, ef_search=ef)
        rq = list(enumerate(queries[:recall_queries]))
        hits = {i: probe.vector_candidates(qvecs[q], agent_filter(i), limit=DEPTH) for i, q in rq}
        sweep[str(ef)] = {
            "recall@10": round(statistics.fmean(recall(hits[i], truth["agent", i], 10) for i, _ in rq), 4),
            "recall@50": round(statistics.fmean(recall(hits[i], truth["agent", i], 50) for i, _ in rq), 4),
            **latency(vector_calls(probe, queries, qvecs, agent_filter)),
        }
        print(f"    ef_search {ef}: {sweep[str(ef)]}", flush=True)
    out["ef_search_sweep_agent_filter"] = sweep
    out.update(search_latencies(url, store, queries, qvecs, args.agents, agent_kind=True))
    # The keyword channel ranking every match (the code before the bounded selection), same run.
    out["keyword_gold"] = {"bounded": keyword_gold(store, search, queries, args)}
    if not big and args.rank_all:
        # Ranking every match takes seconds per query at 1M (its p95 was 1.8 s at 100k): measured below that.
        unbounded = PgSearch(backend, exact_search_below=args.exact_below, keyword_rank_rows=10**15)
        out["keyword_rank_all_ms"] = latency(keyword_calls(unbounded, queries, agent_filter))
        out["keyword_gold"]["rank_all"] = keyword_gold(store, unbounded, queries, args)
    print(f"    keyword gold: {out['keyword_gold']}", flush=True)
    for key in ("vector_ms", "vector_agent_kind_ms", "keyword_ms", "engram_search_ms", "engram_search_breakdown"):
        print(f"    {key}: {out[key]}", flush=True)
    return out


def ratios(pg: dict[str, Any], embedded: dict[str, Any]) -> dict[str, float]:
    """PostgreSQL's p50 and p95 over the embedded store's, per measurement both sides made."""
    out: dict[str, float] = {}
    for key in ("vector_ms", "keyword_ms", "engram_search_ms"):
        for q in ("p50_ms", "p95_ms"):
            if key in pg and key in embedded and embedded[key][q] > 0:
                out[f"{key[:-3]}_{q[:3]}"] = round(pg[key][q] / embedded[key][q], 2)
    return out


def with_writers(
    url: str, store: Store, texts: list[str], base: Vec, queries: list[str], qvecs: dict[str, Vec], args: Any
) -> dict[str, Any]:
    """Search latency while ``args.writers`` processes insert continuously, and their insert rate."""
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    counter = ctx.Value("l", 0)
    sub_texts, sub_base = texts[:3000], base[:3000]
    procs = [
        ctx.Process(target=writer, args=(url, w, sub_texts, sub_base, args.agents, stop, counter, args))
        for w in range(args.writers)
    ]
    for p in procs:
        p.start()
    time.sleep(5.0)  # let them connect and reach a steady rate
    start_count, t0 = counter.value, time.perf_counter()
    out = search_latencies(url, store, queries, qvecs, args.agents)
    elapsed = time.perf_counter() - t0
    inserted = counter.value - start_count
    stop.set()
    for p in procs:
        p.join(timeout=60)
    out["writers"] = args.writers
    out["writer_inserts_per_s"] = round(inserted / elapsed, 1)
    out["window_s"] = round(elapsed, 1)
    out["load1"] = load1()
    print(f"    with {args.writers} writers: {out}", flush=True)
    return out


def _earlier_sizes(path: Path, measuring: Sequence[int]) -> list[dict[str, Any]]:
    """The entries of ``path`` (an earlier run's results) for sizes this run does not measure: kept as they are."""
    if not path.exists():
        return []
    earlier = json.loads(path.read_text(encoding="utf-8"))
    kept = [e for e in earlier.get("sizes", []) if e.get("size") not in measuring]
    for e in kept:
        e.setdefault("date", earlier.get("date"))
    return kept


def load_increment(
    url: str, store: Store, texts: list[str], base: Vec, rng: np.random.Generator, loaded: int, size: int, args: Any
) -> tuple[dict[str, Any], tuple[str, str]]:
    """Grow the store from ``loaded`` to ``size`` memories with the model's HNSW index dropped; its (name, definition).

    Through ``store.memories.add`` up to ``--store-path-max`` memories, then :class:`BulkLoader`.
    """
    import psycopg

    index = hnsw_index(url)
    # One build after the load beats ~size graph insertions (the store keeps its vector_indexes row).
    if index is not None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP INDEX "{index[0]}"')
    start, t0, load_before = loaded, time.perf_counter(), load1()
    bulk: BulkLoader | None = None
    while loaded < size:
        if loaded < args.store_path_max:
            n = min(args.batch, size - loaded, args.store_path_max - loaded)
            memories, vecs = make_batch(texts, base, loaded, n, args.agents, rng, args)
            store.memories.add(memories, vecs, model_id=MODEL_ID, actor="bench")
        else:
            n = min(args.bulk_batch, size - loaded)
            memories, vecs = make_batch(texts, base, loaded, n, args.agents, rng, args)
            if bulk is None:
                bulk = BulkLoader(url)
                bulk.drop_indexes()
            bulk.add(memories, vecs)
        loaded += n
        if index is None:
            # The store created the model's index on its first vector write: drop it for the rest.
            index = hnsw_index(url)
            assert index is not None
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP INDEX "{index[0]}"')
        if loaded // 50_000 != (loaded - n) // 50_000:
            print(f"   {loaded:,} loaded, {time.perf_counter() - t0:.0f}s, load1 {load1()}", flush=True)
    load_s = time.perf_counter() - t0
    entry: dict[str, Any] = {
        "memories": size - start,
        "seconds": round(load_s, 1),
        "per_s": round((size - start) / load_s, 1),
        "batch": args.batch,
        "from": start,
        "load1_before": load_before,
        "load1_after": load1(),
        "path": "store.memories.add"
        if size <= args.store_path_max
        else f"store.memories.add up to {args.store_path_max:,}, bulk COPY of the same rows beyond "
        f"(batches of {args.bulk_batch:,}, secondary indexes and foreign-key triggers off, rebuilt/checked after)",
        "note": "HNSW index dropped during the load (after the first batch), rebuilt after (hnsw_build)",
    }
    if bulk is not None:
        t = time.perf_counter()
        entry["index_rebuild_s"] = bulk.rebuild_indexes()
        entry["index_rebuild_total_s"] = round(time.perf_counter() - t, 1)
        entry["checks"] = bulk.orphans()
        entry["load1_after_rebuild"] = load1()
        bulk.close()
        if entry["checks"]["memory_tags_orphans"] or entry["checks"]["vectors_orphans"]:
            raise SystemExit(f"the bulk load left dangling references: {entry['checks']}")
    assert index is not None
    return entry, index


def run(args: Any) -> dict[str, Any]:
    t = time.perf_counter()
    texts, base, questions = load_turns(args.lme_questions, args.embedding_cache)
    print(
        f"{len(texts)} distinct turns with cached vectors, {len(questions)} questions ({time.perf_counter() - t:.0f}s)",
        flush=True,
    )
    qrng = np.random.default_rng(7)
    queries = [
        questions[int(i)] for i in qrng.choice(len(questions), size=min(args.queries, len(questions)), replace=False)
    ]
    embedder = make_embedder(load_settings())
    if embedder.model_id != MODEL_ID:
        raise SystemExit(f"the default embedder is {embedder.model_id}, the cached turn vectors are {MODEL_ID}")
    qvecs = dict(zip(queries, embedder.embed(queries), strict=True))
    resume = Path(args.resume) if args.resume else None
    server = start_server(Path(args.tmp) if args.tmp else None, resume)
    import psycopg

    kept = _earlier_sizes(args.out, args.sizes)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpu_count": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform()},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "server_settings": SERVER_SETTINGS,
        "data": {
            "distinct_turns": len(texts),
            "queries": len(queries),
            "vectors": (
                "real-derived synthetic: cached all-MiniLM-L6-v2 turn embeddings; copy 0 of a turn is its real "
                f"vector, later copies real + {args.blend} x another real turn vector + Gaussian noise of norm "
                f"{args.noise}, renormalised"
            ),
        },
        "sizes": list(kept),
    }
    try:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            version = conn.execute("SELECT version()").fetchone()
            results["server"] = str(version[0]) if version else "?"
            results["pgvector"] = str(
                scalar(conn, "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
            )
            if resume is None:
                conn.execute("CREATE DATABASE scale")
        if resume is None and args.sizes[-1] > args.store_path_max:
            results["bulk_path_check"] = check_bulk_rows(server, texts, base, args)
        url = server.url("scale")
        backend = PostgresBackend(url, pool_size=4, exact_search_below=args.exact_below)
        store = sql_store(backend)
        with psycopg.connect(url, autocommit=True) as conn:
            loaded = int(scalar(conn, "SELECT count(*) FROM memories") or 0) if resume is not None else 0
        rng = np.random.default_rng(1)
        advance = advancer(len(texts), base.shape[1])
        advance(rng, 0, loaded)
        embedded = None
        if not args.no_embedded:
            where = Path(args.embedded_dir) if args.embedded_dir else server.root / "embedded"
            embedded = EmbeddedSide(where, make_batch, MODEL_ID, advance)
        measured: list[dict[str, Any]] = []
        for size in args.sizes:
            print(f"== {size:,} memories", flush=True)
            entry: dict[str, Any] = {"size": size, "date": results["date"]}
            if loaded >= size:
                # A kept server already holds this size (and its HNSW index): measure it again.
                entry["load"] = {"resumed": str(resume), "memories_present": loaded}
                index = hnsw_index(url)
                assert index is not None
            else:
                entry["load"], index = load_increment(url, store, texts, base, rng, loaded, size, args)
                loaded = size
                print(f"   load: {entry['load']}", flush=True)
                t0, build_before = time.perf_counter(), load1()
                with psycopg.connect(url, autocommit=True) as conn:
                    # A partitioned table's index reads back as ``ON ONLY`` (the parent's alone, left invalid, no
                    # partition's graph built: every search an exact scan): built on every partition instead.
                    conn.execute(index[1].replace(" ON ONLY ", " ON ", 1))
                    conn.execute("ANALYZE")
                entry["hnsw_build"] = {
                    "seconds": round(time.perf_counter() - t0, 1),
                    "vectors": size,
                    "maintenance_work_mem": SERVER_SETTINGS["maintenance_work_mem"],
                    "parallel_workers": SERVER_SETTINGS["max_parallel_maintenance_workers"],
                    "load1_before": build_before,
                    "load1_after": load1(),
                }
                print(f"   build: {entry['hnsw_build']}", flush=True)
            entry["sizes_mb"] = sizes(url, index[0])
            print(f"   sizes: {entry['sizes_mb']}", flush=True)
            entry["quiet"] = measure(url, store, backend, queries, qvecs, args, recall_queries=args.recall_queries)
            entry["load1_after_measure"] = load1()
            results["in_progress"] = entry
            write(args.out, results)
            if embedded is not None:
                print(f"   embedded store: {embedded.directory}", flush=True)
                if embedded.loaded < size:
                    entry["embedded_load"] = embedded.grow(size, texts, base, args, QueryEmbedder(qvecs), queries[0])
                    print(f"   embedded load: {entry['embedded_load']}", flush=True)
                entry["embedded"] = embedded.measure(queries, qvecs, args.agents, latency, QueryEmbedder(qvecs))
                entry["pg_over_embedded"] = ratios(entry["quiet"], entry["embedded"])
                entry["interleaved"] = interleaved(url, embedded.directory, queries, args.agents, QueryEmbedder(qvecs))
                print(f"   interleaved: {entry['interleaved']}", flush=True)
                print(f"   embedded: {entry['embedded']}\n   ratio: {entry['pg_over_embedded']}", flush=True)
                write(args.out, results)
            if args.writers > 0:
                entry["with_writers"] = with_writers(url, store, texts, base, queries, qvecs, args)
                with psycopg.connect(url, autocommit=True) as conn:
                    row = conn.execute("SELECT count(*) FROM memories").fetchone()
                    entry["rows_after_writers"] = int(row[0]) if row else None
                    loaded = entry["rows_after_writers"] or loaded
            measured.append(entry)
            results["sizes"] = sorted([*kept, *measured], key=lambda e: int(e["size"]))
            results.pop("in_progress", None)
            write(args.out, results)
        store.close()
    finally:
        server.stop(keep=args.keep)
    return results


def write(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--agents", type=int, default=10, help="memories are spread over this many agents")
    parser.add_argument("--batch", type=int, default=1000, help="memories per store.memories.add")
    parser.add_argument(
        "--store-path-max", type=int, default=100_000, help="load through store.memories.add up to here, COPY beyond"
    )
    parser.add_argument("--queries", type=int, default=100, help="timed queries per measurement")
    parser.add_argument("--recall-queries", type=int, default=50, help="queries for recall against the exact scan")
    parser.add_argument("--writers", type=int, default=2, help="concurrent writer processes")
    parser.add_argument("--lme-questions", type=int, default=60, help="LongMemEval haystacks to take turns from")
    parser.add_argument("--ef-sweep", default="40,100,200", help="hnsw.ef_search values to measure ('': none)")
    parser.add_argument("--exact-below", type=int, default=20_000, help="the store's exact_search_below")
    parser.add_argument("--blend", type=float, default=0.35)
    parser.add_argument("--noise", type=float, default=0.25)
    parser.add_argument("--bulk-batch", type=int, default=10_000, help="memories per COPY past --store-path-max")
    parser.add_argument(
        "--numpy-truth-above", type=int, default=200_000, help="past this many memories, exact top-k in numpy"
    )
    parser.add_argument("--keep", action="store_true", help="keep the server's data directory at the end")
    parser.add_argument("--resume", default=None, help="a data directory kept by --keep: measure it again")
    parser.add_argument("--tmp", default=None, help="directory for the server's data (default: system temp)")
    parser.add_argument("--rank-all", action="store_true", help="also time the keyword channel ranking every match")
    parser.add_argument("--embedding-cache", type=Path, default=None, help="a copy of the bench's embedding cache")
    parser.add_argument("--no-embedded", action="store_true", help="PostgreSQL only (no embedded store beside it)")
    parser.add_argument(
        "--embedded-dir", default=None, help="the embedded store's directory (kept; grown on from its rows)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "scale_pg.json")
    args = parser.parse_args(argv)
    args.sizes = sorted(int(s) for s in args.sizes.split(","))
    args.ef_sweep = [int(s) for s in args.ef_sweep.split(",") if s.strip()]
    results = run(args)
    write(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Side by side: engramdb against ChromaDB and LanceDB on the same LoCoMo turns, with the same vectors.

Protocol (one run, every system measured in it, the 1-minute load average written beside every timing):

- Data: the LoCoMo dev conversations (bench/_data.py), one memory per turn, content ``"speaker: text"``;
  one store / collection / table per conversation, as bench/retrieval.py does. Quality: recall@5 and
  recall@10 of the evidence turns over the dev questions, each system asked with ``limit=k`` for recall@k.
- One embedder: engramdb's default local model. Every turn and question is embedded once (kept in the
  benchmark's embedding cache file) and the same float32 unit vectors go to every system, so the stores
  are compared, not the models. engramdb gets them the way a user's store gets vectors: ``Engram(path,
  embedder=...)`` with a ``CachedEmbedder`` around a lookup of the precomputed vectors (a text it does not
  know falls through to the real model and is counted as a miss); then ``remember_many(kind="conversation")``
  and ``search(question, agent=..., limit=k)`` exactly as a user calls them (its default hybrid search).
  ChromaDB gets ``PersistentClient`` collections with ``embedding_function=None``, ``add(ids, documents,
  metadatas, embeddings)`` and ``query(query_embeddings=..., n_results=k)`` (its default HNSW index and
  distance; vectors are unit length, so l2 and cosine rank alike). LanceDB gets an on-disk table per
  corpus (``id``, ``text``, ``vector``), its native full-text index with default settings, and three
  searches: vector (exact flat scan: no ANN index, the LanceDB default for tables this size), full-text
  alone, and hybrid (vector + full text, default ``RRFReranker``).
- Ingest: (a) end to end, each system with a fresh embedder (model warmed, empty cache), so it embeds
  every text itself (engramdb inside ``remember_many``, plus ``flush()`` when the store has one, so the
  memories are searchable when the clock stops); (b) the storage path alone with the vectors precomputed.
  Both include creating the store and building the indexes a search mode needs (LanceDB's full-text index
  for its FTS and hybrid columns; its vector column is the table alone). Rows go in in calls of 5,000,
  interleaved corpus by corpus across the systems (the load hits them alike). engramdb's background
  indexes (HNSW past ``ann_threshold`` vectors, keyword postings past 10k memories) are then built and
  waited for, timed as their own row: the store answers (exact scan, FTS5) while they build.
- Search latency: p50/p95 of ``limit=10`` searches, the query vector precomputed for every system (the
  query embedding costs the same for all; its own time is reported once). Calls are interleaved per query
  across systems so all see the same background load. At the LoCoMo size: every dev question against its
  conversation. At scale (``--sizes``, default 100k): one store of real turn texts repeated with variation
  (a copy drops one word and carries a copy number) and perturbed vectors (the turn's vector plus Gaussian
  noise, renormalised, cosine ~0.9 to the original); the same rows for every system.
- Cold start: a fresh Python process opens the store and runs the first search (vector precomputed);
  ``import`` of the library is timed separately. The page cache is warm (files were just written).
- On-disk size: bytes of every file under the system's directory after ingest and close.

    python bench/compare.py                 # full run (all 5 conversations, 100k)
    python bench/compare.py --quick         # 1 conversation, 40 questions, 10k
    python bench/compare.py --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _data import load_locomo
from _report import write_json
from _systems import percentile, recall_at_k
from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, make_embedder
from engramdb.embeddings.base import Embedder

# LanceDB logs a deprecation warning per search that selects columns; keep its errors only.
os.environ.setdefault("LANCEDB_LOG", "error")

AGENT = "bench"
KS = (5, 10)
CHUNK = 5000
WARMUP = 5
RESULTS = Path(__file__).resolve().parent / "results" / "compare.json"
Vectors = npt.NDArray[np.float32]
#: (column, system, search mode): the table's columns, in order.
COLUMNS = (
    ("engramdb", "engramdb", "search"),
    ("chroma vector", "chroma", "vector"),
    ("lance vector", "lance", "vector"),
    ("lance fts", "lance", "fts"),
    ("lance hybrid", "lance", "hybrid"),
)


def load() -> float:
    """The 1-minute load average: six other engineers share the 2 cores."""
    return round(os.getloadavg()[0], 2)


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message} (load {load()})", file=sys.stderr, flush=True)


def latency(ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95), "n": len(ms)}


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Lookup:
    """An embedder answering from precomputed vectors; unknown texts go to the real model (counted)."""

    def __init__(self, inner: Embedder, table: dict[str, Vectors]) -> None:
        self.inner, self.table = inner, table
        self.model_id, self.dim = inner.model_id, inner.dim
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        unknown = [t for t in texts if t not in self.table]
        if unknown:
            self.misses += len(unknown)
            self.table.update(zip(unknown, self.inner.embed(unknown), strict=True))
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack([self.table[t] for t in texts]).astype(np.float32, copy=False)


@dataclass(frozen=True, slots=True)
class Corpus:
    """One store's rows: a conversation (or the scale fill)."""

    name: str
    ids: list[str]
    texts: list[str]
    vectors: Vectors


# -- the systems: same four verbs each -------------------------------------------------------------


class EngramSystem:
    name = "engramdb"

    def __init__(self, root: Path, embedder: Embedder) -> None:
        self.root, self.embedder = root, embedder
        self.stores: dict[str, Engram] = {}
        self.misses = 0

    def add(self, corpus: Corpus, embedder: Embedder | None) -> dict[str, float]:
        t0 = time.perf_counter()
        mem = Engram(self.root / corpus.name, embedder=embedder or self.embedder)
        for start in range(0, len(corpus.ids), CHUNK):
            items = [
                {"content": t, "agent": AGENT, "kind": "conversation", "metadata": {"turn": i}}
                for i, t in zip(corpus.ids[start : start + CHUNK], corpus.texts[start : start + CHUNK], strict=True)
            ]
            mem.remember_many(items)
        flush = getattr(mem, "flush", None)
        if callable(flush):  # background vectors: searchable only once the queue is drained
            flush()
        self.stores[corpus.name] = mem
        return {"total": time.perf_counter() - t0}

    def search(self, corpus: str, mode: str, text: str, vec: Vectors, k: int) -> list[str]:
        return [str(h.memory.metadata["turn"]) for h in self.stores[corpus].search(text, agent=AGENT, limit=k)]

    def build_indexes(self, corpus: Corpus) -> dict[str, float]:
        """Start and wait for the store's background indexes (HNSW past ``ann_threshold`` vectors, the
        in-memory keyword postings past 10k memories); both start on the first search that needs them.

        Until they are ready the exact scan and FTS5 answer, so the store is searchable from the end of
        ``add``; the build is timed here, apart, because it is a real cost of reaching the fast path."""
        mem = self.stores[corpus.name]
        search = mem.store.search
        inner = getattr(search, "_inner", search)  # the background-vectors view wraps the store's search
        t0 = time.perf_counter()
        mem.search(corpus.texts[0], agent=AGENT, limit=10)  # loads the vectors exactly, starts both builds
        first = time.perf_counter() - t0
        inner._index.wait_for_index()
        inner.keyword_index.wait()
        uses_ann = bool(inner._index.uses_ann)
        mem.search(corpus.texts[0], agent=AGENT, limit=10)  # the first search on the new indexes swaps them in
        return {
            "index_build": time.perf_counter() - t0,
            "index_first_search": first,
            "uses_ann": float(uses_ann),
            "keyword_index": float(inner.keyword_index.ready()),
        }

    def close(self) -> None:
        for mem in self.stores.values():
            mem.close()
        self.stores.clear()


class ChromaSystem:
    name = "chroma"

    def __init__(self, root: Path, embedder: Embedder) -> None:
        import chromadb
        from chromadb.config import Settings

        self.root = root
        self.client: Any = chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))
        self.collections: dict[str, Any] = {}

    def add(self, corpus: Corpus, embedder: Embedder | None) -> dict[str, float]:
        t0 = time.perf_counter()
        coll = self.client.get_or_create_collection(corpus.name, embedding_function=None)
        for start in range(0, len(corpus.ids), CHUNK):
            texts = corpus.texts[start : start + CHUNK]
            vecs = corpus.vectors[start : start + CHUNK] if embedder is None else embedder.embed(texts)
            ids = corpus.ids[start : start + CHUNK]
            coll.add(ids=ids, documents=texts, metadatas=[{"turn": i} for i in ids], embeddings=vecs)
        self.collections[corpus.name] = coll
        return {"total": time.perf_counter() - t0}

    def search(self, corpus: str, mode: str, text: str, vec: Vectors, k: int) -> list[str]:
        res = self.collections[corpus].query(query_embeddings=[vec], n_results=k)
        return list(res["ids"][0])

    def close(self) -> None:
        self.collections.clear()
        self.client = None
        gc.collect()


class LanceSystem:
    name = "lance"

    def __init__(self, root: Path, embedder: Embedder) -> None:
        import lancedb

        self.root = root
        self.db: Any = lancedb.connect(str(root))
        self.tables: dict[str, Any] = {}

    def add(self, corpus: Corpus, embedder: Embedder | None) -> dict[str, float]:
        import pyarrow as pa

        t0 = time.perf_counter()
        table = None
        for start in range(0, len(corpus.ids), CHUNK):
            texts = corpus.texts[start : start + CHUNK]
            vecs = corpus.vectors[start : start + CHUNK] if embedder is None else embedder.embed(texts)
            flat = pa.array(np.ascontiguousarray(vecs, dtype=np.float32).ravel())
            batch = pa.table(
                {
                    "id": corpus.ids[start : start + CHUNK],
                    "text": texts,
                    "vector": pa.FixedSizeListArray.from_arrays(flat, vecs.shape[1]),
                }
            )
            if table is None:
                table = self.db.create_table(corpus.name, data=batch, mode="overwrite")
            else:
                table.add(batch)
        t1 = time.perf_counter()
        from lancedb.index import FTS

        assert table is not None
        table.create_index("text", config=FTS())
        self.tables[corpus.name] = table
        t2 = time.perf_counter()
        return {"total": t2 - t0, "table": t1 - t0, "fts_index": t2 - t1}

    def search(self, corpus: str, mode: str, text: str, vec: Vectors, k: int) -> list[str]:
        table = self.tables[corpus]
        if mode == "vector":
            q = table.search(vec).select(["id", "text", "_distance"])
        elif mode == "fts":
            q = table.search(text, query_type="fts").select(["id", "text", "_score"])
        else:
            q = table.search(query_type="hybrid").vector(vec).text(text).select(["id", "text"])
        return [str(r["id"]) for r in q.limit(k).to_list()]

    def close(self) -> None:
        self.tables.clear()
        self.db = None
        gc.collect()


SYSTEMS: dict[str, Callable[[Path, Embedder], Any]] = {
    "engramdb": EngramSystem,
    "chroma": ChromaSystem,
    "lance": LanceSystem,
}


def build(
    root: Path,
    corpora: Sequence[Corpus],
    embedder_for: Callable[[str], Embedder | None],
    store_embedder: Embedder,
    index_corpus: Corpus | None = None,
) -> dict[str, Any]:
    """Ingest ``corpora`` into every system, interleaved corpus by corpus (each corpus goes into every system
    before the next, so the systems share the machine's load alike); the systems stay open for searching.

    With ``index_corpus``, a system with background indexes (engramdb) then builds them for that store,
    timed apart from the ingest (``timing[name]["index"]``)."""
    out: dict[str, Any] = {"systems": {}, "timing": {}}
    n = sum(len(c.ids) for c in corpora)
    systems = {name: factory(root / name, store_embedder) for name, factory in SYSTEMS.items()}
    embedders = {name: embedder_for(name) for name in systems}  # outside the clock: fresh models load here
    parts: dict[str, dict[str, float]] = {name: {} for name in systems}
    loads: dict[str, list[float]] = {name: [] for name in systems}
    for corpus in corpora:
        for name, system in systems.items():
            loads[name].append(load())
            for key, seconds in system.add(corpus, embedders[name]).items():
                parts[name][key] = parts[name].get(key, 0.0) + seconds
    for name, system in systems.items():
        out["systems"][name] = system
        out["timing"][name] = {
            **parts[name],
            "memories": n,
            "load_before": round(statistics.fmean(loads[name]), 2),
            "load_after": load(),
        }
        log(f"{root.name}: {name} ingested {n} memories in {parts[name]['total']:.1f} s")
    for name, system in systems.items():
        if hasattr(system, "build_indexes") and index_corpus is not None:
            before = load()
            built = system.build_indexes(index_corpus)
            out["timing"][name]["index"] = {**built, "load_before": before, "load_after": load()}
            log(f"{root.name}: {name} indexes built in {built['index_build']:.1f} s ({built})")
    return out


def ingest_rows(timing: dict[str, Any]) -> dict[str, Any]:
    """memories/s per column from a :func:`build` timing."""
    rows = {}
    for column, system, mode in COLUMNS:
        t = timing[system]
        # LanceDB's vector column needs no full-text index: its store is the table alone.
        seconds = t["table"] if (system, mode) == ("lance", "vector") else t["total"]
        rows[column] = {"memories_per_s": t["memories"] / seconds, "seconds": seconds, "load": t["load_before"]}
    return rows


def timed_search(systems: dict[str, Any], corpus: str, text: str, vec: Vectors, k: int) -> dict[str, Any]:
    """Each column's ranking and wall time (ms) for one query, systems in turn."""
    out = {}
    for column, system, mode in COLUMNS:
        t0 = time.perf_counter()
        ranking = systems[system].search(corpus, mode, text, vec, k)
        out[column] = (ranking, (time.perf_counter() - t0) * 1000.0)
    return out


def close_all(systems: dict[str, Any], root: Path) -> dict[str, int]:
    sizes = {}
    for name, system in systems.items():
        system.close()
        sizes[name] = disk_bytes(root / name)
    return sizes


# -- the runs ----------------------------------------------------------------------------------------


def run_locomo(
    args: argparse.Namespace, tmp: Path, table: dict[str, Vectors], make_raw: Callable[[], CachedEmbedder]
) -> dict[str, Any]:
    conversations = load_locomo()[: args.conversations]
    corpora = [
        Corpus(
            c.sample_id,
            [d.id for d in c.docs],
            [d.content for d in c.docs],
            np.stack([table[d.content] for d in c.docs]),
        )
        for c in conversations
    ]
    out: dict[str, Any] = {
        "conversations": [c.sample_id for c in conversations],
        "memories": sum(len(c.ids) for c in corpora),
    }

    # (a) end to end: a fresh embedder per system, model warmed outside the clock.
    def fresh(_: str) -> Embedder:
        emb = make_raw()
        emb.embed(["warm up the model"])
        return emb

    # The floor under every end-to-end rate: the model alone on the same texts, one call.
    emb = fresh("")
    before = load()
    seconds = _ms(lambda: emb.embed([t for c in corpora for t in c.texts])) / 1000.0
    out["embedding_alone"] = {"texts_per_s": out["memories"] / seconds, "load_before": before, "load_after": load()}
    e2e = build(tmp / "e2e", corpora, fresh, make_raw())
    close_all(e2e["systems"], tmp / "e2e")
    out["ingest_end_to_end"] = ingest_rows(e2e["timing"])
    out["ingest_end_to_end_detail"] = e2e["timing"]

    # (b) storage path alone: every system gets the precomputed vectors.
    lookup = Lookup(make_raw(), table)
    store_embedder = CachedEmbedder(lookup, size=50_000)
    built = build(tmp / "locomo", corpora, lambda _: None, store_embedder)
    systems = built["systems"]
    out["ingest_storage_path"] = ingest_rows(built["timing"])
    out["ingest_storage_path_detail"] = built["timing"]

    warm_vec = table["warm up the model"]
    for corpus in corpora:
        for _ in range(WARMUP):
            timed_search(systems, corpus.name, "warm up the model", warm_vec, 10)
    recalls: dict[str, dict[str, list[float]]] = {c: {f"recall@{k}": [] for k in KS} for c, _, _ in COLUMNS}
    times: dict[str, list[float]] = {c: [] for c, _, _ in COLUMNS}
    before = load()
    n_questions = 0
    for conv in conversations:
        for q in conv.questions[: args.questions]:
            n_questions += 1
            for k in KS:
                for column, (ranking, ms) in timed_search(systems, conv.sample_id, q.text, table[q.text], k).items():
                    recalls[column][f"recall@{k}"].append(recall_at_k(ranking, q.evidence, k))
                    if k == 10:
                        times[column].append(ms)
    out["questions"] = n_questions
    out["recall"] = {c: {m: statistics.fmean(v) for m, v in r.items()} for c, r in recalls.items()}
    out["search"] = {c: {**latency(t), "load_before": before, "load_after": load()} for c, t in times.items()}
    out["engramdb_embedder_misses"] = lookup.misses
    sizes = close_all(systems, tmp / "locomo")
    out["disk_bytes"] = sizes
    first = conversations[0]
    out["cold_start"] = cold_starts(args, tmp / "locomo", first.sample_id, first.questions[0].text, table)
    return out


def scale_corpus(n: int, pool: Sequence[str], table: dict[str, Vectors], rng: np.random.Generator) -> Corpus:
    """``n`` rows: the pool's turns, then copies with one word dropped, a copy number and a perturbed vector."""
    ids, texts, vecs = [], [], []
    dim = next(iter(table.values())).shape[0]
    # Noise per component so that the copy's cosine to the original is about 0.9.
    sigma = math.sqrt((1 / 0.9**2 - 1) / dim)
    for i in range(n):
        copy, base = divmod(i, len(pool))
        text = pool[base]
        vec = table[text]
        if copy:
            words = text.split(" ")
            if len(words) > 2:
                del words[1 + int(rng.integers(0, len(words) - 1))]
            text = " ".join(words) + f" (copy {copy})"
            vec = vec + rng.normal(0.0, sigma, size=dim).astype(np.float32)
            vec = vec / np.linalg.norm(vec)
        ids.append(f"m{i}")
        texts.append(text)
        vecs.append(vec)
    return Corpus("scale", ids, texts, np.stack(vecs).astype(np.float32))


def run_scale(
    args: argparse.Namespace, tmp: Path, table: dict[str, Vectors], make_raw: Callable[[], CachedEmbedder], size: int
) -> dict[str, Any]:
    rng = np.random.default_rng(size)
    pool = list(dict.fromkeys(d.content for c in load_locomo() for d in c.docs))
    corpus = scale_corpus(size, pool, table, rng)
    scale_table = dict(zip(corpus.texts, corpus.vectors, strict=True))
    questions = [q.text for c in load_locomo() for q in c.questions]
    questions = questions[:: max(1, len(questions) // args.latency_queries)][: args.latency_queries]
    scale_table.update((q, table[q]) for q in questions)
    lookup = Lookup(make_raw(), scale_table)
    root = tmp / f"scale{size}"
    built = build(root, [corpus], lambda _: None, CachedEmbedder(lookup, size=0), index_corpus=corpus)
    systems = built["systems"]
    out: dict[str, Any] = {"memories": size, "ingest_storage_path": ingest_rows(built["timing"])}
    out["index_build"] = built["timing"]["engramdb"].get("index")
    out["ingest_detail"] = built["timing"]
    for q in questions[:WARMUP]:
        timed_search(systems, "scale", q, table[q], 10)
    times: dict[str, list[float]] = {c: [] for c, _, _ in COLUMNS}
    before = load()
    for q in questions:
        for column, (_, ms) in timed_search(systems, "scale", q, table[q], 10).items():
            times[column].append(ms)
    out["search"] = {c: {**latency(t), "load_before": before, "load_after": load()} for c, t in times.items()}
    out["engramdb_embedder_misses"] = lookup.misses
    out["disk_bytes"] = close_all(systems, root)
    out["cold_start"] = cold_starts(args, root, "scale", questions[0], table)
    return out


# -- cold start: a child process per column -----------------------------------------------------------


def cold_starts(
    args: argparse.Namespace, root: Path, corpus: str, question: str, table: dict[str, Vectors]
) -> dict[str, Any]:
    qfile = root / "cold_query.json"
    qfile.write_text(json.dumps({"text": question, "vector": table[question].tolist()}), encoding="utf-8")
    out = {}
    for column, system, mode in COLUMNS:
        runs = []
        for _ in range(args.cold_repeats):
            before = load()
            t0 = time.perf_counter()
            child = subprocess.run(
                [sys.executable, "-c", COLD_CHILD, system, mode, str(root / system), corpus, str(qfile)],
                capture_output=True,
                text=True,
                check=True,
            )
            wall = (time.perf_counter() - t0) * 1000.0
            res = json.loads(child.stdout.strip().splitlines()[-1])
            runs.append({**res, "process_wall_ms": wall, "load": before})
        out[column] = {
            key: statistics.median(run[key] for run in runs)
            for key in ("import_ms", "open_and_first_search_ms", "process_wall_ms")
        }
        out[column]["load"] = runs[0]["load"]
        out[column]["hits"] = runs[0]["hits"]
    return out


#: The fresh process: only json/time/numpy loaded before the clock starts, so ``import`` of each library
#: is timed alike; then open the store and run one search with the precomputed query vector.
COLD_CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np
system, mode, path, corpus, qfile = sys.argv[1:6]
query = json.loads(Path(qfile).read_text(encoding="utf-8"))
text, vec = query["text"], np.asarray(query["vector"], dtype=np.float32)
t0 = time.perf_counter()
if system == "engramdb":
    from engramdb import Engram
    from engramdb.config import load_settings
    from engramdb.embeddings import CachedEmbedder, make_embedder
    t1 = time.perf_counter()
    real = make_embedder(load_settings())  # lazy: the model is never loaded, the vector is known

    class Known:
        model_id, dim = real.model_id, real.dim

        def embed(self, texts):
            return np.stack([vec for _ in texts])

    with Engram(Path(path) / corpus, embedder=CachedEmbedder(Known(), size=16)) as mem:
        hits = len(mem.search(text, agent="bench", limit=10))
elif system == "chroma":
    import chromadb
    from chromadb.config import Settings
    t1 = time.perf_counter()
    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    coll = client.get_collection(corpus, embedding_function=None)
    hits = len(coll.query(query_embeddings=[vec], n_results=10)["ids"][0])
else:
    import lancedb
    t1 = time.perf_counter()
    table = lancedb.connect(path).open_table(corpus)
    if mode == "vector":
        q = table.search(vec).select(["id", "text", "_distance"])
    elif mode == "fts":
        q = table.search(text, query_type="fts").select(["id", "text", "_score"])
    else:
        q = table.search(query_type="hybrid").vector(vec).text(text).select(["id", "text"])
    hits = len(q.limit(10).to_list())
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1000.0, "open_and_first_search_ms": (t2 - t1) * 1000.0, "hits": hits}))
"""


# -- output -----------------------------------------------------------------------------------------------


def table_rows(results: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """The comparison table of one run: (row label, cell per column)."""
    rows: list[tuple[str, dict[str, str]]] = []
    lo = results["locomo"]
    for m in ("recall@5", "recall@10"):
        rows.append((f"LoCoMo {m} ({lo['questions']} q)", {c: f"{100 * v[m]:.1f}" for c, v in lo["recall"].items()}))
    for key, label in (("ingest_end_to_end", "ingest incl. embedding"), ("ingest_storage_path", "ingest storage path")):
        rows.append(
            (f"{label}, memories/s", {c: f"{v['memories_per_s']:.0f} (load {v['load']})" for c, v in lo[key].items()})
        )
    n = lo["memories"]
    sections: list[tuple[str, dict[str, Any]]] = [(f"LoCoMo ({n} in {len(lo['conversations'])} stores)", lo)]
    sections += [(f"{int(s):,}", results["scale"][s]) for s in results.get("scale", {})]
    for label, sec in sections:
        if label[0].isdigit():
            rows.append(
                (
                    f"ingest storage path at {label}, memories/s",
                    {c: f"{v['memories_per_s']:.0f} (load {v['load']})" for c, v in sec["ingest_storage_path"].items()},
                )
            )
            idx = sec.get("index_build")
            if idx:
                what = "HNSW + keyword" if idx["uses_ann"] and idx["keyword_index"] else "partial"
                rows.append(
                    (
                        f"index build after ingest at {label}, s",
                        {"engramdb": f"{idx['index_build']:.1f} ({what}; load {idx['load_before']})"},
                    )
                )
        rows.append(
            (
                f"search p50 / p95 ms, {label}",
                {
                    c: f"{v['p50_ms']:.2f} / {v['p95_ms']:.2f} (load {v['load_before']})"
                    for c, v in sec["search"].items()
                },
            )
        )
        rows.append(
            (
                f"cold start ms (open + 1st search; import), {label}",
                {
                    c: f"{v['open_and_first_search_ms']:.0f}; {v['import_ms']:.0f} (load {v['load']})"
                    for c, v in sec["cold_start"].items()
                },
            )
        )
        rows.append((f"on disk MB, {label}", {c: f"{sec['disk_bytes'][s] / 1e6:.1f}" for c, s, _ in COLUMNS}))
    return rows


def markdown(results: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """The table, with engramdb's figures of ``before`` (an earlier run's results) as the first column."""
    cols = [c for c, _, _ in COLUMNS]
    old = dict(table_rows(before)) if before else {}
    head = (["engramdb before"] if old else []) + cols
    lines = ["| measure | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for label, cells in table_rows(results):
        first = [old.get(label, {}).get("engramdb", "-")] if old else []
        lines.append(f"| {label} | " + " | ".join(first + [cells.get(c, "-") for c in cols]) + " |")
    lo = results["locomo"]
    emb, qe = lo["embedding_alone"], results["query_embedding_ms"]
    lines.append("")
    lines.append(
        f"Same embedder for all ({results['embedder']}): the model alone embeds {emb['texts_per_s']:.0f} turns/s "
        f"(load {emb['load_before']}); one query embedding p50 {qe['p50_ms']:.1f} ms (load {qe['load']}), "
        "excluded from the search and cold-start rows for every system."
    )
    if before:
        lines.append(f'engramdb before: the run of {before.get("date")} (its JSON is kept under "before").')
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 conversation, 40 questions, 10k instead of 100k")
    parser.add_argument(
        "--sizes", default=None, help="comma-separated scale sizes (default 100000; quick 10000; 'none': LoCoMo only)"
    )
    parser.add_argument(
        "--scale-from", type=Path, default=None, help="with --sizes none: take the scale rows from this results file"
    )
    parser.add_argument("--conversations", type=int, default=None, help="first N LoCoMo conversations")
    parser.add_argument("--questions", type=int, default=None, help="first N questions per conversation")
    parser.add_argument("--latency-queries", type=int, default=200, help="queries timed at scale")
    parser.add_argument("--cold-repeats", type=int, default=3, help="fresh processes per cold-start cell (median)")
    parser.add_argument(
        "--embed-cache",
        default=str(Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"),
        help="SQLite file keeping the vectors across runs ('none': no file)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--before", type=Path, default=None, help="an earlier results file for the 'before' column (default: --out)"
    )
    args = parser.parse_args(argv)
    before_file = args.before or args.out
    before = json.loads(before_file.read_text(encoding="utf-8")) if before_file.exists() else None
    if before is not None:
        before.pop("before", None)  # one level of history is enough
    if args.quick:
        args.conversations = args.conversations or 1
        args.questions = args.questions or 40
        args.latency_queries = min(args.latency_queries, 100)
        args.cold_repeats = 1
    sizes = [int(s) for s in (args.sizes or ("10000" if args.quick else "100000")).split(",") if s and s != "none"]

    settings = load_settings()

    def make_raw() -> CachedEmbedder:
        emb = make_embedder(settings)
        assert isinstance(emb, CachedEmbedder)
        return emb

    base = make_raw()
    cache = None if args.embed_cache == "none" else Path(args.embed_cache).expanduser()
    shared = CachedEmbedder(base, size=0, path=cache)
    conversations = load_locomo()
    texts = [d.content for c in conversations for d in c.docs] + [q.text for c in conversations for q in c.questions]
    texts = list(dict.fromkeys([*texts, "warm up the model"]))
    t0 = time.perf_counter()
    log(f"vectors for {len(texts)} texts (cache {cache})")
    table = dict(zip(texts, shared.embed(texts), strict=True))
    shared.close()
    q_embed = []
    for q in [q.text for q in conversations[0].questions][:50]:
        q_embed.append(_ms(lambda q=q: base.inner.embed([q])))
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor(), "cores": os.cpu_count(), "python": platform.python_version()},
        "versions": {p: version(p) for p in ("engramdb", "chromadb", "lancedb", "pyarrow")},
        "embedder": base.model_id,
        "dim": base.dim,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "vectors_prepared_seconds": time.perf_counter() - t0,
        "query_embedding_ms": {**latency(q_embed), "load": load()},
    }
    with tempfile.TemporaryDirectory(prefix="engram-compare-") as tmp_name:
        tmp = Path(tmp_name)
        results["locomo"] = run_locomo(args, tmp, table, make_raw)
        log("LoCoMo done")
        results["scale"] = {}
        if args.scale_from is not None:  # an earlier run's scale rows, named as such in the JSON
            earlier = json.loads(args.scale_from.read_text(encoding="utf-8"))
            results["scale"] = earlier["scale"]
            results["scale_from"] = {"file": str(args.scale_from), "date": earlier["date"]}
        for size in sizes:
            results["scale"][str(size)] = run_scale(args, tmp, table, make_raw, size)
            log(f"scale {size} done")
    table_md = markdown(results, before)
    results["markdown"] = table_md
    if before is not None:
        results["before"] = before
    print(table_md)
    print(f"wrote {write_json(args.out, results)}")
    return 0


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


if __name__ == "__main__":
    raise SystemExit(main())

"""Issue 27: recall of the store's HNSW build on realistic vectors at 100k, by graph and search breadth.

compare.py's scale corpus: the distinct LoCoMo turns with their MiniLM vectors (from the bench's embedding
cache, ``~/.cache/engramdb-bench/embeddings.sqlite``, filled by bench/compare.py), then noisy copies of each at
cosine ~0.9 (near-duplicate groups), ``--rows`` in all. The store's own build (``build_generation``: random
insertion order, sparse-node fill, island links) and search (``AnnBase.search``: the graph's head re-ranked on
float32 rows), for each ``--graphs`` M/efConstruction and ``--ef`` efSearch; recall@10 (head 64) and @50
(head 150) against the exact scan by score, over 200 LoCoMo questions, and with a filter admitting 30% of rows.

    python bench/tenants_recall.py --graphs 16/40,32/80 --ef 128,256,512
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

from _data import load_locomo
from engramdb.storage import _ann, _ann_base
from engramdb.storage._ann import AnnMeta, Snapshot, build_generation
from engramdb.storage._ann_base import AnnBase

CACHE = Path.home() / ".cache" / "engramdb-bench" / "embeddings.sqlite"
MODEL = "all-MiniLM-L6-v2-onnx-int8"
_F32 = npt.NDArray[np.float32]


def corpus(rows: int) -> tuple[_F32, _F32]:
    """The corpus vectors and the question vectors (only texts the cache holds)."""
    conn = sqlite3.connect(CACHE)

    def vec(text: str) -> _F32 | None:
        key = hashlib.sha256(text.encode()).digest()
        row = conn.execute(
            "SELECT vector FROM embedding_cache WHERE model_id = ? AND text_sha256 = ?", (MODEL, key)
        ).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype=np.float32)

    conversations = load_locomo()
    table = {t: vec(t) for t in dict.fromkeys(d.content for c in conversations for d in c.docs)}
    pool = [v for v in table.values() if v is not None]
    questions = [q.text for c in conversations for q in c.questions]
    qv = [vec(q) for q in questions[:: max(1, len(questions) // 200)][:200]]
    dim = pool[0].shape[0]
    rng = np.random.default_rng(rows)
    sigma = math.sqrt((1 / 0.9**2 - 1) / dim)  # a copy's cosine to its original: ~0.9
    out = np.empty((rows, dim), dtype=np.float32)
    for i in range(rows):
        copy, base = divmod(i, len(pool))
        v = pool[base]
        if copy:
            v = v + rng.normal(0.0, sigma, size=dim).astype(np.float32)
            v = v / np.linalg.norm(v)
        out[i] = v
    return out, np.stack([q for q in qv if q is not None])


class _Rows:
    """The float32 rows by seq (seq i is row i), as a store's vectors table serves them to the index."""

    def __init__(self, vectors: _F32) -> None:
        self._vectors = vectors

    def vectors(self, seqs: npt.NDArray[np.int64], dim: int) -> tuple[_F32, npt.NDArray[np.bool_]]:
        return self._vectors[seqs], np.ones(seqs.size, dtype=np.bool_)

    def seqs_of(self, model_id: str | None, ids: npt.NDArray[np.bytes_]) -> npt.NDArray[np.int64]:
        return np.array([int(bytes(i)[1:]) for i in ids], dtype=np.int64)


def build(root: Path, vectors: _F32) -> tuple[AnnBase, float]:
    n, dim = vectors.shape
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    np.save(root / "snap.npy", vectors)
    zeros = np.zeros(n, dtype=np.int32)
    snap = Snapshot(
        AnnMeta("", "m", 0, 0, n, dim, ("a",), ("k",)),
        root / "snap.npy",
        np.array([f"m{i:08d}".encode() for i in range(n)]),
        np.arange(n, dtype=np.int64),
        zeros,
        zeros,
        np.zeros(n, dtype=bool),
        np.arange(n, dtype=np.int64),
    )
    t0 = time.perf_counter()
    meta = build_generation(root, snap, threading.Event())
    assert meta is not None
    return AnnBase(root, meta, _Rows(vectors)), time.perf_counter() - t0


def measure(base: AnnBase, vectors: _F32, queries: _F32, k: int, head: int, allowed: npt.NDArray[np.bool_] | None):
    found, times = [], []
    passing = base.n if allowed is None else int(allowed.sum())
    for q in queries:
        t0 = time.perf_counter()
        _rows, scores = base.search(q, head, allowed, passing)
        times.append(1000 * (time.perf_counter() - t0))
        exact = vectors @ q if allowed is None else np.where(allowed, vectors @ q, -9.0)
        kth = -np.partition(-exact, k - 1)[k - 1]
        found.append(float(np.sum(scores[:k] >= kth - 1e-5)) / k)
    return float(np.mean(found)), float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--graphs", default="32/80", help="M/efConstruction pairs, comma-separated")
    parser.add_argument("--ef", default="256", help="efSearch values, comma-separated")
    args = parser.parse_args()
    vectors, queries = corpus(args.rows)
    allowed = np.random.default_rng(1).random(args.rows) < 0.3
    print(f"{args.rows} rows, {len(queries)} questions, load {os.getloadavg()[0]:.1f}")
    print("| M / efC | efSearch | R@10 | R@50 | R@10, 30% filter | walk p50 ms (k 10) | build s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for graph in args.graphs.split(","):
            m, efc = (int(x) for x in graph.split("/"))
            _ann._HNSW_M, _ann._EF_CONSTRUCTION = m, efc  # type: ignore[misc]
            base, seconds = build(Path(tmp) / graph.replace("/", "-"), vectors)
            for ef in (int(x) for x in args.ef.split(",")):
                _ann_base.EF_SEARCH = ef  # type: ignore[misc]
                r10, ms = measure(base, vectors, queries, 10, 64, None)
                r50, _ = measure(base, vectors, queries, 50, 150, None)
                rf, _ = measure(base, vectors, queries, 10, 64, allowed)
                print(f"| {m} / {efc} | {ef} | {r10:.3f} | {r50:.3f} | {rf:.3f} | {ms:.2f} | {seconds:.0f} |")
            base.close()


if __name__ == "__main__":
    main()

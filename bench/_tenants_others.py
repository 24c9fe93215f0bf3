"""ChromaDB and LanceDB beside engramdb in bench/tenants.py: the same rows, vectors and tenant filters.

One collection (Chroma) and one table (Lance) per size hold every row once, with one metadata column per
spread (``agent50`` = the row's agent when the rows are spread over 50 agents, ``user1000`` = its user over
1,000 users), so a tenant's search is the system's own metadata filter (Chroma ``where``, Lance ``where``
with prefiltering) on that column. Both are cached under the bench's cache directory and built once.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_CHUNK = 5_000
_F32 = npt.NDArray[np.float32]


def column(scope: str, tenants: int) -> str:
    """The metadata column of a spread: ``agent50``, ``user1000``."""
    return f"{scope}{tenants}"


def owner(scope: str, tenants: int, row: int) -> str:
    """The tenant owning ``row`` in a spread (as the engramdb stores of bench/tenants.py assign it)."""
    return f"{'t' if scope == 'agent' else 'u'}{row % tenants}"


def _metadata(rows: range, spreads: list[tuple[str, int]]) -> dict[str, list[str]]:
    return {column(s, n): [owner(s, n, i) for i in rows] for s, n in spreads}


class Chroma:
    """A persistent Chroma collection (HNSW, cosine space) with a column per spread."""

    name = "chroma"

    def __init__(self, root: Path, texts: list[str], vecs: _F32, spreads: list[tuple[str, int]]) -> None:
        import chromadb
        from chromadb.config import Settings

        self.root = root
        done = (root / "done").exists()
        self.client: Any = chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))
        self.coll: Any = self.client.get_or_create_collection(
            "tenants", embedding_function=None, metadata={"hnsw:space": "cosine"}
        )
        if not done:
            for lo in range(0, len(texts), _CHUNK):
                rows = range(lo, min(lo + _CHUNK, len(texts)))
                meta = _metadata(rows, spreads)
                self.coll.add(
                    ids=[f"r{i}" for i in rows],
                    documents=texts[lo : rows.stop],
                    metadatas=[{k: v[j] for k, v in meta.items()} for j in range(len(rows))],
                    embeddings=vecs[lo : rows.stop],
                )
            (root / "done").touch()

    def search(self, vec: _F32, col: str, tenant: str, k: int) -> list[int]:
        res = self.coll.query(query_embeddings=[vec], n_results=k, where={col: tenant}, include=[])
        return [int(i[1:]) for i in res["ids"][0]]

    def close(self) -> None:
        self.coll = self.client = None
        gc.collect()


class Lance:
    """A LanceDB table (no ANN index: a flat scan, as in compare.py) with a column per spread."""

    name = "lance"

    def __init__(self, root: Path, texts: list[str], vecs: _F32, spreads: list[tuple[str, int]]) -> None:
        import lancedb
        import pyarrow as pa

        self.db: Any = lancedb.connect(str(root))
        if (root / "done").exists():
            self.table: Any = self.db.open_table("tenants")
            return
        table = None
        for lo in range(0, len(texts), _CHUNK):
            rows = range(lo, min(lo + _CHUNK, len(texts)))
            flat = pa.array(np.ascontiguousarray(vecs[lo : rows.stop], dtype=np.float32).ravel())
            batch = pa.table(
                {
                    "row": list(rows),
                    "text": texts[lo : rows.stop],
                    "vector": pa.FixedSizeListArray.from_arrays(flat, vecs.shape[1]),
                    **_metadata(rows, spreads),
                }
            )
            if table is None:
                table = self.db.create_table("tenants", data=batch, mode="overwrite")
            else:
                table.add(batch)
        self.table = table
        (root / "done").touch()

    def search(self, vec: _F32, col: str, tenant: str, k: int) -> list[int]:
        q = self.table.search(vec).metric("cosine").where(f"{col} = '{tenant}'", prefilter=True)
        return [int(r["row"]) for r in q.select(["row", "_distance"]).limit(k).to_list()]

    def close(self) -> None:
        self.table = self.db = None
        gc.collect()


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

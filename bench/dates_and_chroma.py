"""Date bounds in the storage filter and Chroma vector reuse, old against new, interleaved in one run.

Two parts:

* **dashboard dates** -- the memories page's date filter at 100,000 memories (one a minute, as in
  tests/web/test_dashboard_scale.py): the committed version of ``interfaces/web/_browse.py`` (walks the
  newest-first listing: interpolation and bisection over one-row reads) against the working tree's
  (``Filter.created_after``/``created_before`` counted in SQL). Per query, old and new run back to back,
  ``--rounds`` times; both must return the same page and total. The 1-minute load average is written beside.
  A third variant, ``dated_list``, reads the page itself with the bounds (as a ``mem.list`` taking them
  would; through the unaudited store read here): what the remaining deep-offset cost is.
* **chroma reuse** -- ``import_chroma`` of a real Chroma persist directory of ``--docs`` documents whose
  vectors come from the store's model, re-embedding (old) against ``reuse_vectors=True`` (new), each into a
  fresh store, alternating; then whether both stores return the same top-10 for a few queries.

    python bench/dates_and_chroma.py --rounds 5 --docs 1000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engramdb import Engram
from engramdb._util import new_id
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.interfaces.web import _browse
from engramdb.interfaces.web._params import BrowseQuery
from engramdb.models import Memory
from engramdb.storage.base import Filter

RESULTS = Path(__file__).resolve().parent / "results" / "dates_and_chroma.json"
N = 100_000
T0 = datetime(2025, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
#: (label, since, until) of the dashboard queries, as its _params would parse them.
QUERIES: list[tuple[str, datetime | None, datetime | None]] = [
    ("3 days in the middle", T0 + 9 * DAY, T0 + 12 * DAY - timedelta(microseconds=1)),
    ("since a date (last 10 days)", T0 + 59 * DAY, None),
    ("until a date (first 10 days)", None, T0 + 10 * DAY - timedelta(microseconds=1)),
    ("one hour", T0 + 30 * DAY, T0 + 30 * DAY + timedelta(hours=1)),
]


class FakeEmbedder:
    """Browsing never embeds; the store only needs a model id and a dimension."""

    model_id = "bench-fake"
    dim = 8

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise AssertionError("browsing must not embed")


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def _old_browse() -> Callable[[Engram, BrowseQuery], Any]:
    """The committed _browse.browse (read with `git show`, loaded beside the package's module)."""
    source = subprocess.run(
        ["git", "show", "HEAD:src/engramdb/interfaces/web/_browse.py"],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "_browse_head.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("engramdb.interfaces.web._browse_head", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    browse: Callable[[Engram, BrowseQuery], Any] = module.browse
    return browse


def _dated_list(mem: Engram, q: BrowseQuery) -> Any:
    """What the page would cost if the page itself were read with the date bounds (a ``mem.list`` taking
    them; measured here through the unaudited store read): one count, then the page at its offset in the range."""
    flt = Filter(agent=q.agent, created_after=q.since, created_before=q.until)
    total = mem.store.memories.count(flt)
    memories = mem.store.memories.list(flt, limit=q.limit, offset=q.offset) if q.offset < total else []
    return _browse.MemoryPage(
        memories=memories, scores={}, total=total, offset=q.offset, limit=q.limit, more=q.offset + q.limit < total
    )


def dashboard(rounds: int, folder: Path) -> dict[str, Any]:
    old = _old_browse()
    rng = np.random.default_rng(7)
    with Engram(folder / "dash", embedder=FakeEmbedder(), vectors="sync") as mem:
        started = time.perf_counter()
        for start in range(0, N, 5000):
            batch = []
            for i in range(start, start + 5000):
                at = T0 + timedelta(minutes=i)
                batch.append(
                    Memory(
                        id=new_id(),
                        agent="bulk",
                        kind="success" if i % 4 == 0 else "knowledge",
                        content=f"bulk memory {i}",
                        created_at=at,
                        updated_at=at,
                    )
                )
            vectors = rng.standard_normal((len(batch), 8)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            mem.store.memories.add(batch, vectors, model_id="bench-fake", actor="bulk")
        print(f"built {N} memories in {time.perf_counter() - started:.0f} s", flush=True)
        rows = []
        for label, since, until in QUERIES:
            for offset in (0, 2000):
                q = BrowseQuery(agent="bulk", since=since, until=until, limit=50, offset=offset)
                times: dict[str, list[float]] = {"old": [], "new": [], "dated_list": []}
                loads: list[float] = []
                pages: dict[str, Any] = {}
                for _ in range(rounds):
                    for name, fn in (("old", old), ("new", _browse.browse), ("dated_list", _dated_list)):
                        loads.append(_load1())
                        t = time.perf_counter()
                        page = fn(mem, q)
                        times[name].append((time.perf_counter() - t) * 1000)
                        pages[name] = (page.total, [m.id for m in page.memories])
                row = {
                    "query": label,
                    "offset": offset,
                    "total": pages["new"][0],
                    "same_page": pages["old"] == pages["new"],
                    "old_ms_median": round(float(np.median(times["old"])), 1),
                    "new_ms_median": round(float(np.median(times["new"])), 1),
                    "same_page_dated_list": pages["dated_list"] == pages["new"],
                    "dated_list_ms_median": round(float(np.median(times["dated_list"])), 1),
                    "load1": [min(loads), max(loads)],
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    return {"memories": N, "rounds": rounds, "queries": rows}


def chroma(rounds: int, docs: int, folder: Path) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings

    from engramdb.integrations.chroma import import_chroma

    embedder = make_embedder(load_settings({}))
    topics = ["parser", "scheduler", "cache", "network", "database", "login", "upload", "search"]
    texts = [
        f"Note {i}: error {i * 7919 % 1000} in the {topics[i % 8]} was fixed by {topics[(i * 3) % 8]} changes"
        for i in range(docs)
    ]
    path = folder / "chroma"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    notes = client.get_or_create_collection("notes", embedding_function=None)
    vectors = embedder.embed(texts)
    for start in range(0, docs, 1000):
        notes.add(
            ids=[f"n{i}" for i in range(start, min(docs, start + 1000))],
            documents=texts[start : start + 1000],
            embeddings=vectors[start : start + 1000].tolist(),
        )
    del client
    times: dict[str, list[float]] = {"old": [], "new": []}
    loads: list[float] = []
    reused = 0
    tops: dict[str, list[list[str]]] = {}
    channel: dict[str, list[list[str]]] = {}
    queries = ["error in the scheduler fixed by cache changes", "login problem", "database upload error 17"]
    for r in range(rounds):
        for name, reuse in (("old", False), ("new", True)):
            # A fresh cache each run: the old run must not find the documents' vectors cached by the new one.
            fresh = make_embedder(load_settings({}))
            loads.append(_load1())
            with Engram(folder / f"store-{name}-{r}", embedder=fresh) as mem:
                t = time.perf_counter()
                report = import_chroma(mem, path, agent="bench", reuse_vectors=reuse)
                mem.flush()
                times[name].append(time.perf_counter() - t)
                if reuse:
                    reused = report.reused
                if r == 0:
                    tops[name] = [
                        [h.memory.metadata["chroma_id"] for h in mem.search(q, agent="bench", limit=10)]
                        for q in queries
                    ]
                    # The vector channel alone (ids mapped back to chroma ids): the reused vectors' ranking.
                    by_id = {m.id: m.metadata["chroma_id"] for m in mem.list(agent="bench", limit=docs)}
                    flt = Filter(agent="bench")
                    channel[name] = [
                        [
                            by_id[c.id]
                            for c in mem.store.search.vector_candidates(mem.embedder.embed([q])[0], flt, limit=10)
                        ]
                        for q in queries
                    ]
    row = {
        "docs": docs,
        "rounds": rounds,
        "old_s_median": round(float(np.median(times["old"])), 2),
        "new_s_median": round(float(np.median(times["new"])), 2),
        "old_docs_per_s": round(docs / float(np.median(times["old"])), 1),
        "new_docs_per_s": round(docs / float(np.median(times["new"])), 1),
        "reused": reused,
        "same_top10": tops["old"] == tops["new"],
        "top10_overlap": [len(set(a) & set(b)) for a, b in zip(tops["old"], tops["new"], strict=True)],
        "same_vector_channel_top10": channel["old"] == channel["new"],
        "load1": [min(loads), max(loads)],
    }
    print(json.dumps(row), flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--skip-chroma", action="store_true")
    parser.add_argument("--skip-dashboard", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        out: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "cores": os.cpu_count()}
        if RESULTS.exists():
            out = {**json.loads(RESULTS.read_text(encoding="utf-8")), **out}
        if not args.skip_dashboard:
            out["dashboard_dates"] = dashboard(args.rounds, folder)
        if not args.skip_chroma:
            out["chroma_reuse"] = chroma(max(1, args.rounds // 2), args.docs, folder)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

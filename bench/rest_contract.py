"""What the typed REST contract and the metrics cost per request (issue 24, items 4 and 7).

Side by side in one run, on the same payloads:

- a page of 100 memories and a search of 10 hits answered through their response models (validated, then
  dumped with only the fields set: what the /v1 routes do) against the untyped ``dict[str, Any]`` model the
  routes had before, and the whole request through the app (in-process ASGI, real store and model) for scale;
- recording one request in the Prometheus metrics, and rendering ``/metrics``.

    python bench/rest_contract.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from starlette.testclient import TestClient

from engramdb import Engram
from engramdb.interfaces import _responses as res
from engramdb.interfaces._metrics import Metrics
from engramdb.interfaces.rest import create_app

OUT = Path(__file__).parent / "results" / "rest_contract.json"


def _p50_us(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    untyped = TypeAdapter(dict[str, Any])
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp, Engram(Path(tmp) / "store") as mem:
        mem.remember_many(
            [{"content": f"Runbook {i}: restart worker pool {i % 17} in region {i % 5}"} for i in range(500)]
        )
        mem.flush()
        page = {"memories": [m.to_dict() for m in mem.list(limit=100)], "limit": 100, "offset": 0}
        hits = {"hits": [h.to_dict() for h in mem.search("restart the worker pool", limit=10)]}
        for name, payload, model in (("100 memories", page, res.MemoryList), ("10 hits", hits, res.SearchResult)):
            typed = _p50_us(
                lambda p=payload, m=model: m.model_validate(p).model_dump(mode="json", exclude_unset=True), rounds
            )
            plain = _p50_us(lambda p=payload: untyped.dump_python(untyped.validate_python(p), mode="json"), rounds)
            rows += [(f"{name}: response model (typed)", typed), (f"{name}: dict[str, Any] (before)", plain)]
        with TestClient(create_app(mem, allowed_hosts=None)) as client:
            rows.append(
                (
                    "GET /v1/memories?limit=100, whole request",
                    _p50_us(lambda: client.get("/v1/memories?limit=100"), rounds),
                )
            )
            query = {"query": "restart the worker pool", "limit": 10}
            rows.append(
                (
                    "POST /v1/search (10 hits), whole request",
                    _p50_us(lambda: client.post("/v1/search", json=query), rounds),
                )
            )
            rows.append(("GET /metrics, whole request", _p50_us(lambda: client.get("/metrics"), rounds)))
        metrics = Metrics(mem)
        rows.append(
            (
                "metrics: record one request",
                _p50_us(lambda: metrics.observe("GET", "/memories", 200, 0.01), rounds * 10),
            )
        )
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  p50 µs")
    for name, value in rows:
        print(f"{name:<{width}}  {value:8.1f}")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"rounds": rounds, "p50_us": dict(rows)}, indent=2) + "\n")


if __name__ == "__main__":
    main()

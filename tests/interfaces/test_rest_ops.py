"""The REST server's contract and operations: typed schema under /v1 (aliases outside it), offline docs, Prometheus
metrics, readiness, JSON logs, and a graceful shutdown that drains the vector queue of a real ``engram serve``."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families
from rest_helpers import error_of
from starlette.testclient import TestClient

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.interfaces._access import keys_of
from engramdb.interfaces._logs import JSONFormatter
from engramdb.interfaces._metrics import Metrics
from engramdb.interfaces.rest import API_PREFIX, create_app
from engramdb.storage.base import MODEL_META_KEY
from server_helpers import free_port


@pytest.fixture
def client(mem: Engram) -> Iterator[TestClient]:
    with TestClient(create_app(mem, allowed_hosts=None)) as c:
        yield c


# -- the typed contract ------------------------------------------------------------------------------------


def test_every_answer_of_the_schema_is_a_named_schema(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's 422 shape is not ours: {"error": "..."} is
    operations = [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]
    assert len(operations) >= 30
    for path, method, op in operations:
        assert path.startswith(f"{API_PREFIX}/"), path
        assert re.fullmatch(r"[a-z_]+", op["operationId"]), op["operationId"]
        for status, answer in op["responses"].items():
            content = answer.get("content")
            if status == "204":
                assert content is None
                continue
            schema = content["application/json"]["schema"]
            ref = schema.get("$ref", "")
            assert ref.startswith("#/components/schemas/"), (method, path, status, schema)
            name = ref.rsplit("/", 1)[1]
            assert name in schemas
            if status.startswith("4") or (status == "503" and op["operationId"] != "health"):
                assert name == "Error", (method, path, status)
            # Named and described: what a generated client shows its users.
            assert schemas[name].get("description"), name
    # A response model is typed to the leaves: no open dict where the library returns a known shape.
    memory = schemas["Memory"]
    assert {"id", "agent", "kind", "content", "created_at", "success_rate"} <= set(memory["required"])
    assert memory["properties"]["created_at"]["format"] == "date-time"
    assert schemas["SearchResult"]["properties"]["hits"]["items"] == {"$ref": "#/components/schemas/Hit"}


def test_answers_are_exactly_the_librarys_dicts(client: TestClient, mem: Engram) -> None:
    m = client.post(f"{API_PREFIX}/memories", json={"content": "The CI runs on two cores", "tags": ["ci"]})
    assert m.status_code == 201
    assert m.json() == mem.get(m.json()["id"]).to_dict()  # no field added (as null) or dropped
    assert client.get("/me").json() == {"authenticated": False, "agent": None, "read_only": False, "admin": True}


def test_unversioned_paths_are_aliases_outside_the_schema(client: TestClient) -> None:
    created = client.post("/memories", json={"content": "Deploys go out on Tuesdays"}).json()
    one = client.get(f"/memories/{created['id']}").json()
    other = client.get(f"{API_PREFIX}/memories/{created['id']}").json()
    assert one["content"] == other["content"] == "Deploys go out on Tuesdays"
    # The same checks on both: an unknown parameter is refused, a bad body is the same 422.
    assert "bogus" in error_of(client.get("/memories", params={"bogus": "1"}), 422)  # type: ignore[arg-type]
    assert "bogus" in error_of(client.get(f"{API_PREFIX}/memories", params={"bogus": "1"}), 422)  # type: ignore[arg-type]
    paths = client.get("/openapi.json").json()["paths"]
    assert "/memories" not in paths
    assert f"{API_PREFIX}/memories" in paths


def test_docs_page_loads_nothing_from_elsewhere(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)""", page.text)
    assert len(urls) >= 3  # the script, the stylesheet, the icon
    assert "://" not in page.text.replace("http://www.w3.org", "")  # no CDN, no absolute URL at all
    for url in urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url
    assert b"SwaggerUIBundle" in client.get("/docs/assets/swagger-ui-bundle.js").content


# -- metrics -----------------------------------------------------------------------------------------------


def _metrics(client: TestClient, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_count_requests_by_route_and_report_the_store(client: TestClient, mem: Engram) -> None:
    created = client.post(f"{API_PREFIX}/memories", json={"content": "Metrics are scraped every 15 s"}).json()
    for path in (f"/memories/{created['id']}", f"{API_PREFIX}/memories/{created['id']}", "/memories/nope"):
        client.get(path)
    client.get("/no/such/route")
    mem.remember("Written in-process: the store gauge counts it too", agent="bob")
    samples = _metrics(client)

    def requests(route: str, status: str, method: str = "GET") -> float:
        key = ("engram_http_requests_total", (("method", method), ("route", route), ("status", status)))
        return samples.get(key, 0.0)

    # By route template (never the id), an alias and its /v1 path together.
    assert requests("/memories/{memory_id}", "200") == 2
    assert requests("/memories/{memory_id}", "404") == 1
    assert requests("/memories", "201", "POST") == 1
    assert requests("unmatched", "404") == 1
    latency = ("engram_http_request_duration_seconds_count", (("method", "GET"), ("route", "/memories/{memory_id}")))
    assert samples[latency] == 3
    assert samples[("engram_store_memories", ())] == 2
    assert samples[("engram_vector_queue_depth", ())] == mem.pending_vectors


def test_metrics_need_a_key_while_the_store_has_keys(mem: Engram) -> None:
    token = keys_of(mem).create("alice", read_only=True).token
    with TestClient(create_app(mem, allowed_hosts=None)) as c:
        error_of(c.get("/metrics"), 401)  # type: ignore[arg-type]
        assert ("engram_store_memories", ()) in _metrics(c, Authorization=f"Bearer {token}")


# -- readiness ---------------------------------------------------------------------------------------------


def test_health_says_the_store_and_the_model_are_ready(client: TestClient, mem: Engram) -> None:
    for path in ("/health", f"{API_PREFIX}/health"):
        health = client.get(path)
        assert health.status_code == 200
        body = health.json()
        assert body["status"] == "ok"
        assert body["store"]["ready"]
        assert body["embedder"]["ready"]
        assert body["model"] == mem.embedder.model_id
        assert body["vector_queue"] >= 0


def test_health_is_503_and_says_why_when_the_store_is_down(tmp_path: Path, embedder: Embedder) -> None:
    mem = Engram(tmp_path / "store", embedder=embedder)
    app = create_app(mem, allowed_hosts=None)
    mem.close()
    with TestClient(app) as c:
        health = c.get("/health")
        assert health.status_code == 503
        body = health.json()
        assert body["status"] == "unavailable"
        assert body["store"] == {"ready": False, "detail": "the store did not answer a read"}
        assert body["embedder"]["ready"]
    # The metrics still render, without the store's gauge (GET /metrics itself needs the store to authenticate).
    text = Metrics(mem).render().decode()
    assert "engram_vector_queue_depth " in text
    assert "engram_store_memories " not in text


class _BrokenEmbedder:
    model_id = "broken"
    dim = 384

    def embed(self, texts: Any) -> Any:
        raise RuntimeError("no model file")


def test_health_is_503_while_the_model_cannot_load(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        app = create_app(mem, allowed_hosts=None)
        mem.embedder = _BrokenEmbedder()  # type: ignore[misc,assignment]
        try:
            body = TestClient(app).get("/health").json()
        finally:
            mem.embedder = embedder  # type: ignore[misc]
    assert body["status"] == "unavailable"
    assert body["embedder"] == {"ready": False, "detail": "the model failed to load: RuntimeError"}
    assert body["store"]["ready"]


# -- logs --------------------------------------------------------------------------------------------------


def test_json_log_lines() -> None:
    formatter = JSONFormatter()
    record = logging.LogRecord("engramdb.x", logging.WARNING, __file__, 1, "two\nlines %s", ("here",), None)
    line = formatter.format(record)
    assert "\n" not in line
    data = json.loads(line)
    assert data["level"] == "warning"
    assert data["logger"] == "engramdb.x"
    assert data["message"] == "two\nlines here"
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(formatter.format(failed))["exception"]
    args = ("1.2.3.4:5", "GET", "/x", "1.1", 200)
    access = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)
    assert json.loads(formatter.format(access))["status"] == 200


# -- engram serve: JSON logs and a graceful shutdown ------------------------------------------------------


def _engram() -> list[str]:
    exe = shutil.which("engram", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from engramdb.interfaces.cli import main; main()"]


def test_serve_logs_json_and_drains_the_vector_queue_on_sigterm(tmp_path: Path, embedder: Embedder) -> None:
    port = free_port()
    store = tmp_path / "store"
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_LOG_FORMAT": "json"}
    proc = subprocess.Popen(
        [*_engram(), "serve", "--port", str(port), "--store", str(store)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # force: no near-duplicate check, which would embed before answering; so the vectors come after, in the queue.
    items = [{"content": f"Runbook step {i}: restart the worker pool of region {i % 7}"} for i in range(400)]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, "engram serve exited"
                try:
                    if c.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "engram serve did not start"
                time.sleep(0.1)
            written = c.post(f"{API_PREFIX}/memories/batch", json={"items": items, "force": True})
            assert written.status_code == 201
        proc.send_signal(signal.SIGTERM)  # at once: the background worker is still embedding them
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-2000:]
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(r.get("path") == f"{API_PREFIX}/memories/batch" and r.get("status") == 201 for r in records)
    assert any(r["logger"].startswith("uvicorn") and "shutdown" in r["message"].lower() for r in records)
    assert "stopped by SIGTERM" in stderr
    assert any(r["message"] == f"shutting down: writing the vectors of {len(items)} memories" for r in records)
    # Every acknowledged memory has its vector: read the store without opening an Engram (which would queue
    # the missing ones again at once).
    from engramdb.config import load_settings
    from engramdb.storage import open_store

    raw = open_store(str(store), settings=load_settings({}, home=tmp_path / "home"))
    try:
        model = raw.meta.get(MODEL_META_KEY)
        assert model == embedder.model_id
        assert raw.vectors.count_stale(model) == 0
    finally:
        raw.close()


# -- OpenTelemetry (the otel extra) -------------------------------------------------------------------------


def test_a_span_per_request_named_by_its_route(mem: Engram) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with TestClient(create_app(mem, allowed_hosts=None, tracer=provider.get_tracer("test"))) as c:
        created = c.post(f"{API_PREFIX}/memories", json={"content": "Traced: the cache is warmed at 06:00"}).json()
        c.get(f"{API_PREFIX}/memories/{created['id']}")
        c.get("/memories/no-such-id")
    spans = {(s.name, s.attributes["http.response.status_code"]) for s in exporter.get_finished_spans()}
    assert ("POST /memories", 201) in spans
    assert ("GET /memories/{memory_id}", 200) in spans
    assert ("GET /memories/{memory_id}", 404) in spans
    assert not [name for name, _ in spans if created["id"] in name]  # route templates, never the ids
    paths = {s.attributes["url.path"] for s in exporter.get_finished_spans()}
    assert f"{API_PREFIX}/memories/{created['id']}" in paths

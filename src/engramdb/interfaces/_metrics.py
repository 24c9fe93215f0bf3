"""Prometheus metrics of one server (``GET /metrics``, the text exposition format), with ``prometheus-client``.

- ``engram_http_requests_total{method, route, status}``: requests answered, by route template
  (``/v1/memories/{memory_id}``, never the id itself: one series per route, not per memory);
  requests no route matched (refused by the host check, unknown paths) count as route ``unmatched``,
  and those of the schema and the docs' files as ``other``;
- ``engram_http_request_duration_seconds{method, route}``: their latency, a histogram;
- ``engram_vector_queue_depth``: memories written whose vector is still being computed;
- ``engram_store_memories``: memories in the store, every agent's.

The two store gauges are read when scraped. Each app has its own registry (several apps
in one process, as in the tests, do not mix); with several ``engram serve`` processes,
scrape each one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engramdb.errors import EngramError
from engramdb.interfaces._http import StatusOf, route_template
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.interfaces._http import ASGIApp, Receive, Scope, Send

__all__ = ["CONTENT_TYPE", "Metrics", "MetricsMiddleware"]

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
UNMATCHED: Final = "unmatched"
_log = logging.getLogger(__name__)
OTHER: Final = "other"


class _StoreCollector(Collector):
    """The store's gauges, read at scrape time."""

    def __init__(self, mem: Engram) -> None:
        self._mem = mem

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "engram_vector_queue_depth",
            "Memories written whose vector is still being computed (the background vector queue).",
            value=self._mem.pending_vectors,
        )
        try:
            count = self._mem.store.memories.count(Filter(agent=None))
        except EngramError as exc:  # the store is down: the other metrics still answer, and /health says why
            _log.warning("metrics: the store did not answer: %s", exc)
            return
        yield GaugeMetricFamily("engram_store_memories", "Memories in the store, every agent's.", value=count)


class Metrics:
    """One server's registry: request counts and latencies, and the store's gauges."""

    def __init__(self, mem: Engram) -> None:
        # Not auto_describe: registering would read the store (collect) before any scrape asks for it.
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "engram_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "engram_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            ("method", "route"),
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(mem))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        """Every metric in Prometheus' text format."""
        return generate_latest(self.registry)


def _route_of(scope: Scope) -> str:
    template = route_template(scope)
    if template is not None:
        return template
    # Starlette's own routes (the schema, the docs' files) name no route; requests no route took do not either.
    return OTHER if "endpoint" in scope else UNMATCHED


class MetricsMiddleware:
    """ASGI middleware (outermost): times every HTTP request and counts it by the route that answered it
    (``route``: how a request's route is named; by default the API route template that answered)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, route: Callable[[Scope], str] | None = None) -> None:
        self._app = app
        self._metrics = metrics
        self._route = route or _route_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        start = time.perf_counter()
        sending = StatusOf(send)
        try:
            await self._app(scope, receive, sending)
        finally:
            method = str(scope.get("method", "GET"))
            self._metrics.observe(method, self._route(scope), sending.status, time.perf_counter() - start)

"""Optional OpenTelemetry traces of a REST server: one span per HTTP request (the ``otel`` extra).

``engram serve`` with the ``otel_traces`` setting on (``ENGRAM_OTEL_TRACES=1``) sends them with OTLP
(gRPC) where the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (and ``OTEL_SERVICE_NAME``, ...) say; in
your own process, hand ``create_app(mem, tracer=...)`` any tracer. A span is named
``METHOD /route/{template}`` (never the ids in a path), carries ``http.request.method``,
``http.route``, ``url.path`` and ``http.response.status_code``, and is an error on a 5xx. The
library's own steps inside a request are not traced (the spans are the requests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from engramdb.errors import ConfigError
from engramdb.interfaces._http import StatusOf, route_template

if TYPE_CHECKING:
    from engramdb.interfaces._http import ASGIApp, Receive, Scope, Send

__all__ = ["TracingMiddleware", "otlp_tracer"]


class TracingMiddleware:
    """ASGI middleware: a server span around every HTTP request, named after the route that answered it."""

    def __init__(self, app: ASGIApp, *, tracer: Tracer) -> None:
        self._app = app
        self._tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        method = str(scope.get("method", "GET"))
        with self._tracer.start_as_current_span(method, kind=SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", method)
            span.set_attribute("url.path", str(scope.get("path", "")))
            sending = StatusOf(send)
            try:
                await self._app(scope, receive, sending)
            finally:
                template = route_template(scope)
                if template is not None:
                    span.set_attribute("http.route", template)
                    span.update_name(f"{method} {template}")
                span.set_attribute("http.response.status_code", sending.status)
                if sending.status >= 500:
                    span.set_status(Status(StatusCode.ERROR))


def otlp_tracer() -> Tracer:
    """A tracer exporting over OTLP (gRPC), configured by the standard ``OTEL_*`` environment variables."""
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError("otel_traces needs OpenTelemetry's SDK and exporter: pip install 'engramdb[otel]'") from exc
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "engramdb"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider.get_tracer("engramdb")

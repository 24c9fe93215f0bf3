"""``engram mcp --transport http`` beside ``/mcp``: ``GET /health`` and ``GET /metrics``, as ``engram serve`` has.

* ``/health`` needs no key (an orchestrator's probe): 200 when the store answers and the embedding model is loaded,
  else 503, with the body of REST's ``/health`` (:class:`~engramdb.interfaces._serving.ServerState`).
* ``/metrics`` is Prometheus' text (:class:`~engramdb.interfaces._metrics.Metrics`: requests and latency by route,
  the vector queue, the store's size) and, like REST's, needs a key while the store has keys: it sits inside the
  authentication, REST's :class:`~engramdb.interfaces._metrics.MetricsMiddleware` outside it (refused requests are
  counted too), naming each request by its path (:meth:`Operations.route`).

Both need the ``rest`` extra (prometheus-client, and FastAPI for the shared readiness code), which serving MCP over
HTTP needs anyway for uvicorn; ``engram mcp`` over stdio imports none of this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import anyio.to_thread

from engramdb.interfaces._http import send_json
from engramdb.interfaces._metrics import CONTENT_TYPE, UNMATCHED, Metrics
from engramdb.interfaces._serving import ServerState

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.interfaces._http import ASGIApp, Receive, Scope, Send

__all__ = ["HEALTH_PATH", "METRICS_PATH", "Operations"]

HEALTH_PATH: Final = "/health"
METRICS_PATH: Final = "/metrics"


def _is(scope: Scope, path: str) -> bool:
    return scope["type"] == "http" and scope.get("path") == path and scope.get("method") in ("GET", "HEAD")


class Operations:
    """The two routes for one served store: :meth:`health` before authentication, :meth:`metrics` after it."""

    def __init__(self, mem: Engram, *, routes: tuple[str, ...]) -> None:
        self.state = ServerState(mem)
        self.registry = Metrics(mem)
        #: The paths counted by name in the metrics (any other request counts as ``unmatched``).
        self._routes = frozenset((*routes, HEALTH_PATH, METRICS_PATH))

    def route(self, scope: Scope) -> str:
        path = scope.get("path")
        return path if isinstance(path, str) and path in self._routes else UNMATCHED

    def health(self, app: ASGIApp) -> ASGIApp:
        """``app`` with ``GET /health`` answered before it (no key needed)."""

        async def served(scope: Scope, receive: Receive, send: Send) -> None:
            if not _is(scope, HEALTH_PATH):
                await app(scope, receive, send)
                return
            # The first probe may load the model: off the event loop.
            report = await anyio.to_thread.run_sync(self.state.health)
            await send_json(send, 200 if report.status == "ok" else 503, report.model_dump(mode="json"))

        return served

    def metrics(self, app: ASGIApp) -> ASGIApp:
        """``app`` with ``GET /metrics`` answered before it (place it inside the authentication)."""

        async def served(scope: Scope, receive: Receive, send: Send) -> None:
            if not _is(scope, METRICS_PATH):
                await app(scope, receive, send)
                return
            body = await anyio.to_thread.run_sync(self.registry.render)  # reads the store's size
            headers = [(b"content-type", CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        return served

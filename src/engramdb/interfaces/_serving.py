"""A REST server's life around its routes: readiness (``/health``), the offline API docs (``/docs``), and the
lifespan that loads the model before the first request and drains the vector queue at shutdown.

**Readiness.** ``/health`` answers 200 when the store answers a read and the embedding model
has embedded a text (once: it stays loaded), else 503, and says which part is not ready.

**Graceful shutdown.** On SIGTERM or Ctrl+C uvicorn stops accepting connections and lets
the requests in flight finish; then the lifespan's end waits (at most ``drain_seconds``) for
the background vector worker to write the vectors of every memory acknowledged so far, so
a restarted server finds them searchable by meaning at once. Memories still pending after
that keep no vector until the store is next opened (nothing acknowledged is lost).

**Docs offline.** Swagger UI's script and stylesheet come from the ``fastapi-offline``
package (MIT, files of ``swagger-ui-dist``), served at ``/docs/assets``: the page works
with no network, where FastAPI's default loads them from a CDN.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

import engramdb
from engramdb.errors import EngramError
from engramdb.interfaces._responses import Health, Readiness
from engramdb.storage.base import MODEL_META_KEY

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from engramdb import Engram

__all__ = ["DOCS_ASSETS", "DRAIN_SECONDS", "HEALTH_RESPONSES", "Readiness", "ServerState", "add_docs", "add_tracing"]

#: Where Swagger UI's files are served.
DOCS_ASSETS: Final = "/docs/assets"
_ASSETS_DIR: Final = Path(fastapi_offline.__file__).parent / "static"
#: ``/health``'s answer when not ready: the same body, with 503.
HEALTH_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    503: {"model": Health, "description": "The store or the embedding model is not ready."}
}
#: Longest wait at shutdown for the vector queue to drain.
DRAIN_SECONDS: Final = 60.0

_log = logging.getLogger(__name__)


class ServerState:
    """Readiness of one served store, and the lifespan that warms and drains it."""

    def __init__(self, mem: Engram, *, drain_seconds: float = DRAIN_SECONDS) -> None:
        self._mem = mem
        self._drain_seconds = drain_seconds
        self._model_ready = False
        self._model_detail = "not loaded yet"
        self._lock = threading.Lock()

    def _store(self) -> Readiness:
        try:
            self._mem.store.meta.get(MODEL_META_KEY)
        except EngramError as exc:  # the details (paths, SQL) go to the log, not to the client
            _log.warning("health: the store did not answer: %s", exc)
            return Readiness(ready=False, detail="the store did not answer a read")
        return Readiness(ready=True, detail="answers")

    def _embedder(self) -> Readiness:
        with self._lock:  # one load at a time; once loaded it stays so
            if not self._model_ready:
                try:
                    self._mem.embedder.embed(["ready"])
                except Exception as exc:  # noqa: BLE001 - any failure to load means not ready, and says why
                    _log.warning("health: the embedding model is not ready: %s", exc)
                    self._model_detail = f"the model failed to load: {type(exc).__name__}"
                else:
                    self._model_ready, self._model_detail = True, "loaded"
            return Readiness(ready=self._model_ready, detail=self._model_detail)

    def health(self) -> Health:
        store, embedder = self._store(), self._embedder()
        return Health(
            status="ok" if store.ready and embedder.ready else "unavailable",
            version=engramdb.__version__,
            model=self._mem.embedder.model_id,
            store=store,
            embedder=embedder,
            vector_queue=self._mem.pending_vectors,
        )

    def drain(self) -> None:
        """Wait for the vector queue (at most ``drain_seconds``); say in the log what was left."""
        pending = self._mem.pending_vectors
        if pending:
            _log.info("shutting down: writing the vectors of %d memories", pending)
        try:
            done = self._mem.flush(timeout=self._drain_seconds)
        except EngramError as exc:
            _log.warning("shutting down: the vector worker failed (%s); those memories stay pending", exc)
            return
        if not done:
            _log.warning(
                "shutting down: %d memories still wait for their vector; they are embedded at the next open",
                self._mem.pending_vectors,
            )

    def lifespan(self) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
        @asynccontextmanager
        async def run(app: FastAPI) -> AsyncIterator[None]:
            await anyio.to_thread.run_sync(self._embedder)  # the first request does not pay the model's load
            yield
            await anyio.to_thread.run_sync(self.drain)

        return run


def add_tracing(app: FastAPI, tracer: Tracer | None) -> None:
    """A span per request (:mod:`._tracing`), when given a tracer; OpenTelemetry is imported only then (an extra)."""
    if tracer is not None:
        from engramdb.interfaces._tracing import TracingMiddleware

        app.add_middleware(TracingMiddleware, tracer=tracer)


def add_docs(app: FastAPI, *, path: str = "/docs") -> None:
    """Swagger UI at ``path``, its files served by this app (no CDN)."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=_ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(path, include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

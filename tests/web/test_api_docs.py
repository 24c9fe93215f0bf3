"""The REST API's docs page (/docs) in headless Chromium with every host but loopback unresolvable: Swagger UI's
files come from the server itself (the fastapi-offline package), so the page renders the API's operations."""

from __future__ import annotations

from pathlib import Path

from web_helpers import Browser, require, serving

require("fastapi")

from engramdb import Engram  # noqa: E402 - after the check: the rest extra is optional
from engramdb.embeddings.base import Embedder  # noqa: E402
from engramdb.interfaces.rest import create_app  # noqa: E402

#: Nothing but the server answers: a page that needed a CDN would stay blank.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


def test_docs_render_offline(tmp_path: Path, embedder: Embedder, browser: Browser) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem, serving(create_app(mem)) as base:
        # Swagger UI fetches /openapi.json after the page loads: give its scripts (virtual) time to render.
        dom = browser._run(f"{base}/docs", "--dump-dom", "--virtual-time-budget=15000", OFFLINE).stdout
        assert "swagger-ui" in dom
        assert "opblock" in dom, dom[-2000:]  # the operations were rendered from the schema
        assert "/v1/memories" in dom
        assert "/v1/search" in dom

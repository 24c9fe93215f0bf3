"""Serving an ASGI app with a real uvicorn on a loopback port for the REST and MCP-over-HTTP tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from server_helpers import serve_asgi


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a background thread on a free loopback port; its base URL."""
    with serve_asgi(app, uvicorn=uvicorn) as url:
        yield url


def error_of(response: httpx.Response, status: int | tuple[int, ...]) -> str:
    """The one-line ``error`` of a failed response, after checking its status and shape."""
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"}, body
    message = body["error"]
    assert isinstance(message, str)
    assert message
    assert "\n" not in message
    assert "Traceback" not in response.text
    return message

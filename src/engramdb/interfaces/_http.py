"""What every HTTP request to an engramdb server passes first (REST and MCP alike), as one ASGI middleware.

In order, before the application sees the request:

1. ``Host`` must name this server (:func:`~engramdb.interfaces._access.allowed_host_names`):
   else 421. This stops DNS rebinding, where a web page's own host name resolves to
   127.0.0.1 and the browser lets the page read the answers.
2. A browser's cross-site request is refused (403): an ``Origin`` naming another host, or
   ``Sec-Fetch-Site: cross-site``.
3. A request with a body must send ``Content-Type: application/json`` (else 415): the
   "simple" content types a cross-site form or ``fetch`` may send without a preflight
   (``text/plain``, form encodings) never reach the API.
4. The body may not exceed ``max_body_bytes`` (413): checked on ``Content-Length`` and
   again while it is read, so a chunked upload cannot get round it.

Every refusal is JSON ``{"error": "<one line>"}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from engramdb.interfaces._access import host_name

__all__ = ["DEFAULT_MAX_BODY_BYTES", "Guard", "StatusOf", "json_response", "replaying", "route_template", "send_json"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: A request body larger than this is refused (413): room for a batch of big memories, not for abuse.
DEFAULT_MAX_BODY_BYTES: Final = 8 * 1024 * 1024
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def send_json(send: Send, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
    """Send ``payload`` as a JSON response with ``status``."""
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def json_response(send: Send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    """Send ``{"error": message}`` (one line) with ``status``."""
    await send_json(send, status, {"error": " ".join(message.split()) or "failed"}, headers)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the already-read ``body`` once, then defers to ``receive``."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class StatusOf:
    """A ``send`` that remembers the status of the response it passes on (500 until one starts: the app failed
    before answering); for middleware that reports on requests (metrics, traces)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status = 500

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self._send(message)


def route_template(scope: Scope) -> str | None:
    """The path template of the API route that answered (``/memories/{memory_id}``), once routing is done."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else None


class Guard:
    """The ASGI middleware described in the module docstring, around ``app``."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: frozenset[str] | None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        self._app = app
        self._allowed = allowed_hosts
        self._max = max_body_bytes

    def _host_ok(self, value: str | None) -> bool:
        if self._allowed is None:
            return True
        return value is not None and host_name(value) in self._allowed

    def _origin_ok(self, origin: str | None, host: str | None) -> bool:
        if origin is None:
            return True
        if origin == "null":  # sandboxed frames, file:// pages
            return False
        _, sep, authority = origin.partition("://")
        if not sep:
            return False
        name = host_name(authority)
        if self._allowed is None:
            return host is not None and name == host_name(host)
        return name in self._allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", ()):
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            # A repeated header (two Host lines...) keeps its first value: the one a proxy would route on.
            headers.setdefault(name, value)
        host = headers.get("host")
        if not self._host_ok(host):
            await json_response(send, 421, f"this server does not answer to host {host!r}")
            return
        if not self._origin_ok(headers.get("origin"), host) or headers.get("sec-fetch-site") == "cross-site":
            await json_response(send, 403, "cross-site requests are refused")
            return
        if scope.get("method", "GET") not in _BODY_METHODS:
            await self._app(scope, receive, send)
            return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await json_response(send, 400, "bad Content-Length")
                return
            if int(declared) > self._max:
                await json_response(send, 413, f"request body over {self._max} bytes")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                await json_response(send, 413, f"request body over {self._max} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if body and media != "application/json" and not media.endswith("+json"):
            await json_response(send, 415, "the request body must be JSON (Content-Type: application/json)")
            return
        await self._app(scope, replaying(body, receive), send)

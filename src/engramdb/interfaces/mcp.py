"""An MCP server over one :class:`~engramdb.Engram` (the official ``mcp`` SDK, 2.x); run it with ``engram mcp``.

Tools (:data:`TOOLS`): ``remember``, ``search``, ``get``, ``forget``; ``record_outcome``,
``suggest``, ``choose``; ``record_failure``, ``solutions``, ``failure_patterns``,
``preflight``; ``record_episode``, ``start_episode``, ``episode_event``, ``end_episode``,
``find_episodes``, ``analyze_episodes``; ``stats``;
``context``; ``session_add``, ``session``; ``share``, ``unshare``. They are the REST
server's operations (:mod:`._ops`), with the same argument models (:mod:`._schemas`) as
their JSON schemas: unknown arguments are rejected, and every error (bad arguments, a
library error) is a tool error result with a one-line message the model can read and act on.
Results are JSON objects (lists come wrapped: ``{"hits": [...]}``), as text and as
structured content conforming to the tool's output schema. Tools carry annotations
(read-only, destructive, idempotent); the agent's memories are resources
(``engram://memories/{id}``) and ``recall`` is a prompt (:mod:`._mcp_more`).

Two transports:

- **stdio** (:func:`serve_stdio`, ``engram mcp``): the client is the local process that
  started the server, and is trusted like a Python caller (it names its ``agent``);
- **streamable HTTP** (:func:`create_http_app`, ``engram mcp --transport http``):
  authenticated with the store's API keys exactly like the REST server (each call acts as
  the key's agent), behind the same host, origin and size checks.

Requires the ``mcp`` extra: ``pip install 'engramdb[mcp]'``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import anyio
import anyio.to_thread
import pydantic

import engramdb
from engramdb import ApiKeys
from engramdb.errors import EngramError, NotAuthenticated, StorageError
from engramdb.interfaces._access import LOOPBACK_NAMES, Caller, authenticate, keys_of, token_from_headers
from engramdb.interfaces._http import DEFAULT_MAX_BODY_BYTES, Guard, json_response, replaying, send_json
from engramdb.interfaces._ops import TOOLS as _BASE_TOOLS
from engramdb.interfaces._ops import Tool
from engramdb.interfaces._ops_more import MORE_TOOLS

try:
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.server.transport_security import TransportSecuritySettings

    from engramdb.interfaces._mcp_more import Extras, output_schema, tool_annotations
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the MCP server needs the mcp SDK (2.x): pip install 'engramdb[mcp]'", name=exc.name) from exc

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.interfaces._http import ASGIApp, Receive, Scope, Send

__all__ = ["MCP_PATH", "SERVER_NAME", "TOOLS", "check_message", "create_http_app", "create_server", "serve_stdio"]

SERVER_NAME: Final = "engramdb"
#: The tools the server offers, in the order it lists them.
_TOOLS: Final = (*_BASE_TOOLS, *MORE_TOOLS)
TOOLS: Final = tuple(t.name for t in _TOOLS)
#: Where the streamable HTTP transport answers.
MCP_PATH: Final = "/mcp"
#: The ASGI scope key under which the HTTP transport leaves the authenticated caller for the tools.
_CALLER_KEY: Final = "engramdb.caller"

_INSTRUCTIONS: Final = (
    "Persistent memory for this agent. Use `search` before a task to recall what is known, `remember` to keep "
    "facts, decisions and preferences, `preflight` before acting and `record_outcome` after acting, "
    "`suggest`/`choose` to learn what works, `record_failure` and `solutions` for errors and their fixes, "
    "`record_episode` for a finished multi-step task (or `start_episode`, `episode_event` and `end_episode` "
    "to follow one as it runs). `context` gives, before a task, everything relevant as "
    "one prompt block; `session_add` and `session` keep the short-term conversation window. Over HTTP your API "
    "key decides the agent; over stdio pass the same `agent` name throughout."
)
_log = logging.getLogger(__name__)


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "failed"


def _clean(value: Any) -> Any:
    """``value`` with every string made encodable (a lone surrogate becomes U+FFFD), so the answer can be sent."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if isinstance(value, Mapping):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _failure(message: str) -> types.CallToolResult:
    text = _clean(_one_line(message))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _success(result: dict[str, Any]) -> types.CallToolResult:
    data = _clean(result)
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=data)


def _arguments_message(tool: str, exc: pydantic.ValidationError) -> str:
    """Pydantic's errors as one line, without the rejected values (they are the caller's data)."""
    parts = []
    for err in exc.errors()[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg", "invalid")))
    return f"invalid arguments for {tool}: " + "; ".join(parts)


def _schema(tool: Tool) -> dict[str, Any]:
    schema = tool.args.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def _caller(ctx: Any) -> Caller | None:
    """The caller of a tool call: trusted over stdio; over HTTP the one the auth layer found (None: unknown)."""
    request = getattr(ctx, "request", None)
    if request is None:
        return Caller()
    caller = request.scope.get(_CALLER_KEY)
    return caller if isinstance(caller, Caller) else None


def create_server(mem: Engram) -> Server[Any]:
    """A low-level MCP server whose tools act on ``mem``; the caller owns ``mem``."""
    by_name = {t.name: t for t in _TOOLS}
    listed = [
        types.Tool(
            name=t.name,
            description=t.description,
            input_schema=_schema(t),
            title=None,
            output_schema=output_schema(t),
            annotations=tool_annotations(t),
        )
        for t in _TOOLS
    ]
    extras = Extras(mem, _caller)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return _failure(f"unknown tool {params.name!r} (tools: {', '.join(TOOLS)})")
        caller = _caller(ctx)
        if caller is None:
            return _failure("not authenticated")
        try:
            args = tool.args.model_validate(params.arguments or {})
        except pydantic.ValidationError as exc:
            return _failure(_arguments_message(tool.name, exc))

        def run() -> dict[str, Any]:
            return tool.call(mem, caller, args)

        try:
            return _success(await anyio.to_thread.run_sync(run))
        except EngramError as exc:
            return _failure(str(exc) or type(exc).__name__)
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback, reported without it
            _log.exception("tool %s failed", tool.name)
            return _failure(f"internal error in {tool.name}")

    return Server(
        SERVER_NAME,
        version=engramdb.__version__,
        instructions=_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=extras.list_resources,
        on_list_resource_templates=extras.list_templates,
        on_read_resource=extras.read_resource,
        on_list_prompts=extras.list_prompts,
        on_get_prompt=extras.get_prompt,
    )


def _bad_text(value: Any) -> bool:
    """Whether ``value`` holds a string that is not valid Unicode (a lone surrogate from a ``\\ud800`` escape)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_bad_text(k) or _bad_text(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_bad_text(v) for v in value)
    return False


def check_message(line: str) -> tuple[Any, int, str] | None:
    """Why the SDK would drop this JSON-RPC line unanswered, as ``(id, code, message)``; None if it is fine.

    The SDK reads a line it cannot parse or validate as nothing at all, so its client would
    wait forever; the stdio transport answers such lines with this error instead.
    """
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None, -32700, "parse error: the message is not JSON"
    if not isinstance(data, dict):
        # The SDK takes one message per line or request: a list (a JSON-RPC batch) is refused like a number.
        kind = {list: "a list (batches are not supported)", str: "a string", type(None): "null", bool: "a boolean"}
        shape = kind.get(type(data), "a number")
        return None, -32600, f"invalid request: expected one JSON-RPC 2.0 message (a JSON object), not {shape}"
    raw_id = data.get("id")
    msg_id = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    try:
        bad = _bad_text(data)
    except RecursionError:
        return msg_id, -32600, "invalid request: nested too deeply"
    if bad:
        return msg_id, -32602, "invalid params: text with a lone surrogate is not valid Unicode"
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:  # noqa: BLE001 - whatever the SDK's parser refuses gets an answer
        return (
            msg_id,
            -32600,
            (
                'invalid request: not a JSON-RPC 2.0 message ("jsonrpc": "2.0" and a "method", or a response\'s '
                '"result" or "error")'
            ),
        )
    return None


#: Longest wait, at the end of the input, for the answers to requests still running.
DRAIN_SECONDS: Final = 300.0


def _parsed(line: str) -> object:
    """``line`` as JSON, or None when it is not JSON."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _message_id(data: object, *, answer: bool) -> str | int | None:
    """The id of a JSON-RPC request (``answer=False``) or of a response (``answer=True``); else None."""
    if not isinstance(data, dict) or ("method" in data) == answer:
        return None
    return _rpc_id(data.get("id"))


def _rpc_id(value: object) -> str | int | None:
    """``value`` if it can be a JSON-RPC id (a string or an integer, not a boolean), else None."""
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


class _Wire:
    """The stdio transport's output (a private copy of fd 1), shared by the SDK's writer and :class:`_Lines`."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._lock = anyio.Lock()
        #: Ids of the client's requests read but not answered yet (see :meth:`drain`).
        self.pending: set[str | int] = set()

    def asked(self, line: str) -> None:
        """Note a request line the SDK is about to handle, so that :meth:`drain` waits for its answer."""
        data = _parsed(line)
        msg_id = _message_id(data, answer=False)
        if msg_id is not None:
            self.pending.add(msg_id)
            return
        # A request the client cancels gets no answer: do not wait for it.
        if isinstance(data, dict) and data.get("method") == "notifications/cancelled":
            params = data.get("params")
            cancelled = _rpc_id(params.get("requestId")) if isinstance(params, dict) else None
            if cancelled is not None:
                self.pending.discard(cancelled)

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._out.write(text)
        for line in text.splitlines():
            msg_id = _message_id(_parsed(line), answer=True)
            if msg_id is not None:
                self.pending.discard(msg_id)

    async def drain(self, timeout: float = DRAIN_SECONDS) -> None:
        """Wait until every request read so far is answered (at most ``timeout`` seconds).

        At the end of its input the SDK cancels the requests still running, so a client that
        writes its requests and closes stdin (``printf ... | engram mcp``) would get no answer
        to the last ones, although their writes were done.
        """
        with anyio.move_on_after(timeout):
            while self.pending:
                await anyio.sleep(0.01)

    async def flush(self) -> None:
        await self._out.flush()

    async def error(self, msg_id: Any, code: int, message: str) -> None:
        line = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})
        async with self._lock:
            await self._out.write(line + "\n")
            await self._out.flush()


class _Lines:
    """The stdio transport's input: lines the SDK would drop unanswered are answered (:func:`check_message`)."""

    def __init__(self, source: Any, wire: _Wire) -> None:
        self._source = source
        self._wire = wire

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            problem = check_message(line)
            if problem is None:
                self._wire.asked(line)
                yield line
            else:
                await self._wire.error(*problem)
        await self._wire.drain()


def serve_stdio(mem: Engram) -> None:
    """Serve ``mem`` over MCP on stdin/stdout until the client disconnects.

    The protocol gets a private copy of stdout, and fd 1 points at stderr meanwhile, so
    nothing a library prints can corrupt it.
    """
    server = create_server(mem)
    sys.stdout.flush()
    wire_fd = os.dup(1)
    saved_stdout = os.dup(1)
    os.dup2(2, 1)

    async def main() -> None:
        source = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        out = anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_fd, "wb"), encoding="utf-8", write_through=True))
        wire = _Wire(out)
        async with stdio_server(stdin=cast("Any", _Lines(source, wire)), stdout=cast("Any", wire)) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)


class _CheckBody:
    """ASGI middleware: a POST body the SDK would refuse is answered here, with a one-line JSON-RPC error.

    The SDK's own answer to a body that is not one JSON-RPC message (a JSON list, a number, a
    message without ``method``) is pydantic's multi-line report, quoting the caller's input;
    :func:`check_message` says the same in one line, as the stdio transport does.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:  # the Guard has already bounded the body's size
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            problem = check_message(body.decode("utf-8")) if body else None
        except UnicodeDecodeError:
            problem = (None, -32700, "parse error: the body is not UTF-8 text")
        if problem is not None:
            msg_id, code, text = problem
            await send_json(send, 400, {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}})
            return
        await self._app(scope, replaying(body, receive), send)


class _Authenticate:
    """ASGI middleware: every HTTP request needs an API key (while the store has any); 401 otherwise."""

    def __init__(self, app: ASGIApp, *, keys: ApiKeys, allow_unauthenticated: bool) -> None:
        self._app = app
        self._keys = keys
        self._allow = allow_unauthenticated

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        token = token_from_headers(headers)
        check: Callable[[], Caller] = lambda: authenticate(self._keys, token, allow_trusted=self._allow)  # noqa: E731
        try:
            caller = await anyio.to_thread.run_sync(check)
        except NotAuthenticated as exc:
            await json_response(send, 401, str(exc), {"WWW-Authenticate": "Bearer"})
            return
        except StorageError as exc:
            _log.warning("storage error while authenticating: %s", exc)
            await json_response(send, 503, "the store is unavailable")
            return
        scope[_CALLER_KEY] = caller
        await self._app(scope, receive, send)


def create_http_app(
    mem: Engram,
    *,
    keys: ApiKeys | None = None,
    allow_unauthenticated: bool = True,
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> ASGIApp:
    """An ASGI app serving ``mem`` over MCP's streamable HTTP transport at :data:`MCP_PATH`, with ``GET /health``
    and ``GET /metrics`` beside it (:mod:`engramdb.interfaces._mcp_http`).

    Authenticated like :func:`engramdb.interfaces.rest.create_app` (same arguments):
    while the store has API keys, every request needs one and every call acts as its
    agent. Run it with uvicorn (``engram mcp --transport http``); its lifespan runs the
    SDK's session manager.
    """
    server = create_server(mem)
    # The host and origin checks are the Guard's (the same as REST's); the SDK's own would only repeat them.
    inner = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_body_bytes,
    )
    # /health (no key) and /metrics (a key) beside /mcp; the rest extra's modules, which HTTP needs for uvicorn.
    from engramdb.interfaces._mcp_http import Operations
    from engramdb.interfaces._metrics import MetricsMiddleware

    operations = Operations(mem, routes=(MCP_PATH,))
    authenticated = _Authenticate(
        operations.metrics(_CheckBody(inner)),
        keys=keys if keys is not None else keys_of(mem),
        allow_unauthenticated=allow_unauthenticated,
    )
    guarded = Guard(operations.health(authenticated), allowed_hosts=allowed_hosts, max_body_bytes=max_body_bytes)
    # Outermost: refused requests are counted too.
    return MetricsMiddleware(guarded, metrics=operations.registry, route=operations.route)

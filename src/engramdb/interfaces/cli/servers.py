"""Server commands at the top level: ``engram serve`` (REST API) and ``engram mcp`` (MCP over stdio or HTTP).

Both HTTP servers follow one policy. They listen on 127.0.0.1 by default. With API keys
in the store (``engram keys create``) every request needs one and acts as its agent.
Without keys, a loopback server trusts its callers (and says so when it starts); a
server bound elsewhere refuses to start unless ``--allow-unauthenticated`` is given.
Only requests whose ``Host`` names the server are answered (``--allowed-host`` adds
names, e.g. the one a load balancer forwards; ``*`` turns the check off).

The server modules and their dependencies (FastAPI, uvicorn, the mcp SDK) are
imported only when a command runs: ``engram --help`` stays fast, and the core
install works without the ``rest`` and ``mcp`` extras.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from engramdb.errors import EngramError, ValidationError
from engramdb.interfaces.cli._options import StoreOption, open_engram, store_location

if TYPE_CHECKING:
    from types import FrameType

    from engramdb import Engram

__all__ = ["mcp", "serve"]

_DEFAULT_HOST: Final = "127.0.0.1"  # the same as engramdb.interfaces.rest.DEFAULT_HOST, without importing FastAPI
_DEFAULT_PORT: Final = 8765
_DEFAULT_MCP_PORT: Final = 8766
_DEFAULT_MAX_BODY: Final = 8 * 1024 * 1024

HostOption = Annotated[
    str, typer.Option("--host", help="Address to listen on. Elsewhere than loopback needs API keys.")
]
AllowedHostOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        metavar="NAME",
        help="Also answer requests for this host name (repeatable; '*': any). Others get 421.",
        show_default=False,
    ),
]
AllowUnauthenticatedOption = Annotated[
    bool,
    typer.Option(
        "--allow-unauthenticated",
        help="Serve off loopback without API keys: anyone who can reach it acts as any agent.",
    ),
]
MaxBodyOption = Annotated[
    int, typer.Option("--max-body-bytes", min=1024, metavar="N", help="Refuse request bodies over N bytes (413).")
]


class LogFormat(StrEnum):
    """How a server writes its logs (the ``log_format`` setting)."""

    text = "text"
    json = "json"


LogFormatOption = Annotated[
    LogFormat | None,
    typer.Option(
        "--log-format",
        help="Logs as text, or as JSON lines for log collectors (default: the log_format setting, text).",
        show_default=False,
    ),
]
#: At shutdown (SIGTERM, Ctrl+C), how long requests in flight may take to finish before they are cut off.
_GRACEFUL_SECONDS: Final = 30
#: Seconds an idle client connection stays open (uvicorn's default, said here): the remote client gives its idle
#: connections up sooner (``client._transport.KEEPALIVE_SECONDS``), so it never reuses one being closed.
KEEP_ALIVE_SECONDS: Final = 5


def _uvicorn_options(mem: Engram, log_format: LogFormat | None) -> dict[str, Any]:
    """How uvicorn runs a server of ``mem``: its log format, and a bounded graceful shutdown."""
    from engramdb.interfaces._logs import log_config

    chosen = log_format.value if log_format is not None else mem.settings.log_format
    return {
        "log_config": log_config("json" if chosen == "json" else "text"),
        "timeout_graceful_shutdown": _GRACEFUL_SECONDS,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
    }


class _Terminated(Exception):
    """SIGTERM arrived (raised by :func:`_stop_on_sigterm`'s handler)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """End the command normally on SIGTERM, so the store is closed and the exit code is 0.

    uvicorn shuts down gracefully on SIGTERM (requests in flight finish, then the app's lifespan
    drains the vector queue) and then raises the signal again for the handler that was there
    before it: by default that kills the process before the ``with`` around the store closes it.
    """
    if threading.current_thread() is not threading.main_thread():  # signal handlers belong to the main thread
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except _Terminated:
        sys.stderr.write("stopped by SIGTERM\n")
    finally:
        signal.signal(signal.SIGTERM, previous)


class Transport(StrEnum):
    """How ``engram mcp`` talks to its client."""

    stdio = "stdio"
    http = "http"


def _is_new(ctx: typer.Context, store: str | None) -> bool:
    """Whether the selected store does not exist yet (a server creates it: a normal first run)."""
    from engramdb.config import load_settings
    from engramdb.toolkit import store_exists

    location = store_location(ctx, store)
    return not store_exists(location if location is not None else str(load_settings().home))


def _announce(mem: Engram, *, new: bool, what: str) -> None:
    """Say on stderr which store is served, so a mistyped path shows even though the server creates it."""
    where = mem.location
    if "://" in where:  # a database URL: never its password
        scheme, _, rest = where.partition("://")
        where = f"{scheme}://{rest.rsplit('@', maxsplit=1)[-1]}"
    else:
        where = str(Path(where).expanduser().absolute())
    sys.stderr.write(f"{what}: serving the store at {where}{' (new and empty: created now)' if new else ''}\n")


def _http_policy(
    mem: Engram, *, host: str, allowed: list[str] | None, allow_unauthenticated: bool, what: str
) -> tuple[frozenset[str] | None, bool]:
    """The allowed ``Host`` names and whether unauthenticated callers are trusted; refuses unsafe setups."""
    from engramdb.interfaces._access import allowed_host_names, is_loopback, keys_of

    loopback = is_loopback(host)
    active = len(keys_of(mem).list(include_revoked=False))
    if not loopback and not active and not allow_unauthenticated:
        raise ValidationError(
            f"refusing to serve on {host} without API keys: anyone who can reach it could read and change every "
            "agent's memories. Create a key with 'engram keys create --agent NAME', or pass --allow-unauthenticated"
        )
    hosts = allowed_host_names(host, allowed or ())
    if hosts is not None and not hosts:
        raise ValidationError(
            f"serving on {host} answers no host name: pass --allowed-host NAME (the name clients use), "
            "or --allowed-host '*' to answer any"
        )
    if active:
        sys.stderr.write(f"{what}: API keys required ({active} active); each request acts as its key's agent\n")
    elif loopback:
        sys.stderr.write(
            f"{what}: no API keys in this store, so every local caller is trusted and may act as any agent; "
            "create keys with 'engram keys create --agent NAME' to require them\n"
        )
    else:
        sys.stderr.write(
            f"warning: {what} on {host} without API keys (--allow-unauthenticated): anyone who can reach it "
            "can read and change every agent's memories\n"
        )
    return hosts, loopback or allow_unauthenticated


def serve(
    ctx: typer.Context,
    *,
    host: HostOption = _DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on.")] = _DEFAULT_PORT,
    allowed_host: AllowedHostOption = None,
    allow_unauthenticated: AllowUnauthenticatedOption = False,
    max_body_bytes: MaxBodyOption = _DEFAULT_MAX_BODY,
    log_format: LogFormatOption = None,
    store: StoreOption = None,
) -> None:
    """Serve the store as a JSON REST API (needs the 'rest' extra); Ctrl+C or SIGTERM stops it gracefully.

    With API keys in the store ('engram keys create') every request needs one and acts as its agent.
    Without keys it trusts its callers, so it listens on 127.0.0.1 unless told otherwise.
    """
    try:
        import uvicorn

        from engramdb.interfaces.rest import create_app
    except ImportError as exc:
        raise EngramError("engram serve needs FastAPI and uvicorn: pip install 'engramdb[rest]'") from exc
    new = _is_new(ctx, store)
    from engramdb.config import server_overrides

    with open_engram(ctx, store, create=True, local=True, **server_overrides()) as mem:
        hosts, trusted = _http_policy(
            mem, host=host, allowed=allowed_host, allow_unauthenticated=allow_unauthenticated, what="engram serve"
        )
        _announce(mem, new=new, what="engram serve")  # once it will serve: a refusal stays one line
        tracer = None
        if mem.settings.otel_traces:
            from engramdb.interfaces._tracing import otlp_tracer

            tracer = otlp_tracer()
        app = create_app(
            mem, allow_unauthenticated=trusted, allowed_hosts=hosts, max_body_bytes=max_body_bytes, tracer=tracer
        )
        # uvicorn handles Ctrl+C and SIGTERM itself: it lets requests in flight finish, then the app's lifespan
        # drains the vector queue; the store closes when it returns.
        with _stop_on_sigterm():
            uvicorn.run(app, host=host, port=port, **_uvicorn_options(mem, log_format))


def mcp(
    ctx: typer.Context,
    *,
    transport: Annotated[
        Transport, typer.Option("--transport", help="stdio (the client starts the server) or http (streamable HTTP).")
    ] = Transport.stdio,
    host: HostOption = _DEFAULT_HOST,
    port: Annotated[
        int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on (http).")
    ] = _DEFAULT_MCP_PORT,
    allowed_host: AllowedHostOption = None,
    allow_unauthenticated: AllowUnauthenticatedOption = False,
    max_body_bytes: MaxBodyOption = _DEFAULT_MAX_BODY,
    log_format: LogFormatOption = None,
    store: StoreOption = None,
) -> None:
    """Serve the store to MCP clients (needs the 'mcp' extra): over stdin/stdout, or streamable HTTP at /mcp.

    For stdio, configure the client with the command `engram mcp --store PATH`. Over HTTP the
    server authenticates like 'engram serve': with API keys in the store, each request needs one.
    """
    missing = "engram mcp needs the mcp SDK (2.x): pip install 'engramdb[mcp]'"
    try:  # before the store is opened (and perhaps created)
        from engramdb.interfaces import mcp as server
    except ImportError as exc:
        raise EngramError(missing) from exc
    new = _is_new(ctx, store)
    if transport is Transport.stdio:
        with open_engram(ctx, store, create=True, local=True) as mem:
            _announce(mem, new=new, what="engram mcp")  # on stderr: stdout is the protocol's
            # stdout is the protocol channel from here on: nothing else may print to it.
            server.serve_stdio(mem)
        return
    try:
        import uvicorn
    except ImportError as exc:
        raise EngramError("engram mcp --transport http needs uvicorn: pip install 'engramdb[rest]'") from exc
    from engramdb.config import server_overrides

    with open_engram(ctx, store, create=True, local=True, **server_overrides()) as mem:
        hosts, trusted = _http_policy(
            mem, host=host, allowed=allowed_host, allow_unauthenticated=allow_unauthenticated, what="engram mcp"
        )
        _announce(mem, new=new, what="engram mcp")  # once it will serve: a refusal stays one line
        app = server.create_http_app(
            mem, allow_unauthenticated=trusted, allowed_hosts=hosts, max_body_bytes=max_body_bytes
        )
        with _stop_on_sigterm():
            uvicorn.run(app, host=host, port=port, **_uvicorn_options(mem, log_format))

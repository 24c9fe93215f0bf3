"""Server commands at the top level: ``engram serve`` (REST API) and ``engram mcp`` (MCP over stdio).

The server modules and their dependencies (FastAPI, uvicorn, the mcp SDK) are
imported only when a command runs: ``engram --help`` stays fast, and the core
install works without the ``rest`` and ``mcp`` extras.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import Annotated

import typer

from engramdb.errors import EngramError
from engramdb.interfaces.cli._common import StoreOption, open_engram

__all__ = ["mcp", "serve"]

_DEFAULT_HOST = "127.0.0.1"  # the same as engramdb.interfaces.rest.DEFAULT_HOST, without importing FastAPI
_DEFAULT_PORT = 8765


def serve(
    ctx: typer.Context,
    *,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on. The API has no authentication: keep it local.")
    ] = _DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on.")] = _DEFAULT_PORT,
    store: StoreOption = None,
) -> None:
    """Serve the store as a JSON REST API (needs the 'rest' extra); Ctrl+C stops it.

    The server trusts its callers: any client can act as any agent. It listens on
    127.0.0.1 unless told otherwise.
    """
    try:
        import uvicorn

        from engramdb.interfaces.rest import create_app
    except ImportError as exc:
        raise EngramError("engram serve needs FastAPI and uvicorn: pip install 'engramdb[rest]'") from exc
    if not _is_loopback(host):
        sys.stderr.write(
            f"warning: serving on {host}: the API has no authentication, so anyone who can reach it "
            "can read and change every agent's memories\n"
        )
    with open_engram(ctx, store) as mem:
        # uvicorn handles Ctrl+C itself (graceful shutdown); the store closes when it returns.
        uvicorn.run(create_app(mem), host=host, port=port, log_level="info")


def mcp(ctx: typer.Context, *, store: StoreOption = None) -> None:
    """Serve the store to an MCP client over stdin/stdout (needs the 'mcp' extra).

    Configure it in the client as the command `engram mcp --store PATH`.
    """
    missing = "engram mcp needs the mcp SDK: pip install 'engramdb[mcp]'"
    try:  # before the store is opened (and perhaps created)
        import mcp as _sdk  # noqa: F401
    except ImportError as exc:
        raise EngramError(missing) from exc
    from engramdb.interfaces.mcp import create_server

    with open_engram(ctx, store) as mem:
        try:
            server = create_server(mem)
        except ImportError as exc:  # an SDK without either server class
            raise EngramError(missing) from exc
        # stdout is the protocol channel from here on: nothing else may print to it.
        server.run("stdio")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: assume it may be reachable from elsewhere
        return False

"""The remote client never reuses a connection the server may be closing (bench/load.py found it under load).

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds; a client that keeps idle
connections as long sends, now and then, a request on one the server is closing at that moment and gets
"Server disconnected without sending a response" (16 of 2,000 calls with 50 agents before the fix).
"""

from __future__ import annotations

import asyncio
import inspect
import time

import uvicorn.config

from engramdb import Engram
from engramdb.client._transport import KEEPALIVE_SECONDS, AsyncTransport, Transport
from engramdb.interfaces.cli import servers


def test_engram_serve_keeps_idle_connections_longer_than_the_client(mem: Engram) -> None:
    options = servers._uvicorn_options(mem, servers.LogFormat.text)
    assert options["timeout_keep_alive"] == servers.KEEP_ALIVE_SECONDS
    assert set(options) <= set(inspect.signature(uvicorn.config.Config.__init__).parameters)  # uvicorn's names
    assert servers.KEEP_ALIVE_SECONDS >= 2 * KEEPALIVE_SECONDS


def test_both_transports_use_the_shorter_keep_alive() -> None:
    sync = Transport("http://127.0.0.1:9")
    aio = AsyncTransport("http://127.0.0.1:9")
    try:
        # httpx keeps the setting on its connection pool (no public getter).
        assert sync._client._transport._pool._keepalive_expiry == KEEPALIVE_SECONDS  # type: ignore[attr-defined]
        assert aio._client._transport._pool._keepalive_expiry == KEEPALIVE_SECONDS  # type: ignore[attr-defined]
    finally:
        sync.close()
        asyncio.run(aio.close())


def test_a_client_idle_past_its_keep_alive_still_gets_answers(server, remote, agent) -> None:  # type: ignore[no-untyped-def]
    stored = remote.remember("Rotate the deploy key every Monday", agent=agent)
    time.sleep(KEEPALIVE_SECONDS + 0.5)  # the pooled connection has expired on this side: a fresh one is opened
    assert remote.get(stored.id, agent=agent).content == stored.content

"""A server (or a proxy in front of one) that drops ``X-Engram-Error`` still maps to the library's errors by status.

The map mirrors :mod:`engramdb.interfaces._status`, so every status the server gives a library error comes back as
that error's class, not as a bare EngramError.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engramdb.client._transport import Call, Transport
from engramdb.errors import EngramError
from engramdb.interfaces._status import STATUSES


class _Bare(BaseHTTPRequestHandler):
    """Answers GET /v1/<status> with that status, a JSON error body and no X-Engram-Error header."""

    def do_GET(self) -> None:
        status = int(self.path.rsplit("/", 1)[-1])
        body = json.dumps({"error": f"failed with {status}"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        return


@pytest.fixture(scope="module")
def bare_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bare)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("cls", "status"), STATUSES, ids=[cls.__name__ for cls, _ in STATUSES])
def test_every_status_of_a_library_error_maps_back_to_its_class(
    bare_url: str, cls: type[EngramError], status: int
) -> None:
    transport = Transport(bare_url)
    try:
        with pytest.raises(EngramError) as caught:
            transport(Call("GET", f"/{status}", lambda data: data))
    finally:
        transport.close()
    assert type(caught.value) is cls
    assert str(caught.value) == f"failed with {status}"

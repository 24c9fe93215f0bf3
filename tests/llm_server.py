"""A chat-completions server on loopback speaking the OpenAI protocol with scripted answers (for LLM tests)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeServer", "Reply"]


@dataclass
class Reply:
    """One scripted answer: status, body (a chat completion's content, or raw text), headers, delay."""

    content: str | None = "hello"
    status: int = 200
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class FakeServer:
    """A chat-completions server on 127.0.0.1 answering from a script; records the requests it got."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        #: When set, answers each request (the parsed body) not found in the script.
        self.answer: Callable[[dict[str, Any]], Reply] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                server.requests.append(json.loads(self.rfile.read(length)))
                server.headers.append(dict(self.headers))
                if server.script:
                    reply = server.script.pop(0)
                else:
                    reply = server.answer(server.requests[-1]) if server.answer is not None else Reply()
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    body = reply.raw
                elif reply.status >= 400:
                    body = json.dumps({"error": {"message": f"scripted {reply.status}"}})
                else:
                    body = json.dumps(
                        {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}}]}
                    )
                data = body.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

"""The short way through a server: ``memory search`` and ``memory record`` with ``--json`` and ``$ENGRAM_URL``.

An agent that calls ``engram`` at every step through a running ``engram serve`` would spend most of
each call starting the CLI: typer (and the pydantic it validates options with), rich, the models and
httpx cost ~0.3 s of CPU before the first byte is sent, for a call the server answers in milliseconds.
This module answers the commands agents call most, in the shape they call them (``--json``), with the
standard library only: it parses the command line, sends the same request the remote client sends,
and prints the server's JSON as ``--json`` prints it (the server's answer is the values' ``to_dict``).

It is strictly a short cut, never a second CLI: :func:`parse` accepts a command line only when it is
sure to read it as typer does (a fixed set of options, the same names and repeat rules; anything else
returns None), and :func:`run` hands over to the full command line whenever the server refuses a
request (4xx: nothing was written, so the full path sends it again and reports the error in its own
words) or cannot be reached. tests/client/test_cli_fast.py checks both parsers agree.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

__all__ = ["FastCall", "parse", "run"]

#: Seconds to wait for the server (the remote client's default: a search embeds its query).
TIMEOUT: Final = 60.0

# Each command's options: the names typer knows them by -> (field, repeatable). Flags are handled apart.
_COMMON: Final = {
    "--agent": ("agent", False),
    "-a": ("agent", False),
    "--type": ("kind", True),
    "--kind": ("kind", True),
    "-t": ("kind", True),
    "--tag": ("tags", True),
    "--user": ("user", False),
    "-u": ("user", False),
    "--session": ("session", False),
}
_SEARCH: Final = {**_COMMON, "--limit": ("limit", False), "-n": ("limit", False)}
# `record` takes one --type (the last one given wins, as for any single-valued option).
_RECORD: Final = {**_COMMON, "--type": ("kind", False), "--kind": ("kind", False), "-t": ("kind", False)}


class FastCall(NamedTuple):
    """One request to the server: ``POST path`` with ``body`` (the remote client's own request).

    A named tuple, not a dataclass: ``dataclasses`` imports ``inspect``, a tenth of this path's budget."""

    path: str
    body: Mapping[str, Any]


def _options(args: Sequence[str], known: Mapping[str, tuple[str, bool]]) -> tuple[dict[str, Any], list[str]] | None:
    """The options and the positional arguments of ``args``, or None when one is not in ``known``."""
    values: dict[str, Any] = {}
    positional: list[str] = []
    json_flag = False
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--json":
            json_flag = True
            continue
        if arg.startswith("-") and arg != "-":
            name, eq, inline = arg.partition("=")
            if name not in known or (eq and not name.startswith("--")):
                return None  # an option this short cut does not handle, or a spelling it does not parse
            if eq:
                value = inline
            elif i < len(args) and not args[i].startswith("-"):
                value = args[i]
                i += 1
            else:
                return None  # a missing value, or one that looks like an option: typer's rules decide
            field, repeatable = known[name]
            if repeatable:
                values.setdefault(field, []).append(value)
            else:
                values[field] = value
            continue
        positional.append(arg)
    if not json_flag:
        return None
    return values, positional


def _text(value: str) -> str | None:
    # Blank text is refused by the full command line (with its own message): leave it that.
    return value if value.strip() else None


def parse(argv: Sequence[str], environ: Mapping[str, str]) -> FastCall | None:
    """The request ``engram ARGV`` sends through a server, or None when the full command line must read it."""
    if len(argv) < 2 or argv[0] != "memory" or argv[1] not in ("search", "record"):
        return None
    search = argv[1] == "search"
    parsed = _options(argv[2:], _SEARCH if search else _RECORD)
    if parsed is None:
        return None
    values, positional = parsed
    if len(positional) != 1 or _text(positional[0]) is None or positional[0] == "-":
        return None
    agent = values.get("agent", environ.get("ENGRAM_AGENT") or None)
    if agent is None:
        return None  # the agent then comes from the config file: the full command line reads it
    if search:
        try:
            limit = int(values.get("limit", "10"))
        except ValueError:
            return None
        if limit < 1 or str(limit) != str(values.get("limit", "10")).strip():
            return None
        body = {"query": positional[0], "agent": agent, "limit": limit}
        body.update({k: values[k] for k in ("kind", "tags", "user", "session") if k in values})
        return FastCall("/v1/search", body)
    body = {
        "content": positional[0],
        "agent": agent,
        "kind": values.get("kind", "knowledge"),
        "tags": values.get("tags", []),
        "visibility": "private",
        "force": False,
    }
    body.update({k: values[k] for k in ("user", "session") if k in values})
    return FastCall("/v1/memories", body)


def _send(url: str, call: FastCall, environ: Mapping[str, str]) -> tuple[int, bytes] | None:
    """The server's status and body, or None when it cannot be reached (nothing was sent)."""
    from http.client import HTTPConnection, HTTPException, HTTPSConnection
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = (HTTPSConnection if parts.scheme == "https" else HTTPConnection)(
        parts.hostname or "localhost", parts.port, timeout=TIMEOUT
    )
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    key = (environ.get("ENGRAM_API_KEY") or "").strip()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        connection.connect()
    except OSError:
        return None
    try:
        connection.request("POST", parts.path.rstrip("/") + call.path, body=json.dumps(call.body), headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, HTTPException) as exc:
        # Sent, maybe written: not handed over (a second send could write twice).
        raise _Failed(f"cannot reach the engram server at {url.rstrip('/')}: {exc or type(exc).__name__}") from exc
    finally:
        connection.close()


class _Failed(Exception):
    """A failure after the request was sent: reported in one line, never retried."""


def run(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int | None:
    """Run ``engram ARGV`` the short way; its exit code, or None to run the full command line instead."""
    env = os.environ if environ is None else environ
    url = env.get("ENGRAM_URL") or ""
    if not url.lower().startswith(("http://", "https://")):
        return None
    if "ENGRAM_API_KEY" in env and not env["ENGRAM_API_KEY"].strip():
        return None  # the full command line refuses a blank key in its own words
    call = parse(argv, env)
    if call is None:
        return None
    try:
        answer = _send(url, call, env)
        if answer is None:
            return None
        status, raw = answer
        if 400 <= status < 500:
            return None  # refused, nothing written: the full command line says why, in its words
        data = json.loads(raw) if raw else None
        if status >= 500 or not isinstance(data, dict):
            message = data.get("error") if isinstance(data, dict) else None
            raise _Failed(str(message or f"HTTP {status}"))
        out = data["hits"] if call.path.endswith("/search") else data
    except (_Failed, ValueError, KeyError) as exc:
        sys.stderr.write(f"error: {' '.join(str(exc).split()) or 'failed'}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return 130
    try:
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``... --json | head``): stop quietly, as the full command line does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    return 0

"""``Engram("http://host:port", api_key=...)``: the library's API through a running ``engram serve``.

:class:`RemoteEngram` has the facade's methods and areas with the same arguments; each is one
typed mapping to a :class:`~engramdb.client._transport.Call` (a route, its arguments, a decoder
rebuilding the library's values with :func:`~engramdb.models._decode.from_dict`), sent by one
transport. Errors are the library's (``NotFound``, ``ValidationError``, ``AccessDenied``, ...).
An ``agent`` left out is the server's choice: the API key's agent, else ``default``.

What cannot cross the wire says so with an :class:`~engramdb.errors.EngramError` naming the
reason (:data:`LOCAL_ONLY`): live in-process objects (``session``, ``episodes.begin``,
``learning.adaptive``), and maintenance of the server's own files (``reembed``, running shell
checks on the server's host).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, NoReturn
from urllib.parse import quote

from engramdb import _validate as check
from engramdb.client._transport import Call, Transport
from engramdb.errors import ConfigError
from engramdb.models import (
    AddResult,
    Change,
    Context,
    HealthReport,
    Hit,
    Memory,
    Reasoning,
)

__all__ = ["LOCAL_ONLY", "RemoteEngram", "Send"]

from engramdb.client._common import LOCAL_ONLY, Send, _int, _kinds, _listed, _local_only, _many, _none, _one, _set
from engramdb.client._learning import RemoteCode, RemoteEpisodes, RemoteFailures, RemoteLearning
from engramdb.client._privacy import (
    RemoteAudit,
    RemoteKeys,
    RemoteKnowledge,
    RemoteRetention,
    RemoteRouting,
    RemoteSharing,
)


class RemoteEngram:
    """The :class:`~engramdb.Engram` API through a running ``engram serve`` at ``url``.

    ``api_key`` (default ``$ENGRAM_API_KEY``) authenticates every request; ``timeout`` is in
    seconds. One instance is safe to share across threads; :meth:`close` (or ``with``)
    releases its connections. ``send`` replaces the HTTP transport (the async client uses it).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float | None = None,
        send: Send | None = None,
    ) -> None:
        self._transport = Transport(url, api_key=api_key, timeout=timeout) if send is None else None
        self.location = url.rstrip("/")
        #: What this client was opened with (AsyncEngram.of opens its async twin with the same).
        self.api_key = api_key
        self.timeout = timeout
        self._send: Send = send if send is not None else self._transport  # type: ignore[assignment]
        self.learning = RemoteLearning(self._send)
        self.failures = RemoteFailures(self._send)
        self.episodes = RemoteEpisodes(self._send)
        self.code = RemoteCode(self._send)
        self.sharing = RemoteSharing(self._send)
        self.knowledge = RemoteKnowledge(self._send)
        self.audit = RemoteAudit(self._send)
        self.retention = RemoteRetention(self._send)
        self.routing = RemoteRouting(self._send)
        self.keys = RemoteKeys(self._send)

    @classmethod
    def opened(cls, url: str, *, api_key: str | None = None, **options: Any) -> RemoteEngram:
        """A client of ``url`` from :class:`~engramdb.Engram`'s arguments (see :func:`client_timeout`)."""
        return cls(url, api_key=api_key, timeout=client_timeout(url, options))

    def __repr__(self) -> str:
        return f"Engram({self.location!r})"

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connections to the server (the server and its store stay up)."""
        if self._transport is not None:
            self._transport.close()

    def __enter__(self) -> RemoteEngram:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def flush(self, timeout: float | None = None) -> bool:
        """Nothing waits on this side: the server's searches wait for its own vector queue."""
        return True

    def reembed(self, *, progress: Any = None) -> NoReturn:
        _local_only("reembed")

    def session(self, agent: str | None = None, *, token_budget: int = 2000) -> NoReturn:
        _local_only("session")

    # -- writes -----------------------------------------------------------------------------------------
    def remember(
        self,
        content: str,
        *,
        agent: str | None = None,
        kind: str = "knowledge",
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        visibility: str = "private",
        confidence: float | None = None,
        force: bool = False,
        user: str | None = None,
        session: str | None = None,
        at: datetime | str | None = None,
        key: str | None = None,
    ) -> Memory:
        body = {
            "user": user,
            "session": session,
            "at": at,
            "content": content,
            "agent": agent,
            "kind": kind,
            "tags": [tags] if isinstance(tags, str) else _listed(tags),
            "metadata": metadata,
            "visibility": visibility,
            "confidence": confidence,
            "force": force,
            "key": key,
        }
        return self._send(Call("POST", "/memories", _one(Memory), body=_set(body)))

    def add(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        agent: str | None = None,
        user: str | None = None,
        session: str | None = None,
        at: datetime | str | None = None,
    ) -> AddResult:
        # Checked here too: what crosses the wire is plain JSON whatever the caller passed.
        when = check.moment(at, what="at")
        body = {
            "messages": [m.to_dict() for m in check.messages(messages)],
            "agent": agent,
            "user": user,
            "session": session,
            "at": None if when is None else when.isoformat(),
        }
        return self._send(Call("POST", "/memories/add", _one(AddResult), body=_set(body)))

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> builtins.list[Memory]:
        listed = (
            [dict(item) if isinstance(item, Mapping) else item for item in items]
            if isinstance(items, Iterable)
            else items
        )
        body = {"items": listed, "force": force}
        return self._send(Call("POST", "/memories/batch", _many(Memory, "memories"), body=body))

    def update(self, memory_id: str, *, agent: str | None = None, **changes: Any) -> Memory:
        query = {"agent": agent}
        return self._send(Call("PATCH", f"/memories/{_segment(memory_id)}", _one(Memory), query=query, body=changes))

    def forget(
        self, memory_id: str, *, agent: str | None = None, user: str | None = None, session: str | None = None
    ) -> None:
        query = {"agent": agent, "user": user, "session": session}
        return self._send(Call("DELETE", f"/memories/{_segment(memory_id)}", _none, query=query))

    def clear(self, *, agent: str, confirm: str, user: str | None = None, session: str | None = None) -> int:
        body = _set({"agent": agent, "confirm": confirm, "user": user, "session": session})
        return self._send(Call("DELETE", "/memories", _int("forgotten"), body=body))

    # -- reads ------------------------------------------------------------------------------------------
    def get(
        self, memory_id: str, *, agent: str | None = None, user: str | None = None, session: str | None = None
    ) -> Memory:
        query = {"agent": agent, "user": user, "session": session}
        return self._send(Call("GET", f"/memories/{_segment(memory_id)}", _one(Memory), query=query))

    def recall_key(
        self, key: str, *, agent: str | None = None, user: str | None = None, as_of: datetime | str | None = None
    ) -> Memory:
        query = {"key": key, "agent": agent, "user": user, "as_of": as_of}
        return self._send(Call("GET", "/keyed", _one(Memory), query=query))

    def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        kind: str | Sequence[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 10,
        user: str | None = None,
        session: str | None = None,
        as_of: datetime | str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        min_score: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Hit]:
        body = {
            "metadata": dict(metadata) if isinstance(metadata, Mapping) else metadata,
            "user": user,
            "session": session,
            "as_of": as_of,
            "query": query,
            "agent": agent,
            "kind": kind,
            "tags": None if tags is None else [tags] if isinstance(tags, str) else _listed(tags),
            "limit": limit,
            "since": since,
            "until": until,
            "min_score": min_score,
        }
        return self._send(Call("POST", "/search", _many(Hit, "hits"), body=_set(body)))

    def list(
        self,
        *,
        agent: str | None = None,
        kind: str | Sequence[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        user: str | None = None,
        session: str | None = None,
        as_of: datetime | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        query = {
            "metadata": _meta_text(metadata),
            "user": user,
            "session": session,
            "as_of": as_of,
            "agent": agent,
            "kind": _kinds(kind),
            "tag": None if tags is None else [tags] if isinstance(tags, str) else _listed(tags),
            "limit": limit,
            "offset": offset,
            "since": since,
            "until": until,
        }
        return self._send(Call("GET", "/memories", _many(Memory, "memories"), query=query))

    def count(
        self,
        *,
        agent: str | None = None,
        kind: str | Sequence[str] | None = None,
        user: str | None = None,
        session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> int:
        query = {
            "agent": agent,
            "kind": _kinds(kind),
            "user": user,
            "session": session,
            "metadata": _meta_text(metadata),
        }
        return self._send(Call("GET", "/count", _int("count"), query=query))

    def history(self, memory_id: str, *, agent: str | None = None) -> builtins.list[Change]:
        path = f"/memories/{_segment(memory_id)}/history"
        return self._send(Call("GET", path, _many(Change, "changes"), query={"agent": agent}))

    # -- the brain and maintenance ----------------------------------------------------------------------
    def context(
        self,
        task: str,
        *,
        agent: str | None = None,
        token_budget: int = 1500,
        user: str | None = None,
        session: str | None = None,
    ) -> Context:
        body = {"task": task, "agent": agent, "token_budget": token_budget, "user": user, "session": session}
        return self._send(Call("POST", "/context", _one(Context), body=_set(body)))

    def reason(
        self, goal: str, *, agent: str | None = None, mode: str = "plan", options: Sequence[str] | None = None
    ) -> Reasoning:
        body = {"goal": goal, "agent": agent, "mode": mode, "options": None if options is None else _listed(options)}
        return self._send(Call("POST", "/reason", _one(Reasoning), body=body))

    def doctor(self, *, quick: bool = False) -> HealthReport:
        return self._send(Call("GET", "/doctor", _one(HealthReport), query={"quick": quick}))


def client_timeout(url: str, options: Mapping[str, Any]) -> Any:
    """The ``timeout`` among a client's :class:`~engramdb.Engram` options. ``create`` means nothing to a client (the
    server's store exists); any other option is a setting of the server's store, refused in one line."""
    unknown = sorted(set(options) - {"timeout", "create"})
    if unknown:
        raise ConfigError(
            f"{', '.join(unknown)}: settings of the server's store, not of a client of {url} "
            "(a client takes api_key and timeout)"
        )
    return options.get("timeout")


def _segment(memory_id: str) -> str:
    """A checked id as one path segment (a '/' or '?' in it must not change the route)."""
    return quote(check.memory_id(memory_id), safe="")


def _meta_text(metadata: Mapping[str, Any] | None) -> str | None:
    """A metadata filter in a query string: its JSON text (checked here, so a bad one fails before the request)."""
    if metadata is None:
        return None
    pairs = check.metadata_filter(metadata)
    return json.dumps(dict(pairs or ()))

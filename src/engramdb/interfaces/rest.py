"""A JSON REST API over one :class:`~engramdb.Engram` (FastAPI): ``create_app(mem)``; run it with ``engram serve``.

Each endpoint parses its request, calls the library and returns the result as
JSON; the rules (validation of kinds, agent scoping, redaction, auditing) stay in
the library. Errors come from the library's exception tree, mapped once::

    ValidationError (and a malformed request) -> 422   {"error": "<one line>"}
    NotFound (and an unknown route)            -> 404   {"error": "<one line>"}
    StorageError                               -> 503   {"error": "<one line>"}
    anything else                              -> 500   {"error": "<one line>"}   (never a traceback)

Agent identity is the ``agent`` field or query parameter, as in the Python API:
the server trusts its caller exactly like the library does, so anyone who can
reach it can act as any agent. That is why ``engram serve`` binds to 127.0.0.1 by
default; binding the agent to an authenticated identity is future work.

Requires the ``rest`` extra: ``pip install 'engramdb[rest]'``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any, Final

try:
    from fastapi import FastAPI, Query, Request, Response
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, Field
    from starlette.exceptions import HTTPException
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the REST server needs FastAPI and uvicorn: pip install 'engramdb[rest]'", name=exc.name) from exc

from engramdb.errors import EngramError, NotFound, StorageError, ValidationError
from engramdb.interfaces._json import audit_dict, pattern_dict, solution_dict, suggestion_dict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from engramdb import Engram

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "create_app"]

#: Loopback only: the server has no authentication (see the module docstring).
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765

_log = logging.getLogger(__name__)


# -- request bodies ------------------------------------------------------------------------------------
# Pydantic checks the shape (types, required fields, no unknown fields); the library checks the meaning.


class _Body(BaseModel):
    # An unknown field is most likely a typo ("tag" for "tags"): reject it rather than ignore it.
    model_config = ConfigDict(extra="forbid")


class RememberBody(_Body):
    """``POST /memories``: the arguments of :meth:`Engram.remember`."""

    content: str
    agent: str = "default"
    kind: str = "knowledge"
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    visibility: str = "private"
    confidence: float | None = None
    force: bool = False


class BatchBody(_Body):
    """``POST /memories/batch``: items as for :meth:`Engram.remember_many` (the library validates each)."""

    items: list[dict[str, Any]]
    force: bool = False


class UpdateBody(_Body):
    """``PATCH /memories/{id}``: the fields to change; fields left out stay as they are."""

    content: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    kind: str | None = None
    confidence: float | None = None
    visibility: str | None = None


class SearchBody(_Body):
    """``POST /search``: the arguments of :meth:`Engram.search`."""

    query: str
    agent: str = "default"
    kind: str | list[str] | None = None
    tags: list[str] | None = None
    limit: int = 10


class RecordBody(_Body):
    """``POST /outcomes``: the arguments of :meth:`Engram.record`."""

    context: str
    action: str
    # Order matters for pydantic's smart union only on ties; JSON true stays a bool, 0.5 a float.
    outcome: str | bool | float
    agent: str = "default"
    alternatives: list[str] = Field(default_factory=list)
    duration: float | None = None
    metadata: dict[str, Any] | None = None
    category: str | None = None
    used: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    visibility: str = "private"


class SuggestBody(_Body):
    """``POST /suggest``: the arguments of :meth:`Engram.suggest`."""

    context: str
    agent: str = "default"
    options: list[str] | None = None
    limit: int = 5


class ChooseBody(_Body):
    """``POST /choose``: the arguments of :meth:`Engram.choose`."""

    context: str
    options: list[str]
    agent: str = "default"
    exploration: float | None = None
    seed: int | None = None


class FailureBody(_Body):
    """``POST /failures``: the arguments of :meth:`Engram.record_failure`."""

    error: str
    agent: str = "default"
    context: str = ""
    solution: str | None = None
    failed_solutions: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    visibility: str = "private"


class SolutionsBody(_Body):
    """``POST /solutions``: the arguments of :meth:`Engram.solutions`."""

    error: str
    agent: str = "default"
    limit: int = 3


class ShareBody(_Body):
    """``POST /shares`` and ``DELETE /shares``: the arguments of :meth:`Engram.share` / :meth:`Engram.unshare`."""

    memory_ids: list[str] | None = None
    from_agent: str
    to_agent: str = "*"
    tag: str | None = None
    pattern: str | None = None


# -- query parameters ----------------------------------------------------------------------------------

AgentQuery = Annotated[str, Query(description="The agent whose memories these are.")]
OptionalAgentQuery = Annotated[
    str | None, Query(description="Act as this agent: the memory must be visible to (or owned by) it.")
]


# -- errors --------------------------------------------------------------------------------------------


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "failed"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": _one_line(message)}, status_code=status)


def _status(exc: EngramError) -> int:
    if isinstance(exc, ValidationError):
        return 422
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, StorageError):
        return 503
    return 500


async def _on_engram_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)
    return _error(_status(exc), str(exc))


async def _on_bad_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _error(422, _validation_message(exc.errors()))


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail))


async def _on_crash(request: Request, exc: Exception) -> JSONResponse:
    # A bug: the traceback goes to the server's log, never to the client (it may show data or paths).
    _log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error(500, "internal server error")


def _validation_message(errors: Sequence[Any]) -> str:
    """Pydantic's errors as one line: ``body.content: Field required; query.limit: ...``."""
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "invalid request: " + "; ".join(parts)


# -- the app -------------------------------------------------------------------------------------------


def create_app(mem: Engram) -> FastAPI:
    """A FastAPI app serving ``mem``; the caller owns ``mem`` (opens and closes it).

    Endpoints are plain (sync) functions: FastAPI runs them in its thread pool,
    and one :class:`~engramdb.Engram` is safe to share across threads.
    """
    app = FastAPI(
        title="engramdb",
        summary="Persistent memory and learning for LLM agents.",
        description="The server trusts its caller: the `agent` field or parameter is not authenticated.",
    )
    app.add_exception_handler(EngramError, _on_engram_error)
    app.add_exception_handler(RequestValidationError, _on_bad_request)
    app.add_exception_handler(HTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_crash)

    # -- memories ------------------------------------------------------------------------------
    @app.post("/memories", status_code=201, tags=["memories"])
    def remember(body: RememberBody) -> dict[str, Any]:
        """Store one memory; returns it as stored (secrets replaced, or the memory it merged into)."""
        return mem.remember(
            body.content,
            agent=body.agent,
            kind=body.kind,
            tags=body.tags,
            metadata=body.metadata,
            visibility=body.visibility,
            confidence=body.confidence,
            force=body.force,
        ).to_dict()

    @app.post("/memories/batch", status_code=201, tags=["memories"])
    def remember_many(body: BatchBody) -> dict[str, Any]:
        """Store many memories at once: all or nothing; an error names the bad item's position."""
        return {"memories": [m.to_dict() for m in mem.remember_many(body.items, force=body.force)]}

    @app.get("/memories", tags=["memories"])
    def list_memories(
        agent: AgentQuery = "default",
        kind: Annotated[list[str] | None, Query(description="Only this kind (repeatable).")] = None,
        tag: Annotated[list[str] | None, Query(description="Only with this tag (repeatable: all must match).")] = None,
        limit: int = 100,
        offset: int = 0,
    ) -> dict[str, Any]:
        """An agent's memories (and those shared with it), newest first."""
        found = mem.list(agent=agent, kind=kind, tags=tag, limit=limit, offset=offset)
        return {"memories": [m.to_dict() for m in found], "limit": limit, "offset": offset}

    @app.get("/memories/{memory_id}", tags=["memories"])
    def get(memory_id: str, agent: OptionalAgentQuery = None) -> dict[str, Any]:
        """One memory; with ``agent``, 404 unless it is visible to that agent."""
        return mem.get(memory_id, agent=agent).to_dict()

    @app.patch("/memories/{memory_id}", tags=["memories"])
    def update(memory_id: str, body: UpdateBody, agent: OptionalAgentQuery = None) -> dict[str, Any]:
        """Change fields of a memory (only those sent); with ``agent``, only that agent's own memory."""
        # Only the fields the client sent: a field sent as null is a change (to empty metadata, ...).
        changes = body.model_dump(exclude_unset=True)
        return mem.update(memory_id, agent=agent, **changes).to_dict()

    @app.delete("/memories/{memory_id}", status_code=204, tags=["memories"])
    def forget(memory_id: str, agent: OptionalAgentQuery = None) -> Response:
        """Remove a memory for good; its history keeps a tombstone."""
        mem.forget(memory_id, agent=agent)
        return Response(status_code=204)

    @app.get("/memories/{memory_id}/history", tags=["memories"])
    def history(memory_id: str, agent: OptionalAgentQuery = None) -> dict[str, Any]:
        """Every change of a memory, oldest first."""
        return {"changes": [c.to_dict() for c in mem.history(memory_id, agent=agent)]}

    @app.post("/search", tags=["memories"])
    def search(body: SearchBody) -> dict[str, Any]:
        """The memories most relevant to a query, best first."""
        hits = mem.search(body.query, agent=body.agent, kind=body.kind, tags=body.tags, limit=body.limit)
        return {"hits": [h.to_dict() for h in hits]}

    # -- learning ------------------------------------------------------------------------------
    @app.post("/outcomes", status_code=201, tags=["learning"])
    def record(body: RecordBody) -> dict[str, Any]:
        """Record how an action turned out in a context; returns the ``decision`` memory."""
        return mem.record(
            body.context,
            body.action,
            body.outcome,
            agent=body.agent,
            alternatives=body.alternatives,
            duration=body.duration,
            metadata=body.metadata,
            category=body.category,
            used=body.used,
            tags=body.tags,
            visibility=body.visibility,
        ).to_dict()

    @app.post("/suggest", tags=["learning"])
    def suggest(body: SuggestBody) -> dict[str, Any]:
        """What to do in a context, from the outcomes of similar contexts."""
        return suggestion_dict(mem.suggest(body.context, agent=body.agent, options=body.options, limit=body.limit))

    @app.post("/choose", tags=["learning"])
    def choose(body: ChooseBody) -> dict[str, Any]:
        """Pick one of the options, balancing exploring and exploiting."""
        chosen = mem.choose(body.context, body.options, agent=body.agent, exploration=body.exploration, seed=body.seed)
        return {"chosen": chosen}

    @app.post("/failures", status_code=201, tags=["failures"])
    def record_failure(body: FailureBody) -> dict[str, Any]:
        """Record one occurrence of a failure (and the fix that worked, if any); returns the ``failure`` memory."""
        return mem.record_failure(
            body.error,
            agent=body.agent,
            context=body.context,
            solution=body.solution,
            failed_solutions=body.failed_solutions,
            tags=body.tags,
            metadata=body.metadata,
            visibility=body.visibility,
        ).to_dict()

    @app.post("/solutions", tags=["failures"])
    def solutions(body: SolutionsBody) -> dict[str, Any]:
        """The fixes recorded for an error's failure pattern, best first."""
        return {"solutions": [solution_dict(s) for s in mem.solutions(body.error, agent=body.agent, limit=body.limit)]}

    @app.get("/failure-patterns", tags=["failures"])
    def failure_patterns(agent: AgentQuery = "default", recurring: bool = False) -> dict[str, Any]:
        """The failure patterns an agent has seen, most occurrences first."""
        return {"patterns": [pattern_dict(p) for p in mem.failure_patterns(agent=agent, recurring=recurring)]}

    # -- sharing and audit ---------------------------------------------------------------------
    @app.post("/shares", tags=["sharing"])
    def share(body: ShareBody) -> dict[str, Any]:
        """Share some of ``from_agent``'s own memories with ``to_agent`` (``*``: everyone)."""
        shared = mem.share(
            body.memory_ids, from_agent=body.from_agent, to_agent=body.to_agent, tag=body.tag, pattern=body.pattern
        )
        return {"shared": shared}

    @app.delete("/shares", tags=["sharing"])
    def unshare(body: ShareBody) -> dict[str, Any]:
        """Revoke shares (same selectors as ``POST /shares``)."""
        revoked = mem.unshare(
            body.memory_ids, from_agent=body.from_agent, to_agent=body.to_agent, tag=body.tag, pattern=body.pattern
        )
        return {"unshared": revoked}

    @app.get("/audit", tags=["audit"])
    def audit_log(agent: OptionalAgentQuery = None, limit: int = 100) -> dict[str, Any]:
        """Audit entries, newest first."""
        return {"events": [audit_dict(e) for e in mem.audit_log(agent=agent, limit=limit)]}

    @app.get("/audit/verify", tags=["audit"])
    def verify_audit() -> dict[str, Any]:
        """Whether the hash-chained audit trail is intact (``ok``), and where it broke if not."""
        return mem.check_audit().to_dict()

    @app.get("/health", tags=["server"])
    def health() -> dict[str, Any]:
        """Liveness: the server answers and its store is open."""
        return {"status": "ok", "model": mem.embedder.model_id}

    return app

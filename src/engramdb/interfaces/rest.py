"""A JSON REST API over one :class:`~engramdb.Engram` (FastAPI): ``create_app(mem)``; run it with ``engram serve``.

Each endpoint parses its request, calls the library acting as the caller and returns
the result as JSON; the rules (validation, agent scoping, redaction, auditing) stay in
the library, the operations are shared with the MCP server (:mod:`._ops`).

**Who the caller is.** With API keys in the store (``engram keys create``), every
request must carry one, as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``
(else 401), and acts as the key's agent: naming another agent is 403 (an admin key may
act for any agent), and a read-only key gets 403 on every change. Without keys the
server trusts its caller (the ``agent`` field or parameter decides), which
``engram serve`` allows only on loopback unless told ``--allow-unauthenticated``.

**What every request passes first** (:mod:`._http`): its ``Host`` must name this server
(DNS rebinding: else 421), cross-site browser requests are refused (403), a body must
be JSON (415) and at most ``max_body_bytes`` (413). Bodies are then read as strict JSON (UTF-8, no key twice
in one object, no NaN, Infinity or out-of-range numbers): anything else is a 422 saying what and where.

**The dashboard** (:mod:`engramdb.interfaces.web`) is served by the same app: HTML pages at
``/`` and ``/ui/...``, per agent, behind the same keys (a browser sends its key as HTTP
Basic authentication's password, and is asked for it by a 401) and the same checks.
The short-term session (``POST /session/messages``, ``GET /session``) is the store's
``mem.session(agent)``: shared by every server when ``ENGRAM_SESSIONS=redis://...``.

Errors come from the library's exception tree, mapped once (:mod:`._status`, for the dashboard's
pages too), always ``{"error": "<one line>"}`` and never a traceback::

    ValidationError (and a malformed request) -> 422      NotAuthenticated -> 401
    NotFound (and an unknown route)            -> 404      AccessDenied     -> 403
    StorageError                               -> 503      anything else    -> 500
    LLMNotConfigured (no LLM on this server)   -> 501      LLMError         -> 502

Requires the ``rest`` extra: ``pip install 'engramdb[rest]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

try:
    from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response, Security
    from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

    from engramdb.interfaces import _responses as res
    from engramdb.interfaces import _responses_more as more_res
    from engramdb.interfaces._metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
    from engramdb.interfaces._rest_strict import StrictJSONRoute, add_error_handlers, no_unknown_query
    from engramdb.interfaces._serving import HEALTH_RESPONSES, ServerState, add_docs, add_tracing
    from engramdb.interfaces.web import api_key_authorizer, dashboard_router
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the REST server needs FastAPI, uvicorn and Jinja2: pip install 'engramdb[rest]'", name=exc.name
    ) from exc

import engramdb
from engramdb import ApiKeys
from engramdb.interfaces import _ops as ops
from engramdb.interfaces._access import LOOPBACK_NAMES, Caller, authenticate, keys_of
from engramdb.interfaces._http import DEFAULT_MAX_BODY_BYTES, Guard
from engramdb.interfaces._rest_more import mount_more
from engramdb.interfaces._schemas import (
    AGENT_HELP,
    AS_OF_HELP,
    MAX_OFFSET,
    META_HELP,
    SESSION_HELP,
    USER_HELP,
    AddArgs,
    AnalyzeEpisodesArgs,
    BatchArgs,
    ChooseArgs,
    ContextArgs,
    EndEpisodeArgs,
    EpisodeArgs,
    EpisodeEventArgs,
    FailureArgs,
    FindEpisodesArgs,
    MemoryArgs,
    PatternsArgs,
    PreflightArgs,
    RecordArgs,
    RememberArgs,
    RouteArgs,
    RouteRecordArgs,
    SearchArgs,
    SessionArgs,
    SessionMessageArgs,
    ShareArgs,
    SolutionsArgs,
    StartEpisodeArgs,
    StatsArgs,
    SuggestArgs,
    UpdateArgs,
)
from engramdb.validate import MAX_LIMIT

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from engramdb import Engram

__all__ = ["API_PREFIX", "DEFAULT_HOST", "DEFAULT_PORT", "create_app"]

#: Where the versioned API lives; the same paths without it are aliases kept for existing clients.
API_PREFIX: Final = "/v1"

#: Loopback by default: without keys the server trusts its callers.
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765


AgentQuery = Annotated[str | None, Query(description=AGENT_HELP)]
LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many results.")]
UserQuery = Annotated[str | None, Query(description=USER_HELP)]
SessionQuery = Annotated[str | None, Query(description=SESSION_HELP)]


# -- the caller ----------------------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="An API key from `engram keys create`.")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key from `engram keys create`.")


def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    x_api_key: Annotated[str | None, Security(_header)],
) -> Caller:
    """The request's caller: its API key (required while the store has any), else trusted if the app allows."""
    token = x_api_key or (credentials.credentials if credentials is not None else None)
    state = request.app.state
    return authenticate(state.engram_keys, token, allow_trusted=state.engram_allow_unauthenticated)


Who = Annotated[Caller, Depends(_caller)]


# -- the app -------------------------------------------------------------------------------------------


def create_app(
    mem: Engram,
    *,
    keys: ApiKeys | None = None,
    allow_unauthenticated: bool = True,
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    tracer: Tracer | None = None,
) -> FastAPI:
    """A FastAPI app serving ``mem``; the caller owns ``mem`` (opens and closes it).

    ``keys`` are the store's API keys (default ``keys_of(mem)``): while any is
    active, every request needs one. Without keys, requests are trusted when
    ``allow_unauthenticated`` (else 401). ``allowed_hosts`` are the ``Host`` names
    answered (None: any; see :func:`~engramdb.interfaces._access.allowed_host_names`).
    ``tracer`` (OpenTelemetry, the ``otel`` extra): a span per request (:mod:`._tracing`).

    Endpoints are plain (sync) functions: FastAPI runs them in its thread pool,
    and one :class:`~engramdb.Engram` is safe to share across threads.
    """
    api_keys = keys if keys is not None else keys_of(mem)
    state = ServerState(mem)
    metrics = Metrics(mem)
    app = FastAPI(
        title="engramdb",
        version=engramdb.__version__,
        summary="Persistent memory and learning for LLM agents.",
        description=(
            f"The API lives under `{API_PREFIX}` (the same paths without it answer too, as aliases). "
            "Authenticate with an API key (`engram keys create --agent NAME`) as `Authorization: Bearer <key>` "
            "or `X-API-Key: <key>`: requests act as the key's agent. A server without keys trusts its caller. "
            'Every error is `{"error": "<one line>"}`.'
        ),
        dependencies=[Depends(no_unknown_query)],
        docs_url=None,  # add_docs: the same page, its files served here rather than from a CDN
        redoc_url=None,
        lifespan=state.lifespan(),
        # Operation ids are the endpoint names (remember, search, ...): what generated clients call them.
        generate_unique_id_function=lambda route: route.name,
    )
    api = APIRouter(route_class=StrictJSONRoute, responses=res.RESPONSES)
    add_error_handlers(app)
    app.add_middleware(Guard, allowed_hosts=allowed_hosts, max_body_bytes=max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # outermost: refused requests are counted too
    add_tracing(app, tracer)  # a span per request when given a tracer (OpenTelemetry, the otel extra)

    app.state.engram_keys = api_keys
    app.state.engram_allow_unauthenticated = allow_unauthenticated

    # -- memories ------------------------------------------------------------------------------
    @api.post("/memories", status_code=201, tags=["memories"], response_model=res.Memory)
    def remember(who: Who, body: RememberArgs) -> dict[str, Any]:
        """Store one memory; returns it as stored (secrets replaced, or the memory it merged into)."""
        return ops.remember(mem, who, body)

    @api.post("/memories/add", status_code=201, tags=["memories"], response_model=more_res.AddResult)
    def add(who: Who, body: AddArgs) -> dict[str, Any]:
        """Add a conversation: its turns are stored and the durable facts it states kept (a changed fact supersedes)."""
        return ops.add_conversation(mem, who, body)

    @api.post("/memories/batch", status_code=201, tags=["memories"], response_model=res.Memories)
    def remember_many(who: Who, body: BatchArgs) -> dict[str, Any]:
        """Store many memories at once: all or nothing; an error names the bad item's position."""
        return ops.remember_many(mem, who, body)

    @api.get("/memories", tags=["memories"], response_model=res.MemoryList)
    def list_memories(
        who: Who,
        *,
        agent: AgentQuery = None,
        kind: Annotated[list[str] | None, Query(description="Only this kind (repeatable).")] = None,
        tag: Annotated[list[str] | None, Query(description="Only with this tag (repeatable: all must match).")] = None,
        limit: LimitQuery = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
        since: Annotated[str | None, Query(max_length=40, description="Created at or after (ISO 8601).")] = None,
        until: Annotated[str | None, Query(max_length=40, description="Created at or before (ISO 8601).")] = None,
        user: UserQuery = None,
        session: SessionQuery = None,
        as_of: Annotated[str | None, Query(max_length=40, description=AS_OF_HELP)] = None,
        metadata: Annotated[str | None, Query(max_length=8192, description=META_HELP + " As JSON text.")] = None,
    ) -> dict[str, Any]:
        """An agent's memories (and those shared with it), newest first."""
        scopes = {"since": since, "until": until, "user": user, "session": session, "as_of": as_of}
        return ops.list_memories(
            mem, who, agent=agent, kind=kind, tags=tag, limit=limit, offset=offset, metadata=metadata, **scopes
        )

    @api.get("/memories/{memory_id}", tags=["memories"], response_model=res.Memory)
    def get(
        who: Who, memory_id: str, agent: AgentQuery = None, user: UserQuery = None, session: SessionQuery = None
    ) -> dict[str, Any]:
        """One memory; 404 unless it is visible to the agent (and in the user's and session's scope)."""
        return ops.get(mem, who, MemoryArgs(memory_id=memory_id, agent=agent, user=user, session=session))

    @api.patch("/memories/{memory_id}", tags=["memories"], response_model=res.Memory)
    def update(
        who: Who,
        memory_id: str,
        body: UpdateArgs,
        *,
        agent: AgentQuery = None,
        user: UserQuery = None,
        session: SessionQuery = None,
    ) -> dict[str, Any]:
        """Change fields of the agent's own memory (only those sent)."""
        return ops.update(mem, who, MemoryArgs(memory_id=memory_id, agent=agent, user=user, session=session), body)

    @api.delete("/memories/{memory_id}", status_code=204, tags=["memories"])
    def forget(
        who: Who, memory_id: str, agent: AgentQuery = None, user: UserQuery = None, session: SessionQuery = None
    ) -> Response:
        """Remove the agent's own memory for good; its history keeps a tombstone."""
        ops.forget(mem, who, MemoryArgs(memory_id=memory_id, agent=agent, user=user, session=session))
        return Response(status_code=204)

    @api.get("/memories/{memory_id}/history", tags=["memories"], response_model=res.History)
    def history(
        who: Who, memory_id: str, agent: AgentQuery = None, user: UserQuery = None, session: SessionQuery = None
    ) -> dict[str, Any]:
        """Every change of a memory visible to the agent, oldest first."""
        return ops.history(mem, who, MemoryArgs(memory_id=memory_id, agent=agent, user=user, session=session))

    @api.post("/search", tags=["memories"], response_model=res.SearchResult)
    def search(who: Who, body: SearchArgs) -> dict[str, Any]:
        """The memories most relevant to a query, best first."""
        return ops.search(mem, who, body)

    @api.get("/stats", tags=["memories"], response_model=res.Stats)
    def stats(who: Who, agent: AgentQuery = None) -> dict[str, Any]:
        """How many memories the agent sees, and its outcome statistics."""
        return ops.stats(mem, who, StatsArgs(agent=agent))

    # -- learning ------------------------------------------------------------------------------
    @api.post("/outcomes", status_code=201, tags=["learning"], response_model=res.Memory)
    def record(who: Who, body: RecordArgs) -> dict[str, Any]:
        """Record how an action turned out in a context; returns the ``decision`` memory."""
        return ops.record_outcome(mem, who, body)

    @api.post("/suggest", tags=["learning"], response_model=res.Suggestion)
    def suggest(who: Who, body: SuggestArgs) -> dict[str, Any]:
        """What to do in a context, from the outcomes of similar contexts."""
        return ops.suggest(mem, who, body)

    @api.post("/choose", tags=["learning"], response_model=res.Chosen)
    def choose(who: Who, body: ChooseArgs) -> dict[str, Any]:
        """Pick one of the options, balancing exploring and exploiting."""
        return ops.choose(mem, who, body)

    @api.post("/route", tags=["learning"], response_model=more_res.RouteChoice)
    def decide_route(who: Who, body: RouteArgs) -> dict[str, Any]:  # named apart from /routing/route's "route"
        """Pick the LLM for a task (seed 002's table, then recorded outcomes); with a fallback and the reason."""
        return ops.route(mem, who, body)

    @api.post("/route/outcomes", status_code=201, tags=["learning"], response_model=res.Memory)
    def record_route(who: Who, body: RouteRecordArgs) -> dict[str, Any]:
        """Record how a model did on a task; returns the ``decision`` memory routing learns from."""
        return ops.route_record(mem, who, body)

    @api.post("/failures", status_code=201, tags=["failures"], response_model=res.Memory)
    def record_failure(who: Who, body: FailureArgs) -> dict[str, Any]:
        """Record one occurrence of a failure (and the fix that worked, if any); returns the ``failure`` memory."""
        return ops.record_failure(mem, who, body)

    @api.post("/solutions", tags=["failures"], response_model=res.SolutionList)
    def solutions(who: Who, body: SolutionsArgs) -> dict[str, Any]:
        """The fixes recorded for an error's failure pattern, best first."""
        return ops.solutions(mem, who, body)

    @api.get("/failure-patterns", tags=["failures"], response_model=res.PatternList)
    def failure_patterns(who: Who, agent: AgentQuery = None, recurring: bool = False) -> dict[str, Any]:
        """The failure patterns an agent has seen, most occurrences first."""
        return ops.failure_patterns(mem, who, PatternsArgs(agent=agent, recurring=recurring))

    @api.post("/preflight", tags=["failures"], response_model=res.WarningList)
    def preflight(who: Who, body: PreflightArgs) -> dict[str, Any]:
        """Before acting: known failures resembling the action, with what prevents them."""
        return ops.preflight(mem, who, body)

    @api.post("/episodes", status_code=201, tags=["episodes"], response_model=res.Memory)
    def record_episode(who: Who, body: EpisodeArgs) -> dict[str, Any]:
        """Record a finished task with its steps as an ``episode`` memory."""
        return ops.record_episode(mem, who, body)

    @api.post("/episodes/start", status_code=201, tags=["episodes"], response_model=res.EpisodeStarted)
    def start_episode(who: Who, body: StartEpisodeArgs) -> dict[str, Any]:
        """Start an episode that spans requests: its ``episode_id`` goes to ``/episodes/event`` and ``/end``."""
        return ops.start_episode(mem, who, body)

    @api.post("/episodes/event", tags=["episodes"], response_model=res.EventAdded)
    def episode_event(who: Who, body: EpisodeEventArgs) -> dict[str, Any]:
        """Add a step to a running episode of the agent."""
        return ops.episode_event(mem, who, body)

    @api.post("/episodes/end", tags=["episodes"], response_model=res.EpisodeRecord)
    def end_episode(who: Who, body: EndEpisodeArgs) -> dict[str, Any]:
        """End a running episode of the agent as a success or a failure, with its metrics."""
        return ops.end_episode(mem, who, body)

    @api.post("/episodes/search", tags=["episodes"], response_model=res.EpisodeList)
    def find_episodes(who: Who, body: FindEpisodesArgs) -> dict[str, Any]:
        """Past episodes of similar tasks, most similar first."""
        return ops.find_episodes(mem, who, body)

    @api.post("/episodes/analyze", tags=["episodes"], response_model=res.Analysis)
    def analyze_episodes(who: Who, body: AnalyzeEpisodesArgs) -> dict[str, Any]:
        """What goes wrong in failed episodes."""
        return ops.analyze_episodes(mem, who, body)

    # -- sharing and audit ---------------------------------------------------------------------
    @api.post("/shares", tags=["sharing"], response_model=res.Shared)
    def share(who: Who, body: ShareArgs) -> dict[str, Any]:
        """Share some of the agent's own memories with ``to_agent`` (``*``: everyone)."""
        return ops.share(mem, who, body)

    @api.delete("/shares", tags=["sharing"], response_model=res.Unshared)
    def unshare(who: Who, body: ShareArgs) -> dict[str, Any]:
        """Revoke shares (same selectors as ``POST /shares``)."""
        return ops.unshare(mem, who, body)

    @api.get("/shares", tags=["sharing"], response_model=res.Shares)
    def shares(who: Who, agent: AgentQuery = None) -> dict[str, Any]:
        """The agent's shares: those it made (outgoing) and those reaching it (incoming)."""
        return ops.shares(mem, who, agent)

    @api.get("/audit", tags=["audit"], response_model=res.AuditLog)
    def audit_log(
        who: Who,
        agent: AgentQuery = None,
        limit: LimitQuery = 100,
        memory: Annotated[str | None, Query(max_length=256, description="Only entries about this memory id.")] = None,
        action: Annotated[
            str | None,
            Query(
                max_length=64,
                description="Only this action (create, update, forget, search, ...); an unknown one is a 422.",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Audit entries of the agent, newest first (trusted callers and admin keys: of every agent by default)."""
        return ops.audit_log(mem, who, agent, limit, memory_id=memory, action=action)

    @api.get("/audit/verify", tags=["audit"], response_model=res.Verification)
    def verify_audit(
        who: Who,
        expect: Annotated[
            str | None, Query(max_length=200, description="A head kept elsewhere, SEQ:HASH: it must still be there.")
        ] = None,
    ) -> dict[str, Any]:
        """Whether the hash-chained audit trail is intact (``ok``), and where it broke if not."""
        return mem.audit.verification(expect=expect).to_dict()

    # -- the brain and the short-term session ---------------------------------------------------
    @api.post("/context", tags=["brain"], response_model=res.Context)
    def context(who: Who, body: ContextArgs) -> dict[str, Any]:
        """What the agent should know before a task: sections of memories and the rendered ``prompt`` (within
        ``token_budget`` tokens, counted in ``prompt_tokens``)."""
        return ops.context(mem, who, body)

    @api.post("/session/messages", status_code=201, tags=["session"], response_model=res.SessionMessageAdded)
    def add_session_message(who: Who, body: SessionMessageArgs) -> dict[str, Any]:
        """Add a message to the agent's short-term session window (shared by every server of the store when
        sessions live in Redis: ``ENGRAM_SESSIONS=redis://...``)."""
        return ops.add_session_message(mem, who, body)

    @api.get("/session", tags=["session"], response_model=res.SessionWindow)
    def session(
        who: Who, agent: AgentQuery = None, user: UserQuery = None, session: SessionQuery = None
    ) -> dict[str, Any]:
        """The short-term window of the agent's thread with ``user`` in ``session``: messages (oldest first),
        variables, tokens held."""
        return ops.session(mem, who, SessionArgs(agent=agent, user=user, session=session))

    # -- server --------------------------------------------------------------------------------
    @api.get("/me", tags=["server"], response_model=res.Caller)
    def me(who: Who) -> dict[str, Any]:
        """Who the request acts as: the API key's agent and rights, or a trusted caller."""
        return who.to_dict()

    @api.get("/health", tags=["server"], response_model=res.Health, responses=HEALTH_RESPONSES)
    def health(response: Response) -> res.Health:
        """Readiness (no key needed): 200 when the store answers and the embedding model is loaded, else 503."""
        report = state.health()
        response.status_code = 200 if report.status == "ok" else 503
        return report

    # The rest of the library: keyed memories, clear, learning, checks, keys, ...
    mount_more(api, mem, Who, results=more_res.MORE_RESULTS)

    app.include_router(api, prefix=API_PREFIX)
    # Today's unversioned paths stay as aliases (the dashboard, scripts and tests use them), outside the schema.
    app.include_router(api, include_in_schema=False)

    @app.get("/metrics", include_in_schema=False)
    def prometheus(who: Who) -> Response:
        """Prometheus metrics, in its text format (any valid key while the store has keys)."""
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    add_docs(app)

    # -- the dashboard (HTML at /, /ui/...): the same keys, also sent by a browser as HTTP Basic ----
    authorize = api_key_authorizer(api_keys, allow_unauthenticated=allow_unauthenticated)
    app.include_router(dashboard_router(lambda: mem, authorize=authorize))
    return app

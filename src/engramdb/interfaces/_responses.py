"""What every server operation returns, as named pydantic models: the REST API's response schemas in
``/openapi.json`` and the MCP tools' output schemas, from which typed clients are generated.

Each model mirrors one ``to_dict()`` of :mod:`engramdb.models` (or an operation's wrapper of
it, :mod:`._ops`). Fields the dict always holds are required; fields it holds only sometimes
have a default, and the REST routes send only the fields the result has
(``response_model_exclude_unset``), so an answer is exactly the library's ``to_dict()``.
Unknown extra fields pass through (``extra="allow"``): a field the library adds reaches
clients before its schema says so, and is never silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "RESPONSES",
    "Analysis",
    "AuditEvent",
    "AuditLog",
    "Caller",
    "Change",
    "Chosen",
    "Context",
    "EpisodeEvent",
    "EpisodeList",
    "EpisodeRecord",
    "EpisodeStarted",
    "Error",
    "EventAdded",
    "FailurePattern",
    "Forgotten",
    "Health",
    "History",
    "Hit",
    "Memories",
    "Memory",
    "MemoryList",
    "PatternList",
    "Response",
    "SearchResult",
    "SessionMessageAdded",
    "SessionWindow",
    "Shared",
    "Shares",
    "SolutionList",
    "Stats",
    "Suggestion",
    "Unshared",
    "Verification",
    "WarningList",
]

#: An ISO 8601 timestamp as the library writes it (``2026-11-27T11:28:48.154306+00:00``).
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
JSONObject = dict[str, Any]


class Response(BaseModel):
    """Base of every response model: extra fields pass through (see the module docstring)."""

    model_config = ConfigDict(extra="allow")


class Error(BaseModel):
    """Every error answer: one line saying what went wrong (never a traceback)."""

    error: str = Field(description="What went wrong, in one line.")


# -- memories ----------------------------------------------------------------------------------------------


class Memory(Response):
    """One memory as stored (secrets replaced by typed placeholders, listed in ``redacted``)."""

    id: str
    agent: str
    kind: str = Field(description="knowledge, preference, decision, episode, failure, ...")
    content: str
    tags: list[str]
    metadata: JSONObject
    created_at: Timestamp
    updated_at: Timestamp
    last_accessed: Timestamp | None
    access_count: int
    confidence: float
    successes: float
    attempts: float
    success_rate: float | None = Field(description="None until outcomes exist.")
    visibility: str = Field(description="private, shared or public.")
    redacted: list[str] = Field(description="The kinds of secret or personal data replaced before storage.")
    shared_by: str | None
    shared_at: Timestamp | None
    user: str | None = Field(description="The person it is about or was told by (null: the agent's own).")
    session: str | None = Field(description="The conversation thread or run it belongs to.")
    occurred_at: Timestamp = Field(description="When the event happened (created_at unless given).")
    valid_until: Timestamp | None = Field(description="When a superseded value stopped being true (null: current).")


class Memories(Response):
    """Memories written in one batch, in the order given."""

    memories: list[Memory]


class MemoryList(Response):
    """A page of an agent's memories, newest first."""

    memories: list[Memory]
    limit: int
    offset: int


class Hit(Response):
    """A search result: the memory and its score (orders one search; higher is better)."""

    memory: Memory
    score: float
    relevance: float = Field(description="Calibrated relevance in [0, 1]: means the same in every search and store.")
    keyword_score: float | None = Field(description="The keyword channel's score; None if it did not find it.")
    vector_score: float | None = Field(description="The vector channel's score; None if it did not find it.")
    stands_for: int = Field(description="How many memories the hit stands for (itself and its duplicates).")
    duplicates: list[str] = Field(description="Ids of near-identical memories folded into this hit.")


class SearchResult(Response):
    """The memories most relevant to a query, best first."""

    hits: list[Hit]


class Change(Response):
    """One entry of a memory's history: the fields that changed, before and after."""

    seq: int
    memory_id: str
    action: str = Field(description="create, update, forget, merge, ...")
    at: Timestamp
    actor: str
    before: JSONObject | None
    after: JSONObject | None


class History(Response):
    """Every change of a memory, oldest first."""

    changes: list[Change]


class Forgotten(Response):
    """The id of the memory removed."""

    forgotten: str


# -- learning ----------------------------------------------------------------------------------------------


class OptionStats(Response):
    """Outcome statistics of one action: weighted successes of attempts, rate and its interval."""

    action: str
    successes: float
    attempts: float
    success_rate: float
    low: float
    high: float


class Stats(Response):
    """An agent's memory count and outcome statistics."""

    agent: str
    memories: int
    decisions: int
    successes: float
    success_rate: float | None
    low: float | None
    high: float | None
    average_duration: float | None
    actions: list[OptionStats]


class Suggestion(Response):
    """What to do in a context, from the outcomes of similar contexts; ``recommended`` is null when evidence is
    thin."""

    context: str
    recommended: str | None
    confidence: float
    tentative: bool
    evidence: float
    raw_confidence: float
    options: list[OptionStats]
    reason: str


class Chosen(Response):
    """The option picked."""

    chosen: str


# -- failures ----------------------------------------------------------------------------------------------


class SolutionStats(Response):
    """A fix of a failure pattern and how often it worked."""

    solution: str
    successes: float
    attempts: float
    success_rate: float


class SolutionList(Response):
    """Fixes recorded for an error's failure pattern, best first."""

    solutions: list[SolutionStats]


class FailurePattern(Response):
    """A kind of failure: messages that differ only in paths, numbers, ids ... belong to one pattern."""

    id: str
    name: str
    signature: str
    example: str
    occurrences: int
    first_seen: Timestamp
    last_seen: Timestamp
    solutions: list[SolutionStats]
    prevention: list[str]


class PatternList(Response):
    """The failure patterns an agent has seen, most occurrences first."""

    patterns: list[FailurePattern]


class FailureWarning(Response):
    """A known failure resembling an action about to be done."""

    pattern: FailurePattern
    similarity: float
    message: str


class WarningList(Response):
    """Known failures resembling the action, with what prevents them."""

    warnings: list[FailureWarning]


# -- episodes ----------------------------------------------------------------------------------------------


class EpisodeEvent(Response):
    """One step of an episode; ``at`` is seconds since it started."""

    kind: str
    data: Any
    at: float
    role: str | None


class EpisodeRecord(Response):
    """A finished episode."""

    id: str
    agent: str
    task: str
    outcome: str
    events: list[EpisodeEvent]
    error: str | None
    reason: str | None
    started_at: Timestamp
    duration: float
    score: float | None
    metrics: JSONObject
    credited: int


class EpisodeList(Response):
    """Past episodes, most similar first."""

    episodes: list[EpisodeRecord]


class EpisodeStarted(Response):
    """A running episode: its id goes to ``/episodes/event`` and ``/episodes/end``."""

    episode_id: str
    agent: str
    task: str


class EventAdded(Response):
    """The step added to a running episode."""

    episode_id: str
    kind: str


class EpisodeFactor(Response):
    """A kind of step more frequent in failed episodes than in the rest."""

    kind: str
    failures: int
    successes: int
    failure_rate: float
    baseline: float
    p_value: float


class StepCount(Response):
    """How many failed episodes ended on this kind of step."""

    kind: str
    count: int


class ErrorCount(Response):
    """How many failed episodes ended with this error."""

    signature: str
    count: int


class Analysis(Response):
    """What goes wrong in failed episodes."""

    episodes: int
    failures: int
    successes: int
    failure_rate: float | None
    factors: list[EpisodeFactor]
    last_steps: list[StepCount]
    errors: list[ErrorCount]


# -- sharing and audit -------------------------------------------------------------------------------------


class Shared(Response):
    """How many shares were made."""

    shared: int


class Unshared(Response):
    """How many shares were revoked."""

    unshared: int


class Share(Response):
    """Consent given by an owner: ``to_agent`` (``*``: every agent) may read the memory."""

    memory_id: str
    from_agent: str
    to_agent: str
    shared_at: Timestamp


class Shares(Response):
    """The agent's shares: those it made and those reaching it."""

    outgoing: list[Share]
    incoming: list[Share]


class AuditEvent(Response):
    """One entry of the hash-chained audit trail."""

    seq: int
    action: str
    agent: str | None
    memory_id: str | None
    at: Timestamp
    detail: JSONObject
    hash: str


class AuditLog(Response):
    """Audit entries, newest first."""

    events: list[AuditEvent]


class Verification(Response):
    """Whether the audit trail is intact (``ok``), and where it broke if not."""

    ok: bool
    checked: int
    head_seq: int
    head_hash: str
    head: str = Field(description="SEQ:HASH, to keep elsewhere and pass back as ``expect``.")
    bad_seq: int | None
    reason: str


# -- the brain and the session -----------------------------------------------------------------------------


class ContextItem(Response):
    """One line of a context section, and the memory it came from."""

    text: str
    memory_id: str | None
    score: float | None


class ContextSection(Response):
    """A titled section of a context (approach, warnings, fixes, preferences, memories, session, ...)."""

    name: str
    title: str
    items: list[ContextItem]


class Approach(Response):
    """The recommended approach for the task, from outcomes of similar tasks."""

    recommended: str | None
    success_rate: float | None
    confidence: float
    attempts: float
    tentative: bool
    alternatives: list[OptionStats]
    reason: str


class Context(Response):
    """What the agent should know before a task: sections of items, and ``prompt`` rendered within the budget."""

    task: str
    agent: str
    token_budget: int
    approach: Approach | None
    sections: list[ContextSection]
    prompt: str
    prompt_tokens: int


class SessionMessage(Response):
    """One message of a short-term session window."""

    role: str
    content: str
    at: Timestamp
    tokens: int


class SessionMessageAdded(Response):
    """The message added to the agent's session window."""

    agent: str
    message: SessionMessage


class SessionWindow(Response):
    """The agent's short-term session window: messages (oldest first), variables, tokens held."""

    agent: str
    messages: list[SessionMessage]
    variables: JSONObject
    tokens: int
    token_budget: int


# -- the server --------------------------------------------------------------------------------------------


class Caller(Response):
    """Who a request acts as: an API key's agent and rights, or a trusted caller (no key)."""

    authenticated: bool
    agent: str | None
    read_only: bool
    admin: bool
    key_id: str | None = None


class Readiness(Response):
    """Whether one part of the server is ready, and why not."""

    ready: bool
    detail: str


class Health(Response):
    """Whether the server can serve: its store answers and its embedding model is loaded."""

    status: Literal["ok", "unavailable"]
    version: str
    model: str = Field(description="The embedding model's id.")
    store: Readiness
    embedder: Readiness
    vector_queue: int = Field(description="Memories written whose vector is still being computed.")


#: The answers every API route may give besides its success: documented once, in every operation.
ERROR_STATUSES: Final = {
    401: "No API key, or an unknown or revoked one (while the store has keys).",
    403: "The key may not do this (another agent, a read-only key), or a cross-site request.",
    404: "No such memory (or not visible to the agent), or no such route.",
    413: "The request body is too large.",
    415: "The request body is not JSON.",
    421: "The Host header does not name this server.",
    422: "The request is invalid: what and where, in one line.",
    501: "The operation needs an LLM and this server has none configured (ENGRAM_LLM).",
    502: "The LLM the server calls failed, timed out or answered unusably.",
    503: "The store is unavailable.",
}
RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    status: {"model": Error, "description": text} for status, text in ERROR_STATUSES.items()
}

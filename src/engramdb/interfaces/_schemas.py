"""The arguments of every server operation, as pydantic models shared by REST (bodies) and MCP (tool inputs).

Pydantic checks the shape (types, required fields, no unknown fields: an unknown one is
most likely a typo, "tag" for "tags"); the library checks the meaning. Kinds and
visibilities stay plain text here, so an unknown one gets the library's message.
``agent`` is optional everywhere: left out, the caller acts as its API key's agent (or
``default`` on a server without keys); naming another agent needs an admin key.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from engramdb.validate import DEFAULT_TOKEN_BUDGET, MAX_LIMIT, MAX_OFFSET, MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET

__all__ = [
    "AGENT_HELP",
    "AS_OF_HELP",
    "AT_HELP",
    "MAX_EVENTS",
    "MAX_OFFSET",
    "META_HELP",
    "SESSION_HELP",
    "USER_HELP",
    "AddArgs",
    "AnalyzeEpisodesArgs",
    "Args",
    "AsOf",
    "At",
    "BatchArgs",
    "ChooseArgs",
    "ContextArgs",
    "EndEpisodeArgs",
    "EpisodeArgs",
    "EpisodeEventArgs",
    "EventArgs",
    "FailureArgs",
    "FindEpisodesArgs",
    "LearningUser",
    "MemoryArgs",
    "MetaFilter",
    "PatternsArgs",
    "PreflightArgs",
    "RecordArgs",
    "RememberArgs",
    "RouteArgs",
    "RouteRecordArgs",
    "SearchArgs",
    "Session",
    "SessionArgs",
    "SessionMessageArgs",
    "ShareArgs",
    "SolutionsArgs",
    "StartEpisodeArgs",
    "StatsArgs",
    "SuggestArgs",
    "UpdateArgs",
    "User",
]

AGENT_HELP: Final = "Act as this agent (default: the API key's agent; another agent needs an admin key)."
#: Events one recorded episode may carry.
MAX_EVENTS: Final = 1000

Agent = Field(default=None, description=AGENT_HELP)
USER_HELP: Final = "A user of the agent: their memories and the agent's own (no user), never another user's."
SESSION_HELP: Final = "A conversation thread or run: only its memories."
AS_OF_HELP: Final = "What was true then (ISO 8601): a changed fact's value at that time, nothing that happened later."
AT_HELP: Final = "When it happened (ISO 8601; default: now)."
User = Field(default=None, description=USER_HELP)
LEARNING_USER_HELP: Final = (
    "Learning of one user: that user's outcomes and the agent's own (no user), never another user's; "
    "absent: the agent's outcomes of every user."
)
LearningUser = Field(default=None, description=LEARNING_USER_HELP)
Session = Field(default=None, description=SESSION_HELP)
AsOf = Field(default=None, max_length=40, description=AS_OF_HELP)
META_HELP: Final = (
    'Only memories whose metadata holds each key with exactly this value: a JSON object such as {"language": '
    '"python"} (values: strings, numbers, true/false, null; several keys: all of them).'
)
# An object in a JSON body; in a query string (GET), the same object as JSON text.
MetaFilter = Field(default=None, max_length=8192, description=META_HELP)
At = Field(default=None, max_length=40, description=AT_HELP)
Limit = Field(ge=1, le=MAX_LIMIT, description="At most this many results.")


class Args(BaseModel):
    """Base of every argument model: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class RememberArgs(Args):
    """Store one memory; returns it as stored (secrets replaced, or the memory it merged into)."""

    content: str = Field(description="What to remember.")
    agent: str | None = Agent
    kind: str = Field(default="knowledge", description="knowledge, preference, decision, episode, failure, ...")
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    visibility: str = Field(default="private", description="private, shared or public.")
    confidence: float | None = Field(default=None, description="From 0 to 1.")
    force: bool = Field(default=False, description="Store it even if a near-duplicate exists.")
    key: str | None = Field(default=None, description="A keyed memory: supersedes the agent's value of this key.")
    user: str | None = User
    session: str | None = Session
    at: str | None = At


class BatchArgs(Args):
    """Store many memories at once: all or nothing; an error names the bad item's position."""

    items: list[dict[str, Any]] = Field(
        description="Memories as for remember (content, agent, kind, tags, user, session, at, ...)."
    )
    force: bool = False


class AddArgs(Args):
    """Add a conversation: every message is stored as a turn, and the durable facts the user states (name, home,
    job, family, preferences, health, dated plans, "remember that ...") are kept under stable keys, so a changed
    fact supersedes the old one. Returns the turns stored and what was done with each fact."""

    # Any: the library checks the messages, so every interface answers a bad one with the same words.
    messages: Any = Field(
        description='OpenAI-style messages: [{"role": "user", "content": "I moved to Berlin"}, ...]; roles user, '
        "assistant, system, developer, tool, function; optional name (the speaker) and at (ISO 8601, when said).",
        json_schema_extra={"type": "array", "items": {"type": "object"}},
    )
    agent: str | None = Agent
    user: str | None = Field(default=None, description="The user the conversation is with.")
    session: str | None = Field(default=None, description="The conversation thread it belongs to.")
    at: str | None = Field(default=None, description="When it was said (ISO 8601), for messages without their own.")


class MemoryArgs(Args):
    """One memory by id (it must be visible to the agent; a change needs the agent's own memory)."""

    memory_id: str
    agent: str | None = Agent
    user: str | None = User
    session: str | None = Session


class UpdateArgs(Args):
    """The fields to change; fields left out stay as they are."""

    content: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    kind: str | None = None
    confidence: float | None = None
    visibility: str | None = None


class SearchArgs(Args):
    """Find the agent's memories most relevant to a query (by meaning and keywords), best first."""

    query: str
    agent: str | None = Agent
    kind: str | list[str] | None = Field(default=None, description="Only this kind (or these kinds).")
    tags: list[str] | None = Field(default=None, description="Only memories carrying all these tags.")
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    since: str | None = Field(default=None, max_length=40, description="Created at or after (ISO 8601).")
    until: str | None = Field(default=None, max_length=40, description="Created at or before (ISO 8601).")
    user: str | None = User
    session: str | None = Session
    as_of: str | None = AsOf
    metadata: dict[str, Any] | str | None = MetaFilter
    min_score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Leave out hits whose calibrated relevance is below this (default: the server's setting).",
    )


class RecordArgs(Args):
    """Record how an action turned out in a context; returns the ``decision`` memory."""

    context: str = Field(description="The situation, in words.")
    action: str = Field(description="What was done.")
    # Order matters for pydantic's smart union only on ties; JSON true stays a bool, 0.5 a float.
    outcome: str | bool | float = Field(
        description='"success", "failure", "partial", true/false, or a reward in [-1, 1].'
    )
    agent: str | None = Agent
    alternatives: list[str] = Field(default_factory=list, description="Other actions that were possible.")
    duration: float | None = Field(default=None, description="Seconds it took.")
    metadata: dict[str, Any] | None = None
    category: str | None = None
    used: list[str] = Field(default_factory=list, description="Ids of memories the decision relied on.")
    tags: list[str] = Field(default_factory=list)
    visibility: str = "private"
    user: str | None = LearningUser


class SuggestArgs(Args):
    """What to do in a context, from the outcomes of similar ones; ``recommended`` is null when evidence is thin."""

    context: str
    agent: str | None = Agent
    options: list[str] | None = Field(default=None, description="Only consider these actions.")
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT)
    user: str | None = LearningUser


class ChooseArgs(Args):
    """Pick one of the options for a context, balancing trying new ones and using the best known."""

    context: str
    options: list[str]
    agent: str | None = Agent
    exploration: float | None = None
    seed: int | None = None
    user: str | None = LearningUser


class RouteArgs(Args):
    """Pick the LLM for a task among candidate models: seed 002's routing table until recorded outcomes say otherwise.

    Returns the model, a fallback, the reason and every candidate's estimates.
    """

    task: str = Field(description="The task, in words.")
    models: list[str] = Field(description="The candidate model names.")
    task_type: str | None = Field(default=None, description="reasoning, code_generation, classification, ...")
    complexity: str | None = Field(default=None, description="simple, medium or complex.")
    context_length: int = Field(default=0, ge=0, description="Tokens of context the task reads.")
    require_fast: bool = False
    require_cheap: bool = False
    agent: str | None = Agent
    cost_weight: float | None = Field(default=None, ge=0)
    latency_weight: float | None = Field(default=None, ge=0)


class RouteRecordArgs(Args):
    """Record how a model did on a task, so routing learns from it; returns the ``decision`` memory."""

    task: str
    model: str
    outcome: str | bool | float = Field(description='"success", "failure", "partial", true/false, or a reward.')
    task_type: str | None = None
    latency_ms: float | None = Field(default=None, ge=0)
    cost: float | None = Field(default=None, ge=0)
    agent: str | None = Agent


class FailureArgs(Args):
    """Record one failure: the error message, the fix that worked (if any) and fixes that did not."""

    error: str
    agent: str | None = Agent
    context: str = ""
    solution: str | None = None
    failed_solutions: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    visibility: str = "private"


class SolutionsArgs(Args):
    """Fixes that worked for this error (or errors like it) before, best first."""

    error: str
    agent: str | None = Agent
    limit: int = Field(default=3, ge=1, le=MAX_LIMIT)


class PatternsArgs(Args):
    """The kinds of failure the agent has seen, with their fixes and prevention checks."""

    agent: str | None = Agent
    recurring: bool = Field(default=False, description="Only patterns seen at least twice.")


class PreflightArgs(Args):
    """Before acting: known failures that resemble this action, with what prevented them."""

    action: str = Field(description="What is about to be done.")
    agent: str | None = Agent
    limit: int = Field(default=3, ge=1, le=MAX_LIMIT)


class EventArgs(Args):
    """One step of an episode."""

    kind: str = Field(min_length=1, description="What kind of step: build, test, tool_call, ...")
    data: Any = Field(default=None, description="Any JSON value.")


class EpisodeArgs(Args):
    """Record a finished task as an ``episode`` memory with the steps it went through (a failure is also recorded
    as a failure occurrence)."""

    task: str
    events: list[EventArgs] = Field(default_factory=list, max_length=MAX_EVENTS)
    outcome: str = Field(default="success", description='"success" or "failure".')
    reason: str | None = Field(default=None, description="Why it failed.")
    agent: str | None = Agent
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None


class StartEpisodeArgs(Args):
    """Start an episode that spans calls: returns its id, for ``episode_event`` and ``end_episode`` (same agent)."""

    task: str
    agent: str | None = Agent
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = Field(default=None, description="The episode's metadata, a JSON object.")
    context: dict[str, Any] | None = Field(default=None, description='Kept as metadata "context" (seed 003).')


class EpisodeEventArgs(Args):
    """Add one step to a running episode (started with ``start_episode``)."""

    episode_id: str
    kind: str = Field(min_length=1, description="What kind of step: code_generation, verification, tool_call, ...")
    data: Any = Field(default=None, description="Any JSON value.")
    role: str | None = Field(default=None, description="The agent role that produced it.")
    agent: str | None = Agent


class EndEpisodeArgs(Args):
    """End a running episode as a success or a failure, with its metrics; its pending decisions get credit."""

    episode_id: str
    outcome: str = Field(default="success", description='"success" or "failure".')
    metrics: dict[str, Any] | None = Field(default=None, description="Measurements of the run, a JSON object.")
    error: str | None = Field(default=None, description="Why it failed.")
    agent: str | None = Agent


class FindEpisodesArgs(Args):
    """Past episodes of tasks like this one, most similar first."""

    task: str
    agent: str | None = Agent
    outcome: str | None = Field(default=None, description='Only "success", "failure" or "aborted" ones.')
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT)


class AnalyzeEpisodesArgs(Args):
    """What goes wrong in failed episodes: steps more frequent in failures, the steps they ended on, errors."""

    agent: str | None = Agent
    task: str | None = Field(default=None, description="Only the episodes most similar to this task.")
    limit: int = Field(default=500, ge=1, le=MAX_LIMIT)


class StatsArgs(Args):
    """An agent's memory count and outcome statistics (overall, per action, per category with trends)."""

    agent: str | None = Agent


class ShareArgs(Args):
    """Share (or unshare) some of the agent's own memories with another agent (``*``: everyone)."""

    memory_ids: list[str] | None = None
    from_agent: str | None = Field(default=None, description="The owner (default: the API key's agent).")
    to_agent: str = "*"
    tag: str | None = None
    pattern: str | None = Field(default=None, description="A failure pattern id: the owner's failures in it.")


class ContextArgs(Args):
    """What the agent should know before a task, as one prompt block (``prompt``) within a token budget: the
    recommended approach, warnings from past failures, known fixes, preferences, relevant memories and the
    short-term session; ``sections`` holds the same items as data."""

    task: str = Field(description="The task about to be worked on, in words.")
    agent: str | None = Agent
    token_budget: int = Field(
        default=DEFAULT_TOKEN_BUDGET,
        ge=MIN_TOKEN_BUDGET,
        le=MAX_TOKEN_BUDGET,
        description="The rendered prompt's size at most, in tokens.",
    )
    user: str | None = User
    session: str | None = Session


class SessionMessageArgs(Args):
    """Add a message to the agent's short-term session window (shared by every server when the store's sessions
    live in Redis); the oldest messages leave the window when it exceeds its token budget."""

    content: str = Field(description="The message.")
    role: str = Field(default="user", description="Who said it: user, assistant, tool, ...")
    agent: str | None = Agent
    user: str | None = User
    session: str | None = Session


class SessionArgs(Args):
    """The agent's short-term session window: its messages (oldest first) and working variables."""

    agent: str | None = Agent
    user: str | None = User
    session: str | None = Session

"""Argument models of the operations added for parity with the library (issue 24): REST bodies or queries, MCP inputs.

Same rules as :mod:`._schemas`: pydantic checks the shape, unknown fields are an error, the
library checks the meaning; ``agent`` is optional (the API key's agent by default).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engramdb.interfaces._schemas import Agent, Args, AsOf, LearningUser, MetaFilter, Session, UpdateArgs, User
from engramdb.validate import MAX_LIMIT, MAX_OFFSET

__all__ = [
    "AddCheckArgs",
    "ApproachesArgs",
    "AuditArgs",
    "CheckIdArgs",
    "ChecksArgs",
    "CleanupArgs",
    "ClearArgs",
    "CodeArgs",
    "CodeSuggestArgs",
    "CountArgs",
    "CreateKeyArgs",
    "DistillArgs",
    "DoctorArgs",
    "ExecutionArgs",
    "ExecutionsArgs",
    "ExportArgs",
    "FeedbackArgs",
    "GenerateCheckArgs",
    "ImportArgs",
    "KeyIdArgs",
    "KeyedArgs",
    "ListArgs",
    "ListKeysArgs",
    "MergeArgs",
    "OutcomesArgs",
    "PatternArgs",
    "PendingArgs",
    "PlanArgs",
    "ReasonArgs",
    "ReportArgs",
    "ResolveArgs",
    "SeedArgs",
    "ShareListArgs",
    "TopArgs",
    "UpdateToolArgs",
    "VerifyArgs",
]

Since = Field(default=None, max_length=40, description="Only since this time (ISO 8601).")


class CountArgs(Args):
    """How many memories the agent can see (of these kinds)."""

    agent: str | None = Agent
    kind: list[str] | None = Field(default=None, description="Only these kinds.")
    user: str | None = User
    session: str | None = Session
    metadata: dict[str, Any] | str | None = MetaFilter


class KeyedArgs(Args):
    """The current memory of the agent's key (a keyed memory: ``remember(..., key=...)``)."""

    key: str = Field(description="The key, such as 'editor'.")
    agent: str | None = Agent
    user: str | None = Field(default=None, description="The user whose value of the key (none: the agent's own).")
    as_of: str | None = AsOf


class ClearArgs(Args):
    """Forget every memory of the agent (its own; shared ones stay with their owners); ``confirm`` repeats its name."""

    agent: str | None = Agent
    confirm: str = Field(description="The agent's name again: nothing is deleted without it.")
    user: str | None = Field(default=None, description="Only this user's memories (not the agent's own).")
    session: str | None = Session


class ReasonArgs(Args):
    """Plan, think or decide about a goal with the server's LLM over the agent's context."""

    goal: str
    agent: str | None = Agent
    mode: str = Field(default="plan", description="plan, think or decide.")
    options: list[str] | None = None


class DoctorArgs(Args):
    """Check the store: integrity, keyword index, vectors, the audit chain and its coverage."""

    quick: bool = False


class FeedbackArgs(Args):
    """Feedback on memories that were used: an outcome label, a bool, a reward in [-1, 1] or words."""

    memory_ids: list[str] | None = Field(
        default=None,
        description="The memories used (none: those answering `context`, else the best hit of the latest recall).",
    )
    outcome: str | bool | float
    agent: str | None = Agent
    context: str | None = Field(default=None, description="The task the feedback is about, when no ids are given.")
    user: str | None = LearningUser


class ResolveArgs(Args):
    """Attach the outcome to a pending decision (recorded with outcome null or "pending")."""

    decision_id: str
    outcome: str | bool | float
    agent: str | None = Agent
    user: str | None = LearningUser


class PendingArgs(Args):
    """Decisions of the agent still waiting for their outcome."""

    agent: str | None = Agent
    episode: str | None = None
    user: str | None = LearningUser


class OutcomesArgs(Args):
    """The agent's outcome records (decisions with their outcomes), oldest first."""

    agent: str | None = Agent
    since: str | None = Since
    category: str | None = None
    user: str | None = LearningUser


class TopArgs(Args):
    """The agent's outcome statistics: overall and the top actions."""

    agent: str | None = Agent
    top: int = Field(default=10, ge=1, le=MAX_LIMIT)
    user: str | None = LearningUser


class ReportArgs(Args):
    """The agent's learning report: rates with intervals, per action and category, trends and advice."""

    agent: str | None = Agent
    since: str | None = Since
    success_target: float = 0.7
    slow_seconds: float = 300.0
    user: str | None = LearningUser


class ApproachesArgs(Args):
    """Approaches the agent used, with success rates (``success_rate`` such as ">80%")."""

    agent: str | None = Agent
    success_rate: str | None = None
    min_attempts: int = Field(default=2, ge=1)
    since: str | None = Since
    user: str | None = LearningUser


class ExecutionArgs(Args):
    """Record a task run with an approach and how it went (an execution record)."""

    task: str
    approach: str
    outcome: str | bool | float
    agent: str | None = Agent
    category: str | None = None
    task_type: str | None = None
    complexity: str | None = None
    success_factors: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    duration: float | None = None
    calls: int | None = None
    alternatives: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    used: list[str] = Field(default_factory=list)
    user: str | None = LearningUser


class ExecutionsArgs(Args):
    """Past executions of tasks like this one, most similar first."""

    task: str
    agent: str | None = Agent
    successful: bool | None = True
    category: str | None = None
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT)
    user: str | None = LearningUser


class PatternArgs(Args):
    """One failure pattern of the agent by id, with its solutions and prevention."""

    pattern_id: str
    agent: str | None = Agent


class PlanArgs(Args):
    """A plan for a task that avoids a failure pattern."""

    pattern_id: str
    task: str
    agent: str | None = Agent


class ChecksArgs(Args):
    """The agent's prevention checks (of a stage, of a pattern)."""

    agent: str | None = Agent
    stage: str | None = None
    pattern: str | None = None


class AddCheckArgs(Args):
    """Add a prevention check to a failure pattern (files, environment variables, commands or modules to check)."""

    pattern: str | None
    check_text: str | None = None
    stage: str = "development"
    agent: str | None = Agent
    files: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    modules: list[str] = Field(default_factory=list)


class GenerateCheckArgs(Args):
    """Generate a prevention check from a failure pattern's history."""

    pattern: str
    stage: str = "development"
    agent: str | None = Agent


class CheckIdArgs(Args):
    """Remove one of the agent's prevention checks."""

    check_id: str
    agent: str | None = Agent


class CodeArgs(Args):
    """Extract code patterns from source and remember them (``code_pattern`` memories)."""

    source: str
    agent: str | None = Agent
    filename: str | None = None
    language: str | None = None
    tags: list[str] = Field(default_factory=list)
    min_lines: int = Field(default=3, ge=1)
    visibility: str = "private"
    metadata: dict[str, Any] | None = Field(default=None, description="Added to every pattern's metadata.")
    name: str | None = Field(default=None, description="Store the whole source as one pattern of this name.")
    context: str | None = Field(default=None, description="When the named pattern applies.")
    success_metrics: dict[str, Any] | None = Field(default=None, description='e.g. {"success_rate": 1.0}')


class CodeSuggestArgs(Args):
    """Code patterns the agent remembered that fit a task, best first."""

    task: str
    agent: str | None = Agent
    pattern_type: str | None = None
    language: str | None = None
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT)
    metadata: dict[str, Any] | None = Field(default=None, description="Only patterns whose metadata holds these.")


class ShareListArgs(Args):
    """Shares made by ``from_agent`` and/or reaching ``to_agent``."""

    from_agent: str | None = None
    to_agent: str | None = None


class ExportArgs(Args):
    """The agent's own memories as a knowledge file (JSON Lines, in ``content``)."""

    agent: str | None = Agent
    tag: str | None = None
    with_vectors: bool = False
    with_history: bool = False
    user: str | None = Field(default=None, description="Only this user's memories (not the agent's own).")
    session: str | None = Session


class ImportArgs(Args):
    """Import a knowledge file (its text in ``content``): all or nothing; returns how many were added or merged."""

    content: str = Field(description="The knowledge file's text (JSON Lines).")
    name: str = Field(default="upload.jsonl", max_length=200, description="The file's name, kept as provenance.")
    agent: str | None = Agent
    keep_agents: bool = False
    dry_run: bool = False


class DistillArgs(Args):
    """Distill groups of similar memories into general ones."""

    agent: str | None = Agent
    kind: list[str] | None = None
    min_group: int = Field(default=3, ge=2)
    dry_run: bool = False
    archive_sources: bool = False


class MergeArgs(Args):
    """Merge another agent's memories (with ``tag``) into ``to_agent``'s, deduplicated."""

    from_agent: str
    to_agent: str | None = None
    tag: str | None = None


class SeedArgs(Args):
    """Seed the agent's memory with a bundled knowledge pack (python, git, docker, ...)."""

    pack: str
    agent: str | None = Agent


class CleanupArgs(Args):
    """Apply the store's retention policy: forget every memory it expires (``dry_run``: only report)."""

    dry_run: bool = False
    agent: str | None = None
    user: str | None = Field(default=None, description="Only this user's memories (not the agent's own).")
    session: str | None = Session


class CreateKeyArgs(Args):
    """Create an API key for an agent (admin only); the secret is shown once."""

    agent: str
    read_only: bool = False
    admin: bool = False
    label: str | None = None


class ListKeysArgs(Args):
    """The store's API keys, without their secrets (admin only)."""

    include_revoked: bool = True


class UpdateToolArgs(UpdateArgs):
    """Change fields of the agent's own memory (only those given); the old values go to its history."""

    memory_id: str
    agent: str | None = Agent


class ListArgs(Args):
    """The agent's memories (and those shared with it), newest first."""

    agent: str | None = Agent
    kind: list[str] | None = None
    tags: list[str] | None = None
    limit: int = Field(default=100, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    since: str | None = Since
    until: str | None = Field(default=None, max_length=40, description="Created at or before (ISO 8601).")
    user: str | None = User
    session: str | None = Session
    as_of: str | None = AsOf
    metadata: dict[str, Any] | str | None = MetaFilter


class AuditArgs(Args):
    """Audit entries, newest first (of the agent; trusted callers and admin keys: of every agent by default)."""

    agent: str | None = Agent
    limit: int = Field(default=100, ge=1, le=MAX_LIMIT)
    memory_id: str | None = None
    action: str | None = None


class VerifyArgs(Args):
    """Whether the hash-chained audit trail is intact, and where it broke if not."""

    expect: str | None = Field(default=None, max_length=200, description="A head kept elsewhere, SEQ:HASH.")


class KeyIdArgs(Args):
    """Revoke an API key by id (admin only)."""

    key_id: str

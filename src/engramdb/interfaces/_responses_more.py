"""The result models of the operations added for parity with the library (issue 24), and of conversations,
routing and reasoning: the REST response schemas of those routes and their MCP tools' output schemas.

The same rules as :mod:`._responses`: one model per ``to_dict()``, fields always present are required, extra
fields pass through. ``TOOL_RESULTS`` maps every operation (by its MCP tool name) to its result model.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MORE_RESULTS", "TOOL_RESULTS"]

from pydantic import BaseModel, Field

from engramdb.interfaces._responses import (
    Analysis,
    AuditLog,
    Chosen,
    Context,
    EpisodeList,
    EpisodeRecord,
    EpisodeStarted,
    EventAdded,
    FailurePattern,
    Forgotten,
    History,
    Memories,
    Memory,
    MemoryList,
    OptionStats,
    PatternList,
    Response,
    SearchResult,
    SessionMessageAdded,
    SessionWindow,
    Share,
    Shared,
    SolutionList,
    SolutionStats,
    Stats,
    Suggestion,
    Timestamp,
    Unshared,
    Verification,
    WarningList,
)

# -- conversations, routing, reasoning ---------------------------------------------------------------------


class FactChange(Response):
    """What ``add`` did with one durable fact: add, update, supersede, delete or none."""

    action: str
    key: str | None
    previous: str | None
    memory: Memory


class AddResult(Response):
    """What ``add`` stored: how many facts were added, updated, ... then the turns and each fact."""

    added: int
    updated: int
    superseded: int
    deleted: int
    unchanged: int
    extractor: str
    llm_error: str | None
    turns: list[Memory]
    facts: list[FactChange]


class ModelStats(Response):
    """How a model is expected to do on a task: success (with its interval), cost, latency, utility."""

    model: str
    tier: str | None
    expected_success: float
    low: float
    high: float
    prior_success: float
    evidence: float
    expected_cost: float
    expected_latency_ms: float
    utility: float


class RouteChoice(Response):
    """The LLM picked for a task, why, and a fallback."""

    model: str
    task: str
    task_type: str | None
    reason: str
    fallback: str | None
    decided_by: str
    explored: bool
    complexity: str | None
    context_length: int
    require_fast: bool
    require_cheap: bool
    cost_weight: float
    latency_weight: float
    candidates: list[ModelStats]


class ModelChosen(Response):
    """The model picked."""

    model: str


class Reasoning(Response):
    """A plan, decision or critique reasoned by the configured LLM over the agent's memories."""

    goal: str
    mode: str
    steps: list[str]
    decision: str | None
    rationale: str
    decision_id: str | None
    options: list[str]
    model: str


# -- the parity operations (keyed memories, learning reports, checks, knowledge, keys) ----------------------


class Count(Response):
    """How many."""

    count: int


class Cleared(Response):
    """How many memories were forgotten."""

    forgotten: int


class CheckResult(Response):
    """One check of ``doctor``."""

    name: str
    ok: bool
    detail: str


class DoctorReport(Response):
    """Every check run on the store; ``ok`` when all passed."""

    location: str
    ok: bool
    checks: list[CheckResult]


class Execution(Response):
    """How a task was executed: its type, complexity, what made it work, the tools used."""

    type: str | None
    complexity: str | None
    complexity_assessed: bool
    success_factors: list[str]
    tools: list[str]
    calls: int | None


class DecisionRecord(Response):
    """A decision read back as an outcome: in ``context``, doing ``action`` gave ``success``."""

    id: str
    agent: str
    context: str
    action: str
    outcome: str | None
    success: float
    at: Timestamp
    alternatives: list[str]
    duration: float | None
    category: str | None
    execution: Execution | None = None
    similarity: float | None = Field(default=None, description="How similar its task is (executions search).")
    user: str | None = Field(default=None, description="The user whose outcome it is (absent: the agent's own).")


class Outcomes(Response):
    """Recorded outcomes, oldest first."""

    outcomes: list[DecisionRecord]


class Executions(Response):
    """Past executions of similar tasks, most similar first."""

    executions: list[DecisionRecord]


class LearningStats(Response):
    """An agent's learning at a glance: memories by kind, decisions, success, most used actions and memories."""

    agent: str
    memories: dict[str, int]
    decisions: int
    pending: int
    successes: float
    success_rate: float | None
    most_used: list[OptionStats]
    categories: list[OptionStats]
    failure_patterns: int
    recurring_failures: int
    episodes: int
    episode_successes: int
    episode_failures: int
    most_used_memories: list[Memory]
    memories_used: int
    memory_uses: float
    memory_success_rate: float | None
    best_memory_success_rate: float | None
    memory_retrievals: int


class TrendTest(Response):
    """Whether a success rate goes up or down over time (a trend test), and how surely."""

    direction: str
    z: float
    p_value: float
    n: int
    early_rate: float | None
    late_rate: float | None
    method: str


class NameCount(Response):
    """A name and how often it was seen."""

    name: str
    count: int


class CategoryTrend(Response):
    """One category's outcomes over time: rate, interval, best approaches, its trend."""

    category: str
    executions: int
    successes: float
    success_rate: float
    low: float
    high: float
    average_duration: float | None
    best_approaches: list[OptionStats]
    success_factors: list[NameCount]
    tools: list[NameCount]
    trend: TrendTest
    first_at: Timestamp
    last_at: Timestamp


class Trends(Response):
    """Each category's trend."""

    trends: list[CategoryTrend]


class TimelinePoint(Response):
    """Outcomes in one time bucket."""

    start: Timestamp
    end: Timestamp
    n: int
    successes: float
    success_rate: float
    low: float
    high: float


class LearningReport(Response):
    """The learning report: overall rate, categories with trends, timelines, failure patterns, insights."""

    agent: str
    generated_at: Timestamp
    since: Timestamp | None
    decisions: int
    successes: float
    success_rate: float | None
    low: float | None
    high: float | None
    average_duration: float | None
    categories: list[CategoryTrend]
    actions: list[OptionStats]
    bucket: str
    timeline: list[TimelinePoint]
    category_timelines: dict[str, list[TimelinePoint]]
    failure_patterns: list[FailurePattern]
    insights: list[str]
    recommendations: list[str]
    success_target: float
    slow_seconds: float
    chart: str | None


class ApproachStats(Response):
    """An approach (action in a context) and how well it worked."""

    category: str | None
    context: str
    action: str
    successes: float
    attempts: int
    success_rate: float
    low: float
    high: float
    last_at: Timestamp


class Approaches(Response):
    """Approaches matching the filters, best first."""

    approaches: list[ApproachStats]


class Prevention(Response):
    """How to prevent a failure pattern, in words."""

    prevention: list[str]


class PatternPlan(Response):
    """Steps to apply a failure pattern's fixes to a task."""

    task: str
    pattern_id: str
    kind: str
    title: str
    relevance: float
    steps: list[str]
    fixes: list[SolutionStats]
    code: str | None


class PreventionCheck(Response):
    """A check run before acting (a file, an environment variable, a command, a module must be there)."""

    id: str
    agent: str
    description: str
    stage: str
    pattern_id: str | None
    pattern_name: str | None
    files: list[str]
    env: list[str]
    commands: list[str]
    modules: list[str]
    automatic: bool
    created_at: Timestamp


class Checks(Response):
    """Prevention checks."""

    checks: list[PreventionCheck]


class Removed(Response):
    """The id of what was removed."""

    removed: str


class ShareList(Response):
    """Shares matching the filters."""

    shares: list[Share]


class Exported(Response):
    """A knowledge file (JSON Lines) and how many memories it holds."""

    count: int
    content: str


class Merged(Response):
    """How many memories were merged."""

    merged: int


class PackReport(Response):
    """What loading a knowledge pack changed."""

    pack: str
    version: int
    agent: str
    previous_version: int | None
    added: int
    updated: int
    removed: int
    unchanged: int


class Expiry(Response):
    """A memory the retention policy removes, and why."""

    memory_id: str
    agent: str
    kind: str
    reason: str
    detail: str


class CleanupReport(Response):
    """What the retention policy expired, and what it forgot (not on a dry run)."""

    dry_run: bool
    policy_empty: bool
    expired: list[Expiry]
    forgotten: list[Expiry]


class ApiKey(Response):
    """An API key (never its secret)."""

    id: str
    agent: str
    read_only: bool
    admin: bool
    created_at: Timestamp
    revoked_at: Timestamp | None
    label: str | None
    active: bool


class NewApiKey(ApiKey):
    """A key just created, with its secret ``token``: shown once, only a hash is stored."""

    token: str


class ApiKeys(Response):
    """API keys."""

    keys: list[ApiKey]


#: The result model of each parity operation, by its MCP tool name (also its REST route's name).
MORE_RESULTS: Final[dict[str, type[BaseModel]]] = {
    "count": Count,
    "recall_key": Memory,
    "clear": Cleared,
    "reason": Reasoning,
    "doctor": DoctorReport,
    "feedback": Memories,
    "resolve": Memory,
    "pending": Memories,
    "outcomes": Outcomes,
    "learning_stats": LearningStats,
    "learning_report": LearningReport,
    "trends": Trends,
    "approaches": Approaches,
    "record_execution": Memory,
    "executions": Executions,
    "failure_pattern": FailurePattern,
    "prevention": Prevention,
    "plan": PatternPlan,
    "checks": Checks,
    "add_check": PreventionCheck,
    "generate_check": PreventionCheck,
    "remove_check": Removed,
    "remember_code": Memories,
    "suggest_code": SearchResult,
    "share_list": ShareList,
    "export_knowledge": Exported,
    "import_knowledge": Count,
    "distill": Memories,
    "merge": Merged,
    "seed": PackReport,
    "cleanup": CleanupReport,
    "route": ModelChosen,
    "decide": RouteChoice,
    "route_record": Memory,
    "list_keys": ApiKeys,
    "create_key": NewApiKey,
    "revoke_key": ApiKey,
    "add_conversation": AddResult,
}

#: The result model of every operation, by its MCP tool name (the parity routes' REST name too): the MCP tools'
#: output schemas.
TOOL_RESULTS: Final[dict[str, type[BaseModel]]] = {
    "remember": Memory,
    "search": SearchResult,
    "get": Memory,
    "forget": Forgotten,
    "record_outcome": Memory,
    "suggest": Suggestion,
    "choose": Chosen,
    "record_failure": Memory,
    "solutions": SolutionList,
    "failure_patterns": PatternList,
    "preflight": WarningList,
    "record_episode": Memory,
    "start_episode": EpisodeStarted,
    "episode_event": EventAdded,
    "end_episode": EpisodeRecord,
    "find_episodes": EpisodeList,
    "analyze_episodes": Analysis,
    "stats": Stats,
    "context": Context,
    "session_add": SessionMessageAdded,
    "session": SessionWindow,
    "share": Shared,
    "unshare": Unshared,
    # The MCP-only tools of operations REST has, and the parity operations (their own module).
    "update": Memory,
    "history": History,
    "list": MemoryList,
    "remember_many": Memories,
    "audit_log": AuditLog,
    "verify_audit": Verification,
    **MORE_RESULTS,
}

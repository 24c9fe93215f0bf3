"""Every server operation once: parse-free calls of the public API acting as the caller (REST and MCP share them).

Each function takes the store, the :class:`~engramdb.interfaces._access.Caller` and the
validated arguments (:mod:`~engramdb.interfaces._schemas`), applies the caller's rights
(which agent; read-only keys may not write) and returns the result as JSON-ready data
(lists wrapped, so every result is an object). :data:`TOOLS` lists those an MCP client
gets as tools, in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from engramdb import validate as check
from engramdb.errors import ValidationError
from engramdb.interfaces._schemas import (
    AddArgs,
    AnalyzeEpisodesArgs,
    Args,
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

if TYPE_CHECKING:
    from engramdb import Engram, Message
    from engramdb.interfaces._access import Caller
    from engramdb.models import Kind, Visibility

__all__ = ["TOOLS", "Tool", "meta_filter"]

JSON = dict[str, Any]


def meta_filter(value: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """A metadata filter as sent: an object, or (in a query string or a CLI option) its JSON text."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ValidationError(
            f'metadata filter must be a JSON object such as {{"language": "python"}}, not {value!r}'
        ) from None
    if not isinstance(parsed, dict):
        raise ValidationError(f"metadata filter must be a JSON object, not {type(parsed).__name__}")
    return parsed


#: The fields of a learning report that ``stats`` shows (as ``engram learning stats --json``).
STATS_FIELDS: Final = ("decisions", "successes", "success_rate", "low", "high", "average_duration", "actions")


# -- memories --------------------------------------------------------------------------------------------


def remember(mem: Engram, who: Caller, a: RememberArgs) -> JSON:
    who.require_write()
    return mem.remember(
        a.content,
        agent=who.agent(a.agent),
        kind=cast("Kind", a.kind),
        tags=a.tags,
        metadata=a.metadata,
        visibility=cast("Visibility", a.visibility),
        confidence=a.confidence,
        force=a.force,
        key=a.key,
        user=a.user,
        session=a.session,
        at=a.at,
    ).to_dict()


def remember_many(mem: Engram, who: Caller, a: BatchArgs) -> JSON:
    who.require_write()
    items = [{**item, "agent": who.agent(item.get("agent"))} for item in a.items]
    return {"memories": [m.to_dict() for m in mem.remember_many(items, force=a.force)]}


def add_conversation(mem: Engram, who: Caller, a: AddArgs) -> JSON:
    who.require_write()
    return mem.add(a.messages, agent=who.agent(a.agent), user=a.user, session=a.session, at=a.at).to_dict()


def list_memories(
    mem: Engram,
    who: Caller,
    *,
    agent: str | None,
    kind: list[str] | None,
    tags: list[str] | None,
    limit: int,
    offset: int,
    since: str | None = None,
    until: str | None = None,
    user: str | None = None,
    session: str | None = None,
    as_of: str | None = None,
    metadata: dict[str, Any] | str | None = None,
) -> JSON:
    kinds = cast("list[Kind] | None", kind)
    found = mem.list(
        agent=who.agent(agent),
        kind=kinds,
        tags=tags,
        limit=limit,
        offset=offset,
        since=since,
        until=until,
        user=user,
        session=session,
        as_of=as_of,
        metadata=meta_filter(metadata),
    )
    return {"memories": [m.to_dict() for m in found], "limit": limit, "offset": offset}


def get(mem: Engram, who: Caller, a: MemoryArgs) -> JSON:
    return mem.get(a.memory_id, agent=who.scope(a.agent), user=a.user, session=a.session).to_dict()


def update(mem: Engram, who: Caller, a: MemoryArgs, changes: UpdateArgs) -> JSON:
    who.require_write()
    # Only the fields the client sent: a field sent as null is a change (to empty metadata, ...).
    if a.user is not None or a.session is not None:
        mem.get(a.memory_id, agent=who.scope(a.agent), user=a.user, session=a.session)  # in scope, else NotFound
    return mem.update(a.memory_id, agent=who.scope(a.agent), **changes.model_dump(exclude_unset=True)).to_dict()


def forget(mem: Engram, who: Caller, a: MemoryArgs) -> JSON:
    who.require_write()
    mem.forget(a.memory_id, agent=who.scope(a.agent), user=a.user, session=a.session)
    return {"forgotten": a.memory_id}


def history(mem: Engram, who: Caller, a: MemoryArgs) -> JSON:
    if a.user is not None or a.session is not None:
        mem.get(a.memory_id, agent=who.scope(a.agent), user=a.user, session=a.session)  # in scope, else NotFound
    return {"changes": [c.to_dict() for c in mem.history(a.memory_id, agent=who.scope(a.agent))]}


def search(mem: Engram, who: Caller, a: SearchArgs) -> JSON:
    kind = cast("Kind | list[Kind] | None", a.kind)
    hits = mem.search(
        a.query,
        agent=who.agent(a.agent),
        kind=kind,
        tags=a.tags,
        limit=a.limit,
        since=a.since,
        until=a.until,
        user=a.user,
        session=a.session,
        as_of=a.as_of,
        min_score=a.min_score,
        metadata=meta_filter(a.metadata),
    )
    return {"hits": [h.to_dict() for h in hits]}


def stats(mem: Engram, who: Caller, a: StatsArgs) -> JSON:
    agent = who.agent(a.agent)
    report = mem.learning.report(agent=agent).to_dict()
    return {"agent": agent, "memories": mem.count(agent=agent), **{k: report[k] for k in STATS_FIELDS}}


# -- learning and failures -------------------------------------------------------------------------------


def record_outcome(mem: Engram, who: Caller, a: RecordArgs) -> JSON:
    who.require_write()
    return mem.learning.record(
        a.context,
        a.action,
        a.outcome,
        agent=who.agent(a.agent),
        alternatives=a.alternatives,
        duration=a.duration,
        metadata=a.metadata,
        category=a.category,
        used=a.used,
        tags=a.tags,
        visibility=cast("Visibility", a.visibility),
        user=a.user,
    ).to_dict()


def suggest(mem: Engram, who: Caller, a: SuggestArgs) -> JSON:
    found = mem.learning.suggest(a.context, agent=who.agent(a.agent), options=a.options, limit=a.limit, user=a.user)
    return found.to_dict()


def choose(mem: Engram, who: Caller, a: ChooseArgs) -> JSON:
    agent = who.agent(a.agent)
    chosen = mem.learning.choose(a.context, a.options, agent=agent, exploration=a.exploration, seed=a.seed, user=a.user)
    return {"chosen": chosen}


def route(mem: Engram, who: Caller, a: RouteArgs) -> JSON:
    return mem.routing.decide(
        a.task,
        models=a.models,
        task_type=a.task_type,
        agent=who.agent(a.agent),
        complexity=a.complexity,
        context_length=a.context_length,
        require_fast=a.require_fast,
        require_cheap=a.require_cheap,
        cost_weight=a.cost_weight,
        latency_weight=a.latency_weight,
    ).to_dict()


def route_record(mem: Engram, who: Caller, a: RouteRecordArgs) -> JSON:
    who.require_write()
    agent = who.agent(a.agent)
    return mem.routing.record(
        a.task, a.model, a.outcome, task_type=a.task_type, latency_ms=a.latency_ms, cost=a.cost, agent=agent
    ).to_dict()


def record_failure(mem: Engram, who: Caller, a: FailureArgs) -> JSON:
    who.require_write()
    return mem.failures.record(
        a.error,
        agent=who.agent(a.agent),
        context=a.context,
        solution=a.solution,
        failed_solutions=a.failed_solutions,
        tags=a.tags,
        metadata=a.metadata,
        visibility=cast("Visibility", a.visibility),
    ).to_dict()


def solutions(mem: Engram, who: Caller, a: SolutionsArgs) -> JSON:
    found = mem.failures.solutions(a.error, agent=who.agent(a.agent), limit=a.limit)
    return {"solutions": [s.to_dict() for s in found]}


def failure_patterns(mem: Engram, who: Caller, a: PatternsArgs) -> JSON:
    return {"patterns": [p.to_dict() for p in mem.failures.patterns(agent=who.agent(a.agent), recurring=a.recurring)]}


def preflight(mem: Engram, who: Caller, a: PreflightArgs) -> JSON:
    warnings = mem.failures.preflight(a.action, agent=who.agent(a.agent), limit=a.limit)
    return {"warnings": [w.to_dict() for w in warnings]}


# -- episodes --------------------------------------------------------------------------------------------


def record_episode(mem: Engram, who: Caller, a: EpisodeArgs) -> JSON:
    who.require_write()
    if a.outcome not in ("success", "failure"):
        raise ValidationError(f"outcome must be 'success' or 'failure', not {a.outcome!r}")
    if a.reason is not None and a.outcome != "failure":
        raise ValidationError("a reason is given only for a failed episode")
    if any(not e.kind.strip() for e in a.events):
        raise ValidationError("event kind must be a non-empty string")
    # Everything is checked before the episode starts: an error inside it would be recorded as its failure.
    episode = mem.episodes.begin(a.task, agent=who.agent(a.agent), tags=a.tags, metadata=a.metadata)
    with episode as running:
        for e in a.events:
            running.event(e.kind, e.data)
        if a.outcome == "failure":
            running.fail(a.reason or "failed")
    assert episode.memory is not None
    return episode.memory.to_dict()


def start_episode(mem: Engram, who: Caller, a: StartEpisodeArgs) -> JSON:
    who.require_write()
    agent = who.agent(a.agent)
    episode_id = mem.episodes.start(a.task, agent=agent, tags=a.tags, metadata=a.metadata, context=a.context)
    return {"episode_id": episode_id, "agent": agent, "task": a.task}


def episode_event(mem: Engram, who: Caller, a: EpisodeEventArgs) -> JSON:
    who.require_write()
    mem.episodes.event(a.episode_id, a.kind, a.data, role=a.role, agent=who.agent(a.agent))
    return {"episode_id": a.episode_id, "kind": a.kind}


def end_episode(mem: Engram, who: Caller, a: EndEpisodeArgs) -> JSON:
    who.require_write()
    if a.outcome not in ("success", "failure"):
        raise ValidationError(f"outcome must be 'success' or 'failure', not {a.outcome!r}")
    record = mem.episodes.end(a.episode_id, a.outcome, agent=who.agent(a.agent), metrics=a.metrics, error=a.error)
    return record.to_dict()


def find_episodes(mem: Engram, who: Caller, a: FindEpisodesArgs) -> JSON:
    found = mem.episodes.list(a.task, agent=who.agent(a.agent), outcome=a.outcome, limit=a.limit)
    return {"episodes": [e.to_dict() for e in found]}


def analyze_episodes(mem: Engram, who: Caller, a: AnalyzeEpisodesArgs) -> JSON:
    return mem.episodes.analyze(agent=who.agent(a.agent), task=a.task, limit=a.limit).to_dict()


# -- sharing and audit -----------------------------------------------------------------------------------


def share(mem: Engram, who: Caller, a: ShareArgs) -> JSON:
    who.require_write()
    owner = who.agent(a.from_agent)
    count = mem.sharing.share(a.memory_ids, from_agent=owner, to_agent=a.to_agent, tag=a.tag, pattern=a.pattern)
    return {"shared": count}


def unshare(mem: Engram, who: Caller, a: ShareArgs) -> JSON:
    who.require_write()
    owner = who.agent(a.from_agent)
    count = mem.sharing.unshare(a.memory_ids, from_agent=owner, to_agent=a.to_agent, tag=a.tag, pattern=a.pattern)
    return {"unshared": count}


def shares(mem: Engram, who: Caller, agent: str | None) -> JSON:
    me = check.agent_name(who.agent(agent))  # checked as agent: the library would name it from_agent
    return {
        "outgoing": [s.to_dict() for s in mem.sharing.list(from_agent=me)],
        "incoming": [s.to_dict() for s in mem.sharing.list(to_agent=me)],
    }


def audit_log(
    mem: Engram, who: Caller, agent: str | None, limit: int, *, memory_id: str | None = None, action: str | None = None
) -> JSON:
    events = mem.audit.log(agent=who.scope(agent), limit=limit, memory_id=memory_id, action=action)
    return {"events": [e.to_dict() for e in events]}


# -- the brain and the short-term session ---------------------------------------------------------------


def context(mem: Engram, who: Caller, a: ContextArgs) -> JSON:
    agent = who.agent(a.agent)
    # The context shows the agent's session window only if this process opened it: open it, so a window
    # written through another server (sessions in Redis) is part of the context served here too.
    mem.session(agent, user=a.user, session=a.session)
    return mem.context(a.task, agent=agent, token_budget=a.token_budget, user=a.user, session=a.session).to_dict()


def _message(m: Message) -> JSON:
    return {"role": m.role, "content": m.content, "at": m.at.isoformat(), "tokens": m.tokens}


def add_session_message(mem: Engram, who: Caller, a: SessionMessageArgs) -> JSON:
    who.require_write()
    agent = who.agent(a.agent)
    window = mem.session(agent, user=a.user, session=a.session)
    return {"agent": agent, "message": _message(window.add(a.content, role=a.role))}


def session(mem: Engram, who: Caller, a: SessionArgs) -> JSON:
    agent = who.agent(a.agent)
    window = mem.session(agent, user=a.user, session=a.session)
    return {
        "agent": agent,
        "user": a.user,
        "session": a.session,
        "messages": [_message(m) for m in window.messages],
        "variables": window.variables,
        "tokens": window.tokens,
        "token_budget": window.token_budget,
    }


# -- MCP tools -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tool:
    """An operation offered as an MCP tool: its name, argument model (whose docstring describes it) and call."""

    name: str
    args: type[Args]
    call: Callable[[Engram, Caller, Any], JSON]
    writes: bool
    summary: str = ""

    @property
    def description(self) -> str:
        """What the tool does, for the model: its own summary, else its argument model's docstring."""
        return " ".join((self.summary or self.args.__doc__ or self.name).split())


#: The MCP tools, in the order the server lists them.
TOOLS: Final[tuple[Tool, ...]] = (
    Tool("remember", RememberArgs, remember, True),
    Tool("add_conversation", AddArgs, add_conversation, True),
    Tool("search", SearchArgs, search, False),
    Tool("get", MemoryArgs, get, False, "One memory by id; it must be visible to the agent."),
    Tool("forget", MemoryArgs, forget, True, "Delete one of the agent's own memories for good."),
    Tool("record_outcome", RecordArgs, record_outcome, True),
    Tool("suggest", SuggestArgs, suggest, False),
    Tool("choose", ChooseArgs, choose, False),
    Tool("route", RouteArgs, route, False),
    Tool("route_record", RouteRecordArgs, route_record, True),
    Tool("record_failure", FailureArgs, record_failure, True),
    Tool("solutions", SolutionsArgs, solutions, False),
    Tool("failure_patterns", PatternsArgs, failure_patterns, False),
    Tool("preflight", PreflightArgs, preflight, False),
    Tool("record_episode", EpisodeArgs, record_episode, True),
    Tool("start_episode", StartEpisodeArgs, start_episode, True),
    Tool("episode_event", EpisodeEventArgs, episode_event, True),
    Tool("end_episode", EndEpisodeArgs, end_episode, True),
    Tool("find_episodes", FindEpisodesArgs, find_episodes, False),
    Tool("analyze_episodes", AnalyzeEpisodesArgs, analyze_episodes, False),
    Tool("stats", StatsArgs, stats, False),
    Tool("context", ContextArgs, context, False),
    Tool("session_add", SessionMessageArgs, add_session_message, True),
    Tool("session", SessionArgs, session, False),
    Tool("share", ShareArgs, share, True),
    Tool("unshare", ShareArgs, unshare, True),
)

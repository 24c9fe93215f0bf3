"""The server operations added for parity with the library (issue 24): each a REST route and an MCP tool.

Like :mod:`._ops`: the store, the caller and validated arguments in, JSON-ready data out,
the caller's rights applied (read-only keys may not write; key management, the store
check and retention need an admin key or a trusted caller). :data:`ROUTES` lists them
with their HTTP method and path; :mod:`.rest` mounts them and :mod:`.mcp` lists them as
tools (:data:`MORE_TOOLS`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from engramdb import validate as check
from engramdb.errors import AccessDenied
from engramdb.interfaces import _ops as ops
from engramdb.interfaces._ops import Tool
from engramdb.interfaces._schemas import Args, BatchArgs, MemoryArgs, UpdateArgs
from engramdb.interfaces._schemas_more import (
    AddCheckArgs,
    ApproachesArgs,
    AuditArgs,
    CheckIdArgs,
    ChecksArgs,
    CleanupArgs,
    ClearArgs,
    CodeArgs,
    CodeSuggestArgs,
    CountArgs,
    CreateKeyArgs,
    DistillArgs,
    DoctorArgs,
    ExecutionArgs,
    ExecutionsArgs,
    ExportArgs,
    FeedbackArgs,
    GenerateCheckArgs,
    ImportArgs,
    KeyedArgs,
    KeyIdArgs,
    ListArgs,
    ListKeysArgs,
    MergeArgs,
    OutcomesArgs,
    PatternArgs,
    PendingArgs,
    PlanArgs,
    ReasonArgs,
    ReportArgs,
    ResolveArgs,
    SeedArgs,
    ShareListArgs,
    TopArgs,
    UpdateToolArgs,
    VerifyArgs,
)

if TYPE_CHECKING:
    from datetime import datetime

    from engramdb import Engram
    from engramdb.interfaces._access import Caller
    from engramdb.models import Kind, ReasoningMode, Visibility

__all__ = ["MORE_TOOLS", "ROUTES", "Route"]

JSON = dict[str, Any]


def _admin(who: Caller) -> None:
    if not who.may_act_for_anyone:
        raise AccessDenied("this needs an admin API key")


def _since(value: str | None) -> datetime | None:
    return check.moment(value, what="since")


# -- memories --------------------------------------------------------------------------------------------


def count(mem: Engram, who: Caller, a: CountArgs) -> JSON:
    kinds = cast("list[Kind] | None", a.kind)
    meta = ops.meta_filter(a.metadata)
    return {"count": mem.count(agent=who.agent(a.agent), kind=kinds, user=a.user, session=a.session, metadata=meta)}


def recall_key(mem: Engram, who: Caller, a: KeyedArgs) -> JSON:
    return mem.recall_key(a.key, agent=who.agent(a.agent), user=a.user, as_of=a.as_of).to_dict()


def clear(mem: Engram, who: Caller, a: ClearArgs) -> JSON:
    who.require_write()
    return {"forgotten": mem.clear(agent=who.agent(a.agent), confirm=a.confirm, user=a.user, session=a.session)}


def reason(mem: Engram, who: Caller, a: ReasonArgs) -> JSON:
    mode = cast("ReasoningMode", a.mode)
    return mem.reason(a.goal, agent=who.agent(a.agent), mode=mode, options=a.options).to_dict()


def doctor(mem: Engram, who: Caller, a: DoctorArgs) -> JSON:
    _admin(who)
    return mem.doctor(quick=a.quick).to_dict()


# -- learning --------------------------------------------------------------------------------------------


def feedback(mem: Engram, who: Caller, a: FeedbackArgs) -> JSON:
    who.require_write()
    changed = mem.learning.feedback(a.memory_ids, a.outcome, agent=who.agent(a.agent), context=a.context, user=a.user)
    return {"memories": [m.to_dict() for m in changed]}


def resolve(mem: Engram, who: Caller, a: ResolveArgs) -> JSON:
    who.require_write()
    return mem.learning.resolve(a.decision_id, a.outcome, agent=who.agent(a.agent), user=a.user).to_dict()


def pending(mem: Engram, who: Caller, a: PendingArgs) -> JSON:
    found = mem.learning.pending(agent=who.agent(a.agent), episode=a.episode, user=a.user)
    return {"memories": [m.to_dict() for m in found]}


def outcomes(mem: Engram, who: Caller, a: OutcomesArgs) -> JSON:
    found = mem.learning.outcomes(agent=who.agent(a.agent), since=_since(a.since), category=a.category, user=a.user)
    return {"outcomes": [r.to_dict() for r in found]}


def learning_stats(mem: Engram, who: Caller, a: TopArgs) -> JSON:
    return mem.learning.stats(agent=who.agent(a.agent), top=a.top, user=a.user).to_dict()


def report(mem: Engram, who: Caller, a: ReportArgs) -> JSON:
    return mem.learning.report(
        agent=who.agent(a.agent),
        since=_since(a.since),
        success_target=a.success_target,
        slow_seconds=a.slow_seconds,
        user=a.user,
    ).to_dict()


def trends(mem: Engram, who: Caller, a: OutcomesArgs) -> JSON:
    found = mem.learning.trends(agent=who.agent(a.agent), since=_since(a.since), category=a.category, user=a.user)
    return {"trends": [t.to_dict() for t in found]}


def approaches(mem: Engram, who: Caller, a: ApproachesArgs) -> JSON:
    found = mem.learning.approaches(
        agent=who.agent(a.agent),
        success_rate=a.success_rate,
        min_attempts=a.min_attempts,
        since=_since(a.since),
        user=a.user,
    )
    return {"approaches": [s.to_dict() for s in found]}


def record_execution(mem: Engram, who: Caller, a: ExecutionArgs) -> JSON:
    who.require_write()
    fields = a.model_dump(exclude={"task", "agent"})
    return mem.learning.record_execution(a.task, agent=who.agent(a.agent), **fields).to_dict()


def executions(mem: Engram, who: Caller, a: ExecutionsArgs) -> JSON:
    found = mem.learning.executions(
        a.task, agent=who.agent(a.agent), successful=a.successful, category=a.category, limit=a.limit, user=a.user
    )
    return {"executions": [e.to_dict() for e in found]}


# -- failures --------------------------------------------------------------------------------------------


def pattern(mem: Engram, who: Caller, a: PatternArgs) -> JSON:
    return mem.failures.pattern(a.pattern_id, agent=who.agent(a.agent)).to_dict()


def prevention(mem: Engram, who: Caller, a: PatternArgs) -> JSON:
    return {"prevention": mem.failures.prevention(a.pattern_id, agent=who.agent(a.agent))}


def plan(mem: Engram, who: Caller, a: PlanArgs) -> JSON:
    return mem.failures.plan(a.pattern_id, a.task, agent=who.agent(a.agent)).to_dict()


def checks(mem: Engram, who: Caller, a: ChecksArgs) -> JSON:
    found = mem.failures.checks(agent=who.agent(a.agent), stage=a.stage, pattern=a.pattern)
    return {"checks": [c.to_dict() for c in found]}


def add_check(mem: Engram, who: Caller, a: AddCheckArgs) -> JSON:
    who.require_write()
    fields = a.model_dump(exclude={"pattern", "check_text", "agent"})
    return mem.failures.add_check(a.pattern, a.check_text, agent=who.agent(a.agent), **fields).to_dict()


def generate_check(mem: Engram, who: Caller, a: GenerateCheckArgs) -> JSON:
    who.require_write()
    return mem.failures.generate_check(a.pattern, stage=a.stage, agent=who.agent(a.agent)).to_dict()


def remove_check(mem: Engram, who: Caller, a: CheckIdArgs) -> JSON:
    who.require_write()
    mem.failures.remove_check(a.check_id, agent=who.agent(a.agent))
    return {"removed": a.check_id}


# -- code, sharing, knowledge ----------------------------------------------------------------------------


def remember_code(mem: Engram, who: Caller, a: CodeArgs) -> JSON:
    who.require_write()
    found = mem.code.remember(
        a.source,
        agent=who.agent(a.agent),
        filename=a.filename,
        language=a.language,
        tags=a.tags,
        min_lines=a.min_lines,
        visibility=cast("Visibility", a.visibility),
        metadata=a.metadata,
        name=a.name,
        context=a.context,
        success_metrics=a.success_metrics,
    )
    return {"memories": [m.to_dict() for m in found]}


def suggest_code(mem: Engram, who: Caller, a: CodeSuggestArgs) -> JSON:
    hits = mem.code.suggest(
        a.task,
        agent=who.agent(a.agent),
        pattern_type=a.pattern_type,
        language=a.language,
        limit=a.limit,
        metadata=a.metadata,
    )
    return {"hits": [h.to_dict() for h in hits]}


def share_list(mem: Engram, who: Caller, a: ShareListArgs) -> JSON:
    if a.from_agent is None and a.to_agent is None:
        found = mem.sharing.list(from_agent=who.agent(None))
    else:
        found = mem.sharing.list(
            from_agent=None if a.from_agent is None else who.agent(a.from_agent),
            to_agent=None if a.to_agent is None else who.agent(a.to_agent),
        )
    return {"shares": [s.to_dict() for s in found]}


def export_knowledge(mem: Engram, who: Caller, a: ExportArgs) -> JSON:
    out = io.BytesIO()
    n = mem.knowledge.export_file(
        out,
        agent=who.agent(a.agent),
        tag=a.tag,
        with_vectors=a.with_vectors,
        with_history=a.with_history,
        user=a.user,
        session=a.session,
    )
    return {"count": n, "content": out.getvalue().decode("utf-8")}


class _Named(io.BytesIO):
    """An uploaded file's bytes with the name it had, so provenance names the file and not ``<stream>``."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(data)
        self.name = name


def import_knowledge(mem: Engram, who: Caller, a: ImportArgs) -> JSON:
    who.require_write()
    if a.keep_agents:
        _admin(who)  # a file naming other agents writes as them
    source = _Named(a.content.encode("utf-8"), a.name)
    agent = None if a.keep_agents and a.agent is None else who.agent(a.agent)
    n = mem.knowledge.import_file(source, agent=agent, keep_agents=a.keep_agents, dry_run=a.dry_run)
    return {"count": n}


def distill(mem: Engram, who: Caller, a: DistillArgs) -> JSON:
    if not a.dry_run:
        who.require_write()
    made = mem.knowledge.distill(
        agent=who.agent(a.agent),
        kind=cast("list[Kind] | None", a.kind),
        min_group=a.min_group,
        dry_run=a.dry_run,
        archive_sources=a.archive_sources,
    )
    return {"memories": [m.to_dict() for m in made]}


def merge(mem: Engram, who: Caller, a: MergeArgs) -> JSON:
    who.require_write()
    source = who.agent(a.from_agent)
    return {"merged": mem.knowledge.merge(from_agent=source, to_agent=who.agent(a.to_agent), tag=a.tag)}


def seed(mem: Engram, who: Caller, a: SeedArgs) -> JSON:
    who.require_write()
    return mem.knowledge.seed(a.pack, agent=who.agent(a.agent)).to_dict()


# -- retention, keys ----------------------------------------------------------------------------


def cleanup(mem: Engram, who: Caller, a: CleanupArgs) -> JSON:
    _admin(who)
    return mem.retention.cleanup(dry_run=a.dry_run, agent=a.agent, user=a.user, session=a.session).to_dict()


def create_key(mem: Engram, who: Caller, a: CreateKeyArgs) -> JSON:
    _admin(who)
    return mem.keys.create(a.agent, read_only=a.read_only, admin=a.admin, label=a.label).to_dict()


def list_keys(mem: Engram, who: Caller, a: ListKeysArgs) -> JSON:
    _admin(who)
    return {"keys": [k.to_dict() for k in mem.keys.list(include_revoked=a.include_revoked)]}


def revoke_key(mem: Engram, who: Caller, a: KeyIdArgs) -> JSON:
    _admin(who)
    return mem.keys.revoke(a.key_id).to_dict()


# -- the table -------------------------------------------------------------------------------------------

Method = Literal["GET", "POST", "DELETE"]


@dataclass(frozen=True, slots=True)
class Route:
    """An operation's HTTP route: GET takes its arguments as query parameters, POST and DELETE as a JSON body."""

    method: Method
    path: str
    tool: Tool
    status: int = 200


#: POST routes that only read (their arguments are too rich for a query string).
_READS: Final = frozenset({"executions", "plan", "suggest_code"})


def _r(method: Method, path: str, name: str, args: type[Args], call: Callable[[Engram, Caller, Any], JSON]) -> Route:
    writes = method != "GET" and name not in _READS
    return Route(method, path, Tool(name, args, call, writes), 201 if method == "POST" and writes else 200)


#: Every added operation: method, path, MCP tool name, arguments, call.
ROUTES: Final[tuple[Route, ...]] = (
    _r("GET", "/count", "count", CountArgs, count),
    _r("GET", "/keyed", "recall_key", KeyedArgs, recall_key),
    _r("DELETE", "/memories", "clear", ClearArgs, clear),
    _r("POST", "/reason", "reason", ReasonArgs, reason),
    _r("GET", "/doctor", "doctor", DoctorArgs, doctor),
    _r("POST", "/learning/feedback", "feedback", FeedbackArgs, feedback),
    _r("POST", "/learning/resolve", "resolve", ResolveArgs, resolve),
    _r("GET", "/learning/pending", "pending", PendingArgs, pending),
    _r("GET", "/learning/outcomes", "outcomes", OutcomesArgs, outcomes),
    _r("GET", "/learning/stats", "learning_stats", TopArgs, learning_stats),
    _r("GET", "/learning/report", "learning_report", ReportArgs, report),
    _r("GET", "/learning/trends", "trends", OutcomesArgs, trends),
    _r("GET", "/learning/approaches", "approaches", ApproachesArgs, approaches),
    _r("POST", "/learning/executions", "record_execution", ExecutionArgs, record_execution),
    _r("POST", "/learning/executions/search", "executions", ExecutionsArgs, executions),
    _r("GET", "/failure-pattern", "failure_pattern", PatternArgs, pattern),
    _r("GET", "/failure-pattern/prevention", "prevention", PatternArgs, prevention),
    _r("POST", "/failure-pattern/plan", "plan", PlanArgs, plan),
    _r("GET", "/checks", "checks", ChecksArgs, checks),
    _r("POST", "/checks", "add_check", AddCheckArgs, add_check),
    _r("POST", "/checks/generate", "generate_check", GenerateCheckArgs, generate_check),
    _r("DELETE", "/checks", "remove_check", CheckIdArgs, remove_check),
    _r("POST", "/code", "remember_code", CodeArgs, remember_code),
    _r("POST", "/code/suggest", "suggest_code", CodeSuggestArgs, suggest_code),
    _r("GET", "/share-list", "share_list", ShareListArgs, share_list),
    _r("GET", "/knowledge/export", "export_knowledge", ExportArgs, export_knowledge),
    _r("POST", "/knowledge/import", "import_knowledge", ImportArgs, import_knowledge),
    _r("POST", "/knowledge/distill", "distill", DistillArgs, distill),
    _r("POST", "/knowledge/merge", "merge", MergeArgs, merge),
    _r("POST", "/knowledge/seed", "seed", SeedArgs, seed),
    _r("POST", "/retention/cleanup", "cleanup", CleanupArgs, cleanup),
    _r("GET", "/api-keys", "list_keys", ListKeysArgs, list_keys),
    _r("POST", "/api-keys", "create_key", CreateKeyArgs, create_key),
    _r("DELETE", "/api-keys", "revoke_key", KeyIdArgs, revoke_key),
)


# -- MCP tools of operations REST already had ------------------------------------------------------------


def update_tool(mem: Engram, who: Caller, a: UpdateToolArgs) -> JSON:
    changes = UpdateArgs.model_validate(a.model_dump(exclude={"memory_id", "agent"}, exclude_unset=True))
    return ops.update(mem, who, MemoryArgs(memory_id=a.memory_id, agent=a.agent), changes)


def list_tool(mem: Engram, who: Caller, a: ListArgs) -> JSON:
    return ops.list_memories(
        mem,
        who,
        agent=a.agent,
        kind=a.kind,
        tags=a.tags,
        limit=a.limit,
        offset=a.offset,
        since=a.since,
        until=a.until,
        user=a.user,
        session=a.session,
        as_of=a.as_of,
        metadata=a.metadata,
    )


def audit_tool(mem: Engram, who: Caller, a: AuditArgs) -> JSON:
    return ops.audit_log(mem, who, a.agent, a.limit, memory_id=a.memory_id, action=a.action)


def verify_tool(mem: Engram, who: Caller, a: VerifyArgs) -> JSON:
    return mem.audit.verification(expect=a.expect).to_dict()


_MCP_ONLY: Final[tuple[Tool, ...]] = (
    Tool("update", UpdateToolArgs, update_tool, True),
    Tool("history", MemoryArgs, ops.history, False, "Every change of a memory visible to the agent, oldest first."),
    Tool("list", ListArgs, list_tool, False),
    Tool("remember_many", BatchArgs, ops.remember_many, True),
    Tool("audit_log", AuditArgs, audit_tool, False),
    Tool("verify_audit", VerifyArgs, verify_tool, False),
)

#: The added operations as MCP tools (key management stays off MCP: a model should not mint credentials).
MORE_TOOLS: Final[tuple[Tool, ...]] = (
    *_MCP_ONLY,
    *(r.tool for r in ROUTES if not r.path.startswith("/api-keys")),
)

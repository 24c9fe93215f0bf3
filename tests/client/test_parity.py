"""Parity: every public method of the facade and its areas has a REST route and an MCP tool, or a written reason.

The public API is enumerated with ``inspect`` (a method added to the library without its route, tool or
reason fails here), and the remote and async clients are checked to offer every method with the same
parameters. The REST check sends nothing: each remote method builds its request, which must match a
route of the real app.
"""

from __future__ import annotations

import inspect
import io
from typing import Any

import pytest
from starlette.routing import Match

from engramdb import AsyncEngram, Engram, RemoteEngram
from engramdb.client import LOCAL_ONLY
from engramdb.client._transport import API_PREFIX, Call
from engramdb.interfaces.mcp import TOOLS
from engramdb.interfaces.rest import create_app
from engramdb.services.audit import AuditService
from engramdb.services.code import CodeService
from engramdb.services.episodes import EpisodeService
from engramdb.services.failures import FailureService
from engramdb.services.keys import ApiKeys
from engramdb.services.knowledge import KnowledgeService
from engramdb.services.learning import LearningService
from engramdb.services.retention import RetentionService
from engramdb.services.routing import RoutingService
from engramdb.services.sharing import SharingService

#: The facade ("") and its areas, as the embedded library defines them.
AREAS: dict[str, type] = {
    "": Engram,
    "learning": LearningService,
    "failures": FailureService,
    "episodes": EpisodeService,
    "code": CodeService,
    "sharing": SharingService,
    "knowledge": KnowledgeService,
    "audit": AuditService,
    "retention": RetentionService,
    "routing": RoutingService,
    "keys": ApiKeys,
}

#: Lifecycle and process-local methods: no route, no tool, by nature.
LIFECYCLE = {"close": "the client's own connections", "flush": "a client has no vector queue of its own"}

#: Every public method -> its MCP tool, or why it has none.
MCP: dict[str, str] = {
    "add": "tool:add_conversation",
    "remember": "tool:remember",
    "remember_many": "tool:remember_many",
    "search": "tool:search",
    "get": "tool:get",
    "update": "tool:update",
    "forget": "tool:forget",
    "history": "tool:history",
    "list": "tool:list",
    "count": "tool:count",
    "recall_key": "tool:recall_key",
    "clear": "tool:clear",
    "context": "tool:context",
    "reason": "tool:reason",
    "doctor": "tool:doctor",
    "learning.record": "tool:record_outcome",
    "learning.suggest": "tool:suggest",
    "learning.choose": "tool:choose",
    "learning.feedback": "tool:feedback",
    "learning.resolve": "tool:resolve",
    "learning.pending": "tool:pending",
    "learning.outcomes": "tool:outcomes",
    "learning.stats": "tool:learning_stats",
    "learning.report": "tool:learning_report",
    "learning.trends": "tool:trends",
    "learning.approaches": "tool:approaches",
    "learning.record_execution": "tool:record_execution",
    "learning.executions": "tool:executions",
    "failures.record": "tool:record_failure",
    "failures.solutions": "tool:solutions",
    "failures.patterns": "tool:failure_patterns",
    "failures.pattern": "tool:failure_pattern",
    "failures.preflight": "tool:preflight",
    "failures.prevention": "tool:prevention",
    "failures.plan": "tool:plan",
    "failures.checks": "tool:checks",
    "failures.add_check": "tool:add_check",
    "failures.generate_check": "tool:generate_check",
    "failures.remove_check": "tool:remove_check",
    "episodes.start": "tool:start_episode",
    "episodes.event": "tool:episode_event",
    "episodes.end": "tool:end_episode",
    "episodes.list": "tool:find_episodes",
    "episodes.analyze": "tool:analyze_episodes",
    "code.remember": "tool:remember_code",
    "code.suggest": "tool:suggest_code",
    "sharing.share": "tool:share",
    "sharing.unshare": "tool:unshare",
    "sharing.list": "tool:share_list",
    "knowledge.export_file": "tool:export_knowledge",
    "knowledge.import_file": "tool:import_knowledge",
    "knowledge.distill": "tool:distill",
    "knowledge.merge": "tool:merge",
    "knowledge.seed": "tool:seed",
    "audit.log": "tool:audit_log",
    "audit.verification": "tool:verify_audit",
    "audit.verify": "tool:verify_audit",
    "retention.cleanup": "tool:cleanup",
    "routing.route": "tool:route",
    "routing.decide": "tool:route",
    "routing.record": "tool:route_record",
    "keys.create": "no tool: a model should not mint credentials (REST, admin key: POST /api-keys)",
    "keys.list": "no tool: key management is for operators (REST, admin key: GET /api-keys)",
    "keys.revoke": "no tool: key management is for operators (REST, admin key: DELETE /api-keys)",
}

#: Arguments that make a remote method build its request without touching anything.
SAMPLE: dict[str, Any] = {
    "memory_id": "m1",
    "memory_ids": ["m1"],
    "options": ["a", "b"],
    "models": ["small", "large"],
    "messages": [{"role": "user", "content": "hi"}],
    "items": [{"content": "x"}],
    "outcome": "success",
    "path": io.BytesIO(b"{}"),
    "pattern": "p1",
    "pattern_id": "p1",
    "agent": "a",
    "from_agent": "a",
    "to_agent": "b",
    "confirm": "a",
}


def _public(cls: type) -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member))
    )


def _api() -> list[tuple[str, str, type]]:
    return [(f"{area}.{name}".lstrip("."), name, cls) for area, cls in AREAS.items() for name in _public(cls)]


def _owner(obj: Any, qual: str) -> Any:
    area = qual.rpartition(".")[0]
    return getattr(obj, area) if area else obj


API = _api()


def test_the_enumeration_sees_the_whole_api():
    names = {q for q, _, _ in API}
    assert {"remember", "search", "learning.suggest", "failures.preflight", "audit.verify", "keys.create"} <= names
    assert len(names) > 60


@pytest.mark.parametrize(("qual", "name", "cls"), API, ids=[q for q, _, _ in API])
def test_every_public_method_has_a_tool_or_a_reason(qual, name, cls):
    if qual in LOCAL_ONLY or qual in LIFECYCLE:
        return
    assert qual in MCP, f"{qual}: add an MCP tool (interfaces/_ops_more.py) or a reason to this table"
    entry = MCP[qual]
    if entry.startswith("tool:"):
        assert entry.removeprefix("tool:") in TOOLS
    else:
        assert entry.startswith("no tool: ")


@pytest.fixture(scope="module")
def routes():
    with Engram(":memory:", embedder="static") as mem:
        # The API's routes are routers included twice (under /v1, and unversioned outside the schema, the paths the
        # remote client sends); the dashboard's pages and the docs answer none of the API's paths.
        yield list(create_app(mem).routes)


@pytest.fixture(scope="module")
def planner():
    return RemoteEngram("http://127.0.0.1:9", send=lambda call: call)


@pytest.mark.parametrize(("qual", "name", "cls"), API, ids=[q for q, _, _ in API])
def test_every_public_method_has_a_rest_route_used_by_the_remote_client(qual, name, cls, routes, planner):
    if qual in LOCAL_ONLY or qual in LIFECYCLE:
        if qual in LOCAL_ONLY:
            with pytest.raises(Exception, match="not available through a server"):
                getattr(_owner(planner, qual), name)()
        return
    remote = getattr(_owner(planner, qual), name, None)
    assert remote is not None, f"the remote client lacks {qual}"
    mine = inspect.signature(getattr(cls, name)).parameters
    theirs = inspect.signature(remote).parameters
    assert [(p.name, p.kind, p.default) for p in list(mine.values())[1:]] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ], f"{qual}: the remote client's parameters differ from the library's"
    args = [
        SAMPLE.get(p.name, "x") for p in theirs.values() if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty
    ]
    kwargs = {
        p.name: SAMPLE.get(p.name, "x") for p in theirs.values() if p.kind is p.KEYWORD_ONLY and p.default is p.empty
    }
    call = remote(*args, **kwargs)
    assert isinstance(call, Call)
    scope = {"type": "http", "path": API_PREFIX + call.path, "method": call.method, "root_path": ""}
    matched = [r for r in routes if r.matches(scope)[0] is Match.FULL]
    assert matched, f"{qual}: no REST route answers {call.method} {call.path}"


@pytest.mark.parametrize(("qual", "name", "cls"), API, ids=[q for q, _, _ in API])
def test_the_async_client_offers_every_method(qual, name, cls):
    if qual in LOCAL_ONLY or qual == "close":
        return
    area = qual.rpartition(".")[0]
    owner = AsyncEngram if not area else type(getattr(AsyncEngram(":memory:", embedder="static"), area))
    method = getattr(owner, name, None)
    assert method is not None, f"AsyncEngram lacks {qual}"
    assert inspect.iscoroutinefunction(method)


def test_the_client_speaks_the_servers_versioned_api():
    from engramdb.interfaces.rest import API_PREFIX as SERVED

    assert API_PREFIX == SERVED

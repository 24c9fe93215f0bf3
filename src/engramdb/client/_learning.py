"""The remote learning areas: ``mem.learning``, ``mem.failures``, ``mem.episodes``, ``mem.code``."""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn

from engramdb.client._common import _Area, _listed, _local_only, _many, _none, _one, _str
from engramdb.client._transport import Call
from engramdb.errors import EngramError
from engramdb.models import (
    ApproachStats,
    CategoryTrend,
    CheckResult,
    DecisionRecord,
    EpisodeAnalysis,
    EpisodeRecord,
    ExecutionMatch,
    FailurePattern,
    FailureWarning,
    Hit,
    LearningReport,
    LearningStats,
    Memory,
    PatternPlan,
    PreventionCheck,
    SolutionStats,
    Suggestion,
)


class RemoteLearning(_Area):
    """``mem.learning`` through a server."""

    def record(
        self,
        context: str,
        action: str,
        outcome: str | bool | float | None,
        *,
        agent: str | None = None,
        alternatives: Iterable[str] = (),
        duration: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        category: str | None = None,
        used: Iterable[str] = (),
        tags: Iterable[str] = (),
        visibility: str = "private",
        episode: str | None = None,
        user: str | None = None,
    ) -> Memory:
        body = {
            "context": context,
            "action": action,
            "outcome": outcome,
            "agent": agent,
            "alternatives": _listed(alternatives),
            "duration": duration,
            "metadata": metadata,
            "category": category,
            "used": _listed(used),
            "tags": _listed(tags),
            "visibility": visibility,
        }
        if episode is not None:
            body["episode"] = episode
        if user is not None:
            body["user"] = user
        return self._send(Call("POST", "/outcomes", _one(Memory), body=body))

    def suggest(
        self,
        context: str,
        *,
        agent: str | None = None,
        options: Sequence[str] | None = None,
        limit: int = 5,
        user: str | None = None,
    ) -> Suggestion:
        body = {"context": context, "agent": agent, "options": options, "limit": limit, "user": user}
        return self._send(Call("POST", "/suggest", _one(Suggestion), body=body))

    def choose(
        self,
        context: str,
        options: Sequence[str],
        *,
        agent: str | None = None,
        exploration: float | None = None,
        seed: int | None = None,
        user: str | None = None,
    ) -> str:
        body = {
            "context": context,
            "options": options,
            "agent": agent,
            "exploration": exploration,
            "seed": seed,
            "user": user,
        }
        return self._send(Call("POST", "/choose", _str("chosen"), body=body))

    def feedback(
        self,
        memory_ids: Iterable[str] | None = None,
        outcome: str | bool | float | None = None,
        *,
        agent: str | None = None,
        context: str | None = None,
        user: str | None = None,
    ) -> builtins.list[Memory]:
        ids = None if memory_ids is None else [memory_ids] if isinstance(memory_ids, str) else _listed(memory_ids)
        body = {"memory_ids": ids, "outcome": outcome, "agent": agent, "context": context, "user": user}
        return self._send(Call("POST", "/learning/feedback", _many(Memory, "memories"), body=body))

    def resolve(
        self, decision_id: str, outcome: str | bool | float, *, agent: str | None = None, user: str | None = None
    ) -> Memory:
        body = {"decision_id": decision_id, "outcome": outcome, "agent": agent, "user": user}
        return self._send(Call("POST", "/learning/resolve", _one(Memory), body=body))

    def pending(
        self, *, agent: str | None = None, episode: str | None = None, user: str | None = None
    ) -> builtins.list[Memory]:
        query = {"agent": agent, "episode": episode, "user": user}
        return self._send(Call("GET", "/learning/pending", _many(Memory, "memories"), query=query))

    def outcomes(
        self,
        *,
        agent: str | None = None,
        since: datetime | None = None,
        category: str | None = None,
        user: str | None = None,
    ) -> builtins.list[DecisionRecord]:
        query = {"agent": agent, "since": since, "category": category, "user": user}
        return self._send(Call("GET", "/learning/outcomes", _many(DecisionRecord, "outcomes"), query=query))

    def stats(self, *, agent: str | None = None, top: int = 10, user: str | None = None) -> LearningStats:
        query = {"agent": agent, "top": top, "user": user}
        return self._send(Call("GET", "/learning/stats", _one(LearningStats), query=query))

    def report(
        self,
        *,
        agent: str | None = None,
        since: datetime | None = None,
        chart: str | os.PathLike[str] | None = None,
        success_target: float = 0.7,
        slow_seconds: float = 300.0,
        user: str | None = None,
    ) -> LearningReport:
        if chart is not None:
            raise EngramError("learning.report(chart=...) draws a file where the store is: not through a server")
        query = {
            "agent": agent,
            "since": since,
            "success_target": success_target,
            "slow_seconds": slow_seconds,
            "user": user,
        }
        return self._send(Call("GET", "/learning/report", _one(LearningReport), query=query))

    def trends(
        self,
        *,
        agent: str | None = None,
        since: datetime | None = None,
        category: str | None = None,
        user: str | None = None,
    ) -> builtins.list[CategoryTrend]:
        query = {"agent": agent, "since": since, "category": category, "user": user}
        return self._send(Call("GET", "/learning/trends", _many(CategoryTrend, "trends"), query=query))

    def approaches(
        self,
        *,
        agent: str | None = None,
        success_rate: str | None = None,
        min_attempts: int = 2,
        since: datetime | None = None,
        user: str | None = None,
    ) -> builtins.list[ApproachStats]:
        if success_rate is not None and not isinstance(success_rate, str):
            raise EngramError("learning.approaches through a server takes success_rate as text, such as '>80%'")
        query = {
            "agent": agent,
            "success_rate": success_rate,
            "min_attempts": min_attempts,
            "since": since,
            "user": user,
        }
        return self._send(Call("GET", "/learning/approaches", _many(ApproachStats, "approaches"), query=query))

    def record_execution(
        self,
        task: str,
        *,
        approach: str,
        outcome: str | bool | float,
        agent: str | None = None,
        category: str | None = None,
        task_type: str | None = None,
        complexity: str | None = None,
        success_factors: Iterable[str] = (),
        tools: Iterable[str] = (),
        duration: float | None = None,
        calls: int | None = None,
        alternatives: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        used: Iterable[str] = (),
        user: str | None = None,
    ) -> Memory:
        body = {
            "task": task,
            "approach": approach,
            "outcome": outcome,
            "agent": agent,
            "category": category,
            "task_type": task_type,
            "complexity": complexity,
            "success_factors": _listed(success_factors),
            "tools": _listed(tools),
            "duration": duration,
            "calls": calls,
            "alternatives": _listed(alternatives),
            "metadata": metadata,
            "used": _listed(used),
            "user": user,
        }
        return self._send(Call("POST", "/learning/executions", _one(Memory), body=body))

    def executions(
        self,
        task: str,
        *,
        agent: str | None = None,
        successful: bool | None = True,
        category: str | None = None,
        limit: int = 5,
        user: str | None = None,
    ) -> builtins.list[ExecutionMatch]:
        body = {
            "task": task,
            "agent": agent,
            "successful": successful,
            "category": category,
            "limit": limit,
            "user": user,
        }
        return self._send(Call("POST", "/learning/executions/search", _many(ExecutionMatch, "executions"), body=body))

    def adaptive(self, *args: Any, **kwargs: Any) -> NoReturn:
        _local_only("learning.adaptive")


class RemoteFailures(_Area):
    """``mem.failures`` through a server."""

    def record(
        self,
        error: BaseException | str,
        *,
        agent: str | None = None,
        context: str = "",
        solution: str | None = None,
        failed_solutions: Iterable[str] = (),
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        visibility: str = "private",
    ) -> Memory:
        body = {
            "error": _error_text(error),
            "agent": agent,
            "context": context,
            "solution": solution,
            "failed_solutions": _listed(failed_solutions),
            "tags": _listed(tags),
            "metadata": metadata,
            "visibility": visibility,
        }
        return self._send(Call("POST", "/failures", _one(Memory), body=body))

    def solutions(
        self, error: BaseException | str, *, agent: str | None = None, limit: int = 3
    ) -> builtins.list[SolutionStats]:
        body = {"error": _error_text(error), "agent": agent, "limit": limit}
        return self._send(Call("POST", "/solutions", _many(SolutionStats, "solutions"), body=body))

    def patterns(
        self, *, agent: str | None = None, recurring: bool = False, since: datetime | None = None
    ) -> builtins.list[FailurePattern]:
        if since is not None:
            raise EngramError("failures.patterns(since=...) is not available through a server")
        query = {"agent": agent, "recurring": recurring}
        return self._send(Call("GET", "/failure-patterns", _many(FailurePattern, "patterns"), query=query))

    def preflight(
        self, action: str, *, agent: str | None = None, limit: int = 3, min_similarity: float = 0.35
    ) -> builtins.list[FailureWarning]:
        if min_similarity != 0.35:
            raise EngramError("failures.preflight(min_similarity=...) is not available through a server")
        body = {"action": action, "agent": agent, "limit": limit}
        return self._send(Call("POST", "/preflight", _many(FailureWarning, "warnings"), body=body))

    def pattern(self, pattern_id: str, *, agent: str | None = None) -> FailurePattern:
        query = {"pattern_id": pattern_id, "agent": agent}
        return self._send(Call("GET", "/failure-pattern", _one(FailurePattern), query=query))

    def prevention(self, pattern_id: str, *, agent: str | None = None) -> builtins.list[str]:
        query = {"pattern_id": pattern_id, "agent": agent}
        return self._send(
            Call("GET", "/failure-pattern/prevention", lambda data: [str(p) for p in data["prevention"]], query=query)
        )

    def plan(self, pattern_id: str, task: str, *, agent: str | None = None) -> PatternPlan:
        body = {"pattern_id": pattern_id, "task": task, "agent": agent}
        return self._send(Call("POST", "/failure-pattern/plan", _one(PatternPlan), body=body))

    def checks(
        self, *, agent: str | None = None, stage: str | None = None, pattern: str | None = None
    ) -> builtins.list[PreventionCheck]:
        query = {"agent": agent, "stage": stage, "pattern": pattern}
        return self._send(Call("GET", "/checks", _many(PreventionCheck, "checks"), query=query))

    def add_check(
        self,
        pattern: str | None,
        check_text: str | None = None,
        *,
        stage: str = "development",
        agent: str | None = None,
        files: Iterable[str] = (),
        env: Iterable[str] = (),
        commands: Iterable[str] = (),
        modules: Iterable[str] = (),
    ) -> PreventionCheck:
        body = {
            "pattern": pattern,
            "check_text": check_text,
            "stage": stage,
            "agent": agent,
            "files": _listed(files),
            "env": _listed(env),
            "commands": _listed(commands),
            "modules": _listed(modules),
        }
        return self._send(Call("POST", "/checks", _one(PreventionCheck), body=body))

    def generate_check(self, pattern: str, *, stage: str = "development", agent: str | None = None) -> PreventionCheck:
        body = {"pattern": pattern, "stage": stage, "agent": agent}
        return self._send(Call("POST", "/checks/generate", _one(PreventionCheck), body=body))

    def remove_check(self, check_id: str, *, agent: str | None = None) -> None:
        return self._send(Call("DELETE", "/checks", _none, body={"check_id": check_id, "agent": agent}))

    def run_checks(self, *args: Any, **kwargs: Any) -> builtins.list[CheckResult]:
        _local_only("failures.run_checks")


def _error_text(error: BaseException | str) -> Any:
    """An exception as its type and message; anything else as it is (text, or a value for the server to refuse)."""
    return f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error


class RemoteEpisodes(_Area):
    """``mem.episodes`` through a server (``begin`` is in-process only: use start/event/end)."""

    def start(
        self,
        task: str,
        *,
        agent: str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> str:
        body = {"task": task, "agent": agent, "tags": _listed(tags), "metadata": metadata, "context": context}
        return self._send(Call("POST", "/episodes/start", _str("episode_id"), body=body))

    def event(
        self, episode_id: str, kind: str, data: Any = None, *, role: str | None = None, agent: str | None = None
    ) -> None:
        body = {"episode_id": episode_id, "kind": kind, "data": data, "role": role, "agent": agent}
        return self._send(Call("POST", "/episodes/event", _none, body=body))

    def end(
        self,
        episode_id: str,
        outcome: str | bool = "success",
        *,
        agent: str | None = None,
        metrics: Mapping[str, Any] | None = None,
        error: str | None = None,
        discount: float = 0.95,
        record_failures: bool = True,
    ) -> EpisodeRecord:
        if discount != 0.95 or record_failures is not True:
            raise EngramError("episodes.end(discount=..., record_failures=...) is not available through a server")
        label = outcome if isinstance(outcome, str) else "success" if outcome else "failure"
        body = {"episode_id": episode_id, "outcome": label, "agent": agent, "metrics": metrics, "error": error}
        return self._send(Call("POST", "/episodes/end", _one(EpisodeRecord), body=body))

    def list(
        self, task: str, *, agent: str | None = None, outcome: str | None = None, limit: int = 5
    ) -> builtins.list[EpisodeRecord]:
        body = {"task": task, "agent": agent, "outcome": outcome, "limit": limit}
        return self._send(Call("POST", "/episodes/search", _many(EpisodeRecord, "episodes"), body=body))

    def analyze(self, *, agent: str | None = None, task: str | None = None, limit: int = 500) -> EpisodeAnalysis:
        body = {"agent": agent, "task": task, "limit": limit}
        return self._send(Call("POST", "/episodes/analyze", _one(EpisodeAnalysis), body=body))

    def begin(self, *args: Any, **kwargs: Any) -> NoReturn:
        _local_only("episodes.begin")


class RemoteCode(_Area):
    """``mem.code`` through a server."""

    def remember(
        self,
        source: str,
        *,
        agent: str | None = None,
        filename: str | None = None,
        language: str | None = None,
        tags: Iterable[str] = (),
        min_lines: int = 3,
        visibility: str = "private",
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        context: str | None = None,
        success_metrics: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        body = {
            "source": source,
            "agent": agent,
            "filename": filename,
            "language": language,
            "tags": _listed(tags),
            "min_lines": min_lines,
            "visibility": visibility,
            "metadata": metadata,
            "name": name,
            "context": context,
            "success_metrics": success_metrics,
        }
        return self._send(Call("POST", "/code", _many(Memory, "memories"), body=body))

    def suggest(
        self,
        task: str,
        *,
        agent: str | None = None,
        pattern_type: str | None = None,
        language: str | None = None,
        limit: int = 5,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Hit]:
        body = {
            "task": task,
            "agent": agent,
            "pattern_type": pattern_type,
            "language": language,
            "limit": limit,
            "metadata": metadata,
        }
        return self._send(Call("POST", "/code/suggest", _many(Hit, "hits"), body=body))

"""Seed 000's executions on ``mem.learning``: record a task run with its facts, find similar past runs.

:class:`Executions` is a collaborator of :class:`~engramdb.services.learning.LearningService`, which
exposes it as ``record_execution`` and ``executions``: an execution is an outcome record with
:class:`~engramdb.models.ExecutionInfo` in its metadata, so the service hands in how it writes an outcome
record and how it finds the records of similar contexts.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.learning import _args
from engramdb.learning.complexity import assess_complexity
from engramdb.learning.factors import infer_success_factors, result_tools
from engramdb.models import DecisionRecord, ExecutionInfo, ExecutionMatch, Memory, Visibility

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.learning.recommend import Neighbour

__all__ = ["Executions", "Neighbours", "Outcomes", "RecordDecision"]

#: Cosine at which a past task counts as the same kind of task for the complexity assessment.
_SIMILAR_TASK: Final = 0.6


class RecordDecision(Protocol):
    """How the learning service validates and stores one outcome record (its ``_record_decision``)."""

    def __call__(
        self,
        context: str,
        action: str,
        outcome: str | bool | float | None,
        *,
        what: str,
        agent: str,
        used: Iterable[str],
        alternatives: Iterable[str],
        duration: float | None,
        category: str | None,
        metadata: Mapping[str, Any] | None,
        tags: Callable[[Mapping[str, Any]], list[str]],
        execution: ExecutionInfo | None = None,
        visibility: Visibility = "private",
        episode: str | None = None,
        user: str | None = None,
    ) -> Memory: ...


class Outcomes(Protocol):
    """Every outcome record an agent can see (the learning service's ``outcomes``)."""

    def __call__(self, *, agent: str | None = None, user: str | None = None) -> list[DecisionRecord]: ...


class Neighbours(Protocol):
    """The outcome records of contexts like a task (the learning service's ``_neighbours``)."""

    def __call__(self, context: str, agent: str, user: str | None = None) -> list[Neighbour]: ...


class Executions:
    """Record task runs with their facts and find similar past runs (``mem.learning``'s executions)."""

    def __init__(
        self,
        settings: Settings,
        *,
        record: RecordDecision,
        neighbours: Neighbours,
        outcomes: Outcomes,
    ) -> None:
        self._settings = settings
        self._record_decision = record
        #: The outcome records of contexts like a task (text, agent, user).
        self._neighbours = neighbours
        self._outcomes = outcomes

    def record(
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
        """See :meth:`~engramdb.services.learning.LearningService.record_execution`."""
        agent = check.agent_or_default(agent, self._settings)
        if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int) or calls < 0):
            raise ValidationError(f"calls must be a non-negative integer, not {check.shown(calls)}")
        given = _args.optional_label(complexity, "complexity")
        # Seed 000's task and result facts may come in ``metadata``: dependencies and effort weigh on the
        # complexity, files created, API calls, tools used... are the success factors when none are given.
        facts: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
        deps = facts.get("dependencies")
        effort = facts.get("effort")
        factors = _args.label_list(success_factors, "success_factors")
        used_tools = _args.label_list(tools, "tools")
        label = category.strip() if isinstance(category, str) else None
        info = ExecutionInfo(
            task_type=_args.optional_label(task_type, "task_type"),
            complexity=given
            if given is not None
            else self._assess(
                task,
                agent,
                check.scope(user, what="user"),
                category=label,
                dependencies=len(deps) if isinstance(deps, list | tuple) else 0,
                effort=float(effort) if isinstance(effort, int | float) and not isinstance(effort, bool) else None,
            ),
            complexity_assessed=given is None,
            success_factors=factors
            or _args.label_list(infer_success_factors(facts, category=label, calls=calls), "success_factors"),
            tools=used_tools or _args.label_list(result_tools(facts), "tools"),
            calls=calls,
        )
        return self._record_decision(
            task,
            approach,
            outcome,
            what="task",
            agent=agent,
            used=used,
            alternatives=alternatives,
            duration=duration,
            category=category,
            metadata=metadata,
            tags=lambda meta: (
                ["execution", f"action:{meta['action']}"]
                + ([f"category:{meta['category']}"] if "category" in meta else [])
            ),
            execution=info,
            user=user,
        )

    def _assess(
        self,
        task: str,
        agent: str,
        user: str | None,
        *,
        category: str | None = None,
        dependencies: int = 0,
        effort: float | None = None,
    ) -> str:
        """The complexity of ``task`` by :func:`~engramdb.learning.complexity.assess_complexity`."""
        if not isinstance(task, str) or not task.strip():
            return "low"  # the record itself rejects it
        agent = check.agent_name(agent)
        similar = [n.record for n in self._neighbours(task, agent, user) if n.cosine >= _SIMILAR_TASK]
        durations = [r.duration for r in self._outcomes(agent=agent, user=user) if r.duration is not None]
        return assess_complexity(
            task,
            similar_success=[r.success for r in similar],
            similar_durations=[r.duration for r in similar if r.duration is not None],
            typical_duration=statistics.median(durations) if durations else None,
            category=category,
            dependencies=dependencies,
            effort=effort,
        )

    def find(
        self,
        task: str,
        *,
        agent: str | None = None,
        successful: bool | None = True,
        category: str | None = None,
        limit: int = 5,
        user: str | None = None,
    ) -> list[ExecutionMatch]:
        """See :meth:`~engramdb.services.learning.LearningService.executions`."""
        task = check.content(task, what="task")
        agent = check.agent_or_default(agent, self._settings)
        user = check.scope(user, what="user")
        limit = check.limit(limit)
        matches = [
            ExecutionMatch(record=n.record, similarity=n.cosine)
            for n in self._neighbours(task, agent, user)
            if n.record.execution is not None
            and (successful is None or (n.record.success >= 0.5) == successful)
            and (category is None or n.record.category == category)
        ]
        matches.sort(key=lambda m: (-m.similarity, -m.record.at.timestamp(), m.record.id))
        return matches[:limit]

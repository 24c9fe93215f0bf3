"""Seed 000's executions on ``mem.learning``: record a task run with its facts, find similar past runs.

A part of :class:`~engramdb.learning.service.LearningService` (its base class), kept apart
so that neither module outgrows the size limit: an execution is an outcome record with
:class:`~engramdb.models.ExecutionInfo` in its metadata, written by the service's
``_record_decision`` and found by its ``_neighbours``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.learning import _args
from engramdb.learning.complexity import assess_complexity
from engramdb.learning.factors import infer_success_factors, result_tools
from engramdb.models import DecisionRecord, ExecutionInfo, ExecutionMatch, Memory, Visibility

if TYPE_CHECKING:
    from datetime import datetime

    from engramdb.config import Settings
    from engramdb.learning.recommend import Neighbour

__all__ = ["ExecutionMethods"]

#: Cosine at which a past task counts as the same kind of task for the complexity assessment.
_SIMILAR_TASK: Final = 0.6


class ExecutionMethods:
    """``record_execution``, ``executions`` and the complexity assessment (see the module docstring)."""

    _settings: Settings

    if TYPE_CHECKING:

        def _neighbours(self, context: str, agent: str, *, wide: bool = False) -> list[Neighbour]: ...

        def _record_decision(
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
        ) -> Memory: ...

        def outcomes(
            self, *, agent: str | None = None, since: datetime | None = None, category: str | None = None
        ) -> list[DecisionRecord]: ...

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
    ) -> Memory:
        """Record a task run: the approach taken, how it went, and what it involved.

        An execution is an outcome record (a ``decision`` memory whose context is the
        task) with the execution's facts in its metadata, so :meth:`suggest` and
        :meth:`choose` learn from executions too. ``calls`` counts API or tool calls.
        Without ``complexity`` it is assessed from the task's text and the agent's similar
        past runs (the rule is in :mod:`engramdb.learning.complexity`).
        """
        agent = self._settings.agent if agent is None else agent
        if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int) or calls < 0):
            raise ValidationError(f"calls must be a non-negative integer, not {calls!r}")
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
        )

    def _assess(
        self,
        task: str,
        agent: str,
        *,
        category: str | None = None,
        dependencies: int = 0,
        effort: float | None = None,
    ) -> str:
        """The complexity of ``task`` by :func:`~engramdb.learning.complexity.assess_complexity`."""
        if not isinstance(task, str) or not task.strip():
            return "low"  # the record itself rejects it
        agent = check.agent_name(agent)
        similar = [n.record for n in self._neighbours(task, agent) if n.cosine >= _SIMILAR_TASK]
        durations = [r.duration for r in self.outcomes(agent=agent) if r.duration is not None]
        return assess_complexity(
            task,
            similar_success=[r.success for r in similar],
            similar_durations=[r.duration for r in similar if r.duration is not None],
            typical_duration=statistics.median(durations) if durations else None,
            category=category,
            dependencies=dependencies,
            effort=effort,
        )

    def executions(
        self,
        task: str,
        *,
        agent: str | None = None,
        successful: bool | None = True,
        category: str | None = None,
        limit: int = 5,
    ) -> list[ExecutionMatch]:
        """Past executions (see :meth:`record_execution`) most similar to ``task``, most similar first.

        ``successful=True`` (the default) keeps those that succeeded (success weight at
        least 0.5), ``False`` those that did not, ``None`` all. ``category`` restricts
        to one category.
        """
        task = check.content(task, what="task")
        agent = check.agent_name(self._settings.agent if agent is None else agent)
        limit = check.limit(limit)
        matches = [
            ExecutionMatch(record=n.record, similarity=n.cosine)
            for n in self._neighbours(task, agent)
            if n.record.execution is not None
            and (successful is None or (n.record.success >= 0.5) == successful)
            and (category is None or n.record.category == category)
        ]
        matches.sort(key=lambda m: (-m.similarity, -m.record.at.timestamp(), m.record.id))
        return matches[:limit]

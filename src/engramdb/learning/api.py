"""The learning part of the :class:`~engramdb.Engram` facade (mixed into it).

Thin on purpose: each method validates its arguments, fetches memories through
the store (agent scope is a hard filter there, and memories shared with the
agent count), and hands values to the pure modules next to it:
:mod:`~engramdb.learning.recommend` (suggest, choose),
:mod:`~engramdb.learning.analytics` and :mod:`~engramdb.learning.report`
(executions, trends, patterns, the report).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from engramdb import _validate as check
from engramdb._host import FacadeHost
from engramdb._util import utcnow
from engramdb.errors import NotFound, ValidationError
from engramdb.learning import recommend
from engramdb.learning.analytics import (
    CategoryTrend,
    ExecutionMatch,
    Pattern,
    RateFilter,
    category_trends,
    parse_rate_filter,
)
from engramdb.learning.analytics import patterns as find_patterns
from engramdb.learning.recommend import Neighbour, RecommendConfig
from engramdb.learning.records import (
    DecisionRecord,
    ExecutionInfo,
    decision_metadata,
    parse_decision,
)
from engramdb.learning.report import LearningReport, build_report, write_chart
from engramdb.learning.stats import success_weight
from engramdb.models import FailurePattern, Memory, Suggestion
from engramdb.storage.base import Filter

__all__ = ["LearningAPI"]

_DECISION: tuple[str, ...] = ("decision",)
#: Page size when reading all of an agent's outcome records (analytics).
_PAGE = 5000


class LearningAPI(FacadeHost):
    """Outcome learning methods of :class:`~engramdb.Engram`; relies on its store and embedder."""

    #: Tunables of suggest/choose (similarity floor, recency, thin-evidence rule); replace per instance to tune.
    recommend_config: RecommendConfig = RecommendConfig()
    # Feedback reads then writes a memory's counters; one lock keeps threads of this process from losing updates.
    _feedback_lock: ClassVar[threading.Lock] = threading.Lock()

    # -- outcomes --------------------------------------------------------------------------------------------
    def record(
        self,
        context: str,
        action: str,
        outcome: str | bool | float,
        *,
        agent: str = "default",
        alternatives: Iterable[str] = (),
        duration: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        category: str | None = None,
        used: Iterable[str] = (),
        tags: Iterable[str] = (),
        visibility: str = "private",
    ) -> Memory:
        """Record that doing ``action`` in ``context`` turned out as ``outcome``; returns the decision memory.

        ``outcome`` is "success", "failure", "partial", a boolean, or a reward in [-1, 1].
        ``alternatives`` are the other actions that were possible (they become options of
        :meth:`suggest`). ``used`` names memories the agent relied on for this task: the
        outcome is fed back to them (see :meth:`feedback`). Bad input raises
        ValidationError (NotFound for an unknown ``used`` id) and records nothing.
        """
        return self._record_decision(
            context,
            action,
            outcome,
            what="context",
            agent=agent,
            used=used,
            alternatives=alternatives,
            duration=duration,
            category=category,
            metadata=metadata,
            # The action as a tag too: ``list(tags=["action:retry"])`` finds every time it was tried.
            tags=lambda meta: [*check.tags(tags if isinstance(tags, str) else list(tags)), f"action:{meta['action']}"],
            visibility=visibility,
        )

    def _record_decision(
        self,
        context: str,
        action: str,
        outcome: str | bool | float,
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
        visibility: str = "private",
    ) -> Memory:
        """Validate and store one outcome record (a ``decision`` memory), then feed the outcome back to ``used``.

        ``what`` names the context in error messages; ``tags`` gives the memory's tags
        from its validated metadata.
        """
        context = check.content(context, what=what)
        agent = check.agent_name(agent)
        used_ids = self._visible_ids(used, agent)
        _, meta = decision_metadata(
            action,
            outcome,
            alternatives=alternatives,
            duration=duration,
            category=category,
            used=used_ids,
            execution=execution,
            extra=check.metadata(metadata),
        )
        memory = self.remember(
            context, agent=agent, kind="decision", tags=tags(meta), metadata=meta, visibility=visibility
        )
        if used_ids:
            self.feedback(used_ids, outcome, agent=agent)
        return memory

    def feedback(
        self, memory_ids: Iterable[str], outcome: str | bool | float, *, agent: str = "default"
    ) -> list[Memory]:
        """Tell the memories an agent used for a task how the task went; returns them updated.

        Each memory's ``successes`` grows by the outcome's success weight and its
        ``attempts`` by one (so ``success_rate``, which search ranking uses, follows),
        and its ``confidence`` moves towards the outcome like a Beta posterior mean with
        the old confidence as a prior worth two outcomes. The memories must be visible
        to ``agent`` (its own or shared with it); the change is in their history as
        ``feedback`` by that agent. Unknown ids raise NotFound and change nothing.
        """
        agent = check.agent_name(agent)
        weight = success_weight(outcome)
        ids = self._visible_ids(memory_ids, agent)
        if not ids:
            raise ValidationError("no memory ids given")
        now = utcnow()
        out = []
        # Read-modify-write: inside one write transaction, so concurrent writers (threads here,
        # other processes through the store's write lock) never lose an update.
        with self._feedback_lock, self.store.atomic():
            current = self.store.get_many(ids, Filter(agent=agent))
            for memory_id in ids:
                m = current[memory_id]
                changes = {
                    "successes": m.successes + weight,
                    "attempts": m.attempts + 1.0,
                    # Running Beta mean: prior mass 2 at the initial confidence, one unit per outcome.
                    "confidence": min(1.0, max(0.0, m.confidence + (weight - m.confidence) / (m.attempts + 3.0))),
                }
                out.append(
                    self.store.update(
                        memory_id,
                        changes,
                        vector=None,
                        model_id=self.embedder.model_id,
                        actor=agent,
                        at=now,
                        action="feedback",
                    )
                )
        return out

    def _visible_ids(self, memory_ids: Iterable[str], agent: str) -> list[str]:
        if isinstance(memory_ids, str):
            memory_ids = [memory_ids]
        ids = list(dict.fromkeys(memory_ids))
        for i in ids:
            if not isinstance(i, str) or not i:
                raise ValidationError(f"memory ids must be non-empty strings, not {i!r}")
        if not ids:
            return []
        found = self.store.get_many(ids, Filter(agent=agent))
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no memory {missing[0]!r} visible to agent {agent!r}")
        return ids

    # -- recommendations -------------------------------------------------------------------------------------
    def _neighbours(self, context: str, agent: str) -> list[Neighbour]:
        """Outcome records of ``agent`` (and shared with it) whose context resembles ``context``."""
        cfg = self.recommend_config
        flt = Filter(agent=agent, kinds=_DECISION)
        query = self.embedder.embed([context])[0]
        cands = self.store.vector_candidates(query, flt, limit=cfg.candidates)
        # Below the floor a context contributes nothing, unless it is the same text (cosine ~1 anyway).
        cands = [c for c in cands if c.score > cfg.similarity_floor]
        memories = self.store.get_many([c.id for c in cands], flt)
        out = []
        for c in cands:
            m = memories.get(c.id)
            rec = parse_decision(m) if m is not None else None
            if rec is not None:
                out.append(Neighbour(rec, c.score))
        return out

    def suggest(
        self,
        context: str,
        *,
        agent: str = "default",
        options: Sequence[str] | None = None,
        limit: int = 5,
    ) -> Suggestion:
        """What to do in ``context``, from the outcomes of similar contexts.

        ``options`` limits (and completes: unseen ones get the prior) the actions
        considered; without it, every action recorded nearby and its alternatives.
        ``recommended`` is None when the evidence is too thin (see
        :mod:`engramdb.learning.recommend`); ``confidence`` is the posterior
        probability that the top option is the best.
        """
        context = check.content(context, what="context")
        agent = check.agent_name(agent)
        opts = _options(options) if options is not None else None
        limit = check.limit(limit)
        return recommend.suggest(
            context,
            self._neighbours(context, agent),
            now=utcnow(),
            config=self.recommend_config,
            seed=self.settings.learning_seed,
            options=opts,
            limit=limit,
        )

    def choose(
        self,
        context: str,
        options: Sequence[str],
        *,
        agent: str = "default",
        exploration: float | None = None,
        seed: int | None = None,
    ) -> str:
        """Pick one of ``options`` for ``context``, balancing exploring and exploiting (Thompson sampling).

        ``exploration`` (default: the ``exploration`` setting, 1.0) scales how far each
        draw may stray from its posterior mean: 0 always takes the best estimate.
        Deterministic: the same data, context, options and ``seed`` (default: the
        ``learning_seed`` setting) give the same choice; each new outcome gives new draws.
        """
        context = check.content(context, what="context")
        agent = check.agent_name(agent)
        opts = _options(options)
        exp = self.settings.exploration if exploration is None else exploration
        if isinstance(exp, bool) or not isinstance(exp, int | float) or not 0.0 <= exp <= 1.0:
            raise ValidationError(f"exploration must be a number within [0, 1], not {exploration!r}")
        chosen_seed = self.settings.learning_seed if seed is None else seed
        if isinstance(chosen_seed, bool) or not isinstance(chosen_seed, int):
            raise ValidationError(f"seed must be an integer, not {seed!r}")
        if len(opts) == 1:
            return opts[0]
        return recommend.choose(
            context,
            opts,
            self._neighbours(context, agent),
            now=utcnow(),
            config=self.recommend_config,
            seed=chosen_seed,
            exploration=float(exp),
        )

    # -- executions and analytics ----------------------------------------------------------------------------
    def record_execution(
        self,
        task: str,
        *,
        approach: str,
        outcome: str | bool | float,
        agent: str = "default",
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
        """
        if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int) or calls < 0):
            raise ValidationError(f"calls must be a non-negative integer, not {calls!r}")
        info = ExecutionInfo(
            task_type=_optional_label(task_type, "task_type"),
            complexity=_optional_label(complexity, "complexity"),
            success_factors=_label_list(success_factors, "success_factors"),
            tools=_label_list(tools, "tools"),
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

    def similar_executions(
        self,
        task: str,
        *,
        agent: str = "default",
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
        agent = check.agent_name(agent)
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

    def outcomes(
        self, *, agent: str = "default", since: datetime | None = None, category: str | None = None
    ) -> list[DecisionRecord]:
        """Every outcome record ``agent`` can see (its own and shared with it), oldest first."""
        agent = check.agent_name(agent)
        flt = Filter(agent=agent, kinds=_DECISION)
        out: list[DecisionRecord] = []
        for page in self._pages(flt, size=_PAGE):
            for m in page:
                rec = parse_decision(m)
                if rec is None or (since is not None and rec.at < since):
                    continue
                if category is not None and (rec.category or "general") != category:
                    continue
                out.append(rec)
            # Newest first: once a page ends before ``since``, older pages cannot match.
            if since is not None and page and page[-1].created_at < since:
                break
        out.sort(key=lambda r: (r.at, r.id))
        return out

    def trends(
        self, *, agent: str = "default", since: datetime | None = None, category: str | None = None
    ) -> list[CategoryTrend]:
        """Performance per category: success with interval, duration, best approaches, and a tested trend."""
        return category_trends(self.outcomes(agent=agent, since=_since(since), category=category))

    def outcome_patterns(
        self,
        *,
        agent: str = "default",
        success_rate: str | RateFilter | None = None,
        min_attempts: int = 2,
        since: datetime | None = None,
    ) -> list[Pattern]:
        """Recurring (situation, action) pairs with their success, e.g. ``success_rate=">80%"``."""
        rate = parse_rate_filter(success_rate) if isinstance(success_rate, str) else success_rate
        if isinstance(min_attempts, bool) or not isinstance(min_attempts, int) or min_attempts < 1:
            raise ValidationError(f"min_attempts must be a positive integer, not {min_attempts!r}")
        return find_patterns(self.outcomes(agent=agent, since=_since(since)), rate=rate, min_attempts=min_attempts)

    def report(
        self,
        *,
        agent: str = "default",
        since: datetime | None = None,
        chart: str | os.PathLike[str] | None = None,
    ) -> LearningReport:
        """A report of ``agent``'s outcomes (``.to_json()``, ``.to_markdown()``); with ``chart``, also a PNG there.

        Recurring failure patterns are included when the failures part of the engine is present.
        """
        agent = check.agent_name(agent)
        since = _since(since)
        failures = self._recurring_failures(agent, since)
        report = build_report(
            self.outcomes(agent=agent, since=since), agent=agent, now=utcnow(), since=since, failure_patterns=failures
        )
        if chart is not None:
            written = write_chart(report, chart)
            report = report.with_chart(str(written))
        return report

    def _recurring_failures(self, agent: str, since: datetime | None) -> list[FailurePattern]:
        # The failures part of the engine is another mixin of the facade; a learning-only build has none.
        lookup = getattr(self, "failure_patterns", None)
        if lookup is None:
            return []
        found = lookup(agent=agent, recurring=True, since=since)
        return [p for p in found if isinstance(p, FailurePattern)]


def _options(options: Sequence[str] | None) -> list[str]:
    if options is None or isinstance(options, str):
        raise ValidationError("options must be a list of action names")
    out = list(dict.fromkeys(_label(o, "option") for o in options))
    if not out:
        raise ValidationError("options must not be empty")
    return out


def _label(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, not {value!r}")
    return value.strip()


def _optional_label(value: object, what: str) -> str | None:
    return None if value is None else _label(value, what)


def _label_list(values: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [values]
    return tuple(dict.fromkeys(_label(v, f"each of {what}") for v in values))


def _since(since: datetime | None) -> datetime | None:
    if since is None:
        return None
    if not isinstance(since, datetime):
        raise ValidationError(f"since must be a datetime, not {type(since).__name__}")
    if since.tzinfo is None:
        raise ValidationError("since must be timezone-aware (e.g. datetime.now(UTC) - timedelta(days=7))")
    return since

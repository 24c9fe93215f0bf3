"""Learning from outcomes: ``mem.learning``.

Thin on purpose: each method validates its arguments, reads memories through the store's roles (agent scope is
a hard filter there, and memories shared with the agent count), writes through the write pipeline, and hands
values to the pure modules next to it: :mod:`~engramdb.learning.recommend` (suggest, choose),
:mod:`~engramdb.learning.analytics` and :mod:`~engramdb.learning.report` (executions, trends, approaches, the
report), :mod:`~engramdb.learning.adaptive`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb._validate import PAGE_SIZE
from engramdb.errors import NotFound, ValidationError
from engramdb.learning import _args, recommend, records
from engramdb.learning.adaptive import Adaptive, RecoveryHook
from engramdb.learning.analytics import GENERAL, RateFilter, category_trends, learning_stats, parse_rate_filter
from engramdb.learning.analytics import approaches as find_approaches
from engramdb.learning.executions import Executions
from engramdb.learning.factors import common_factors
from engramdb.learning.recommend import Neighbour, RecommendConfig
from engramdb.learning.records import (
    EPISODE_TAG,
    PENDING,
    decision_metadata,
    is_pending_outcome,
    parse_decision,
    resolved_metadata,
)
from engramdb.learning.report import build_report, write_chart
from engramdb.models import (
    KINDS,
    ApproachStats,
    CategoryTrend,
    DecisionRecord,
    ExecutionInfo,
    ExecutionMatch,
    LearningReport,
    LearningStats,
    Memory,
    Suggestion,
    Visibility,
)
from engramdb.services._base import Service, ServiceContext
from engramdb.services.feedback import Feedback, user_filter

if TYPE_CHECKING:
    from engramdb.services.failures import FailureService

__all__ = ["LearningService"]

_DECISION: tuple[str, ...] = ("decision",)
#: Cosine similarity at which a past run counts as a run of the same task (complexity from history).
_SIMILAR_TASK: Final = 0.6


class LearningService(Service):
    """Outcome learning: record outcomes, get suggestions and choices, feedback, executions, analytics."""

    def __init__(
        self,
        ctx: ServiceContext,
        *,
        failures: FailureService,
        recommend: RecommendConfig | None = None,
        rate_text: Callable[[str], float] | None = None,
    ) -> None:
        super().__init__(ctx)
        self._failures = failures
        self._feedback = Feedback(ctx.store, ctx.embedder, ctx.pipeline, ctx.recall, rate_text=rate_text)
        #: Tunables of suggest/choose (similarity floor, recency, thin-evidence rule); replace to tune this instance.
        self.recommend: RecommendConfig = recommend if recommend is not None else RecommendConfig()
        self._executions = Executions(
            ctx.settings, record=self._record_decision, neighbours=self._neighbours, outcomes=self.outcomes
        )

    # -- outcomes --------------------------------------------------------------------------------------------
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
        visibility: Visibility = "private",
        episode: str | None = None,
        user: str | None = None,
    ) -> Memory:
        """Record that doing ``action`` in ``context`` turned out as ``outcome``; returns the decision memory.

        ``outcome`` is "success", "failure", "partial", a boolean, a reward in [-1, 1], or feedback in
        words ("worked first time, thanks": rated as for :meth:`feedback`, the text kept as
        ``metadata["feedback"]``); None
        (or "pending") records the decision now and its outcome later (:meth:`resolve`, or the end of its
        ``episode``: a decision made within an episode started with ``mem.episodes.start``
        and left pending gets credit from the episode's outcome, discounted by its distance
        from the end). A pending decision does not count in suggestions until resolved.
        ``alternatives`` are the other actions that were possible (they become options of
        :meth:`suggest`). ``used`` names memories the agent relied on for this task: the
        outcome is fed back to them (see :meth:`feedback`). Bad input raises
        ValidationError (NotFound for an unknown ``used`` id) and records nothing.

        ``user`` records the outcome as that user's: the agent's learning (no ``user`` in a read) counts it
        like any other, and a read for one user counts that user's records and the agent's own, never
        another user's.
        """
        agent = check.agent_or_default(agent, self._settings)
        # A phrase ("worked first time, thanks") is rated like feedback, the text kept beside the reward; a single
        # unknown word stays an error ("sucess" is a typo, not neutral feedback).
        if isinstance(outcome, str) and len(outcome.split()) > 1 and not is_pending_outcome(outcome):
            text, reward = self._feedback.rate(outcome)
            if text is not None and reward is not None:
                outcome = reward
                if metadata is None or isinstance(metadata, Mapping):
                    metadata = {**(metadata or {}), "feedback": text}
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
            episode=episode,
            user=user,
        )

    def resolve(
        self, decision_id: str, outcome: str | bool | float, *, agent: str | None = None, user: str | None = None
    ) -> Memory:
        """Attach the outcome to a decision recorded with ``outcome=None``; returns the decision memory.

        The memories it ``used`` get the outcome as feedback now. ValidationError if the
        decision already has an outcome; NotFound if ``agent`` (``user``: that user, or the agent's own) has no
        such decision.
        """
        agent, user = self._who(agent, user)
        if not isinstance(decision_id, str) or not decision_id.strip():
            raise ValidationError("decision id must be a non-empty string")
        memory = self._store.memories.get(decision_id.strip(), user_filter(agent, user, kinds=_DECISION))
        if memory is None or memory.agent != agent:
            who = f"agent {agent!r}" if user is None else f"user {user!r} of agent {agent!r}"
            raise NotFound(f"no decision {decision_id!r} of {who}")
        meta = resolved_metadata(memory.metadata, outcome)
        # A decision from reasoning written before it carried the action tag gets it now, as record() writes it.
        tags = list(dict.fromkeys([*(t for t in memory.tags if t != PENDING), f"action:{meta['action']}"]))
        updated = self._pipeline.update(
            memory.id,
            {"metadata": meta, "tags": tags},
            actor=agent,
            action="resolve",
            current=memory,
        )
        used = [u for u in meta.get("used", []) if isinstance(u, str)]
        if used:
            self.feedback(used, outcome, agent=agent, user=memory.user)
        return updated

    # -- executions (seed 000) -------------------------------------------------------------------------------
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
        """Record a task run: the approach taken, how it went, and what it involved.

        An execution is an outcome record (a ``decision`` memory whose context is the
        task) with the execution's facts in its metadata, so :meth:`suggest` and
        :meth:`choose` learn from executions too. ``calls`` counts API or tool calls.
        Without ``complexity`` it is assessed from the task's text and the agent's similar
        past runs (the rule is in :mod:`engramdb.learning.complexity`). ``user``: as for :meth:`record`.
        """
        return self._executions.record(
            task,
            approach=approach,
            outcome=outcome,
            agent=agent,
            category=category,
            task_type=task_type,
            complexity=complexity,
            success_factors=success_factors,
            tools=tools,
            duration=duration,
            calls=calls,
            alternatives=alternatives,
            metadata=metadata,
            used=used,
            user=user,
        )

    def executions(
        self,
        task: str,
        *,
        agent: str | None = None,
        successful: bool | None = True,
        category: str | None = None,
        limit: int = 5,
        user: str | None = None,
    ) -> list[ExecutionMatch]:
        """Past executions (see :meth:`record_execution`) most similar to ``task``, most similar first.

        ``successful=True`` (the default) keeps those that succeeded (success weight at least 0.5), ``False``
        those that did not, ``None`` all. ``category`` restricts to one category; ``user`` to that user's runs
        and the agent's own (no user)."""
        return self._executions.find(
            task, agent=agent, successful=successful, category=category, limit=limit, user=user
        )

    def pending(self, *, agent: str | None = None, episode: str | None = None, user: str | None = None) -> list[Memory]:
        """Decisions of ``agent`` still waiting for their outcome (of one ``episode`` if given; of ``user`` and the
        agent's own if given), oldest first."""
        agent, user = self._who(agent, user)
        if episode is not None:
            episode = _args.label(episode, "episode")
        tags = (PENDING,) if episode is None else (PENDING, EPISODE_TAG + episode)
        flt = replace(user_filter(agent, user, kinds=_DECISION), tags=tags)
        out = [m for page in self._recall.pages(flt) for m in page]
        out = [m for m in out if m.agent == agent and records.is_pending(m.metadata)]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

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
        user: str | None = None,
    ) -> Memory:
        """Validate and store one outcome record (a ``decision`` memory), then feed the outcome back to ``used``.

        ``what`` names the context in error messages; ``tags`` gives the memory's tags from its validated metadata.
        """
        context = check.content(context, what=what)
        agent, user = self._who(agent, user)
        used_ids = self._feedback.visible_ids(used, agent, user)
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
        all_tags = tags(meta)
        if episode is not None:
            episode = _args.label(episode, "episode")
            meta["episode"] = episode
            all_tags.append(EPISODE_TAG + episode)
        pending = meta["outcome"] == PENDING
        if pending:
            all_tags.append(PENDING)
        memory = self._pipeline.remember(
            context, agent=agent, kind="decision", tags=all_tags, metadata=meta, visibility=visibility, user=user
        )
        if used_ids and not pending and outcome is not None:
            self.feedback(used_ids, outcome, agent=agent, user=user)
        return memory

    def feedback(
        self,
        memory_ids: Iterable[str] | None = None,
        outcome: str | bool | float | None = None,
        *,
        agent: str | None = None,
        context: str | None = None,
        user: str | None = None,
    ) -> list[Memory]:
        """Tell the memories an agent used for a task how the task went; returns them updated.

        Each memory's ``successes`` grows by the outcome's success weight and its ``attempts`` by one (so
        ``success_rate``, which search ranking uses, follows), and its ``confidence`` moves towards the outcome
        like a Beta posterior mean with the old confidence as a prior worth two outcomes. The memories must be
        visible to ``agent`` (with ``user``: that user's or the agent's own); the change is in their history as
        ``feedback`` by that agent. Unknown ids raise NotFound and change nothing. Without ids: the memories
        answering the task ``context``, else the best hit of the agent's latest recall within the hour
        (:mod:`engramdb.services.feedback_refs`), of those ``user`` may see.

        ``outcome`` may also be feedback in words ("great, exactly what I wanted"): rated as a reward in [-1, 1]
        (the lexicon, or the configured LLM); feedback above 0.5 that names something ("great, I like short
        bullet points"; the lexicon rates a bare "I like short bullet points" 0.36) is also kept as a
        ``preference`` of ``agent`` (of ``user`` when given; tag ``feedback``), praise alone never. Empty or
        invalid text raises ValidationError and changes nothing.
        """
        agent, user = self._who(agent, user)
        return self._feedback.give(memory_ids, outcome, agent=agent, user=user, context=context, now=self._clock())

    def _who(self, agent: object, user: object) -> tuple[str, str | None]:
        """The validated agent (default: the ``agent`` setting) and user (None: the agent's records of every user)."""
        return check.agent_or_default(agent, self._settings), check.scope(user, what="user")

    # -- recommendations -------------------------------------------------------------------------------------
    def _neighbours(self, context: str, agent: str, user: str | None = None, *, wide: bool = False) -> list[Neighbour]:
        """Outcome records of ``agent`` (and shared with it; of ``user`` and the agent's own if given) whose
        context resembles ``context`` (``wide``: down to ``pool_floor``, for :meth:`suggest`)."""
        cfg = self.recommend
        flt = user_filter(agent, user, kinds=_DECISION)
        query = self._embedder.embed([context])[0]
        cands = self._store.search.vector_candidates(query, flt, limit=cfg.candidates)
        # Below the floor a context contributes nothing, unless it is the same text (cosine ~1 anyway); the wider
        # neighbourhood (pool_floor) answers suggest when the close one holds too little (recommend.assess).
        floor = cfg.similarity_floor
        if wide and cfg.pool_floor is not None:
            floor = min(floor, cfg.pool_floor)
        cands = [c for c in cands if c.score > floor]
        memories = self._store.memories.get_many([c.id for c in cands], flt)
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
        agent: str | None = None,
        options: Sequence[str] | None = None,
        limit: int = 5,
        user: str | None = None,
    ) -> Suggestion:
        """What to do in ``context``, from the outcomes of similar contexts.

        ``options`` limits (and completes: unseen ones get the prior) the actions
        considered; without it, every action recorded nearby and its alternatives.
        ``recommended`` is None when the evidence is too thin, when the record does not put
        the top option ahead of the runner-up, or when the calibrated ``confidence`` (how
        often a recommendation made on such evidence was right, measured on simulated
        streams) is under ``min_confidence``; one under ``firm_confidence`` or on little
        evidence is ``tentative`` and its ``reason`` says why (see :mod:`engramdb.learning.recommend`).
        Without ``user`` the agent's outcomes of every user count; with it, that user's and the agent's
        own (recorded with no user), never another user's.
        """
        context = check.content(context, what="context")
        agent, user = self._who(agent, user)
        opts = _args.options(options) if options is not None else None
        limit = check.limit(limit)
        neighbours = self._neighbours(context, agent, user, wide=True)
        s = recommend.suggest(
            context,
            neighbours,
            now=self._clock(),
            config=self.recommend,
            seed=self._settings.learning_seed,
            options=opts,
            limit=limit,
        )
        top = s.recommended or (s.options[0].action if s.options else None)
        factors, tools = common_factors([n.record for n in neighbours], top)
        return replace(s, success_factors=factors, tools=tools) if factors or tools else s

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
        """Pick one of ``options`` for ``context``, balancing exploring and exploiting (Thompson sampling).

        ``exploration`` (default: the ``exploration`` setting, 0.25) scales how far each
        draw may stray from its posterior mean: 0 always takes the best estimate.
        Deterministic: the same data, context, options and ``seed`` (default: the
        ``learning_seed`` setting) give the same choice; each new outcome gives new draws. ``user``: as
        for :meth:`suggest`.
        """
        context = check.content(context, what="context")
        agent, user = self._who(agent, user)
        opts = _args.options(options)
        exp, chosen_seed = check.exploration_and_seed(exploration, seed, self._settings)
        if len(opts) == 1:
            return opts[0]
        return recommend.choose(
            context,
            opts,
            self._neighbours(context, agent, user),
            now=self._clock(),
            config=self.recommend,
            seed=chosen_seed,
            exploration=exp,
        )

    # -- analytics -----------------------------------------------------------------------------------------
    def outcomes(
        self,
        *,
        agent: str | None = None,
        since: datetime | None = None,
        category: str | None = None,
        user: str | None = None,
    ) -> list[DecisionRecord]:
        """Every outcome record ``agent`` can see (its own and shared with it; with ``user``, that user's and the
        agent's own, never another user's), oldest first."""
        agent, user = self._who(agent, user)
        since = _args.since(since)
        flt = user_filter(agent, user, kinds=_DECISION)
        out: list[DecisionRecord] = []
        for page in self._recall.pages(flt, size=PAGE_SIZE):
            for m in page:
                rec = parse_decision(m)
                if rec is None or (since is not None and rec.at < since):
                    continue
                if category is not None and (rec.category or GENERAL) != category:
                    continue
                out.append(rec)
            # Newest first: once a page ends before ``since``, older pages cannot match.
            if since is not None and page and page[-1].created_at < since:
                break
        out.sort(key=lambda r: (r.at, r.id))
        return out

    def trends(
        self,
        *,
        agent: str | None = None,
        since: datetime | None = None,
        category: str | None = None,
        user: str | None = None,
    ) -> list[CategoryTrend]:
        """Performance per category: success with interval, duration, best approaches, and a tested trend
        (``user``: of the outcomes :meth:`outcomes` gives for that user)."""
        return category_trends(self.outcomes(agent=agent, since=since, category=category, user=user))

    def approaches(
        self,
        *,
        agent: str | None = None,
        success_rate: str | RateFilter | None = None,
        min_attempts: int = 2,
        since: datetime | None = None,
        user: str | None = None,
    ) -> list[ApproachStats]:
        """The approaches taken in recurring situations, with their success, e.g. ``success_rate=">80%"``.

        A situation is the category when one was recorded, else the context (ignoring
        case and spacing); only (situation, approach) pairs tried at least
        ``min_attempts`` times count. Best first. ``user``: as for :meth:`outcomes`.
        """
        rate = parse_rate_filter(success_rate) if isinstance(success_rate, str) else success_rate
        if isinstance(min_attempts, bool) or not isinstance(min_attempts, int) or min_attempts < 1:
            raise ValidationError(f"min_attempts must be a positive integer, not {check.shown(min_attempts)}")
        found = self.outcomes(agent=agent, since=since, user=user)
        return find_approaches(found, rate=rate, min_attempts=min_attempts)

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
        """A report of ``agent``'s outcomes (``.to_json()``, ``.to_markdown()``); with ``chart``, also a PNG there.

        Recurring failure patterns (``mem.failures.patterns``) are included. Its
        ``recommendations`` name the categories under ``success_target`` (a share) or
        declining, and the categories and approaches slower than ``slow_seconds`` on average. With ``user``
        the outcomes are that user's and the agent's own (as :meth:`outcomes`); failure patterns stay the agent's.
        """
        agent, user = self._who(agent, user)
        since = _args.since(since)
        if chart is not None and not isinstance(chart, str | os.PathLike):
            raise ValidationError(f"chart must be a file path, not {type(chart).__name__}")
        success_target = check.non_negative(success_target, what="success_target")
        slow_seconds = check.non_negative(slow_seconds, what="slow_seconds")
        if success_target > 1:
            raise ValidationError(f"success_target is a share within [0, 1], not {check.shown(success_target)}")
        failures = self._failures.patterns(agent=agent, recurring=True, since=since)
        report = build_report(
            self.outcomes(agent=agent, since=since, user=user),
            agent=agent,
            now=self._clock(),
            since=since,
            failure_patterns=failures,
            success_target=float(success_target),
            slow_seconds=float(slow_seconds),
        )
        if chart is not None:
            written = write_chart(report, chart)
            report = report.with_chart(str(written))
        return report

    def stats(self, *, agent: str | None = None, top: int = 10, user: str | None = None) -> LearningStats:
        """``agent``'s learning in one call: memories per kind, outcomes and success, the most used actions and
        categories, failure patterns, episodes, and the most used memories with feedback totals. With ``user``
        the memories, outcomes, episodes and uses are that user's and the agent's own; failure patterns stay
        the agent's."""
        agent, user = self._who(agent, user)
        top = check.limit(top)
        counts: dict[str, int] = {k: self._recall.count(agent=agent, kind=k, user=user) for k in KINDS}
        flt = user_filter(agent, user, kinds=("episode",))
        # Memory use is summed and ranked in the store: no memory is loaded beyond the top ones.
        visible = user_filter(agent, user)
        return learning_stats(
            self.outcomes(agent=agent, user=user),
            agent=agent,
            memories=counts,
            pending=len(self.pending(agent=agent, user=user)),
            patterns=self._failures.patterns(agent=agent),
            episode_successes=self._store.memories.count(replace(flt, tags=("outcome:success",))),
            episode_failures=self._store.memories.count(replace(flt, tags=("outcome:failure",))),
            usage=self._store.memories.usage(visible),
            by_use=self._store.memories.list(visible, limit=top, order="most_used"),
            top=top,
        )

    # -- adaptive execution ----------------------------------------------------------------------------------
    def adaptive(
        self,
        task: str,
        options: Sequence[str] | None = None,
        *,
        agent: str | None = None,
        recover: RecoveryHook | None = None,
        category: str | None = None,
        user: str | None = None,
    ) -> Adaptive:
        """Run a task adaptively: choose the approach, time it, record the outcome, recover from known failures.

        Use as a decorator (the chosen approach is passed as the first argument when ``options`` are given) or as
        a context manager (``run.approach``). See :mod:`engramdb.learning.adaptive`. With ``user`` the approach is
        chosen from that user's outcomes (and the agent's own) and the outcome is recorded as theirs."""
        task = check.content(task, what="task")
        agent, user = self._who(agent, user)
        opts = None
        if options is not None:
            if isinstance(options, str):
                raise ValidationError("options must be a list of approach names")
            opts = _args.texts(options, "options")
            if not opts:
                raise ValidationError("options must not be empty")
        if recover is not None and not callable(recover):
            raise ValidationError("recover must be callable")
        return Adaptive(
            self, self._failures, task, options=opts, agent=agent, recover=recover, category=category, user=user
        )

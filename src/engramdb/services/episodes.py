"""Episodes: ``mem.episodes``, tasks recorded with the events they went through.

Thin on purpose: validates, stores the finished :class:`~engramdb.learning.episodes.Episode`
through the write pipeline (its failure through the failure service, so failure
patterns learn from episodes), and reads episodes back through the recall.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb._util import parse_ts
from engramdb.errors import NotFound, ValidationError
from engramdb.learning import episodes as ep
from engramdb.learning.records import EPISODE_TAG, PENDING, credited_weights, is_pending, resolved_metadata
from engramdb.models import EpisodeAnalysis, EpisodeRecord, Memory
from engramdb.services._base import Service, ServiceContext
from engramdb.services.failures import FailureService
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    pass

__all__ = ["EpisodeService"]

_EPISODE: tuple[str, ...] = ("episode",)
_DECISION: tuple[str, ...] = ("decision",)
#: Discount per step of the credit a decision gets from its episode's outcome (seed 002's discount factor).
DISCOUNT: Final = 0.95


class EpisodeService(Service):
    """Episodes: begin one (a context manager), find past ones, analyse what goes wrong."""

    def __init__(self, ctx: ServiceContext, *, failures: FailureService | None = None) -> None:
        super().__init__(ctx)
        # A failed episode is recorded as a failure occurrence too (``failures``: the facade's ``mem.failures``).
        self._failures = failures if failures is not None else FailureService(ctx)

    def begin(
        self,
        task: str,
        *,
        agent: str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        record_failures: bool = True,
    ) -> ep.Episode:
        """A context manager that records a task as an ``episode`` memory with the events it went through.

        ``with mem.episodes.begin("deploy api", agent="ops") as e: e.event("build", {"ok": True})``.
        The episode ends as a success, or as a failure when an exception escapes (it
        is recorded with its error and re-raised) or :meth:`~engramdb.learning.episodes.Episode.fail`
        was called. With ``record_failures`` a failure is also recorded as a failure
        occurrence (``mem.failures.record``), so failure patterns learn from episodes.
        """
        task = check.content(task, what="task")
        agent = check.agent_or_default(agent, self._settings)
        user_tags = check.tags(tags if not isinstance(tags, str) else [tags])
        extra = check.metadata(metadata)

        def save(episode: ep.Episode) -> Memory:
            failure_id = None
            if record_failures and episode.outcome == "failure":
                reason = episode.error or episode.reason or "failed"
                failure = self._failures.record(
                    episode.exception if episode.exception is not None else reason,
                    agent=agent,
                    context=f"episode: {task}",
                    metadata={"episode_task": task},
                )
                failure_id = failure.id
            meta = ep.episode_metadata(episode, extra=extra, failure_id=failure_id)
            return self._pipeline.remember(
                task,
                agent=agent,
                kind="episode",
                tags=[*user_tags, ep.OUTCOME_TAG + (episode.outcome or "aborted")],
                metadata=meta,
            )

        return ep.Episode(task, agent=agent, on_end=save)

    # -- episodes by id (across calls and processes) ---------------------------------------------------------
    def start(
        self,
        task: str,
        *,
        agent: str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> str:
        """Start an episode and return its id: add events with :meth:`event` and finish it with :meth:`end`,
        from any call or process. Until it ends it is listed with outcome ``running``. Decisions recorded with
        ``mem.learning.record(..., outcome=None, episode=id)`` get credit from its outcome when it ends.
        ``context`` (seed 003's ``start_episode(task, context={"user": ..., "priority": "high"})``) is kept as
        ``metadata["context"]``."""
        task = check.content(task, what="task")
        agent = check.agent_or_default(agent, self._settings)
        user_tags = check.tags(tags if not isinstance(tags, str) else [tags])
        meta: dict[str, Any] = dict(check.metadata(metadata))
        if context is not None:
            if not isinstance(context, Mapping):
                raise ValidationError(f"context must be a JSON object (a mapping), not {type(context).__name__}")
            meta = dict(check.metadata({**meta, "context": dict(context)}))
        meta.update({"outcome": ep.RUNNING, "events": [], "dropped_events": 0, "started_at": self._clock().isoformat()})
        memory = self._pipeline.remember(
            task, agent=agent, kind="episode", tags=[*user_tags, ep.OUTCOME_TAG + ep.RUNNING], metadata=meta
        )
        return memory.id

    def _owner(self, episode_id: str, agent: str | None) -> str:
        """The agent an episode call acts as: the one given, else the episode's own (its id names it: seed 003's
        ``record_event(episode_id, ...)`` passes no agent), else the ``agent`` setting when there is no such id."""
        if agent is not None:
            return check.agent_name(agent)
        if isinstance(episode_id, str) and episode_id.strip():
            found = self._store.memories.get(episode_id.strip(), Filter(agent=None, kinds=_EPISODE))
            if found is not None:
                return found.agent
        return check.agent_name(self._settings.agent)

    def _running(self, episode_id: str, agent: str) -> Memory:
        if not isinstance(episode_id, str) or not episode_id.strip():
            raise ValidationError("episode id must be a non-empty string")
        memory = self._store.memories.get(episode_id.strip(), Filter(agent=agent, kinds=_EPISODE))
        if memory is None or memory.agent != agent:
            # The id alone does not say whose it is: name the usual cause of a miss (agent left at its default).
            raise NotFound(
                f"no episode {episode_id!r} of agent {agent!r} (an episode belongs to the agent that started it: "
                "pass the same agent)"
            )
        if memory.metadata.get("outcome") != ep.RUNNING:
            raise ValidationError(f"episode {episode_id!r} has ended ({memory.metadata.get('outcome')})")
        return memory

    def event(
        self, episode_id: str, kind: str, data: Any = None, *, role: str | None = None, agent: str | None = None
    ) -> None:
        """Add an event to a running episode; ``role`` names the agent role that produced it.

        Without ``agent`` the episode's own agent acts (the id names the episode); with it, the
        episode must be that agent's.
        """
        agent = self._owner(episode_id, agent)
        kind, value, role = ep.event_parts(kind, data, role)
        with self._pipeline.transaction():
            memory = self._running(episode_id, agent)
            meta = dict(memory.metadata)
            events = list(meta.get("events") or [])
            if len(events) >= ep.MAX_EVENTS:
                meta["dropped_events"] = int(meta.get("dropped_events") or 0) + 1
            else:
                started = parse_ts(str(meta.get("started_at"))) or memory.created_at
                at = round(max(0.0, (self._clock() - started).total_seconds()), 6)
                events.append({"kind": kind, "data": value, "at": at, "role": role})
                meta["events"] = events
            self._pipeline.update(memory.id, {"metadata": meta}, actor=agent, action="episode-event", current=memory)

    def end(
        self,
        episode_id: str,
        outcome: str | bool = "success",
        *,
        agent: str | None = None,
        metrics: Mapping[str, Any] | None = None,
        error: str | None = None,
        discount: float = DISCOUNT,
        record_failures: bool = True,
    ) -> EpisodeRecord:
        """End a running episode as "success" or "failure" (or a boolean), with ``metrics`` (a JSON object).

        The decisions of the episode still pending (``mem.learning.record(..., outcome=None,
        episode=id)``) get its outcome as credit, the last one in full and each earlier one
        discounted by ``discount`` per step back (see :func:`~engramdb.learning.records.credited_weights`),
        so that ``choose`` learns which sequences of decisions lead to success. A failure is also
        recorded as a failure occurrence (``error`` or "failed") when ``record_failures``.
        Without ``agent`` the episode's own agent acts, as for :meth:`event`.
        """
        agent = self._owner(episode_id, agent)
        word = ("success" if outcome else "failure") if isinstance(outcome, bool) else outcome
        if word not in ("success", "failure"):
            raise ValidationError(f"an episode ends as success or failure, not {check.shown(outcome)}")
        extra = check.metadata(metrics)
        error = None if error is None else check.content(error, what="error")
        memory = self._running(episode_id, agent)
        started = parse_ts(str(memory.metadata.get("started_at"))) or memory.created_at
        duration = round(max(0.0, (self._clock() - started).total_seconds()), 6)
        # Searches (the failure's pattern lookup) cannot run inside a transaction: these come first.
        failure_id = None
        if record_failures and word == "failure":
            failure_id = self._failures.record(
                error or "failed",
                agent=agent,
                context=f"episode: {memory.content}",
                metadata={"episode_task": memory.content},
            ).id
        credited = self._credit(memory.id, word, agent=agent, discount=discount)
        with self._pipeline.transaction():
            memory = self._running(episode_id, agent)  # again: events may have arrived meanwhile
            meta = dict(memory.metadata)
            meta.update(
                {
                    "outcome": word,
                    "error": error,
                    "reason": None,
                    "metrics": extra,
                    "ended_at": (started + timedelta(seconds=duration)).isoformat(),
                    "duration": duration,
                    "failure_id": failure_id,
                    "credited": credited,
                }
            )
            tags = [t for t in memory.tags if not t.startswith(ep.OUTCOME_TAG)] + [ep.OUTCOME_TAG + word]
            updated = self._pipeline.update(
                memory.id, {"metadata": meta, "tags": tags}, actor=agent, action="episode-end", current=memory
            )
        record = ep.parse_episode(updated)
        assert record is not None
        return record

    def _credit(self, episode_id: str, outcome: str, *, agent: str, discount: float) -> int:
        """Resolve the episode's pending decisions with discounted credit; returns how many."""
        flt = Filter(agent=agent, kinds=_DECISION, tags=(PENDING, EPISODE_TAG + episode_id))
        pending = [m for page in self._recall.pages(flt) for m in page if m.agent == agent]
        pending = [m for m in pending if is_pending(m.metadata)]
        pending.sort(key=lambda m: (m.created_at, m.id))
        weights = credited_weights(outcome, len(pending), discount=discount)
        for m, w in zip(pending, weights, strict=True):
            meta = resolved_metadata(m.metadata, 2.0 * w - 1.0, credit="episode")
            self._pipeline.update(
                m.id,
                {"metadata": meta, "tags": [t for t in m.tags if t != PENDING]},
                actor=agent,
                action="resolve",
                current=m,
            )
        return len(pending)

    def list(
        self, task: str, *, agent: str | None = None, outcome: str | None = None, limit: int = 5
    ) -> builtins.list[EpisodeRecord]:
        """Past episodes most similar to ``task``, best first; ``outcome`` ("success"/"failure") filters."""
        agent = check.agent_or_default(agent, self._settings)
        task = check.content(task, what="task")
        if outcome is not None and outcome not in ep.EPISODE_OUTCOMES:
            raise ValidationError(
                f"outcome must be one of {', '.join(ep.EPISODE_OUTCOMES)}, not {check.shown(outcome)}"
            )
        tags = [ep.OUTCOME_TAG + outcome] if outcome else None
        hits = self._recall.search(task, agent=agent, kind="episode", tags=tags, limit=limit, fold=False)
        out = []
        for h in hits:
            record = ep.parse_episode(h.memory, score=h.score)
            if record is not None:
                out.append(record)
        return out

    def analyze(self, *, agent: str | None = None, task: str | None = None, limit: int = 500) -> EpisodeAnalysis:
        """What goes wrong in failed episodes: event kinds seen more often before failure than success.

        Over ``agent``'s episodes (the ``limit`` most similar to ``task`` if given, else
        the ``limit`` most recent): each event kind's failure rate when it occurs
        against the rate when it does not, with Fisher's exact test; the steps failures
        ended on; and their most common errors.
        """
        agent = check.agent_or_default(agent, self._settings)
        limit = check.limit(limit)
        if task is not None:
            # Statistics count every episode: identical ones are separate events.
            hits = self._recall.search(
                check.content(task, what="task"), agent=agent, kind="episode", limit=limit, fold=False
            )
            memories = [h.memory for h in hits]
        else:
            memories = self._store.memories.list(Filter(agent=agent, kinds=_EPISODE), limit=limit)
        records = [r for r in (ep.parse_episode(m) for m in memories) if r is not None]
        return ep.analyze(records)

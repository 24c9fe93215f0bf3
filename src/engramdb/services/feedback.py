"""Feedback on the memories an agent used: ``mem.learning.feedback``, and the rating of feedback in words.

:class:`Feedback` is a collaborator of :class:`~engramdb.services.learning.LearningService`: it moves the
counters of used memories (successes, attempts, confidence) in one transaction, and keeps praise that
names something as a learned preference of the agent (of the user, when the feedback is one user's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Final

from engramdb import _validate as check
from engramdb.errors import NotFound, ValidationError
from engramdb.learning import _args
from engramdb.learning.stats import OUTCOME_WORDS, success_weight
from engramdb.models import Memory
from engramdb.services.feedback_refs import referred_ids
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.embeddings.base import Embedder
    from engramdb.pipeline import WritePipeline
    from engramdb.recall import Recall
    from engramdb.storage.base import Store

__all__ = ["Feedback", "user_filter"]

#: Feedback in words whose reward is above this is also kept as a learned preference (seed 002's rule).
_PREFERENCE_REWARD: Final = 0.5
#: Characters of the task (the first memory's first line) kept in front of a preference learned from feedback.
_ABOUT_CHARS: Final = 120


def user_filter(agent: str, user: str | None, *, kinds: tuple[str, ...] | None = None) -> Filter:
    """What one call of the learning area reads: the agent's records of every user, or, for one ``user``, that
    user's and the agent's own (no user), never another user's (the memories' scope rule)."""
    return Filter(agent=agent, kinds=kinds, users=None if user is None else (None, user))


class Feedback:
    """Feedback on used memories: their counters moved, audited, and praise kept as a preference."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        pipeline: WritePipeline,
        recall: Recall,
        *,
        rate_text: Callable[[str], float] | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._pipeline = pipeline
        self._recall = recall
        # Feedback in words -> a reward in [-1, 1] (Engram passes engramdb.brain.sentiment.reward_from_text).
        self._rate_text = rate_text
        # Feedback reads then writes a memory's counters; the lock keeps this instance's threads from losing updates.
        self._lock = threading.Lock()

    def give(
        self,
        memory_ids: Iterable[str] | None,
        outcome: str | bool | float | None,
        *,
        agent: str,
        user: str | None,
        context: str | None,
        now: datetime,
    ) -> list[Memory]:
        """See :meth:`~engramdb.services.learning.LearningService.feedback` (``agent`` and ``user`` validated)."""
        if outcome is None:
            raise ValidationError("feedback needs an outcome: a label, true/false, a reward or words")
        ids = self.visible_ids(memory_ids, agent, user) if memory_ids is not None else []
        if not ids:
            ids = self._referred(agent, user, context, now)
        text, reward = self.rate(outcome)  # after the ids: rating may ask the LLM
        weight = success_weight(outcome if reward is None else reward)

        def moved(m: Memory) -> dict[str, float]:
            return {
                "successes": m.successes + weight,
                "attempts": m.attempts + 1.0,
                # Running Beta mean: prior mass 2 at the initial confidence, one unit per outcome.
                "confidence": min(1.0, max(0.0, m.confidence + (weight - m.confidence) / (m.attempts + 3.0))),
            }

        # The counters are not fields a caller may set: the pipeline's adjust moves them, in one transaction.
        with self._lock:
            out = self._pipeline.adjust(
                ids,
                user_filter(agent, user),
                changes=moved,
                actor=agent,
                at=now,
                action="feedback",
                detail={"weight": weight},
            )
        if text is not None and reward is not None and reward > _PREFERENCE_REWARD:
            # Imported here: the brain layer sits above learning (its router reads the learning engine).
            from engramdb.brain.sentiment import preference_text

            # Praise alone ("great, exactly what I wanted") is a reward, not a preference: kept as one, it was
            # recalled for every later task. Only feedback naming something is, with the task it was about.
            first = out[0].content.strip().splitlines()[0] if out and out[0].content.strip() else ""
            about = first[:_ABOUT_CHARS] if first else None
            stated = preference_text(text, context=about)
            if stated is not None:
                # After the transaction: the pipeline's duplicate check searches, which must not run inside one.
                self._pipeline.remember(
                    stated,
                    agent=agent,
                    kind="preference",
                    tags=["feedback"],
                    metadata={"feedback": text, "reward": reward, "memories": ids, "context": about},
                    user=user,
                )
        return out

    def _referred(self, agent: str, user: str | None, context: str | None, now: datetime) -> list[str]:
        """The memories feedback without ids is about (:func:`referred_ids`), of those ``user`` may see."""
        ids = referred_ids(store=self._store, recall=self._recall, agent=agent, context=context, now=now)
        if user is None:
            return ids
        # The agent's recall may have been another user's: feedback in one user's name never reaches it.
        found = self._store.memories.get_many(ids, user_filter(agent, user))
        mine = [i for i in ids if i in found]
        if not mine:
            raise NotFound(f"user {user!r} of agent {agent!r} has no memory to give the feedback to: pass memory ids")
        return mine

    def rate(self, outcome: object) -> tuple[str | None, float | None]:
        """Feedback in words (text that is no outcome word) and its reward; (None, None) for any other outcome."""
        if not isinstance(outcome, str) or outcome.strip().lower() in OUTCOME_WORDS:
            return None, None
        text = check.content(outcome, what="feedback text").strip()
        if self._rate_text is None:
            raise ValidationError(
                "text feedback needs a rater (rate_text) to turn it into a reward; without one, give "
                "success, failure, partial, a boolean or a reward in [-1, 1]"
            )
        reward = self._rate_text(text)
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not -1.0 <= reward <= 1.0:
            raise ValidationError(f"the text rater must give a reward within [-1, 1], not {check.shown(reward)}")
        return text, float(reward)

    def visible_ids(self, memory_ids: Iterable[str], agent: str, user: str | None) -> list[str]:
        """``memory_ids`` as distinct ids, each visible to ``agent`` (and ``user``), else NotFound."""
        ids = _args.ids(memory_ids)
        if not ids:
            return []
        found = self._store.memories.get_many(ids, user_filter(agent, user))
        missing = [i for i in ids if i not in found]
        if missing:
            who = f"agent {agent!r}" if user is None else f"user {user!r} of agent {agent!r}"
            raise NotFound(f"no memory {missing[0]!r} visible to {who}")
        return ids

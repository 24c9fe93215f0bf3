"""Which memories feedback given without ids is about: those answering the task, else the latest recall's best.

Seed 002's ``learn_from_feedback(feedback, task_context)`` takes words and a task, no memory ids (issue 25).

A user says "great, exactly what I wanted" about what the agent just did, not about memory ids. Two readings:

* with the task's words (``context=``): the agent's memories that answer that task (relevance at least
  :data:`RELEVANT`, at most :data:`MOST` of them);
* without them: the best hit of the agent's latest recall (a search or a ``context()``) within
  :data:`RECENT`, read from the audit trail, so it works across processes (``engram memory search`` and then
  ``engram learning feedback``).

Only the best hit of a recall: a search always returns something, and crediting its weaker hits with praise
meant for the first would be noise in their success rates. A recall older than :data:`RECENT`, or none at all,
is an error that says to pass ids or the task: feedback is never spread over memories it may not be about.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from engramdb import _validate as check
from engramdb.errors import NotFound
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.recall import Recall
    from engramdb.storage.base import Store

__all__ = ["MOST", "RECENT", "RELEVANT", "referred_ids"]

#: How long after a recall feedback without ids or task may still refer to it.
RECENT: Final = timedelta(hours=1)
#: Memories a task's words may point at.
MOST: Final = 3
#: Calibrated relevance (``Hit.relevance``) a memory needs to count as answering the task: "says what the
#: query asks about" starts at 0.7, related at 0.3 (README, "Relevance").
RELEVANT: Final = 0.5
#: Audit entries read back while looking for the latest recall (its own searches come first in context()).
_SCAN: Final = 200


def referred_ids(*, store: Store, recall: Recall, agent: str, context: str | None, now: datetime) -> list[str]:
    """The memories ``agent``'s feedback without ids is about (see the module); NotFound when there are none."""
    if context is not None:
        task = check.text(context, what="context", empty=False)
        hits = recall.search(task, agent=agent, limit=MOST, min_score=RELEVANT, bookkeep=False)
        # Earlier feedback kept as preferences is about the task too, but is not what was used for it.
        ids = [h.memory.id for h in hits if "feedback" not in h.memory.tags]
        if not ids:
            raise NotFound(
                f"agent {agent!r} has no memory about {task[:80]!r} to give the feedback to: pass memory ids"
            )
        return ids
    for event in store.audit.events(agent=agent, action="search", limit=_SCAN, newest_first=True):
        if now - event.at > RECENT:
            break
        for memory_id in event.detail.get("ids") or ():
            # Still there and still visible (a recall's memory may have been forgotten or unshared since).
            if store.memories.get_many([memory_id], Filter(agent=agent)):
                return [memory_id]
            break
    minutes = int(RECENT.total_seconds() // 60)
    raise NotFound(
        f"agent {agent!r} recalled no memory in the last {minutes} minutes for the feedback to be about: "
        "pass memory ids or the task it was about"
    )

"""Session evidence: a turn is also judged by the conversation it belongs to. Pure functions.

A question about one conversation ("what did I say about my sister's wedding?") usually matches several of
its turns a little, while an unrelated conversation matches at most one turn well. So a session's evidence,
the best relevance among its candidates plus a share of the rest (:func:`session_evidence`), counts for
the session's best candidate beside its own relevance. The session is the memory's ``session``, else
``metadata["session"]`` (the same key :func:`engramdb.retrieval.context.link_turns` follows); a memory
without one is a session of its own, so a store of notes ranks exactly as without this step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from engramdb.models import Memory
from engramdb.retrieval.ranking import Fused

__all__ = [
    "SESSION_BEST_ONLY",
    "SESSION_GATED",
    "SESSION_SHARE",
    "SESSION_WEIGHT",
    "asks_across_sessions",
    "gathering_words",
    "session_evidence",
    "session_key",
    "weigh_by_session",
]

#: How much a turn's session evidence counts beside its own relevance (bench/RESULTS.md, issue 21 third
#: round); 0 turns the step off.
SESSION_WEIGHT: Final = 0.0
#: The share of a session's other candidates' relevance added to its best one.
SESSION_SHARE: Final = 0.3
#: Only each session's best candidate gains its session's evidence (True), or all of its candidates.
SESSION_BEST_ONLY: Final = True
#: Session evidence and diversity only for questions that gather facts across conversations (True).
SESSION_GATED: Final = True

# A question that counts, sums or lists what was told over time ("how many ... in total", "all the ...",
# "different ..."): its answer is one fact from each of several conversations.
_ACROSS: Final = re.compile(
    r"\bhow (?:many|much)\b|\b(?:in )?total\b|\ball (?:the|of)\b|\bdifferent\b|\beach\b|\bevery\b"
    r"|\bso far\b|\bcombined\b|\baltogether\b",
    re.IGNORECASE,
)


def asks_across_sessions(query: str) -> bool:
    """Whether ``query`` gathers facts told across conversations: it counts, sums or lists them."""
    return _ACROSS.search(query) is not None


def gathering_words(query: str) -> frozenset[str]:
    """The words by which ``query`` gathers ("how", "many", "total", ...): its form, not its topic."""
    return frozenset(w.lower() for m in _ACROSS.finditer(query) for w in m.group(0).split())


def session_key(memory: Memory) -> str | None:
    """The conversation ``memory`` belongs to: its ``session``, else a ``metadata["session"]`` string or int."""
    if memory.session is not None:
        return memory.session
    raw = memory.metadata.get("session")
    return str(raw) if isinstance(raw, str | int) and not isinstance(raw, bool) else None


def session_evidence(fused: Sequence[Fused], sessions: Mapping[str, str | None], *, share: float) -> dict[str, float]:
    """Each candidate's session evidence in [0, 1]: ``best + share * (sum - best)`` over its session's
    candidates, divided by the largest such value. A candidate without a session is its own session."""
    totals: dict[str, float] = {}
    best: dict[str, float] = {}
    for f in fused:
        key = sessions.get(f.id) or f"\0{f.id}"
        totals[key] = totals.get(key, 0.0) + f.relevance
        best[key] = max(best.get(key, 0.0), f.relevance)
    raw = {k: best[k] + share * (totals[k] - best[k]) for k in totals}
    top = max(raw.values(), default=0.0)
    if top <= 0.0:
        return dict.fromkeys((f.id for f in fused), 0.0)
    return {f.id: raw[sessions.get(f.id) or f"\0{f.id}"] / top for f in fused}


def weigh_by_session(
    fused: Sequence[Fused],
    sessions: Mapping[str, str | None],
    *,
    weight: float = SESSION_WEIGHT,
    share: float = SESSION_SHARE,
    best_only: bool = SESSION_BEST_ONLY,
) -> list[Fused]:
    """``relevance' = (relevance + weight * session evidence) / (1 + weight)``, best first (ties by id).

    ``sessions``: each candidate's :func:`session_key`. With ``best_only``, only each session's best candidate
    gains (the others get 0 evidence): the session is lifted by its best turn, and its other turns do not crowd
    out the turns of other sessions (measured against lifting them all: bench/RESULTS.md, issue 21 third round).
    With ``weight`` 0, or no two candidates sharing a session, the order is unchanged; relevance stays within
    [0, 1].
    """
    if not 0.0 <= weight <= 10.0:
        raise ValueError("weight must be within [0, 10]")
    if not 0.0 <= share <= 1.0:
        raise ValueError("share must be within [0, 1]")
    keys = [sessions.get(f.id) for f in fused]
    named = [k for k in keys if k is not None]
    if weight == 0.0 or len(named) == len(set(named)):
        return list(fused)
    evidence = session_evidence(fused, sessions, share=share)
    if best_only:
        firsts: dict[str, str] = {}
        for f in sorted(fused, key=lambda f: (-f.relevance, f.id)):
            firsts.setdefault(sessions.get(f.id) or f"\0{f.id}", f.id)
        best = set(firsts.values())
        evidence = {i: (e if i in best else 0.0) for i, e in evidence.items()}
    out = [replace(f, relevance=(f.relevance + weight * evidence[f.id]) / (1.0 + weight)) for f in fused]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out

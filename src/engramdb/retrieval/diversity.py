"""Session diversity: one conversation cannot take every place of a result list. Pure functions.

A question that gathers facts told across conversations ("how many games have I played in total?") needs one
turn of each, while the conversation that matches its words best (a long chat about "totals" in a table) has
many turns that each match a little. Ranked by relevance alone, that one session's turns fill the top ten and
push out the turns of the other sessions. So each further candidate of a session, after the first ``free``
of them, counts at ``repeat`` times its relevance, and ``repeat`` again for the one after (a geometric
decay): a session's best turns keep their places, and the places below them go to other sessions unless
the session's later turns are clearly better. A candidate without a session is a session of its own, so a
store of notes ranks exactly as without this step (bench/RESULTS.md, issue 21 fourth round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from engramdb.retrieval.ranking import Fused

__all__ = ["SESSION_FREE", "SESSION_REPEAT", "diversify_sessions"]

#: What each further candidate of one session counts for, after the first :data:`SESSION_FREE` (1: off).
SESSION_REPEAT: Final = 0.7
#: Candidates of one session that keep their full relevance: a fact is often told over two or three turns.
SESSION_FREE: Final = 3


def diversify_sessions(
    fused: Sequence[Fused],
    sessions: Mapping[str, str | None],
    *,
    repeat: float = SESSION_REPEAT,
    free: int = SESSION_FREE,
) -> list[Fused]:
    """Candidates re-scored for session diversity, best first (ties by id).

    In order of relevance, the ``n``-th candidate of a session (``n`` from 0) gets
    ``relevance x repeat ** max(0, n - free + 1)``. ``sessions``: each candidate's session key (None: a
    session of its own). With ``repeat`` 1, or no session holding more than ``free`` candidates, the order is
    unchanged; relevance stays within [0, 1] and never rises.
    """
    if not 0.0 <= repeat <= 1.0:
        raise ValueError("repeat must be within [0, 1]")
    if free < 1:
        raise ValueError("free must be >= 1")
    if repeat == 1.0:
        return list(fused)
    seen: dict[str, int] = {}
    out = []
    for f in sorted(fused, key=lambda f: (-f.relevance, f.id)):
        key = sessions.get(f.id)
        if key is None:
            out.append(f)
            continue
        n = seen.get(key, 0)
        seen[key] = n + 1
        extra = n - free + 1
        out.append(replace(f, relevance=f.relevance * repeat**extra) if extra > 0 else f)
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out

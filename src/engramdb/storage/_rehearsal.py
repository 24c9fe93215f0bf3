"""The open's rehearsal of a SQLite store's search: both channels once, answers discarded, ended by a caller's search.

What a search does only the first time is then done before the caller's first search (bench/RESULTS.md, first2):
the FTS5 tokeniser's temp tables on the store's connection (~1.3 ms), the vector rows' own connection (~1 ms), each
statement's preparation (~2-3 ms over a search), the first pages of rows, graph and postings. Reads only.

A caller's search that comes while it runs does that work itself, so the rehearsal stops at its next step: going on
would only hold the store's lock and a core beside that search (at 1M memories over 1,000 users, a first search that
met the rehearsal's user scope took 2.6x warm with every page cached: bench/RESULTS.md, issue 27, eighth round).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

from engramdb.storage._arrays import np
from engramdb.storage.base import Filter

__all__ = ["Rehearsal"]

#: Candidates each channel's rehearsal asks for (a search's depth, retrieval.hybrid).
REHEARSAL_LIMIT: Final = 50


class Rehearsal:
    """One store's rehearsal (:meth:`run`, on the warm-up thread) and the note that a caller's search began."""

    def __init__(self) -> None:
        self._asked = threading.Event()
        self._thread: int | None = None

    def note(self) -> None:
        """A channel was asked: by a caller (not the rehearsal's own thread), the rehearsal ends at its next step."""
        if threading.get_ident() != self._thread:
            self._asked.set()

    def run(
        self,
        reading: Callable[..., AbstractContextManager[sqlite3.Connection]],
        model_id: str | None,
        keywords: Callable[..., Sequence[Any]],
        vectors: Callable[..., Sequence[Any]],
    ) -> None:
        """Both channels (``keywords``, ``vectors``: the store's) once for the newest memory's agent, then for its
        user if it has one, with three of its words and its vector (of ``model_id``); unless a caller came first."""
        with reading() as conn:
            # Two lookups by key: as one join ordered by rid SQLite scanned the vectors (~0.3 s at 100k).
            row = conn.execute("SELECT id, agent, user_id, content FROM memories ORDER BY rid DESC LIMIT 1").fetchone()
            got = None
            if row is not None:
                got = conn.execute(
                    "SELECT vec FROM vectors WHERE memory_id = ? AND model_id = ?", (row[0], model_id)
                ).fetchone()
        if row is None or got is None:
            return
        _, agent, user, content = row
        blob = got[0]
        if not isinstance(blob, bytes) or len(blob) % 4:
            return  # a damaged row: the search that reads it reports it
        vector = np.frombuffer(blob, dtype=np.float32)
        if not vector.size or not np.all(np.isfinite(vector)) or not np.any(vector):
            return
        terms = [w for w in (t.strip(".,;:!?\"'()").lower() for t in str(content).split()) if w.isalnum()][:3]
        scopes = [Filter(agent=str(agent))]
        if user is not None:
            scopes.append(Filter(agent=str(agent), users=(None, str(user))))
        self._thread = threading.get_ident()
        try:
            for flt in scopes:
                if self._asked.is_set():
                    return
                keywords(terms or ["warm"], flt, limit=REHEARSAL_LIMIT)
                if self._asked.is_set():
                    return
                vectors(vector, flt, limit=REHEARSAL_LIMIT)
        finally:
            self._thread = None

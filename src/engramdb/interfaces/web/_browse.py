"""The memories page's data: one page of an agent's memories (filtered by kind, tags and dates) or of its search hits.

Browsing is newest first and paged with limit/offset, with an exact count of what the
filters select. Dates are bounds of the store's filter (``Filter.created_after`` and
``created_before``), counted in SQL; since the listing is ordered by creation time, a
date range is a contiguous run of it, starting after the memories newer than its end.
The page itself is read through ``mem.list``, so it is audited like any read. Search
hits are ranked, not listed (at most :data:`SEARCH_DEPTH` deep); their date bounds are the search's own filter.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from engramdb import validate as check
from engramdb.errors import ValidationError
from engramdb.models import Memory
from engramdb.storage.base import Filter

from ._params import BrowseQuery

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = ["SEARCH_DEPTH", "MemoryPage", "browse"]

#: Search results are ranked, not listed: the dashboard pages through the best this many.
SEARCH_DEPTH: Final = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPage:
    """One page of the memories page."""

    memories: list[Memory]
    #: Scores of search hits, by memory id (empty when browsing).
    scores: dict[str, float]
    #: How many memories the filters select (None for a search: hits are ranked, not counted).
    total: int | None
    offset: int
    limit: int
    #: Whether a next page exists.
    more: bool

    @property
    def first(self) -> int:
        """1-based position of the first memory shown (0 when the page is empty)."""
        return self.offset + 1 if self.memories else 0

    @property
    def last(self) -> int:
        """1-based position of the last memory shown."""
        return self.offset + len(self.memories)


def browse(mem: Engram, q: BrowseQuery) -> MemoryPage:
    """The page of ``mem`` that ``q`` asks for."""
    if q.query is not None:
        return _search(mem, q)
    tags = list(q.tags) or None
    # The agent's scope (its own, shared with it, public), as mem.list reads it: the Filter's agent rule.
    flt = Filter(
        agent=check.agent_name(q.agent),
        kinds=None if q.kind is None else (check.kind(q.kind),),
        tags=check.tags(tags) or None,
    )
    repo = mem.store.memories
    # The listing is newest first, so the date range is one contiguous run of it: it starts after
    # the memories created later than `until`, and the store counts both in SQL (indexed on created_at).
    newer = _just_after(q.until) if q.until is not None else None
    start = repo.count(dataclasses.replace(flt, created_after=newer)) if newer is not None else 0
    selected = repo.count(dataclasses.replace(flt, created_after=q.since, created_before=q.until))
    memories: list[Memory] = []
    if q.offset < selected:
        wanted = min(q.limit, selected - q.offset)
        # Read through mem.list (audited like any read), at the range's offset in the whole listing.
        memories = mem.list(agent=q.agent, kind=q.kind, tags=tags, limit=wanted, offset=start + q.offset)
    return MemoryPage(
        memories=memories,
        scores={},
        total=selected,
        offset=q.offset,
        limit=q.limit,
        more=q.offset + q.limit < selected,
    )


def _just_after(moment: datetime) -> datetime | None:
    """The first instant after ``moment`` (stored times have microsecond precision); None past the last one."""
    try:
        return moment + timedelta(microseconds=1)
    except OverflowError:
        return None


def _search(mem: Engram, q: BrowseQuery) -> MemoryPage:
    if q.offset + q.limit > SEARCH_DEPTH:
        raise ValidationError(f"search results go {SEARCH_DEPTH} deep: offset + limit must be at most {SEARCH_DEPTH}")
    assert q.query is not None
    # One more than the page, to know whether a next page exists.
    depth = q.offset + q.limit + 1
    kept = mem.search(
        q.query, agent=q.agent, kind=q.kind, tags=list(q.tags) or None, limit=depth, since=q.since, until=q.until
    )
    page = kept[q.offset : q.offset + q.limit]
    return MemoryPage(
        memories=[h.memory for h in page],
        scores={h.memory.id: h.score for h in page},
        total=None,
        offset=q.offset,
        limit=q.limit,
        more=len(kept) > q.offset + q.limit,
    )

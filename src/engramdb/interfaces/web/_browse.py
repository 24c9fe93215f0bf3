"""The memories page's data: one page of an agent's memories (filtered by kind, tags and dates) or of its search hits.

Browsing is newest first and paged with limit/offset, with an exact count of what the
filters select, so a page costs the same at 100 or 100,000 memories. The store's
filter has no date bounds; since its listing is ordered by creation time (newest
first), a date range is a contiguous run of that listing, and its two ends are found
by searching the offsets (interpolation on the timestamps, safeguarded by bisection:
a handful of one-row reads). The page itself is read through ``mem.list``, so it is
audited like any read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

from engramdb.errors import ValidationError
from engramdb.models import Memory
from engramdb.recall import read_filter
from engramdb.storage.base import Filter, MemoryRepo

from ._params import BrowseQuery

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = ["SEARCH_DEPTH", "MemoryPage", "browse"]

#: Search results are ranked, not listed: the dashboard pages through the best this many.
SEARCH_DEPTH: Final = 1000
#: A date bound's last stretch is read in one go once it is this narrow.
_WINDOW: Final = 200


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
    flt = read_filter(q.agent, q.kind, tags)
    repo = mem.store.memories
    total = repo.count(flt)
    start, end = 0, total
    seen: dict[int, datetime | None] = {}
    if q.until is not None:
        start = _first_index(repo, flt, start, end, q.until, strict=False, seen=seen)
    if q.since is not None:
        end = _first_index(repo, flt, start, end, q.since, strict=True, seen=seen)
    selected = end - start
    memories: list[Memory] = []
    if q.offset < selected:
        wanted = min(q.limit, selected - q.offset)
        memories = mem.list(agent=q.agent, kind=q.kind, tags=tags, limit=wanted, offset=start + q.offset)
    return MemoryPage(
        memories=memories,
        scores={},
        total=selected,
        offset=q.offset,
        limit=q.limit,
        more=q.offset + q.limit < selected,
    )


def _search(mem: Engram, q: BrowseQuery) -> MemoryPage:
    if q.offset + q.limit > SEARCH_DEPTH:
        raise ValidationError(f"search results go {SEARCH_DEPTH} deep: offset + limit must be at most {SEARCH_DEPTH}")
    assert q.query is not None
    # One more than the page, to know whether a next page exists.
    depth = q.offset + q.limit + 1
    if q.since is not None or q.until is not None:
        depth = SEARCH_DEPTH  # the date filter applies after ranking: look at every hit that could be shown
    hits = mem.search(q.query, agent=q.agent, kind=q.kind, tags=list(q.tags) or None, limit=depth)
    kept = [h for h in hits if _in_range(h.memory.created_at, q.since, q.until)]
    page = kept[q.offset : q.offset + q.limit]
    return MemoryPage(
        memories=[h.memory for h in page],
        scores={h.memory.id: h.score for h in page},
        total=None,
        offset=q.offset,
        limit=q.limit,
        more=len(kept) > q.offset + q.limit,
    )


def _in_range(at: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or at >= since) and (until is None or at <= until)


def _first_index(
    repo: MemoryRepo, flt: Filter, lo: int, hi: int, bound: datetime, *, strict: bool, seen: dict[int, datetime | None]
) -> int:
    """The first position in ``[lo, hi)`` of the newest-first listing created before ``bound`` (``hi`` if none).

    "Before" is ``created_at < bound`` when ``strict``, else ``<=``. The listing is
    ordered by creation time, newest first, so the positions where this holds are a
    suffix. Reads are unaudited and only give positions (no memory is shown from them):
    one-row reads while the range is wide (``seen`` keeps them for the other bound),
    then one read of the last :data:`_WINDOW` rows.
    """

    def at(position: int) -> datetime | None:
        if position not in seen:
            found = repo.list(flt, limit=1, offset=position)
            # None: the store changed under us (memories removed), so the end came early.
            seen[position] = found[0].created_at if found else None
        return seen[position]

    def before(moment: datetime | None) -> bool:
        return moment is None or (moment < bound if strict else moment <= bound)

    if lo >= hi:
        return hi
    lo_at = at(lo)
    if before(lo_at):
        return lo
    hi -= 1
    hi_at = at(hi)
    if not before(hi_at):
        return hi + 1
    # Invariant: position lo is not before the bound, position hi is.
    step = 0
    while hi - lo > _WINDOW:
        step += 1
        mid = (lo + hi) // 2
        if step % 2 and lo_at is not None and hi_at is not None and lo_at > hi_at:
            # Interpolate on odd steps (creation times are spread roughly evenly in most stores);
            # bisect on even ones, so the worst case stays logarithmic.
            share = (lo_at - bound) / (lo_at - hi_at)
            mid = lo + round(share * (hi - lo))
        mid = min(max(mid, lo + 1), hi - 1)
        moment = at(mid)
        if before(moment):
            hi, hi_at = mid, moment
        else:
            lo, lo_at = mid, moment
    rows = repo.list(flt, limit=hi - lo - 1, offset=lo + 1) if hi - lo > 1 else []
    for i, memory in enumerate(rows):
        if before(memory.created_at):
            return lo + 1 + i
    return hi

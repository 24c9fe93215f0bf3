"""Query parameters of the dashboard's pages, validated: bad input is a ValidationError with a one-line message.

The dashboard reads ``request.query_params`` itself instead of letting FastAPI parse
typed parameters, so that every bad value becomes the dashboard's own HTML 422 page (never
the REST API's JSON answer, never a 500). Names and kinds are checked by the
library's own validators, so the messages match the rest of engramdb.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

from engramdb import validate as check
from engramdb.errors import ValidationError
from engramdb.models import Kind

__all__ = ["MAX_OFFSET", "MAX_PAGE", "MAX_QUERY_CHARS", "NAMES", "BrowseQuery", "Params"]

#: Memories on one page at most (and the default).
MAX_PAGE: Final = 200
DEFAULT_PAGE: Final = 50
#: Offsets beyond this are refused (no store holds that many memories for one agent page by page).
MAX_OFFSET: Final = 100_000_000
#: A search query from the browser (the library allows much longer ones; a form does not need them).
MAX_QUERY_CHARS: Final = 2000
#: Every query parameter of the dashboard's pages, and what it means.
NAMES: Final = {
    "agent": "The agent whose pages these are (with an API key: the key's agent unless it is an admin key).",
    "q": "Search text: the best matches instead of the newest memories.",
    "kind": "Only memories of this kind.",
    "tag": "Only memories with these tags (comma-separated; all must be present).",
    "from": "Created on or after this date (YYYY-MM-DD, UTC) or ISO 8601 time.",
    "to": "Created on or before this date (the whole day) or ISO 8601 time.",
    "limit": "Rows on one page.",
    "offset": "Rows skipped before this page.",
    "id": "The memory to show.",
    "all": "1: every failure pattern, not only recurring ones.",
}
_INT_RE: Final = re.compile(r"[0-9]{1,12}")


class Params:
    """The query string of one request, read one validated parameter at a time."""

    def __init__(self, query: Mapping[str, Sequence[str]]) -> None:
        self._query = query

    def text(self, name: str) -> str | None:
        """The parameter's value, or None when it is absent or empty (a form's empty field)."""
        values = self._query.get(name, ())
        if len(values) > 1:
            raise ValidationError(f"give {name} once, not {len(values)} times")
        if not values or values[0] == "":
            return None
        value = values[0]
        if "\x00" in value:
            raise ValidationError(f"{name} contains a NUL character")
        return value

    def requested_agent(self) -> str | None:
        """The agent the request names, checked (None when not given)."""
        value = self.text("agent")
        return None if value is None else check.agent_name(value)

    def reject_unknown(self) -> None:
        """Refuse parameters no page takes (a typo would otherwise silently change nothing)."""
        unknown = sorted(set(self._query) - set(NAMES))
        if unknown:
            raise ValidationError(f"unknown query parameter {', '.join(check.shown(u) for u in unknown[:5])}")

    def integer(self, name: str, *, default: int, low: int, high: int) -> int:
        """A whole number from ``low`` to ``high``."""
        value = self.text(name)
        if value is None:
            return default
        if not _INT_RE.fullmatch(value) or not low <= int(value) <= high:
            raise ValidationError(f"{name} must be a whole number from {low} to {high}, not {check.shown(value)}")
        return int(value)

    def flag(self, name: str, *, default: bool) -> bool:
        """``1``/``true``/``yes`` or ``0``/``false``/``no``."""
        value = self.text(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValidationError(f"{name} must be 1 or 0, not {check.shown(value)}")

    def memory_id(self) -> str:
        """The ``id`` parameter (required)."""
        value = self.text("id")
        if value is None:
            raise ValidationError("id is required: the id of the memory to show")
        return check.name(value, what="id")

    def day(self, name: str, *, end: bool) -> datetime | None:
        """A date (``YYYY-MM-DD``, UTC) or an ISO 8601 time; a date as an upper bound means the end of that day."""
        value = self.text(name)
        if value is None:
            return None
        try:
            if len(value) == 10:
                day = date.fromisoformat(value)
                start = datetime.combine(day, time(), tzinfo=UTC)
                return start + timedelta(days=1) - timedelta(microseconds=1) if end else start
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(
                f"{name} must be a date like 2024-05-31 or an ISO 8601 time, not {check.shown(value)}"
            ) from None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)

    def browse(self, agent: str) -> BrowseQuery:
        """The filters and the page of the memories page of ``agent``."""
        query = self.text("q")
        if query is not None:
            if len(query) > MAX_QUERY_CHARS:
                raise ValidationError(f"q is too long ({len(query)} characters; the limit is {MAX_QUERY_CHARS})")
            query = check.content(query, what="q") if query.strip() else None
        kind_text = self.text("kind")
        kind = check.kind(kind_text) if kind_text is not None else None
        tag_text = self.text("tag")
        tags = check.tags([t.strip() for t in tag_text.split(",") if t.strip()]) if tag_text is not None else ()
        since = self.day("from", end=False)
        until = self.day("to", end=True)
        if since is not None and until is not None and since > until:
            raise ValidationError("from must not be after to")
        limit = self.integer("limit", default=DEFAULT_PAGE, low=1, high=MAX_PAGE)
        offset = self.integer("offset", default=0, low=0, high=MAX_OFFSET)
        return BrowseQuery(
            agent=agent, query=query, kind=kind, tags=tags, since=since, until=until, limit=limit, offset=offset
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowseQuery:
    """What the memories page shows: an agent's memories, filtered, one page of them."""

    agent: str
    #: Search text: the page shows the best matches instead of the newest memories.
    query: str | None = None
    kind: Kind | None = None
    tags: tuple[str, ...] = ()
    #: Created at or after ``since`` and at or before ``until`` (both inclusive).
    since: datetime | None = None
    until: datetime | None = None
    limit: int = DEFAULT_PAGE
    offset: int = 0

    def form(self) -> dict[str, str]:
        """The query as the page's form shows it (and as links repeat it)."""
        out = {"agent": self.agent}
        if self.query is not None:
            out["q"] = self.query
        if self.kind is not None:
            out["kind"] = self.kind
        if self.tags:
            out["tag"] = ",".join(self.tags)
        if self.since is not None:
            out["from"] = _shown_time(self.since, end=False)
        if self.until is not None:
            out["to"] = _shown_time(self.until, end=True)
        if self.limit != DEFAULT_PAGE:
            out["limit"] = str(self.limit)
        return out


def _shown_time(moment: datetime, *, end: bool) -> str:
    """A bound as the user can type it back: the date alone when it is a whole day's bound."""
    utc = moment.astimezone(UTC)
    whole = time.max if end else time()
    if utc.timetz().replace(tzinfo=None) == whole:
        return utc.date().isoformat()
    return utc.isoformat()

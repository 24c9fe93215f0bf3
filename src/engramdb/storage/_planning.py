"""What a write changes, decided before any SQL runs: the fields an update really changes, what
sharing or unsharing does to a memory's visibility and history, and keyset batching of reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engramdb.errors import ValidationError
from engramdb.models import Memory
from engramdb.storage._codecs import (
    FIELD_COLUMNS,
    HistoryRow,
    column_value,
    history_row,
    normalise_changes,
    tag_rows,
    ts,
)

__all__ = ["KEY_WINDOW", "ShareChange", "UpdatePlan", "keyset_batches", "on_share", "on_unshare", "plan_update"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdatePlan:
    """What an ``update`` writes: only the fields whose value really changes."""

    #: Old values of the changed fields.
    before: dict[str, Any]
    #: New values of the changed fields (empty: nothing to write, no history entry).
    after: dict[str, Any]
    #: Column -> stored value of the changed fields plus ``updated_at``.
    columns: dict[str, Any]
    #: The history entry to write.
    history: HistoryRow

    @property
    def withdraws_shares(self) -> bool:
        """Private means the owner alone: making a memory private withdraws its shares."""
        return bool(self.after.get("visibility") == "private")

    @property
    def new_tag_rows(self) -> list[tuple[str, str]] | None:
        """The memory's new ``memory_tags`` rows, or None if its tags did not change."""
        return tag_rows(self.history[0], self.after["tags"]) if "tags" in self.after else None


def plan_update(old: Memory, changes: Mapping[str, Any], *, action: str, actor: str, at: datetime) -> UpdatePlan:
    """Diff checked ``changes`` (see :func:`check_changes`) against ``old``, as one ``action`` by ``actor``.

    Only fields whose value really changes are written and recorded. The store then also drops
    the old vector when ``content`` changes without a new one (it no longer describes the text,
    so the memory shows up in ``vectors.iter_stale``), and making a memory ``private``
    withdraws every share of it (:attr:`UpdatePlan.withdraws_shares`).
    """
    new = normalise_changes(changes)
    before = {k: getattr(old, k) for k, v in new.items() if getattr(old, k) != v}
    after = {k: new[k] for k in before}
    columns = {FIELD_COLUMNS.get(k, k): column_value(k, v) for k, v in after.items()}
    columns["updated_at"] = ts(at)
    history = history_row(old.id, action, at=at, actor=actor, before=before, after=after, what="changes")
    return UpdatePlan(before=before, after=after, columns=columns, history=history)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareChange:
    """What sharing or unsharing one memory changes besides the ``shares`` rows."""

    #: The memory's new visibility, or None if it keeps its own.
    visibility: str | None
    before: dict[str, Any]
    after: dict[str, Any]

    def history(self, memory_id: str, action: str, *, at: datetime, actor: str) -> HistoryRow:
        """The ``share``/``unshare`` history entry of ``memory_id``."""
        return history_row(memory_id, action, at=at, actor=actor, before=self.before, after=self.after, what="change")


def on_share(visibility: str, to_agent: str) -> ShareChange:
    """A memory newly shared with ``to_agent``: a private one becomes ``shared`` (public stays public)."""
    if visibility == "private":
        return ShareChange(
            visibility="shared",
            before={"visibility": "private"},
            after={"shared_with": to_agent, "visibility": "shared"},
        )
    return ShareChange(visibility=None, before={}, after={"shared_with": to_agent})


def on_unshare(visibility: str, to_agent: str, *, shares_left: bool) -> ShareChange:
    """A memory that lost its share(s) with ``to_agent``: ``shared`` with none left becomes ``private``.

    A ``public`` memory stays public: that is a visibility change, made with ``update``.
    """
    if not shares_left and visibility == "shared":
        return ShareChange(
            visibility="private",
            before={"shared_with": to_agent, "visibility": "shared"},
            after={"visibility": "private"},
        )
    return ShareChange(visibility=None, before={"shared_with": to_agent}, after={})


#: Keys one query of :func:`keyset_batches` looks at (measured: ~20k memories scan in tens of ms).
KEY_WINDOW: Final = 20_000


def keyset_batches(
    batch: int, fetch: Callable[[int, int, int], Sequence[Sequence[Any]]], *, top: int, window: int = KEY_WINDOW
) -> Iterator[list[tuple[str, str]]]:
    """Batches of (id, content) from ``fetch(after_key, upto_key, batch)`` rows ``(key, id, content)`` in key
    order, over the keys up to ``top``.

    Each query is fresh, so the caller may write between batches, and looks at no more than ``window``
    keys: a scan that finds few rows (the open-time check for memories without a vector, which usually
    finds none) never holds the store for long. As one query over a million memories it took seconds,
    and every search waited for it (bench/RESULTS.md, "Figures moved out of the source").
    """
    if batch < 1:
        raise ValidationError("batch must be at least 1")
    last = 0
    pending: list[tuple[str, str]] = []
    while last < top:
        upto = min(last + window, top)
        rows = fetch(last, upto, batch)
        # A full answer may stop short of the window's end: resume after its last key.
        last = int(rows[-1][0]) if len(rows) >= batch else upto
        pending.extend((memory_id, content) for _, memory_id, content in rows)
        while len(pending) >= batch:
            yield pending[:batch]
            pending = pending[batch:]
    if pending:
        yield pending

"""Does every recorded change have its audit entry? A pure cross-check of history against the audit trail.

Each write commits its history entries and its audit entries in one transaction, so a change
without an entry means a write escaped the trail (or the trail lost entries). The rule, per
history entry of an audited action (:data:`CHECKED_ACTIONS`):

* an audit entry for the same memory, at the same time, with an action that records it
  (the same action; a ``create`` may also be recorded as ``import`` or ``merge``, a ``forget``
  as ``retention``, a ``merge`` as ``import``); or
* an import or knowledge merge of that memory (an entry whose detail names its ``origin_id``)
  at or after the change: imported memories bring their history from the other store.

Changes older than the first audit entry were made before the trail began and are skipped,
as are history actions outside :data:`CHECKED_ACTIONS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from engramdb.models import AuditEvent, Change
from engramdb.models.health import AuditCoverage

__all__ = ["CHECKED_ACTIONS", "RECORDED_AS", "coverage"]

#: History actions every write records in the audit trail.
CHECKED_ACTIONS: Final = frozenset({"create", "update", "forget", "merge", "share", "unshare", "feedback"})

#: History action -> the audit actions that record it.
RECORDED_AS: Final = {
    "create": frozenset({"create", "import", "merge"}),
    "update": frozenset({"update"}),
    "forget": frozenset({"forget", "retention"}),
    "merge": frozenset({"merge", "import"}),
    "share": frozenset({"share"}),
    "unshare": frozenset({"unshare"}),
    "feedback": frozenset({"feedback"}),
}

_WRITE_ACTIONS: Final = frozenset().union(*RECORDED_AS.values())


def coverage(history: Iterable[Change], events: Iterable[AuditEvent]) -> AuditCoverage:
    """Check every change in ``history`` against the audit ``events`` (both may be generators over pages).

    ``events`` is read whole first (oldest first, as stored); only write entries naming a
    memory are kept in memory.
    """
    exact: set[tuple[str, str, datetime]] = set()
    transfers: dict[str, datetime] = {}
    first: datetime | None = None
    for event in events:
        if first is None:
            first = event.at
        if event.memory_id is None or event.action not in _WRITE_ACTIONS:
            continue
        exact.add((event.memory_id, event.action, event.at))
        if "origin_id" in event.detail:
            latest = transfers.get(event.memory_id)
            transfers[event.memory_id] = event.at if latest is None else max(latest, event.at)
    checked = skipped = 0
    missing: list[Change] = []
    for change in history:
        if change.action not in CHECKED_ACTIONS or first is None or change.at < first:
            skipped += 1
            continue
        checked += 1
        if any((change.memory_id, action, change.at) in exact for action in RECORDED_AS[change.action]):
            continue
        imported = transfers.get(change.memory_id)
        if imported is not None and change.at <= imported:
            continue
        missing.append(change)
    return AuditCoverage(checked=checked, skipped=skipped, missing=tuple(missing))

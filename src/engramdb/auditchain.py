"""The audit trail's hash chain: hashing, chaining and verification. Pure, and below storage.

Storage appends entries with :func:`chain`; the audit service checks them with :func:`verify`.

Every entry's hash is ``sha256(previous hash + canonical JSON of the entry)``, the
entry being its sequence number, time, action, acting agent, memory id and detail.
The first entry chains to :data:`GENESIS`. Editing any field of an entry changes
its hash; removing, reordering or inserting entries breaks the sequence numbers or
the link to the previous hash; cutting entries off the end is caught against the
*head* (last sequence number and hash) that the store keeps beside the log. Someone
able to rewrite the whole file can recompute every hash: for that threat, keep the
head hash that ``engram audit verify`` prints somewhere else and compare.

Entries never hold memory content, only ids, kinds and counts, so forgetting a
memory never needs to touch the append-only log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Final

from engramdb.models.audit import GENESIS, AuditEvent, AuditRecord, Verification

__all__ = [
    "ACTIONS",
    "GENESIS",
    "AuditRecord",
    "Verification",
    "canonical",
    "chain",
    "entry_hash",
    "format_at",
    "verify",
]

#: Actions engramdb records. Others are allowed (extensions), these are the ones it writes itself.
ACTIONS: Final = frozenset(
    {"create", "update", "merge", "forget", "retention", "get", "list", "search", "share", "unshare",
     "export", "import"}
)  # fmt: skip


def format_at(at: datetime) -> str:
    """The one text form of a timestamp that is hashed and stored (UTC, microseconds)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def canonical(seq: int, record: AuditRecord | AuditEvent) -> bytes:
    """The canonical JSON of an entry: sorted keys, no spaces, UTF-8."""
    body = {
        "seq": seq,
        "at": format_at(record.at),
        "action": record.action,
        "agent": record.agent,
        "memory_id": record.memory_id,
        "detail": dict(record.detail),
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def entry_hash(prev_hash: str, seq: int, record: AuditRecord | AuditEvent) -> str:
    """``sha256(prev_hash + canonical(entry))`` as lower-case hex."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical(seq, record)).hexdigest()


def chain(records: Sequence[AuditRecord], *, prev_hash: str, last_seq: int) -> list[AuditEvent]:
    """Number and hash ``records`` after the entry ``(last_seq, prev_hash)`` (``(0, GENESIS)`` when empty)."""
    events: list[AuditEvent] = []
    for offset, record in enumerate(records, start=1):
        seq = last_seq + offset
        digest = entry_hash(prev_hash, seq, record)
        events.append(
            AuditEvent(
                seq=seq,
                action=record.action,
                agent=record.agent,
                memory_id=record.memory_id,
                at=record.at,
                detail=dict(record.detail),
                hash=digest,
            )
        )
        prev_hash = digest
    return events


def verify(
    events: Iterable[AuditEvent], *, head: tuple[int, str] | None, anchor: tuple[int, str] | None = None
) -> Verification:
    """Check ``events`` (the whole log, oldest first) against their hashes and the stored ``head``.

    ``head`` is the ``(seq, hash)`` the store recorded with its last append (None:
    nothing was ever appended). ``anchor`` is a ``(seq, hash)`` kept outside the store
    (from an earlier verification): that entry must still be in the chain, unchanged,
    which catches a rewrite of the whole file or entries cut off the end together with
    the head. Streams: ``events`` may be a generator over batches.
    """
    prev_hash, expected_seq, checked = GENESIS, 1, 0
    anchored = anchor is None
    for event in events:
        if event.seq != expected_seq:
            what = "removed" if event.seq > expected_seq else "duplicated or reordered"
            return Verification(
                ok=False,
                checked=checked,
                bad_seq=event.seq,
                reason=f"entry {expected_seq} expected, found {event.seq}: entries were {what}",
            )
        try:
            recomputed = entry_hash(prev_hash, event.seq, event)
        except (TypeError, ValueError):
            recomputed = ""
        if recomputed != event.hash:
            return Verification(
                ok=False,
                checked=checked,
                bad_seq=event.seq,
                reason=f"entry {event.seq} does not match its hash: it, or the link to the entry before, was changed",
            )
        if anchor is not None and event.seq == anchor[0]:
            if event.hash != anchor[1]:
                return Verification(
                    ok=False,
                    checked=checked,
                    bad_seq=event.seq,
                    reason=f"entry {event.seq} no longer has the hash kept outside the store: the log was rewritten",
                )
            anchored = True
        prev_hash, expected_seq, checked = event.hash, expected_seq + 1, checked + 1
    last_seq = expected_seq - 1
    if not anchored and anchor is not None:
        return Verification(
            ok=False,
            checked=checked,
            head_seq=last_seq,
            head_hash=prev_hash,
            reason=f"entry {anchor[0]}, kept outside the store, is gone: entries were removed from the end",
        )
    if head is None:
        if checked:
            return Verification(
                ok=False,
                checked=checked,
                head_seq=last_seq,
                head_hash=prev_hash,
                reason="the log has entries but the store recorded no head: the head was removed",
            )
        return Verification(ok=True, checked=0)
    head_seq, head_hash = head
    if (head_seq, head_hash) != (last_seq, prev_hash):
        return Verification(
            ok=False,
            checked=checked,
            head_seq=last_seq,
            head_hash=prev_hash,
            reason=f"the log ends at entry {last_seq} but the store's head is entry {head_seq}: "
            "entries were removed from the end (or the head was changed)",
        )
    return Verification(ok=True, checked=checked, head_seq=last_seq, head_hash=prev_hash)

"""The audit trail as a service: read entries (``log``) and verify the hash chain (``verify``, ``verification``).

Entries are appended by the write pipeline and the reads (:mod:`engramdb.pipeline`,
:mod:`engramdb.recall`), inside the transaction of what they record; the chain itself
(hashing, verification) is :mod:`engramdb.auditchain`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from engramdb import _validate as check
from engramdb import auditchain as chain
from engramdb.auditcoverage import coverage
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.models import AuditEvent, Change, Verification
from engramdb.services._base import Service

__all__ = ["AUDIT_ACTIONS", "AuditService", "check_action"]

#: Every action engramdb writes to the audit trail: the chain's core set, plus the writes of the services
#: (learning, episodes, distillation, keyed memories) and the entry that reports dropped read bookkeeping.
#: A filter on any other action could never match, so :func:`check_action` rejects it.
AUDIT_ACTIONS: Final = chain.ACTIONS | frozenset(
    {"feedback", "resolve", "supersede", "distill", "archive", "episode-event", "episode-end", "bookkeeping_dropped"}
)


def _parse_anchor(text: object) -> tuple[int, str]:
    if not isinstance(text, str) or len(text) > 100:
        raise ValidationError(f"expect must look like SEQ:HASH (64 hex digits), not {check.shown(text)}")
    seq, sep, digest = text.strip().partition(":")
    ok_seq = seq.isascii() and seq.isdigit() and len(seq) <= 19
    if not sep or not ok_seq or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValidationError(f"expect must look like SEQ:HASH (64 hex digits), not {check.shown(text)}")
    return int(seq), digest


def check_action(action: object) -> str:
    """``action`` if the audit trail can hold it (:data:`AUDIT_ACTIONS`); else ValidationError listing them."""
    text = check.name(action, what="action")
    if text not in AUDIT_ACTIONS:
        raise ValidationError(
            f"unknown audit action {check.shown(text)} (choose from {', '.join(sorted(AUDIT_ACTIONS))})"
        )
    return text


class AuditService(Service):
    """Who did what to which memory, and when; and whether anyone tampered with that record."""

    def log(
        self,
        *,
        agent: str | None = None,
        limit: int = 100,
        memory_id: str | None = None,
        action: str | None = None,
    ) -> list[AuditEvent]:
        """Audit entries, newest first; ``agent``, ``memory_id`` and ``action`` narrow them to those.

        An ``action`` the trail never holds (not in :data:`AUDIT_ACTIONS`, a typo) is a ValidationError, not
        an empty answer.
        """
        if agent is not None:
            agent = check.agent_name(agent)
        if memory_id is not None:
            memory_id = check.memory_id(memory_id)
        if action is not None:
            action = check_action(action)
        return self._store.audit.events(
            agent=agent, memory_id=memory_id, action=action, limit=check.limit(limit), newest_first=True
        )

    def verification(self, *, expect: str | None = None) -> Verification:
        """Verify the whole chain; says where it broke, and the head to keep elsewhere.

        ``expect`` is a head kept outside the store from an earlier check, as
        ``"SEQ:HASH"``: that entry must still be there, unchanged. Only such an outside
        anchor catches someone who rewrote the whole trail, or cut entries off the end
        and fixed the stored head to match.
        """
        anchor = _parse_anchor(expect) if expect is not None else None
        try:
            head = self._store.audit.head()
            result = chain.verify(self._events(), head=head, anchor=anchor)
            if not result.ok:
                return result
            # An intact chain can still miss a change: every history entry must have its audit entry.
            covered = coverage(self._history(), self._events())
        except CorruptStoreError as exc:
            return Verification(ok=False, checked=0, reason=str(exc))
        if covered.missing:
            first = covered.missing[0]
            return Verification(
                ok=False,
                checked=result.checked,
                head_seq=result.head_seq,
                head_hash=result.head_hash,
                reason=f"{len(covered.missing)} change(s) have no audit entry, the first a {first.action!r} "
                f"of memory {first.memory_id!r} at {first.at.isoformat()}",
            )
        return result

    def verify(self) -> bool:
        """False if any entry was edited, removed, reordered or inserted, or a change has no entry
        (see :meth:`verification`)."""
        return self.verification().ok

    def _history(self) -> Iterator[Change]:
        after = 0
        while True:
            page = self._store.memories.history_all(after_seq=after, limit=check.PAGE_SIZE)
            yield from page
            if len(page) < check.PAGE_SIZE:
                return
            after = page[-1].seq

    def _events(self) -> Iterator[AuditEvent]:
        after = 0
        while True:
            page = self._store.audit.events(after_seq=after, limit=check.PAGE_SIZE)
            yield from page
            if len(page) < check.PAGE_SIZE:
                return
            after = page[-1].seq

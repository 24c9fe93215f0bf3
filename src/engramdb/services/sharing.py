"""Consent-based sharing as a service: ``share``, ``unshare`` and ``list``.

What a share selects and who may receive it are the pure rules of
:mod:`engramdb.privacy.sharing`; this service reads the owner's memories, writes the
shares and their audit entries in one transaction.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from engramdb import _validate as check
from engramdb.errors import NotFound
from engramdb.learning import failures
from engramdb.models import AuditRecord, Share
from engramdb.privacy import sharing as rules
from engramdb.services._base import Service, ServiceContext
from engramdb.storage.base import Filter

__all__ = ["SharingService"]


class SharingService(Service):
    """Lets an owner give other agents read access to some of its memories, and take it back."""

    def __init__(self, ctx: ServiceContext) -> None:
        super().__init__(ctx)

    def share(
        self,
        memory_ids: str | Iterable[str] | None = None,
        *,
        from_agent: str,
        to_agent: str = "*",
        tag: str | None = None,
        pattern: str | None = None,
    ) -> int:
        """Share some of ``from_agent``'s own memories with ``to_agent`` (``"*"``: every agent).

        Choose exactly one of: ``memory_ids`` (each must be ``from_agent``'s own, else
        :class:`~engramdb.errors.NotFound` and nothing is shared), ``tag`` (every memory of
        ``from_agent`` carrying it, as of now), or ``pattern`` (the ``failure`` memories of
        ``from_agent`` in that failure pattern, an id from ``mem.failures.patterns``).
        Nothing is copied: recipients read the originals, with ``shared_by`` and
        ``shared_at`` set, until :meth:`unshare`. Returns how many memories are now
        shared with ``to_agent``.
        """
        owner, recipient, ids = self._selected(
            memory_ids, from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern
        )
        now = self._clock()
        with self._pipeline.transaction():
            if ids:
                self._store.shares.share(ids, from_agent=owner, to_agent=recipient, at=now)
            self._audit([_record("share", owner, i, now, to_agent=recipient) for i in ids])
        return len(ids)

    def unshare(
        self,
        memory_ids: str | Iterable[str] | None = None,
        *,
        from_agent: str,
        to_agent: str = "*",
        tag: str | None = None,
        pattern: str | None = None,
    ) -> int:
        """Revoke shares made by :meth:`share` (same selectors); ``to_agent="*"`` revokes every recipient.

        Revoking one agent leaves a share with everyone (``"*"``) in place, and a memory
        whose visibility is ``public`` stays readable by all until its visibility changes.
        Copies made earlier by ``mem.knowledge.merge`` are the receiver's own and stay.
        Returns how many memories lost a share.
        """
        owner, recipient, ids = self._selected(
            memory_ids, from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern
        )
        now = self._clock()
        with self._pipeline.transaction():
            revoked = self._store.shares.unshare(ids, from_agent=owner, to_agent=recipient, at=now) if ids else 0
            self._audit([_record("unshare", owner, i, now, to_agent=recipient) for i in ids])
        return revoked

    def list(self, *, from_agent: str | None = None, to_agent: str | None = None) -> builtins.list[Share]:
        """Shares in force, oldest first: those ``from_agent`` made, and/or those reaching ``to_agent``.

        Shares reaching an agent include shares with everyone (``to_agent == "*"``)
        made by other agents. With neither argument: every share in the store.
        """
        owner = check.agent_name(from_agent, what="from_agent") if from_agent is not None else None
        shares = self._store.shares
        if to_agent is None:
            return shares.list(from_agent=owner)
        if to_agent == rules.ALL_AGENTS:
            return shares.list(from_agent=owner, to_agent=rules.ALL_AGENTS)
        reader = check.agent_name(to_agent, what="to_agent")
        everyone = shares.list(from_agent=owner, to_agent=rules.ALL_AGENTS)
        found = shares.list(from_agent=owner, to_agent=reader) + [s for s in everyone if s.from_agent != reader]
        return sorted(found, key=lambda s: (s.shared_at, s.memory_id, s.to_agent))

    def _selected(
        self,
        memory_ids: str | Iterable[str] | None,
        *,
        from_agent: str,
        to_agent: str,
        tag: str | None,
        pattern: str | None,
    ) -> tuple[str, str, builtins.list[str]]:
        """Validate a share request; return (owner, recipient, ids of the owner's memories it selects)."""
        owner = check.agent_name(from_agent, what="from_agent")
        recipient = rules.recipient(to_agent, from_agent=owner)
        chosen = rules.selection(memory_ids, tag=tag, pattern=pattern)
        if chosen.memory_ids is not None:
            found = self._recall.get_many(chosen.memory_ids, Filter(agent=owner, include_shared=False))
            missing = [i for i in chosen.memory_ids if i not in found]
            if missing:
                # The same answer whether the id does not exist or belongs to someone else.
                raise NotFound(f"no memory {missing[0]!r} owned by agent {owner!r}; nothing was shared or unshared")
            return owner, recipient, list(chosen.memory_ids)
        if chosen.tag is not None:
            flt = Filter(agent=owner, include_shared=False, tags=(chosen.tag,))
            return owner, recipient, [m.id for m in self._recall.all(flt)]
        assert chosen.pattern is not None  # selection() guarantees exactly one selector
        return owner, recipient, self._pattern_ids(chosen.pattern, owner)

    def _pattern_ids(self, pattern: str, owner: str) -> builtins.list[str]:
        """The owner's own ``failure`` memories in failure pattern ``pattern``.

        The pattern is found as ``mem.failures.patterns`` shows it to the owner (its id,
        or a unique prefix of at least 4 characters); only the occurrences the owner
        recorded are selected, never ones others shared with it.
        """
        visible = self._recall.all(Filter(agent=owner, kinds=("failure",)))
        groups = failures.group_occurrences(failures.occurrence_from_memory(m) for m in visible)
        group = failures.find_pattern(groups, pattern, agent=owner, not_found_note="; nothing was shared or unshared")
        owned = {m.id for m in visible if m.agent == owner}
        return [o.id for o in group if o.id in owned]


def _record(action: str, agent: str, memory_id: str | None, at: datetime, **detail: Any) -> AuditRecord:
    return AuditRecord(action=action, agent=agent, memory_id=memory_id, at=at, detail=detail)

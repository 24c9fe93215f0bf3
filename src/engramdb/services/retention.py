"""Retention as a service: the policy in force, and applying it (``cleanup``), on demand or when a store opens.

Which memories expire is decided by the pure :mod:`engramdb.privacy.retention`; each
deletion goes through the write pipeline's ``forget``, so a deletion and its audit entry
commit together.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from engramdb import _validate as check
from engramdb._util import parse_ts
from engramdb.errors import NotFound, ValidationError
from engramdb.models import CleanupReport, Expiry, Memory, RetentionPolicy
from engramdb.privacy.retention import evaluate, load_policy
from engramdb.recall import scope_filter
from engramdb.services._base import Service, ServiceContext
from engramdb.storage.base import Filter

__all__ = ["RETENTION_ACTOR", "RetentionService"]

#: Actor recorded for deletions made by the retention policy.
RETENTION_ACTOR: Final = "retention"
#: Meta key: when the retention policy last ran on a schedule (ISO 8601).
_LAST_RUN: Final = "retention_last_run"


class RetentionService(Service):
    """Forgets what the retention policy expires (``max_age``, ``max_count``, ``decay``)."""

    def __init__(self, ctx: ServiceContext, *, location: str) -> None:
        super().__init__(ctx)
        self._location = location

    @property
    def policy(self) -> RetentionPolicy:
        """The policy in force: the ``retention_file`` setting, else ``retention.toml`` (empty if absent).

        For a store in a folder, ``<folder>/retention.toml`` is looked for before ``<home>/retention.toml``.
        """
        if self._settings.retention_file is not None:
            return load_policy(self._settings.retention_file)
        if self._location != ":memory:" and "://" not in self._location:
            local = Path(self._location) / "retention.toml"
            if local.is_file():
                return load_policy(local)
        return load_policy(self._settings.home / "retention.toml")

    def cleanup(
        self,
        *,
        dry_run: bool = False,
        agent: str | None = None,
        policy: RetentionPolicy | None = None,
        now: datetime | None = None,
        user: str | None = None,
        session: str | None = None,
    ) -> CleanupReport:
        """Apply the policy (default: :attr:`policy`): forget every memory it expires, for good.

        ``dry_run`` only reports. ``agent`` limits it to that agent's own memories, ``user`` to that user's
        (not the agent's own), ``session`` to that thread's. Superseded values of keyed facts age like the rest.
        Deletion is the thorough forget (content, keyword index, vector, shares, history
        contents; a tombstone stays), each with its audit entry in the same transaction.
        """
        dry_run = check.flag(dry_run, what="dry_run")
        if policy is not None and not isinstance(policy, RetentionPolicy):
            raise ValidationError(f"policy must be a RetentionPolicy, not {type(policy).__name__}")
        if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
            raise ValidationError(f"now must be a timezone-aware datetime, not {check.shown(now)}")
        users, sessions = scope_filter(user, session, exact=True)
        policy = self.policy if policy is None else policy
        if agent is not None:
            agent = check.agent_name(agent)
        now = self._clock() if now is None else now
        if policy.empty:
            return CleanupReport(dry_run=dry_run, policy_empty=True)
        expired = evaluate(self._owned_memories(agent, users, sessions), policy, now=now)
        if dry_run:
            return CleanupReport(dry_run=True, expired=tuple(expired))
        gone: list[Expiry] = []
        for expiry in expired:
            try:
                self._pipeline.forget(
                    expiry.memory_id,
                    actor=RETENTION_ACTOR,
                    action="retention",
                    detail={"kind": expiry.kind, "reason": expiry.reason},
                    at=now,
                )
            except NotFound:
                continue  # forgotten meanwhile (another process): nothing left to remove
            gone.append(expiry)
        return CleanupReport(dry_run=False, expired=tuple(gone))

    def run_scheduled(self) -> CleanupReport | None:
        """Run :meth:`cleanup` if ``retention_interval_hours`` passed since the last scheduled run (0: never)."""
        hours = self._settings.retention_interval_hours
        if hours <= 0:
            return None
        now = self._clock()
        try:
            when = parse_ts(self._store.meta.get(_LAST_RUN))
        except ValueError:
            when = None
        if when is not None and now - when < timedelta(hours=hours):
            return None
        report = self.cleanup(now=now)
        self._store.meta.set(_LAST_RUN, now.isoformat())
        return report

    def _owned_memories(
        self, agent: str | None, users: tuple[str | None, ...] | None, sessions: tuple[str | None, ...] | None
    ) -> Iterator[Memory]:
        """Every memory (of ``agent`` only, if given; in the scopes given), page by page."""
        flt = Filter(agent=agent, include_shared=False, users=users, sessions=sessions, superseded=True)
        for page in self._recall.pages(flt):
            yield from (m for m in page if agent is None or m.agent == agent)

"""Values of a store's health check (``engram doctor``): each check's outcome, the whole report, audit coverage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from engramdb.models._encode import Encoded
from engramdb.models.memory import Change

__all__ = ["AuditCoverage", "HealthCheck", "HealthReport"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthCheck(Encoded):
    """One check of the store: its name, whether it passed, and a one-line detail (what is wrong, or what was seen)."""

    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthReport(Encoded):
    """Every check run on a store; ``ok`` when all of them passed."""

    location: str
    checks: tuple[HealthCheck, ...]

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> tuple[HealthCheck, ...]:
        """The checks that did not pass."""
        return tuple(c for c in self.checks if not c.ok)

    _keys: ClassVar[tuple[str, ...]] = ("location", "ok", "checks")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditCoverage(Encoded):
    """Whether every recorded change of a memory has its audit entry.

    ``checked`` changes were compared with the trail; ``skipped`` are older than its first
    entry (made before auditing began) or of actions the trail does not record; ``missing``
    are the changes without an entry.
    """

    checked: int
    skipped: int
    missing: tuple[Change, ...]

    @property
    def ok(self) -> bool:
        """Whether no change lacks its audit entry."""
        return not self.missing

    _keys: ClassVar[tuple[str, ...]] = ("ok", "checked", "skipped", "missing")

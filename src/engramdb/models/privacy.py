"""Values of the privacy area: what is redacted, what the retention policy keeps, and what a cleanup removed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from engramdb.errors import ConfigError
from engramdb.models._encode import Encoded

__all__ = ["DEFAULT_RULE", "CleanupReport", "Expiry", "RedactionPolicy", "RetentionPolicy", "RetentionRule"]

#: The section of a retention policy file that applies to kinds without their own.
DEFAULT_RULE: Final = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactionPolicy(Encoded):
    """What to redact: secrets (on by default) and personal data (off by default)."""

    secrets: bool = True
    pii: bool = False
    #: Region assumed for phone numbers written without a country code (ISO 3166 alpha-2).
    phone_region: str = "US"

    @property
    def enabled(self) -> bool:
        """True when anything at all is redacted."""
        return self.secrets or self.pii


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionRule:
    """How long memories of one kind are kept (every limit is optional)."""

    max_age_days: float | None = None
    max_count: int | None = None
    decay_half_life_days: float | None = None
    decay_floor: float | None = None

    def __post_init__(self) -> None:
        if self.max_age_days is not None and not (math.isfinite(self.max_age_days) and self.max_age_days > 0):
            raise ConfigError(f"max_age_days must be a positive number, not {self.max_age_days!r}")
        if self.max_count is not None and (isinstance(self.max_count, bool) or self.max_count < 0):
            raise ConfigError(f"max_count must be a non-negative integer, not {self.max_count!r}")
        half, floor = self.decay_half_life_days, self.decay_floor
        if (half is None) != (floor is None):
            raise ConfigError("decay_half_life_days and decay_floor go together")
        if half is not None and not (math.isfinite(half) and half > 0):
            raise ConfigError(f"decay_half_life_days must be a positive number, not {half!r}")
        if floor is not None and not 0.0 < floor < 1.0:
            raise ConfigError(f"decay_floor must be within (0, 1), not {floor!r}")

    @property
    def empty(self) -> bool:
        """True when the rule limits nothing."""
        return self.max_age_days is None and self.max_count is None and self.decay_half_life_days is None

    def to_dict(self) -> dict[str, Any]:
        """The limits that are set."""
        return {
            k: v
            for k, v in (
                ("max_age_days", self.max_age_days),
                ("max_count", self.max_count),
                ("decay_half_life_days", self.decay_half_life_days),
                ("decay_floor", self.decay_floor),
            )
            if v is not None
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """Rules by kind; ``default`` applies to kinds without their own rule."""

    rules: Mapping[str, RetentionRule] = field(default_factory=dict)
    default: RetentionRule | None = None

    def rule_for(self, kind: str) -> RetentionRule | None:
        """The rule that applies to ``kind`` (its own, else the default), or None."""
        return self.rules.get(kind, self.default)

    @property
    def empty(self) -> bool:
        """True when nothing ever expires under this policy."""
        return all(r.empty for r in self.rules.values()) and (self.default is None or self.default.empty)

    @staticmethod
    def _json_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The fields in :meth:`to_dict`'s JSON, for ``from_dict``: a section per kind, and the default's."""
        rules = {k: v for k, v in data.items() if k != DEFAULT_RULE}
        return {"rules": rules, **({"default": data[DEFAULT_RULE]} if DEFAULT_RULE in data else {})}

    def to_dict(self) -> dict[str, Any]:
        """The policy as the sections of its file."""
        out = {kind: rule.to_dict() for kind, rule in sorted(self.rules.items())}
        if self.default is not None:
            out[DEFAULT_RULE] = self.default.to_dict()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Expiry(Encoded):
    """A memory the policy removes, and why (``max_age``, ``max_count`` or ``decay``)."""

    memory_id: str
    agent: str
    kind: str
    reason: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanupReport(Encoded):
    """What one application of the retention policy expired, and whether it forgot them (not on a dry run)."""

    dry_run: bool
    #: Every memory the policy expired (on a real run: those forgotten; one forgotten meanwhile is left out).
    expired: tuple[Expiry, ...] = ()
    #: True when the policy in force expires nothing at all (no policy set).
    policy_empty: bool = False

    @property
    def forgotten(self) -> tuple[Expiry, ...]:
        """The memories actually forgotten (none on a dry run)."""
        return () if self.dry_run else self.expired

    _keys: ClassVar[tuple[str, ...]] = ("dry_run", "policy_empty", "expired", "forgotten")

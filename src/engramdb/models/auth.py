"""Values of API keys: a key as listed (never its secret), and a key just created (its secret, shown once)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["ApiKey", "NewApiKey"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """An API key as stored: whose it is and what it may do; the secret itself is never kept (only its hash)."""

    id: str
    #: The agent the key acts as.
    agent: str
    #: A read-only key may read but not change anything.
    read_only: bool = False
    #: An admin key may act for any agent.
    admin: bool = False
    created_at: datetime
    revoked_at: datetime | None = None
    label: str | None = None

    @property
    def active(self) -> bool:
        """Whether the key still works (it was not revoked)."""
        return self.revoked_at is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (no secret, no hash)."""
        return {
            "id": self.id,
            "agent": self.agent,
            "read_only": self.read_only,
            "admin": self.admin,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "label": self.label,
            "active": self.active,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class NewApiKey:
    """A key just created: the record and the secret token, which is shown this once and never stored."""

    key: ApiKey
    token: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the key's fields plus ``token``."""
        return {**self.key.to_dict(), "token": self.token}

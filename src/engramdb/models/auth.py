"""Values of API keys: a key as listed (never its secret), and a key just created (its secret, shown once)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from engramdb.models._encode import Encoded

__all__ = ["ApiKey", "NewApiKey"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey(Encoded):
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

    _keys: ClassVar[tuple[str, ...]] = (
        "id",
        "agent",
        "read_only",
        "admin",
        "created_at",
        "revoked_at",
        "label",
        "active",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NewApiKey:
    """A key just created: the record and the secret token, which is shown this once and never stored."""

    key: ApiKey
    token: str

    @staticmethod
    def _json_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The fields in :meth:`to_dict`'s JSON, for ``from_dict``: the key is the rest of it."""
        key = {k: v for k, v in data.items() if k != "token"}
        return {"key": key, **({"token": data["token"]} if "token" in data else {})}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the key's fields plus ``token``."""
        return {**self.key.to_dict(), "token": self.token}

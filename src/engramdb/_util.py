"""Small helpers shared across the package (ids, clocks)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def new_id() -> str:
    """A fresh memory id: 32 lowercase hex characters."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def parse_ts(value: str | None) -> datetime | None:
    """Parse an ISO 8601 timestamp written by :func:`datetime.isoformat`."""
    if value is None:
        return None
    ts = datetime.fromisoformat(value)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)

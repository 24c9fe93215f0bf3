"""Validation of values that come from callers. Each check raises ValidationError with one clear line."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from engramdb.errors import ValidationError
from engramdb.models import KINDS, VISIBILITIES

__all__ = [
    "agent_name",
    "confidence",
    "content",
    "kind",
    "kinds",
    "limit",
    "metadata",
    "tags",
    "visibility",
]

MAX_CONTENT_CHARS = 1_000_000
MAX_LIMIT = 10_000


def content(value: object, *, what: str = "content") -> str:
    """Non-empty text."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, not {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{what} must not be empty")
    if len(value) > MAX_CONTENT_CHARS:
        raise ValidationError(f"{what} is too long ({len(value)} characters; the limit is {MAX_CONTENT_CHARS})")
    if "\x00" in value:
        raise ValidationError(f"{what} must not contain NUL characters")
    return value


def agent_name(value: object, *, what: str = "agent") -> str:
    """A non-empty agent name without surrounding whitespace; '*' is reserved for 'every agent'."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty name")
    if value != value.strip():
        raise ValidationError(f"{what} {value!r} must not start or end with whitespace")
    if value == "*":
        raise ValidationError(f"{what} '*' is reserved (it means every agent)")
    return value


def kind(value: object) -> str:
    """One of :data:`~engramdb.models.KINDS`."""
    if not isinstance(value, str) or value not in KINDS:
        raise ValidationError(f"unknown kind {value!r} (choose from {', '.join(sorted(KINDS))})")
    return value


def kinds(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """None, one kind, or several kinds."""
    if value is None:
        return None
    if isinstance(value, str):
        return (kind(value),)
    return tuple(kind(k) for k in value)


def tags(value: object) -> tuple[str, ...]:
    """Distinct non-empty tag strings, order kept."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise ValidationError("tags must be a list of strings")
    out: dict[str, None] = {}
    for t in value:
        if not isinstance(t, str) or not t.strip():
            raise ValidationError(f"tag {t!r} must be a non-empty string")
        out[t.strip()] = None
    return tuple(out)


def metadata(value: object) -> dict[str, Any]:
    """A JSON-serialisable mapping with string keys (copied)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"metadata must be a mapping, not {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise ValidationError(f"metadata keys must be strings, not {key!r}")
    try:
        # Round-trip: what we return is exactly what the store will give back.
        out: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"metadata must be JSON-serialisable: {exc}") from exc
    return out


def visibility(value: object) -> str:
    """private, shared or public."""
    if value not in VISIBILITIES:
        raise ValidationError(f"unknown visibility {value!r} (choose from {', '.join(sorted(VISIBILITIES))})")
    return str(value)


def confidence(value: object) -> float:
    """A number within [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"confidence must be a number within [0, 1], not {value!r}")
    if not 0.0 <= value <= 1.0:
        raise ValidationError(f"confidence must be within [0, 1], not {value!r}")
    return float(value)


def limit(value: object, *, what: str = "limit") -> int:
    """A positive integer no larger than MAX_LIMIT."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValidationError(f"{what} must be an integer from 1 to {MAX_LIMIT}, not {value!r}")
    return value

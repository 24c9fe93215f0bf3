"""Argument checks shared by the learning services (the generic ones are in :mod:`engramdb._validate`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from engramdb import _validate as check
from engramdb.errors import ValidationError
from engramdb.learning.signatures import error_text, exception_type

__all__ = ["error", "ids", "label", "label_list", "optional_label", "optional_text", "options", "since", "texts"]


def _iterable(values: object, what: str) -> Iterable[object]:
    """``values`` as something to loop over (a list, tuple, set...), else ValidationError."""
    if values is None or isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ValidationError(f"{what} must be a list of strings")
    return values


def ids(values: object, what: str = "memory ids") -> list[str]:
    """Distinct non-empty id strings (one string counts as a list of one), order kept."""
    if isinstance(values, str):
        values = [values]
    out: dict[str, None] = {}
    for v in _iterable(values, what):
        if not isinstance(v, str) or not v.strip():
            raise ValidationError(f"{what} must be non-empty strings, not {v!r}")
        out[v.strip()] = None
    return list(out)


def options(values: Sequence[str] | None) -> list[str]:
    """A non-empty list of distinct action names (stripped), order kept."""
    if values is None or isinstance(values, str) or not isinstance(values, Iterable):
        raise ValidationError("options must be a list of action names")
    out = list(dict.fromkeys(label(o, "option") for o in values))
    if not out:
        raise ValidationError("options must not be empty")
    return out


def label(value: object, what: str) -> str:
    """A non-empty string of valid Unicode without NUL (it is stored and sent back as JSON), stripped."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, not {check.shown(value)}")
    return check.text(value, what=what).strip()


def optional_label(value: object, what: str) -> str | None:
    """None or a :func:`label`."""
    return None if value is None else label(value, what)


def label_list(values: Iterable[str], what: str) -> tuple[str, ...]:
    """Distinct :func:`label` values (one string counts as a list of one)."""
    if isinstance(values, str):
        values = [values]
    return tuple(dict.fromkeys(label(v, f"each of {what}") for v in _iterable(values, what)))


def since(value: datetime | None) -> datetime | None:
    """None or a timezone-aware datetime."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"since must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None:
        raise ValidationError("since must be timezone-aware (e.g. datetime.now(UTC) - timedelta(days=7))")
    return value


def error(value: object) -> tuple[str, str | None]:
    """An error argument (an exception or its message) as (message, exception type)."""
    if isinstance(value, BaseException):
        return check.content(error_text(value), what="error"), type(value).__name__
    if not isinstance(value, str):
        raise ValidationError(f"error must be an exception or a message, not {type(value).__name__}")
    text = check.content(value, what="error").strip()
    return text, exception_type(text)


def optional_text(value: object, what: str) -> str | None:
    """None, or text stripped (None when blank)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, not {type(value).__name__}")
    return value.strip() or None


def texts(values: Iterable[str], what: str) -> tuple[str, ...]:
    """Distinct non-empty strings, stripped; a single string is refused (a list is expected)."""
    if isinstance(values, str):
        raise ValidationError(f"{what} must be a list of strings, not a string")
    out: dict[str, None] = {}
    for v in _iterable(values, what):
        if not isinstance(v, str) or not v.strip():
            raise ValidationError(f"each of {what} must be a non-empty string, not {v!r}")
        out[v.strip()] = None
    return tuple(out)

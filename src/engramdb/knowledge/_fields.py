"""One record's fields of a knowledge file checked, value by value: the file is outside input.

Each check returns the value as the models hold it, or raises :class:`Bad` with one line saying what is wrong;
:func:`engramdb.knowledge.files.read_bundle` adds the file and line. The fields the write path also takes are
checked by its own rules (:mod:`engramdb._validate`); the rest (ids, timestamps, counts, vectors) are limited
here, against hostile values a file can carry: NUL bytes, huge strings, duplicate keys, non-finite numbers.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from engramdb import _validate as check
from engramdb.errors import ValidationError

__all__ = [
    "MAX_COUNT",
    "MAX_DIM",
    "Bad",
    "count",
    "exact_keys",
    "ident",
    "mapping",
    "name",
    "number",
    "optional_timestamp",
    "parse",
    "strings",
    "tags",
    "timestamp",
    "valid",
    "vector",
]

#: Limits on hostile input that only a file has (the fields' own limits are those of the write path).
MAX_DIM: Final = 65_536
MAX_COUNT: Final = 2**62

# Ids are opaque, but they end up in SQL parameters, file names of other tools and terminal
# output: printable, no whitespace, no path or shell metacharacters.
_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_T = TypeVar("_T")
_shown = check.shown


class Bad(Exception):
    """A problem in one record; :func:`read_bundle` adds the line number."""


def _no_constants(what: str) -> Any:
    raise Bad(f"{what} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads silently keeps the last of duplicate keys; two values for one field is
    # ambiguous at best and an attempt to slip something past a reviewer at worst.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise Bad(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if not text.strip():
        raise Bad("empty line")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except RecursionError as exc:
        raise Bad("JSON nested too deeply") from exc
    except ValueError as exc:
        raise Bad(f"malformed JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise Bad(f"expected a JSON object, not {type(value).__name__}")
    return value


def exact_keys(record: Mapping[str, Any], allowed: frozenset[str], optional: frozenset[str], what: str) -> None:
    unknown = set(record) - allowed
    if unknown:
        raise Bad(f"unknown field(s) in {what}: {', '.join(sorted(unknown))}")
    missing = allowed - optional - set(record)
    if missing:
        raise Bad(f"missing field(s) in {what}: {', '.join(sorted(missing))}")


def valid(rule: Callable[..., _T], value: Any, **options: Any) -> _T:
    """A field checked by the write path's own rule (:mod:`engramdb._validate`): one set of limits, one wording."""
    try:
        return rule(value, **options)
    except ValidationError as exc:
        raise Bad(str(exc)) from None


def name(value: Any, what: str) -> str:
    return valid(check.name, value, what=what)


def ident(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise Bad(f"{what} must be 1-128 letters, digits or '_.:-', not {_shown(value)}")
    return value


def optional_timestamp(value: Any, what: str) -> datetime | None:
    return None if value is None else timestamp(value, what)


def timestamp(value: Any, what: str) -> datetime:
    if not isinstance(value, str) or len(value) > 64:
        raise Bad(f"{what} must be an ISO 8601 timestamp string, not {_shown(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise Bad(f"{what} is not an ISO 8601 timestamp: {_shown(value)}") from exc
    if parsed.tzinfo is None:
        raise Bad(f"{what} must carry a UTC offset: {_shown(value)}")
    return parsed


def number(value: Any, what: str, *, low: float = 0.0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Bad(f"{what} must be a number, not {_shown(value)}")
    if not math.isfinite(value) or not low <= value <= high:
        raise Bad(f"{what} must be a number from {low:g} to {high:g}, not {_shown(value)}")
    return float(value)


def count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise Bad(f"{what} must be a non-negative integer, not {_shown(value)}")
    return value


def strings(value: Any, what: str) -> tuple[str, ...]:
    """A list of distinct names (the kinds in ``redacted``)."""
    if not isinstance(value, list):
        raise Bad(f"{what} must be a list of strings, not {type(value).__name__}")
    if len(value) > check.MAX_TAGS:
        raise Bad(f"{what} has too many entries ({len(value)}; the limit is {check.MAX_TAGS})")
    out = tuple(name(v, f"{what} entry") for v in value)
    if len(set(out)) != len(out):
        raise Bad(f"{what} has duplicate entries")
    return out


def tags(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise Bad(f"tags must be a list of strings, not {type(value).__name__}")
    stored = valid(check.tags, value)
    # The write path strips tags and drops repeats; a file must hold them as stored, or the round trip is not exact.
    if len(stored) != len(value):
        raise Bad("tags has duplicate entries")
    for tag, given in zip(stored, value, strict=True):
        if tag != given:
            raise Bad(f"tag {given!r} must be non-empty without surrounding whitespace")
    return stored


def mapping(value: Any, what: str, *, optional: bool = False) -> dict[str, Any] | None:
    if value is None and optional:
        return None
    return valid(check.json_object, value, what=what)


def vector(value: Any, dim: int | None) -> npt.NDArray[np.float32]:
    if dim is None:
        raise Bad("a vector is present but the header declares no dim")
    if not isinstance(value, str) or len(value) > 4 * MAX_DIM * 2:
        raise Bad("vector must be a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Bad("vector is not valid base64") from exc
    if len(raw) != dim * 4:
        raise Bad(f"vector has {len(raw) // 4} dimensions; the header says {dim}")
    out = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(out)):
        raise Bad("vector contains NaN or infinite values")
    norm = float(np.linalg.norm(out))
    if abs(norm - 1.0) > 1e-3:
        raise Bad(f"vector is not unit length (norm {norm:.4f})")
    return out

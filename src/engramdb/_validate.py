"""Validation of values that come from callers or files, and every limit on them, defined once.

Each check raises :class:`~engramdb.errors.ValidationError` with one line in one wording
(``"<field> must be ..., not <value>"``, ``"<field> is too long (...; the limit is N)"``,
``"<field> contains a NUL character"``). The write path (``remember``, ``update``, imports)
and the knowledge-file reader use the same checks, so a file can hold nothing that
``remember`` would refuse.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any, Final, cast

from engramdb.errors import ValidationError

if TYPE_CHECKING:
    from engramdb.config import Settings

from engramdb.models import CHAT_ROLES, KINDS, VISIBILITIES, ChatMessage, ChatRole, Kind, Visibility

__all__ = [
    "AUDIT_IDS",
    "DEFAULT_TOKEN_BUDGET",
    "MAX_CONTENT_CHARS",
    "MAX_LIMIT",
    "MAX_MESSAGES",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_OFFSET",
    "MAX_TAGS",
    "MAX_TOKEN_BUDGET",
    "MIN_TOKEN_BUDGET",
    "PAGE_SIZE",
    "PROVENANCE_BYTES",
    "PROVENANCE_KEY",
    "agent_name",
    "agent_or_default",
    "confidence",
    "content",
    "flag",
    "json_object",
    "key",
    "kind",
    "kinds",
    "limit",
    "memory_id",
    "messages",
    "metadata",
    "metadata_filter",
    "name",
    "offset",
    "shown",
    "stored_metadata",
    "tag",
    "tags",
    "text",
    "visibility",
]

#: Messages one ``add`` call takes (a longer conversation goes in several calls).
MAX_MESSAGES: Final = 10_000
#: Fields of an OpenAI-style message that ``add`` reads; the others it knows are tool plumbing, skipped.
_MESSAGE_FIELDS: Final = frozenset({"role", "content", "name", "at"})
_MESSAGE_SKIPPED: Final = frozenset({"tool_calls", "tool_call_id", "function_call", "refusal", "audio", "annotations"})

#: Characters of a memory's content (and of a search query).
MAX_CONTENT_CHARS: Final = 1_000_000
#: Largest ``limit`` of one read.
MAX_LIMIT: Final = 10_000
#: Rows per page when a whole selection is read page by page (internal reads, exports, retention).
PAGE_SIZE: Final = 1000
#: Memory ids listed in one audit entry (its ``count`` is always exact).
AUDIT_IDS: Final = 100
#: Characters of an agent name, a tag, or another name (model, action, actor).
MAX_NAME_CHARS: Final = 256
#: Tags on one memory.
MAX_TAGS: Final = 256
#: Size of a memory's metadata as compact UTF-8 JSON.
MAX_METADATA_BYTES: Final = 1024 * 1024
#: Nesting depth of a memory's metadata.
MAX_METADATA_DEPTH: Final = 32
#: Metadata key of the provenance an import adds (``{"source", "imported_at", "signed"}``).
PROVENANCE_KEY: Final = "provenance"
#: Metadata keys of the library's own small provenance stamps: an import's, and a merged copy's ``origin``.
_STAMP_KEYS: Final = (PROVENANCE_KEY, "origin")
#: Room those stamps may take beyond :data:`MAX_METADATA_BYTES`: they are the library's, not the caller's, so
#: a memory accepted at the limit still imports, merges, and comes back from its store's export.
PROVENANCE_BYTES: Final = 4096
#: Largest ``offset`` of a paged read (the stores' integers are 64-bit).
MAX_OFFSET: Final = 2**62
#: Default size of a rendered context (``mem.context``), in tokens of the bundled tokenizer.
DEFAULT_TOKEN_BUDGET: Final = 1500
#: Smallest context budget accepted: room for a header and a few short lines.
MIN_TOKEN_BUDGET: Final = 32
#: Largest context budget accepted (beyond any model's context window).
MAX_TOKEN_BUDGET: Final = 200_000
#: Kinds named in one read filter.
_MAX_KINDS: Final = 64

_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")


def shown(value: object) -> str:
    """``repr(value)``, cut to 60 characters (for messages); never raises."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**60:
        return f"<an integer of {value.bit_length()} bits>"
    try:
        out = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__, a huge or deeply nested value
        return f"<a {type(value).__name__}>"
    return out if len(out) <= 60 else out[:57] + "..."


def _utf8(value: str, what: str) -> None:
    """Reject text that cannot be stored as UTF-8 (a lone surrogate, e.g. from undecodable input)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{what} is not valid Unicode text (a lone surrogate {value[exc.start]!r} at position {exc.start})"
        ) from None


def _string(value: object, what: str, *, limit: int, controls: bool) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise ValidationError(f"{what} is too long ({len(value)} characters; the limit is {limit})")
    if "\x00" in value:
        raise ValidationError(f"{what} contains a NUL character")
    if not controls and _CONTROL_RE.search(value):
        raise ValidationError(f"{what} contains a control character")
    _utf8(value, what)
    return value


def text(value: object, *, what: str, limit: int = MAX_CONTENT_CHARS, empty: bool = True) -> str:
    """Free text (a description, a context, a file name): valid Unicode, no NUL, at most ``limit`` characters."""
    out = _string(value, what, limit=limit, controls=True)
    if not empty and not out.strip():
        raise ValidationError(f"{what} must not be empty")
    return out


def content(value: object, *, what: str = "content") -> str:
    """Non-empty text of at most :data:`MAX_CONTENT_CHARS` characters, without NUL."""
    text = _string(value, what, limit=MAX_CONTENT_CHARS, controls=True)
    if not text.strip():
        raise ValidationError(f"{what} must not be empty")
    return text


def name(value: object, *, what: str) -> str:
    """A non-empty name without surrounding whitespace or control characters (model, action, actor...)."""
    text = _string(value, what, limit=MAX_NAME_CHARS, controls=False)
    if not text.strip() or text != text.strip():
        raise ValidationError(f"{what} must be a non-empty name without surrounding whitespace, not {shown(text)}")
    return text


def agent_name(value: object, *, what: str = "agent") -> str:
    """A :func:`name`; ``'*'`` is reserved for "every agent"."""
    text = name(value, what=what)
    if text == "*":
        raise ValidationError(f"{what} '*' is reserved (it means every agent)")
    return text


def agent_or_default(value: object, settings: Settings) -> str:
    """The :func:`agent_name` of a call's ``agent``, or the instance's ``agent`` setting when the call gives None."""
    return agent_name(settings.agent if value is None else value)


def exploration_and_seed(exploration: object, seed: object, settings: Settings) -> tuple[float, int]:
    """A draw's ``exploration`` (within [0, 1]) and ``seed`` (an integer), each the instance's setting when None.

    Shared by ``mem.learning.choose`` and ``mem.routing.decide``: both make seeded Thompson draws.
    """
    exp = settings.exploration if exploration is None else exploration
    if isinstance(exp, bool) or not isinstance(exp, int | float) or not 0.0 <= exp <= 1.0:
        raise ValidationError(f"exploration must be a number within [0, 1], not {shown(exploration)}")
    chosen = settings.learning_seed if seed is None else seed
    if isinstance(chosen, bool) or not isinstance(chosen, int):
        raise ValidationError(f"seed must be an integer, not {shown(seed)}")
    return float(exp), chosen


def scope(value: object, *, what: str) -> str | None:
    """None (no such scope) or the :func:`name` of a user or a session (conversation thread, run)."""
    if value is None:
        return None
    return name(value, what=what)


def event_time(value: object, *, what: str = "at") -> datetime | None:
    """None or when an event happened: a timezone-aware datetime or an ISO 8601 string (see :func:`moment`)."""
    return moment(value, what=what)


def memory_id(value: object) -> str:
    """A non-empty id string of printable characters (its existence is the store's business)."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"memory id must be a non-empty string, not {shown(value)}")
    return _string(value, "memory id", limit=MAX_NAME_CHARS, controls=False)


def key(value: object) -> str:
    """The key of a keyed memory (``remember(..., key="editor")``): a name short enough for its ``key:`` tag."""
    out = name(value, what="key")
    if len(out) > MAX_NAME_CHARS - 4:
        raise ValidationError(f"key is too long ({len(out)} characters; the limit is {MAX_NAME_CHARS - 4})")
    return out


def flag(value: object, *, what: str) -> bool:
    """True or False (not a truthy stand-in such as 1 or "yes")."""
    if not isinstance(value, bool):
        raise ValidationError(f"{what} must be True or False, not {shown(value)}")
    return value


def kind(value: object) -> Kind:
    """One of :data:`~engramdb.models.KINDS`."""
    if not isinstance(value, str) or value not in KINDS:
        raise ValidationError(f"unknown kind {shown(value)} (choose from {', '.join(sorted(KINDS))})")
    return value


def kinds(value: str | Sequence[str] | None) -> tuple[Kind, ...] | None:
    """None, one kind, or several kinds."""
    if value is None:
        return None
    if isinstance(value, str):
        return (kind(value),)
    if not isinstance(value, Sequence | set | frozenset):
        raise ValidationError(f"kind must be a kind or a list of kinds, not {type(value).__name__}")
    if len(value) > _MAX_KINDS:
        raise ValidationError(f"kind has too many entries ({len(value)}; the limit is {_MAX_KINDS})")
    return tuple(kind(k) for k in value)


def tag(value: object, *, what: str = "tag") -> str:
    """One tag: a non-empty string of at most :data:`MAX_NAME_CHARS` characters, stripped."""
    text = _string(value, what, limit=MAX_NAME_CHARS, controls=False).strip()
    if not text:
        raise ValidationError(f"{what} must not be empty")
    return text


def tags(value: object) -> tuple[str, ...]:
    """At most :data:`MAX_TAGS` distinct tags (see :func:`tag`), order kept; any iterable but a string."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise ValidationError(f"tags must be a list of strings, not {type(value).__name__}")
    items = list(itertools.islice(value, MAX_TAGS + 1))
    if len(items) > MAX_TAGS:
        size = len(value) if isinstance(value, Sequence | set | frozenset) else f"more than {MAX_TAGS}"
        raise ValidationError(f"tags has too many entries ({size}; the limit is {MAX_TAGS})")
    return tuple(dict.fromkeys(tag(t, what="tags entry") for t in items))


def _nested(value: Any, what: str, depth: int) -> None:
    """Reject NUL in any string (keys included), non-string keys, and nesting deeper than the limit."""
    if depth > MAX_METADATA_DEPTH:
        raise ValidationError(f"{what} is nested too deeply (more than {MAX_METADATA_DEPTH} levels)")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(f"{what} contains a NUL character")
        _utf8(value, f"a value in {what}")
    elif isinstance(value, Mapping):
        for field, item in value.items():
            if not isinstance(field, str):
                raise ValidationError(f"{what} keys must be strings, not {shown(field)}")
            if "\x00" in field:
                raise ValidationError(f"{what} has a key containing a NUL character")
            _utf8(field, f"a key in {what}")
            _nested(item, what, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _nested(item, what, depth + 1)


def stored_metadata(value: object, *, what: str = "metadata") -> dict[str, Any]:
    """Metadata as a store holds it: the caller's part within :data:`MAX_METADATA_BYTES`, plus the library's
    provenance stamps (an import's ``provenance``, a merged copy's ``origin``) within :data:`PROVENANCE_BYTES`
    more. What knowledge files may hold."""
    whole = json_object(value, what=what, limit=MAX_METADATA_BYTES + PROVENANCE_BYTES)
    stamps = {k: whole[k] for k in _STAMP_KEYS if k in whole}
    if not stamps:
        return json_object(whole, what=what)
    json_object({k: v for k, v in whole.items() if k not in stamps}, what=what)
    json_object(stamps, what=f"the provenance in {what}", limit=PROVENANCE_BYTES)
    return whole


def json_object(value: object, *, what: str, limit: int = MAX_METADATA_BYTES) -> dict[str, Any]:
    """A JSON object (copied through JSON): string keys, no NUL, bounded depth and size (``limit`` bytes)."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a JSON object, not {type(value).__name__}")
    _nested(value, what, 0)
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"{what} must be JSON-serialisable: {_first_line(exc)}") from exc
    except RecursionError as exc:
        raise ValidationError(f"{what} is nested too deeply (more than {MAX_METADATA_DEPTH} levels)") from exc
    size = len(text.encode("utf-8"))
    if size > limit:
        raise ValidationError(f"{what} is too large ({size} bytes; the limit is {limit})")
    # Round-trip: what we return is exactly what the store will give back.
    out: dict[str, Any] = json.loads(text)
    return out


def metadata(value: object) -> dict[str, Any]:
    """A memory's metadata: None (empty) or a :func:`json_object`."""
    if value is None:
        return {}
    return json_object(value, what="metadata")


#: Keys one metadata filter may name.
_MAX_FILTER_KEYS: Final = 64
#: A metadata filter's value: a JSON scalar (containers have no exact match both backends agree on).
MetaValue = str | int | float | bool | None


def metadata_filter(value: object) -> tuple[tuple[str, MetaValue], ...] | None:
    """A read's metadata filter: None, or a mapping of top-level keys to JSON scalars that a memory's metadata
    must hold exactly (``{"language": "python"}``); as sorted ``(key, value)`` pairs. An empty mapping filters
    nothing. Numbers match numerically (1 matches 1.0); ``True`` never matches 1; ``None`` matches a key
    holding JSON null, not a missing key."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(f"metadata filter must be a JSON object, not {type(value).__name__}")
    if len(value) > _MAX_FILTER_KEYS:
        raise ValidationError(f"metadata filter has too many keys ({len(value)}; the limit is {_MAX_FILTER_KEYS})")
    pairs: list[tuple[str, MetaValue]] = []
    for raw_key, item in value.items():
        field = _string(raw_key, "a metadata filter key", limit=MAX_NAME_CHARS, controls=True)
        if isinstance(item, str):
            _string(item, f"metadata filter value of {field!r}", limit=MAX_NAME_CHARS * 4, controls=True)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValidationError(f"metadata filter value of {field!r} must be a finite number, not {item!r}")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 2**63:
            raise ValidationError(f"metadata filter value of {field!r} is out of range ({shown(item)})")
        elif item is not None and not isinstance(item, bool | int | float):
            raise ValidationError(
                f"metadata filter value of {field!r} must be a string, number, true/false or null, "
                f"not {type(item).__name__}"
            )
        pairs.append((field, item))
    return tuple(sorted(pairs, key=lambda pair: pair[0])) or None


def visibility(value: object) -> Visibility:
    """private, shared or public."""
    if not isinstance(value, str) or value not in VISIBILITIES:
        raise ValidationError(f"unknown visibility {shown(value)} (choose from {', '.join(sorted(VISIBILITIES))})")
    return value


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def confidence(value: object, *, what: str = "confidence") -> float:
    """A finite number from 0 to 1."""
    # Compared before any conversion: float(10**400) would overflow.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationError(f"{what} must be a number from 0 to 1, not {shown(value)}")
    return float(value)


def non_negative(value: object, *, what: str) -> float:
    """A number from 0 to the largest float (an integer larger than any float is refused, not overflowed)."""
    # Compared before any conversion, as in confidence(); NaN fails the comparison.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= sys.float_info.max:
        raise ValidationError(f"{what} must be a non-negative number, not {shown(value)}")
    return float(value)


def limit(value: object, *, what: str = "limit") -> int:
    """An integer from 1 to :data:`MAX_LIMIT`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValidationError(f"{what} must be an integer from 1 to {MAX_LIMIT}, not {shown(value)}")
    return value


def offset(value: object, *, what: str = "offset") -> int:
    """An integer from 0 to :data:`MAX_OFFSET`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise ValidationError(f"{what} must be an integer from 0 to 2**62, not {shown(value)}")
    return value


def timeout(value: object, *, what: str = "timeout") -> float | None:
    """None (no limit) or a finite number of seconds, at least 0."""
    if value is None:
        return None
    # Compared before any conversion, as in confidence(); NaN fails the comparison.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 10**9:
        raise ValidationError(f"{what} must be a number of seconds from 0 or None, not {shown(value)}")
    return float(value)


def moment(value: object, *, what: str, end: bool = False) -> datetime | None:
    """None, a timezone-aware datetime, or an ISO 8601 string, as a UTC datetime: a date, or a date and time (UTC
    unless it gives an offset). A date alone means the start of that day (UTC), or its end when ``end`` (an
    inclusive upper bound: ``until=2026-11-24`` includes that day). The API refuses naive datetimes, which would
    be read as local time in one place and UTC in another."""
    if value is None:
        return None
    if isinstance(value, datetime) and value.utcoffset() is None:
        raise ValidationError(f"{what} must be timezone-aware (e.g. datetime.now(UTC)), not {shown(value)}")
    found: datetime | None = value if isinstance(value, datetime) else None
    if isinstance(value, date) and not isinstance(value, datetime):
        found = datetime.combine(value, time.max if end else time.min, tzinfo=UTC)
    if isinstance(value, str) and len(value) <= 40:
        text = value.strip()
        try:
            if len(text) == 10:
                found = datetime.combine(date.fromisoformat(text), time.max if end else time.min, tzinfo=UTC)
            else:
                parsed = datetime.fromisoformat(text)
                found = parsed if parsed.utcoffset() is not None else parsed.replace(tzinfo=UTC)
        except ValueError:
            found = None
    if found is not None:
        try:
            return found.astimezone(UTC)
        except OverflowError:
            pass  # an offset that moves the instant outside years 1-9999
    raise ValidationError(f"{what} must be an ISO 8601 date or date and time (e.g. 2026-11-24), not {shown(value)}")


def messages(value: object) -> tuple[ChatMessage, ...]:
    """OpenAI-style chat messages (``[{"role": "user", "content": "..."}, ...]``): a non-empty list of mappings,
    each with a known role and non-empty text content; optional ``name`` (the speaker) and ``at`` (when)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise ValidationError(
            f'messages must be a list of {{"role": ..., "content": ...}} mappings, not {type(value).__name__}'
        )
    if not value:
        raise ValidationError("messages is empty: give at least one message")
    if len(value) > MAX_MESSAGES:
        raise ValidationError(f"messages has {len(value)} entries (the limit is {MAX_MESSAGES}); add them in parts")
    return tuple(_message(item, f"message {i}") for i, item in enumerate(value))


def _message(item: object, what: str) -> ChatMessage:
    if not isinstance(item, Mapping):
        raise ValidationError(f"{what} must be a mapping with role and content, not {type(item).__name__}")
    unknown = sorted(shown(k) for k in item if k not in _MESSAGE_FIELDS | _MESSAGE_SKIPPED)
    if unknown:
        raise ValidationError(f"{what} has unknown field(s) {', '.join(unknown)} (known: at, content, name, role)")
    for field in ("role", "content"):
        if field not in item:
            raise ValidationError(f"{what} has no {field}")
    role = item["role"]
    if not isinstance(role, str) or role not in CHAT_ROLES:
        raise ValidationError(f"{what}: unknown role {shown(role)} (choose from {', '.join(sorted(CHAT_ROLES))})")
    name_value = item.get("name")
    return ChatMessage(
        role=cast("ChatRole", role),
        content=content(item["content"], what=f"{what}: content"),
        name=None if name_value is None else name(name_value, what=f"{what}: name"),
        at=moment(item.get("at"), what=f"{what}: at"),
    )

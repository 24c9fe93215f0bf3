"""The known shapes of Chroma collections (seeds 002, 003 and 004) and what each record becomes. Pure.

A collection is recognised by its name, else by the metadata keys its records carry:

- **patterns** (seed 004's ``task_patterns``: the document is the task, metadata ``task``, ``actions``,
  ``success_rate``, ``usage_count``, ``context``): a ``success`` memory tagged ``pattern``, what the
  ``save_pattern`` tool writes, so ``recall_patterns`` and ``get_pattern_stats`` find it; its confidence is the
  success rate, and its uses (``usage_count``) its attempts, ``success_rate`` of them successes.
- **failures** (seed 003's ``errors``, "error resolutions": ``error_message``, ``context``, ``resolution``,
  ``success``): one failure occurrence through ``mem.failures.record``, the resolution as the fix that worked
  (or, with ``success`` false, as a fix that did not), so ``mem.failures.solutions`` finds it. A record whose
  error and fix cannot be told apart stays a plain memory.
- **code patterns** (seed 003's and seed 002's ``code_patterns``: ``pattern_name``, ``language``, ``context``,
  ``success_metrics``, or ``type``): a ``code_pattern`` memory tagged with its language and type, named after
  the pattern, so ``mem.code.suggest`` finds it.

Anything else is a plain memory of the kind asked for (``knowledge`` by default), as before.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from engramdb.integrations._patterns import PATTERN_KIND, PATTERN_TAG

__all__ = ["SHAPES", "FailureRecord", "Shape", "code_pattern_item", "failure_record", "pattern_item", "shape_of"]

Shape = Literal["patterns", "failures", "code_patterns", "plain"]
#: The shapes a collection may be given (``plain``: documents as they are, of one kind).
SHAPES: Final[tuple[Shape, ...]] = ("patterns", "failures", "code_patterns", "plain")

_NAMES: Final[Mapping[str, Shape]] = {
    "task_patterns": "patterns",
    "patterns": "patterns",
    "successful_patterns": "patterns",
    "errors": "failures",
    "error_resolutions": "failures",
    "error_solutions": "failures",
    "failures": "failures",
    "error_patterns": "failures",
    "code_patterns": "code_patterns",
    "code": "code_patterns",
}
_ERROR_KEYS: Final = ("error_message", "error", "error_text", "message")
_FIX_KEYS: Final = ("resolution", "solution", "fix")
# "Error: X\nResolution: Y" documents: the fix after a label of its own line.
_FIX_LABEL: Final = re.compile(r"(?im)^\s*(?:resolution|solution|fix)\s*:\s*")
_ERROR_LABEL: Final = re.compile(r"(?i)^\s*error(?:\s+message)?\s*:\s*")


def shape_of(name: str, metadatas: Iterable[Mapping[str, Any] | None]) -> Shape:
    """The shape of the collection ``name`` whose records carry ``metadatas`` (a sample is enough)."""
    known = _NAMES.get(name.strip().lower())
    if known is not None:
        return known
    keys: set[str] = set()
    for meta in metadatas:
        keys |= set(meta or {})
    if "actions" in keys and ("task" in keys or "success_rate" in keys):
        return "patterns"
    if keys & set(_FIX_KEYS) and keys & set(_ERROR_KEYS):
        return "failures"
    if "pattern_name" in keys or ("language" in keys and ("pattern_type" in keys or "type" in keys)):
        return "code_patterns"
    return "plain"


def _json_text(value: Any) -> Any:
    """A value Chroma could only keep as text (``actions``, ``success_metrics``) parsed back, if it is JSON."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _rate(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return min(1.0, max(0.0, float(value)))


def _text(meta: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def pattern_item(document: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A seed 004 task pattern as a ``remember_many`` item (without agent, tags of the collection, ids)."""
    out = dict(meta)
    out["task"] = _text(meta, ("task",)) or document
    actions = _json_text(meta.get("actions"))
    out["actions"] = actions if isinstance(actions, list) else [] if actions is None else [actions]
    item: dict[str, Any] = {"content": document, "kind": PATTERN_KIND, "tags": [PATTERN_TAG], "metadata": out}
    rate = _rate(meta.get("success_rate"))
    if rate is not None:
        item["confidence"] = rate
    uses = _uses(meta.get("usage_count"))
    if uses:
        # The seed's update_pattern_usage counted uses beside an averaged rate; as outcome counts they keep
        # get_pattern_stats' total usage and most used pattern, as feedback after the import would.
        item["attempts"] = float(uses)
        item["successes"] = uses * (0.5 if rate is None else rate)
    return item


def _uses(value: Any) -> int:
    """A usage count Chroma kept (a whole number, maybe as a float or text); 0 when there is none."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0
    return int(value)


def code_pattern_item(document: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A seed 003 (or 002) code pattern as a ``remember_many`` item: named, tagged with language and type."""
    out = dict(meta)
    metrics = _json_text(meta.get("success_metrics"))
    if metrics is not None:
        out["success_metrics"] = metrics
    name = _text(meta, ("pattern_name", "name"))
    if name is not None:
        out["name"] = name
    tags = [t.lower() for t in (_text(meta, ("language",)), _text(meta, ("pattern_type", "type"))) if t]
    item: dict[str, Any] = {"content": document, "kind": "code_pattern", "tags": tags, "metadata": out}
    rate = _rate(metrics.get("success_rate")) if isinstance(metrics, Mapping) else _rate(meta.get("success_rate"))
    if rate is not None:
        item["confidence"] = rate
    return item


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRecord:
    """A seed 003 error resolution as ``mem.failures.record`` takes it."""

    error: str
    context: str
    solution: str | None
    failed_solutions: tuple[str, ...]
    metadata: dict[str, Any]


def failure_record(document: str, meta: Mapping[str, Any]) -> FailureRecord | None:
    """The failure and its fix a record of an errors collection holds; None if its fix is not to be found."""
    error = _text(meta, _ERROR_KEYS)
    fix = _text(meta, _FIX_KEYS)
    if fix is None:
        parts = _FIX_LABEL.split(document, maxsplit=1)
        if len(parts) == 2 and parts[0].strip() and parts[1].strip():
            fix = parts[1].strip()
            error = error or _ERROR_LABEL.sub("", parts[0]).strip()
    if fix is None:
        return None
    error = error or _ERROR_LABEL.sub("", document).strip()
    if not error:
        return None
    worked = meta.get("success")
    failed = worked is False or (isinstance(worked, str) and worked.strip().lower() in ("false", "no", "0"))
    rest = {k: v for k, v in meta.items() if k not in (*_ERROR_KEYS, *_FIX_KEYS, "context", "success")}
    return FailureRecord(
        error=error,
        context=_text(meta, ("context",)) or "",
        solution=None if failed else fix,
        failed_solutions=(fix,) if failed else (),
        metadata=rest,
    )

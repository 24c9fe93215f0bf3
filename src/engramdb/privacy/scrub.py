"""Redaction applied to memories: a memory, or the changes to one, with secrets replaced in every field. Pure.

The write pipeline calls these on everything it stores (new memories, updates, imports and merges), so
no write path depends on its caller having redacted first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from engramdb.models import Memory, RedactionPolicy
from engramdb.privacy.redact import redact_text, redact_value

__all__ = ["redact_changes", "redact_memory"]


def redact_memory(memory: Memory, *, policy: RedactionPolicy) -> Memory:
    """``memory`` with secrets replaced in its content, tags and metadata (keys and values, at any depth).

    The same object when nothing was found, so a caller can tell whether redaction changed it.
    """
    if not policy.enabled:
        return memory
    content = redact_text(memory.content, policy=policy)
    tags = [redact_text(t, policy=policy) for t in memory.tags]
    metadata, meta_kinds = redact_value(dict(memory.metadata), policy=policy)
    kinds = set(content.kinds) | set(meta_kinds) | {k for t in tags for k in t.kinds}
    if not kinds:
        return memory
    return dataclasses.replace(
        memory,
        content=content.text,
        tags=tuple(dict.fromkeys(t.text for t in tags)),
        metadata=metadata,
        redacted=tuple(sorted(kinds | set(memory.redacted))),
    )


def redact_changes(
    changes: Mapping[str, Any], *, already: Iterable[str] = (), policy: RedactionPolicy
) -> dict[str, Any]:
    """Field ``changes`` with secrets replaced; adds ``redacted`` (with the kinds ``already`` redacted in the
    memory changed) when a kind not among them was found."""
    out = dict(changes)
    if not policy.enabled:
        return out
    kinds: set[str] = set()
    if "content" in out:
        result = redact_text(out["content"], policy=policy)
        out["content"], kinds = result.text, kinds | set(result.kinds)
    if "tags" in out:
        redacted_tags = [redact_text(t, policy=policy) for t in out["tags"]]
        out["tags"] = tuple(dict.fromkeys(t.text for t in redacted_tags))
        kinds |= {k for t in redacted_tags for k in t.kinds}
    if "metadata" in out:
        out["metadata"], meta_kinds = redact_value(out["metadata"], policy=policy)
        kinds |= set(meta_kinds)
    known = set(already)
    if kinds - known:
        out["redacted"] = tuple(sorted(kinds | known))
    return out

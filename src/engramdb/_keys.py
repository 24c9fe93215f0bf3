"""Keyed memories (``remember(..., key=...)``): how a memory carries its key, and the lock of a key."""

from __future__ import annotations

from typing import Final

from engramdb.models import Memory

__all__ = ["KEY_TAG_PREFIX", "key_lock", "key_of", "key_tag"]

#: A keyed memory carries its key in ``metadata["key"]`` and the tag ``key:<name>`` (the lookup).
KEY_TAG_PREFIX: Final = "key:"


def key_tag(key: str) -> str:
    """The tag that marks the keyed memory of ``key``."""
    return KEY_TAG_PREFIX + key


def key_lock(agent: str, key: str, user: str | None = None) -> str:
    """The meta key locked while ``agent``'s (and ``user``'s) ``key`` is looked up and written (never stored)."""
    if user is None:
        return f"keyed-write:{len(agent)}:{agent}:{key}"
    return f"keyed-write:{len(agent)}:{agent}:user:{len(user)}:{user}:{key}"


def key_of(memory: Memory) -> str | None:
    """The key of a keyed memory, None for others."""
    value = memory.metadata.get("key")
    return value if isinstance(value, str) and key_tag(value) in memory.tags else None

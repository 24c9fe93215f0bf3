"""Values of the audit trail: an entry to append, an entry as stored, and the outcome of verifying the chain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Final

from engramdb.models._encode import Encoded

__all__ = ["GENESIS", "AuditEvent", "AuditRecord", "Verification"]

#: The "previous hash" of the first entry.
GENESIS: Final = "0" * 64


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """An event to append: what happened, who did it, to which memory, when, and details (no content)."""

    action: str
    agent: str | None
    memory_id: str | None = None
    at: datetime
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvent(Encoded):
    """One entry of the hash-chained audit trail."""

    seq: int
    action: str
    agent: str | None
    memory_id: str | None
    at: datetime
    detail: Mapping[str, Any] = field(default_factory=dict)
    hash: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verification(Encoded):
    """The outcome of checking the chain: ``ok``, how many entries were checked, and where it broke."""

    ok: bool
    checked: int
    #: The last entry's sequence number and hash (what to keep elsewhere to detect a rewrite).
    head_seq: int = 0
    head_hash: str = GENESIS
    #: The first entry found wrong (None when ok, or when entries are missing from the end).
    bad_seq: int | None = None
    reason: str = ""

    @property
    def head(self) -> str:
        """``"SEQ:HASH"`` of the last entry: keep it outside the store and pass it back as ``expect``."""
        return f"{self.head_seq}:{self.head_hash}"

    _keys: ClassVar[tuple[str, ...]] = ("ok", "checked", "head_seq", "head_hash", "head", "bad_seq", "reason")

"""JSON-ready dicts of the library's result types, shared by the REST and MCP servers.

Models with their own ``to_dict`` (:class:`~engramdb.Memory`, :class:`~engramdb.Hit`,
:class:`~engramdb.Change`, :class:`~engramdb.Share`) are used as they are; this module
covers the rest (and re-exports the failure serializers), so both servers answer
with the same shapes as ``engram ... --json``.
"""

from __future__ import annotations

from typing import Any

from engramdb.learning.analytics import option_dict
from engramdb.learning.failures import pattern_dict, solution_dict
from engramdb.models import AuditEvent, Suggestion

__all__ = ["audit_dict", "pattern_dict", "solution_dict", "suggestion_dict"]


def suggestion_dict(s: Suggestion) -> dict[str, Any]:
    """A :class:`~engramdb.models.Suggestion` as a JSON-ready dict (the shape of ``engram learning suggest --json``)."""
    return {
        "context": s.context,
        "recommended": s.recommended,
        "confidence": s.confidence,
        "reason": s.reason,
        "options": [option_dict(o) for o in s.options],
    }


def audit_dict(e: AuditEvent) -> dict[str, Any]:
    """An :class:`~engramdb.models.AuditEvent` as a JSON-ready dict (the shape of ``engram audit log --json``)."""
    return {
        "seq": e.seq,
        "at": e.at.isoformat(),
        "action": e.action,
        "agent": e.agent,
        "memory_id": e.memory_id,
        "detail": dict(e.detail),
        "hash": e.hash,
    }

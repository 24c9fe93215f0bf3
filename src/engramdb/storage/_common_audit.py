"""Backend-neutral parts of the hash-chained audit trail: numbering and hashing new entries, the head
value kept in ``meta``, the read query, and decoding entries. Each backend supplies its SQL placeholder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from engramdb._util import parse_ts
from engramdb.errors import CorruptStoreError, ValidationError
from engramdb.models import AuditEvent
from engramdb.privacy.audit import GENESIS, AuditRecord, chain, format_at
from engramdb.storage._common import AUDIT_COLUMNS, AUDIT_HEAD_KEY, equal_conditions

__all__ = ["AuditReads", "audit_head_value", "audit_query", "chain_rows", "parse_audit_head", "row_to_event"]


# -- audit trail ----------------------------------------------------------------------------------
def chain_rows(
    records: Sequence[AuditRecord], last: Sequence[Any] | None
) -> tuple[list[AuditEvent], list[tuple[Any, ...]]]:
    """Number and hash ``records`` after the ``(seq, hash)`` row ``last`` (None: the first); with their rows.

    The rows hold the :data:`AUDIT_COLUMNS` values. ValidationError if a detail is not JSON.
    """
    last_seq, prev_hash = (int(last[0]), str(last[1])) if last is not None else (0, GENESIS)
    rows: list[tuple[Any, ...]] = []
    try:
        events = chain(records, prev_hash=prev_hash, last_seq=last_seq)
        for e in events:
            detail = json.dumps(dict(e.detail), sort_keys=True, ensure_ascii=False, allow_nan=False)
            rows.append((e.seq, format_at(e.at), e.action, e.agent, e.memory_id, detail, e.hash))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"audit detail must be JSON: {exc}") from exc
    return events, rows


def audit_head_value(events: Sequence[AuditEvent]) -> str:
    """The :data:`AUDIT_HEAD_KEY` meta value after appending ``events``."""
    return f"{events[-1].seq}:{events[-1].hash}"


def parse_audit_head(value: str) -> tuple[int, str]:
    """``(seq, hash)`` from a :data:`AUDIT_HEAD_KEY` meta value."""
    seq, _, digest = value.partition(":")
    try:
        return int(seq), digest
    except ValueError:
        return -1, digest  # a damaged head never matches: verification reports it


def audit_query(
    *,
    agent: str | None,
    memory_id: str | None,
    action: str | None,
    after_seq: int,
    limit: int | None,
    newest_first: bool,
    placeholder: str,
) -> tuple[str, list[Any]]:
    """The SELECT of ``Store.audit_events`` and its parameters (``placeholder``: the driver's)."""
    conds, params = equal_conditions(
        (("agent", agent), ("memory_id", memory_id), ("action", action)), placeholder=placeholder
    )
    clauses = [f"seq > {placeholder}", *conds]
    order = "DESC" if newest_first else "ASC"
    statement = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(clauses)} ORDER BY seq {order}"
    params = [after_seq, *params]
    if limit is not None:
        statement += f" LIMIT {placeholder}"
        params.append(limit)
    return statement, params


def row_to_event(row: Sequence[Any]) -> AuditEvent:
    """Decode a row selected with :data:`AUDIT_COLUMNS`; CorruptStoreError if it is unreadable."""
    seq, at, action, agent, memory_id, detail, digest = row
    try:
        parsed = json.loads(detail)
        when = parse_ts(at)
    except (TypeError, ValueError) as exc:
        raise CorruptStoreError(f"audit entry {seq} is unreadable: {exc}") from exc
    if when is None or not isinstance(parsed, dict):
        raise CorruptStoreError(f"audit entry {seq} is unreadable")
    return AuditEvent(
        seq=int(seq), action=str(action), agent=agent, memory_id=memory_id, at=when, detail=parsed, hash=str(digest)
    )


class AuditReads:
    """``audit_events``/``audit_head`` for a store whose ``_reading()`` yields a DB-API-like connection.

    The queries are portable SQL; a backend's mixin names its driver's :attr:`_placeholder`.
    """

    _placeholder: str

    if TYPE_CHECKING:

        def _reading(self, *, snapshot: bool = False) -> AbstractContextManager[Any]: ...

    def audit_events(
        self,
        *,
        agent: str | None = None,
        memory_id: str | None = None,
        action: str | None = None,
        after_seq: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> list[AuditEvent]:
        """See :meth:`Store.audit_events`."""
        statement, params = audit_query(
            agent=agent,
            memory_id=memory_id,
            action=action,
            after_seq=after_seq,
            limit=limit,
            newest_first=newest_first,
            placeholder=self._placeholder,
        )
        with self._reading() as conn:
            rows = conn.execute(statement, params).fetchall()
        return [row_to_event(r) for r in rows]

    def audit_head(self) -> tuple[int, str] | None:
        """See :meth:`Store.audit_head`."""
        with self._reading() as conn:
            row = conn.execute(f"SELECT value FROM meta WHERE key = {self._placeholder}", (AUDIT_HEAD_KEY,)).fetchone()
        return None if row is None else parse_audit_head(str(row[0]))

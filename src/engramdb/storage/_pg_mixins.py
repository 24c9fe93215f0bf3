"""PostgreSQL store methods for sharing, knowledge transfer and the audit trail.

Mixins of :class:`~engramdb.storage.postgres.PostgresStore`, the twins of the SQLite
store's ``_sqlite_sharing``, ``_sqlite_transfer`` and ``_sqlite_audit`` modules with the
same semantics. They rely on the store's ``_reading``/``_writing`` contexts, which
yield a psycopg connection inside the right transaction.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from engramdb._util import parse_ts
from engramdb.errors import CorruptStoreError, NotFound, ValidationError
from engramdb.models import AuditEvent, Change, Share
from engramdb.privacy.audit import GENESIS, AuditRecord, chain, format_at
from engramdb.storage._pg_schema import LOCK_AUDIT
from engramdb.storage._sqlite_audit import AUDIT_HEAD_KEY
from engramdb.storage._sqlite_sql import check_share_agents, dumps, jsonable, ts

if TYPE_CHECKING:
    import psycopg

    from engramdb.storage.base import Vectors

    Conn = psycopg.Connection[tuple[Any, ...]]

__all__ = ["AUDIT_HEAD_KEY", "PgAuditMixin", "PgSharingMixin", "PgTransferMixin"]

_HISTORY: Final = "INSERT INTO history (memory_id, action, at, actor, before, after) VALUES (%s, %s, %s, %s, %s, %s)"
_AUDIT_COLUMNS: Final = "seq, at, action, agent, memory_id, detail, hash"


class _Base:
    if TYPE_CHECKING:

        def _reading(self, *, snapshot: bool = False) -> AbstractContextManager[Conn]: ...

        def _writing(self) -> AbstractContextManager[Conn]: ...


def _log(
    conn: Conn,
    memory_id: str,
    action: str,
    *,
    at: datetime,
    actor: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
) -> None:
    conn.execute(
        _HISTORY, (memory_id, action, ts(at), actor, dumps(before, what="change"), dumps(after, what="change"))
    )


class PgSharingMixin(_Base):
    """Share and unshare: consent rows in ``shares``, visibility kept in step, a history entry per memory."""

    def share(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """Share ``from_agent``'s own memories among ``memory_ids`` with ``to_agent`` ('*' = everyone).

        Memories of other agents are skipped (only the owner can consent). A private
        memory becomes ``shared``. Returns how many memories were newly shared.
        """
        check_share_agents(from_agent, to_agent)
        with self._writing() as conn:
            owned = conn.execute(
                "SELECT id, visibility FROM memories WHERE id = ANY(%s::text[]) AND agent = %s ORDER BY rid FOR UPDATE",
                (builtins.list(memory_ids), from_agent),
            ).fetchall()
            shared = 0
            for memory_id, visibility in owned:
                cur = conn.execute(
                    "INSERT INTO shares (memory_id, from_agent, to_agent, shared_at) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (memory_id, from_agent, to_agent, ts(at)),
                )
                if cur.rowcount == 0:
                    continue
                shared += 1
                before: dict[str, Any] = {}
                after: dict[str, Any] = {"shared_with": to_agent}
                if visibility == "private":
                    conn.execute("UPDATE memories SET visibility = 'shared' WHERE id = %s", (memory_id,))
                    before["visibility"], after["visibility"] = "private", "shared"
                _log(conn, memory_id, "share", at=at, actor=from_agent, before=before, after=after)
        return shared

    def unshare(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """Withdraw shares of ``from_agent``'s memories; ``to_agent='*'`` withdraws every share.

        A ``shared`` memory left with no shares becomes ``private`` again. Returns how
        many memories lost at least one share.
        """
        check_share_agents(from_agent, to_agent)
        with self._writing() as conn:
            owned = conn.execute(
                "SELECT id, visibility FROM memories WHERE id = ANY(%s::text[]) AND agent = %s ORDER BY rid FOR UPDATE",
                (builtins.list(memory_ids), from_agent),
            ).fetchall()
            withdrawn = 0
            for memory_id, visibility in owned:
                cur = conn.execute(
                    "DELETE FROM shares WHERE memory_id = %s AND (%s = '*' OR to_agent = %s)",
                    (memory_id, to_agent, to_agent),
                )
                if cur.rowcount == 0:
                    continue
                withdrawn += 1
                before: dict[str, Any] = {"shared_with": to_agent}
                after: dict[str, Any] = {}
                left = conn.execute("SELECT 1 FROM shares WHERE memory_id = %s LIMIT 1", (memory_id,)).fetchone()
                if left is None and visibility == "shared":
                    conn.execute("UPDATE memories SET visibility = 'private' WHERE id = %s", (memory_id,))
                    before["visibility"], after["visibility"] = "shared", "private"
                _log(conn, memory_id, "unshare", at=at, actor=from_agent, before=before, after=after)
        return withdrawn


class PgTransferMixin(_Base):
    """Grouped writes, stored vectors, share listings and imported history."""

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Group writes: every write this store makes on this thread inside the block commits together or not at all.

        Re-entrant. Other threads keep their own connections (they do not see the block's
        writes until it commits). Raise to roll everything back; do not search inside.
        """
        with self._writing():
            yield

    def get_vectors(self, memory_ids: Sequence[str], *, model_id: str) -> dict[str, Vectors]:
        """The stored vectors from ``model_id`` of these memories (ids without one are left out)."""
        if not memory_ids:
            return {}
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT memory_id, dim, embedding FROM vectors WHERE model_id = %s AND memory_id = ANY(%s::text[])",
                (model_id, builtins.list(memory_ids)),
            ).fetchall()
        out: dict[str, Vectors] = {}
        for memory_id, dim, embedding in rows:
            # pgvector >= 0.3 loads a Vector object, older releases a numpy array.
            raw = embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding
            vector = np.asarray(raw, dtype=np.float32)
            if vector.shape != (int(dim),):
                raise CorruptStoreError(f"the vector of memory {memory_id!r} is damaged")
            out[memory_id] = vector.copy()
        return out

    def list_shares(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """Shares in force, oldest first; each argument given narrows them (``to_agent`` matches exactly)."""
        conds: builtins.list[str] = []
        params: builtins.list[Any] = []
        if from_agent is not None:
            conds.append("from_agent = %s")
            params.append(from_agent)
        if to_agent is not None:
            conds.append("to_agent = %s")
            params.append(to_agent)
        if memory_ids is not None:
            conds.append("memory_id = ANY(%s::text[])")
            params.append(builtins.list(memory_ids))
        where = " AND ".join(conds) or "TRUE"
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT memory_id, from_agent, to_agent, shared_at FROM shares WHERE {where} "
                'ORDER BY shared_at, memory_id COLLATE "C", to_agent COLLATE "C"',
                params,
            ).fetchall()
        out = []
        for memory_id, owner, recipient, at in rows:
            when = parse_ts(at)
            if when is None:
                raise CorruptStoreError(f"share of memory {memory_id!r} has no time")
            out.append(Share(memory_id=memory_id, from_agent=owner, to_agent=recipient, shared_at=when))
        return out

    def import_history(self, changes: Sequence[Change]) -> None:
        """Give existing memories the history they had in another store (see ``Store.import_history``).

        The current life's entries (after the last ``forget`` tombstone of that id) are
        replaced by ``changes`` in order. NotFound if a named memory does not exist.
        """
        if not changes:
            return
        rows = []
        for c in changes:
            if not c.action or not c.actor:
                raise ValidationError("a history entry needs an action and an actor")
            before = None if c.before is None else dumps(jsonable(c.before), what="history entry")
            after = None if c.after is None else dumps(jsonable(c.after), what="history entry")
            rows.append((c.memory_id, c.action, ts(c.at), c.actor, before, after))
        ids = builtins.list(dict.fromkeys(c.memory_id for c in changes))
        with self._writing() as conn:
            found = {
                r[0] for r in conn.execute("SELECT id FROM memories WHERE id = ANY(%s::text[])", (ids,)).fetchall()
            }
            missing = [i for i in ids if i not in found]
            if missing:
                raise NotFound(f"no memory with id {missing[0]!r}")
            with conn.cursor() as cur:
                # Tombstones of earlier memories with the same id stay: they record a forget.
                cur.executemany(
                    "DELETE FROM history WHERE memory_id = %s AND seq > COALESCE("
                    "(SELECT max(seq) FROM history WHERE memory_id = %s AND action = 'forget'), 0)",
                    [(i, i) for i in ids],
                )
                cur.executemany(_HISTORY, rows)


def _row_to_event(row: Sequence[Any]) -> AuditEvent:
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


class PgAuditMixin(_Base):
    """The hash-chained audit trail: appends serialised by an advisory lock held to the commit."""

    def append_audit(self, records: Sequence[AuditRecord]) -> builtins.list[AuditEvent]:
        """Append entries to the audit trail, chained to the last one; returns them numbered and hashed."""
        if not records:
            return []
        with self._writing() as conn:
            # Held until commit: concurrent appenders (threads or processes) queue here, so each
            # reads the head the previous one wrote and the chain stays one line.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_AUDIT,))
            last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            last_seq, prev_hash = (int(last[0]), str(last[1])) if last is not None else (0, GENESIS)
            rows: builtins.list[tuple[Any, ...]] = []
            try:
                events = chain(records, prev_hash=prev_hash, last_seq=last_seq)
                for e in events:
                    detail = json.dumps(dict(e.detail), sort_keys=True, ensure_ascii=False, allow_nan=False)
                    rows.append((e.seq, format_at(e.at), e.action, e.agent, e.memory_id, detail, e.hash))
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"audit detail must be JSON: {exc}") from exc
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO audit ({_AUDIT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (AUDIT_HEAD_KEY, f"{events[-1].seq}:{events[-1].hash}"),
            )
        return events

    def audit_events(
        self,
        *,
        agent: str | None = None,
        memory_id: str | None = None,
        action: str | None = None,
        after_seq: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> builtins.list[AuditEvent]:
        """Audit entries with ``seq > after_seq``, each given argument narrowing them; oldest first by default."""
        clauses: builtins.list[str] = ["seq > %s"]
        params: builtins.list[Any] = [after_seq]
        for column, value in (("agent", agent), ("memory_id", memory_id), ("action", action)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(value)
        order = "DESC" if newest_first else "ASC"
        statement = f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(clauses)} ORDER BY seq {order}"
        if limit is not None:
            statement += " LIMIT %s"
            params.append(limit)
        with self._reading() as conn:
            rows = conn.execute(statement, params).fetchall()
        return [_row_to_event(r) for r in rows]

    def audit_head(self) -> tuple[int, str] | None:
        """``(seq, hash)`` of the last entry as recorded with the last append, or None if none ever was."""
        with self._reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (AUDIT_HEAD_KEY,)).fetchone()
        if row is None:
            return None
        seq, _, digest = str(row[0]).partition(":")
        try:
            return int(seq), digest
        except ValueError:
            return -1, digest  # a damaged head never matches: verification reports it

"""Each agent's readable rows for the keyword channel's plan, gathered once and reused while none can have joined.

An agent owning a minority of a store's rows has its keyword search ranked among them (see
``SQLiteSearch.keyword_candidates``). Gathering those keys from the agent's index costs about 0.4 us a row:
7 ms per search for an agent of 20,000 rows among a million (bench/RESULTS.md, issue 27, fourth round),
twice the ranking itself. The set is a superset the ranked head is filtered after, so a stale set only
costs when it *misses* rows; rows join an agent's readable set only through

* a new memory (``max(rid)`` grows: ``rid`` is AUTOINCREMENT, never reused),
* a memory moved to the agent or made public (the ``vec_epoch`` trigger on agent, kind and visibility),
* a share (``share_epoch``),

so the set is reused for as long as those three read the same, and when only ``max(rid)`` moved (memories
were added: a server's steady state) the agent's new rows are added to it, read by key range. Rows that
left it (forgotten, moved away) fail the filter applied to the head, as they would in a freshly gathered set.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64

__all__ = ["TenantRows"]

#: Keys kept over all agents (8 bytes each: 16 MB), least recently used dropped first.
_MAX_KEYS: Final = 2_000_000

_COUNTERS_SQL: Final = (
    "SELECT (SELECT max(rid) FROM memories), (SELECT value FROM meta WHERE key = 'vec_epoch'), "
    "(SELECT value FROM meta WHERE key = 'share_epoch')"
)

_Token = tuple[object, ...]


class TenantRows:
    """Gathered key sets by (agent, shared), valid while the store's token reads the same (see the module)."""

    def __init__(self, *, max_keys: int = _MAX_KEYS) -> None:
        self._sets: dict[tuple[str, bool], tuple[_Token, I64]] = {}
        self._keys = 0
        self._max_keys = max_keys

    def clear(self) -> None:
        """Forget every set (the store closed)."""
        self._sets.clear()
        self._keys = 0

    def get(
        self,
        conn: sqlite3.Connection,
        agent: str,
        *,
        shared: bool,
        gather: Callable[[], I64],
    ) -> I64:
        """``agent``'s readable keys: the cached set while still valid, else ``gather()`` (then kept)."""
        token: _Token = tuple(conn.execute(_COUNTERS_SQL).fetchone())
        key = (agent, shared)
        found = self._sets.pop(key, None)
        if found is not None:
            self._keys -= found[1].size
            if found[0] == token:
                self._remember(key, token, found[1])
                return found[1]
            if found[0][1:] == token[1:] and token[0] is not None:
                # Only new memories since (the epochs read the same): add the agent's among them, read by key
                # range (as many rows as were written since, not the agent's whole set).
                rids = np.concatenate([found[1], self._newer(conn, agent, shared=shared, after=found[0][0] or 0)])
                rids.flags.writeable = False
                self._remember(key, token, rids)
                return rids
        rids = gather()
        rids.flags.writeable = False  # shared between searches: nobody may change it
        self._remember(key, token, rids)
        return rids

    @staticmethod
    def _newer(conn: sqlite3.Connection, agent: str, *, shared: bool, after: object) -> I64:
        """Keys above ``after`` that ``agent`` may read (its own; with ``shared``, public ones too: a share of a
        new memory moves ``share_epoch``, so it never comes this way)."""
        # Unary + keeps SQLite off the agent's index: the key range is the narrow side.
        visible = "+agent = ? OR +visibility = 'public'" if shared else "+agent = ?"
        (joined,) = conn.execute(
            f"SELECT group_concat(rid) FROM memories WHERE rid > ? AND ({visible})", (after, agent)
        ).fetchone()
        if not joined:
            return np.zeros(0, dtype=np.int64)
        return np.array(str(joined).split(","), dtype=np.int64)

    def _remember(self, key: tuple[str, bool], token: _Token, rids: I64) -> None:
        if rids.size > self._max_keys:
            return
        while self._sets and self._keys + rids.size > self._max_keys:
            oldest = next(iter(self._sets))
            self._keys -= self._sets.pop(oldest)[1].size
        self._sets[key] = (token, rids)  # most recently used last
        self._keys += rids.size

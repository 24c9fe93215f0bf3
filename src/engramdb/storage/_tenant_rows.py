"""Each tenant's readable rows for both search channels, gathered once and reused while none can have joined.

A tenant owning a minority of a store's rows has its searches ranked among them (see
``SQLiteSearch.keyword_candidates`` and ``vector_candidates``). Gathering those keys from the indexes costs
about 0.4 us a row: 7 ms per search for an agent of 20,000 rows among a million (bench/RESULTS.md, issue 27,
fourth round), twice the keyword ranking itself. So the sets are kept, valid while the store's counters read
the same:

* ``max(rid)``: a new memory (``rid`` is AUTOINCREMENT, never reused);
* ``vec_epoch``: a memory moved to another agent, another kind or visibility, a vector replaced or forgotten;
* ``share_epoch``: a share given or withdrawn;
* ``scope_epoch`` (user scopes only): a memory moved to another user or thread, or superseded.

Each is moved by a trigger, whoever writes (another process, plain SQL). When only ``max(rid)`` moved (memories
were added: a server's steady state) the scope's new rows are added to its set, read by key range. At open,
:meth:`TenantRows.prefill` gathers every minority agent's set in one pass on a connection of its own, so an
agent's first search does not pay it (7-19 ms at 1M over 50 agents, issue 27 fifth round), then each user's set of
a plain read for that user (``search(q, agent=A, user=U)``), smallest first: ~10 ms for 20,000 rows otherwise paid
by the user's first search. What it gathered is saved beside the database (:mod:`engramdb.storage._tenant_persist`)
and kept again by :meth:`TenantRows.restore` at the next open while the counters allow.

An agent's set (:attr:`Scope.users` None) is a superset: its own rows of any user and validity and, with
``shared``, others' public and shared ones; the rest of the filter applies to the ranked head. A user scope's set
is exact for everything but kinds, tags, dates and metadata: the rows of the agent's admitted users and (with
``shared``) others' public and shared rows of those users, without superseded values when ``current``; the
vector channel trusts it as its filter (kinds are the index's own) and skips checking each row in SQL.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._ann_exact import distinct
from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64

__all__ = ["Prefilled", "Scope", "TenantRows", "gather_rids", "user_read_scope"]

#: Keys kept over all scopes (8 bytes each: 16 MB), least recently used dropped first.
_MAX_KEYS: Final = 2_000_000

#: Prefill reads others' public and shared rows once for all agents; past this many it leaves the sets to searches.
_PREFILL_OPEN_ROWS: Final = 100_000

#: User scopes prefill gathers at most (each a query of its own; the rest are gathered by their first search).
_PREFILL_USER_SCOPES: Final = 4096

#: New memories since a saved file's counters beyond which :meth:`TenantRows.restore` leaves it to a prefill: each
#: set's first search reads them all by key range (see _newer_rids).
_RESTORE_NEW_ROWS: Final = 2_000

_COUNTERS_SQL: Final = (
    "SELECT (SELECT max(rid) FROM memories), (SELECT value FROM meta WHERE key = 'vec_epoch'), "
    "(SELECT value FROM meta WHERE key = 'share_epoch'), (SELECT value FROM meta WHERE key = 'scope_epoch')"
)

_Token = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose rows a set holds (see the module): an agent's readable rows, or those of some of its users."""

    agent: str
    shared: bool
    #: The admitted users (None in it: rows of no user); None: every row of the agent's (a superset).
    users: tuple[str | None, ...] | None = None
    #: Leave superseded values out (a read of what is true now); user scopes only.
    current: bool = False


@dataclass(frozen=True, slots=True)
class Prefilled:
    """What :meth:`TenantRows.prefill` counted: each agent's rows, and each (agent, user)'s own (None: no user)."""

    agents: dict[str, int]
    users: dict[tuple[str, str | None], int]
    #: The store's counters when counted, and the memory id at their largest key (see _tenant_persist).
    token: tuple[object, ...] = ()
    anchor: str = ""
    #: The key sets gathered, each valid at ``token`` (an agent's at its first three counters).
    sets: tuple[tuple[Scope, I64], ...] = ()

    def user_scope_rows(self, agent: str, user: str) -> int:
        """The agent's rows a plain read for ``user`` admits of its own: the user's and those of no user."""
        return self.users.get((agent, user), 0) + self.users.get((agent, None), 0)


def user_read_scope(agent: str, user: str) -> Scope:
    """The scope of a plain read for ``user`` (``users=(None, user)``, shared, current: see recall.scope_filter)."""
    return Scope(agent, shared=True, users=(None, user), current=True)


def _users_sql(users: tuple[str | None, ...], column: str) -> tuple[str, list[Any]]:
    """``column`` among ``users`` (None: NULL), OR-ed so each arm can use the (agent, user) index."""
    names = [u for u in dict.fromkeys(users) if u is not None]
    arms = [f"{column} IS NULL"] if None in users else []
    arms += [f"{column} = ?"] * len(names)
    return f"({' OR '.join(arms) or '0'})", names


def _rids(conn: sqlite3.Connection, sql: str, params: list[Any]) -> I64:
    return _parsed(conn, f"SELECT group_concat(rid) FROM ({sql})", params)


def _parsed(conn: sqlite3.Connection, sql: str, params: list[Any]) -> I64:
    # One joined string parsed in C: a Python object per row costs ~0.6 us, 1 ms at 2,000 rows.
    (joined,) = conn.execute(sql, params).fetchone()
    if not joined:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(str(joined), dtype=np.int64, sep=",")


def gather_rids(conn: sqlite3.Connection, scope: Scope) -> I64:
    """``scope``'s rows (see the module), read from the indexes: the agent's own without a row lookup each
    (~0.5 ms for 2,000 rows, not ~10); sorted, each once, for a user scope."""
    agent = scope.agent
    if scope.users is None:
        parts = ["SELECT rid FROM memories WHERE agent = ?"]
        params: list[Any] = [agent]
        if scope.shared:
            parts += [
                "SELECT rid FROM memories WHERE visibility = 'public' AND agent != ?",
                "SELECT m.rid FROM shares s JOIN memories m ON m.id = s.memory_id WHERE s.to_agent IN (?, '*')",
            ]
            params += [agent, agent]
        return _rids(conn, " UNION ALL ".join(parts), params)
    parts, params = [], []
    for user in dict.fromkeys(scope.users):
        # One arm per user: (agent, user_id) is an index, so the keys come without reading a row.
        by_user = "user_id IS NULL" if user is None else "user_id = ?"
        parts.append(f"SELECT rid FROM memories WHERE agent = ? AND {by_user}")
        params += [agent, *(() if user is None else (user,))]
    if scope.shared:
        users, names = _users_sql(scope.users, "m.user_id")
        valid = " AND m.valid_until IS NULL" if scope.current else ""
        parts += [
            f"SELECT m.rid FROM memories m WHERE m.visibility = 'public' AND m.agent != ? AND {users}{valid}",
            "SELECT m.rid FROM shares s JOIN memories m ON m.id = s.memory_id "
            f"WHERE s.to_agent IN (?, '*') AND {users}{valid}",
        ]
        params += [agent, *names, agent, *names]
    rids = distinct(_rids(conn, " UNION ALL ".join(parts), params))
    if scope.current:
        # The agent's superseded values, from their partial index (few: one per change of a keyed fact).
        past = _rids(conn, "SELECT rid FROM memories WHERE agent = ? AND valid_until IS NOT NULL", [agent])
        if past.size:
            rids = rids[~np.isin(rids, past)]
    return rids


def _anchor(conn: sqlite3.Connection, rid: object) -> str:
    """The memory id at key ``rid`` ("" if none): which store a saved file's counters are of."""
    row = conn.execute("SELECT id FROM memories WHERE rid = ?", (rid,)).fetchone()
    return "" if row is None else str(row[0])


def _newer_rids(conn: sqlite3.Connection, scope: Scope, *, after: object) -> I64:
    """``scope``'s keys above ``after`` (a share of a new memory moves ``share_epoch``: never this way)."""
    # Unary + keeps SQLite off the agent's index: the key range is the narrow side.
    visible = "(+agent = ? OR +visibility = 'public')" if scope.shared else "+agent = ?"
    params: list[Any] = [after, scope.agent]
    sql = f"SELECT group_concat(rid) FROM memories WHERE rid > ? AND {visible}"
    if scope.users is not None:
        users, names = _users_sql(scope.users, "+user_id")
        sql += f" AND {users}"
        params += names
        if scope.current:
            sql += " AND +valid_until IS NULL"
    return _parsed(conn, sql, params)


class TenantRows:
    """Gathered key sets by :class:`Scope`, valid while the store's counters read the same (see the module)."""

    def __init__(self, *, max_keys: int = _MAX_KEYS) -> None:
        self._sets: dict[Scope, tuple[_Token, I64]] = {}
        self._keys = 0
        self._max_keys = max_keys
        # Searches use the sets under the store's lock, prefill offers them from its own thread: the dict is
        # changed under this one.
        self._guard = threading.Lock()

    def clear(self) -> None:
        """Forget every set (the store closed)."""
        with self._guard:
            self._sets.clear()
            self._keys = 0

    def prefill(self, conn: sqlite3.Connection, *, bound: int, user_bound: int) -> Prefilled:
        """Gather the default read's set (``shared``) of every agent owning fewer than ``bound`` rows, then that of
        a plain read for each user (:func:`user_read_scope`) whose own rows are fewer than ``user_bound``, in one
        read transaction on ``conn`` (the caller's own connection, on a background thread), smallest first while
        the bound on kept keys allows; kept unless a search kept one meanwhile. Returns the rows it counted.
        Others' public and shared rows are read once for all agents (skipped when they alone are many)."""
        gathered: list[tuple[Scope, I64]] = []
        conn.execute("BEGIN")
        try:
            counters: _Token = tuple(conn.execute(_COUNTERS_SQL).fetchone())
            found = Prefilled(agents={}, users={}, token=counters, anchor=_anchor(conn, counters[0]))
            # One pass over the (agent, user) index counts both agents and their users.
            users = {
                (str(a), None if u is None else str(u)): int(c)
                for a, u, c in conn.execute("SELECT agent, user_id, count(*) FROM memories GROUP BY agent, user_id")
            }
            counts: dict[str, int] = {}
            for (agent, _), count in users.items():
                counts[agent] = counts.get(agent, 0) + count
            found = dataclasses.replace(found, agents=counts, users=users)
            public = conn.execute("SELECT agent, rid FROM memories WHERE visibility = 'public'").fetchall()
            shared = conn.execute(
                "SELECT s.to_agent, m.rid FROM shares s JOIN memories m ON m.id = s.memory_id"
            ).fetchall()
            if len(public) + len(shared) > _PREFILL_OPEN_ROWS:
                return found
            budget = self._prefill_agents(
                conn, counts, public, shared, counters=counters[:3], bound=bound, gathered=gathered
            )
            scopes = sorted(
                ((a, u) for a, u in users if u is not None and found.user_scope_rows(a, u) < user_bound),
                key=lambda pair: found.user_scope_rows(*pair),
            )
            for agent, user in scopes[:_PREFILL_USER_SCOPES]:
                if found.user_scope_rows(agent, user) + len(public) + len(shared) > budget:
                    break
                # The same gathering a search would make, so the kept set is exactly the one it would keep.
                scope = user_read_scope(agent, user)
                rids = gather_rids(conn, scope)
                rids.flags.writeable = False
                budget -= rids.size
                gathered.append((scope, rids))
                with self._guard:
                    if scope not in self._sets:
                        self._remember(scope, counters, rids)
        finally:
            conn.execute("COMMIT")
        return dataclasses.replace(found, sets=tuple(gathered))

    @staticmethod
    def counters(conn: sqlite3.Connection) -> tuple[object, ...]:
        """The store's counters now (what :attr:`Prefilled.token` holds)."""
        return tuple(conn.execute(_COUNTERS_SQL).fetchone())

    def restore(self, conn: sqlite3.Connection, saved: Prefilled | None) -> Prefilled | None:
        """Keep the sets of a :meth:`prefill` saved earlier (see _tenant_persist) and return its counts, brought up
        to the store; None (nothing kept) unless the store's counters read as the saved ones, or differ only by
        at most ``_RESTORE_NEW_ROWS`` memories added (then counted here, and each set brought up by :meth:`get`),
        and the memory at the saved largest key is the same (another store's file names another)."""
        if saved is None or len(saved.token) != 4 or not isinstance(saved.token[0], int):
            return None
        conn.execute("BEGIN")
        try:
            counters: _Token = tuple(conn.execute(_COUNTERS_SQL).fetchone())
            top, old = counters[0], saved.token[0]
            if counters[1:] != saved.token[1:] or not isinstance(top, int) or not old <= top <= old + _RESTORE_NEW_ROWS:
                return None
            if not saved.anchor or _anchor(conn, old) != saved.anchor:
                return None
            users = dict(saved.users)
            agents = dict(saved.agents)
            if top > old:
                added = "SELECT agent, user_id, count(*) FROM memories WHERE rid > ? GROUP BY agent, user_id"
                for a, u, c in conn.execute(added, (old,)):
                    pair = (str(a), None if u is None else str(u))
                    users[pair] = users.get(pair, 0) + int(c)
                    agents[pair[0]] = agents.get(pair[0], 0) + int(c)
        finally:
            conn.execute("COMMIT")
        with self._guard:
            for scope, rids in saved.sets:
                if scope not in self._sets:  # a search kept a newer one meanwhile
                    self._remember(scope, saved.token if scope.users is not None else saved.token[:3], rids)
        return Prefilled(agents=agents, users=users, token=counters, anchor=saved.anchor, sets=saved.sets)

    def _prefill_agents(
        self,
        conn: sqlite3.Connection,
        counts: dict[str, int],
        public: list[Any],
        shared: list[Any],
        *,
        counters: _Token,
        bound: int,
        gathered: list[tuple[Scope, I64]],
    ) -> int:
        """The agents' part of :meth:`prefill`; returns the keys left in the budget."""
        # Agents by number (-1: everyone), so each agent's share of those rows is picked out in numpy.
        number = {agent: i for i, agent in enumerate(counts)}
        pub_owner = np.array([number.get(owner, -2) for owner, _ in public], dtype=np.int64)
        pub_rids = np.array([rid for _, rid in public], dtype=np.int64)
        to = np.array([-1 if a == "*" else number.get(a, -2) for a, _ in shared], dtype=np.int64)
        to_rids = np.array([rid for _, rid in shared], dtype=np.int64)
        budget = self._max_keys
        for agent in sorted((a for a, c in counts.items() if c < bound), key=counts.__getitem__):
            if counts[agent] + len(public) + len(shared) > budget:
                break
            own = _rids(conn, "SELECT rid FROM memories WHERE agent = ?", [agent])
            # As gather_rids orders them: its own, others' public rows, rows shared with it or everyone.
            i = number[agent]
            rids = np.concatenate([own, pub_rids[pub_owner != i], to_rids[(to == i) | (to == -1)]])
            rids.flags.writeable = False
            budget -= rids.size
            gathered.append((Scope(agent, shared=True), rids))
            with self._guard:
                if Scope(agent, shared=True) not in self._sets:
                    self._remember(Scope(agent, shared=True), counters, rids)
        return budget

    def get(
        self, conn: sqlite3.Connection, scope: Scope, *, gather: Callable[[], I64] | None = None
    ) -> tuple[I64, tuple[object, ...]]:
        """``scope``'s keys (the kept set while valid, else ``gather()``, by default :func:`gather_rids`, then
        kept) and a key naming exactly this set (for caches of what is derived from it). Read it inside the read
        transaction the caller searches in, so the set and the data it filters are of one commit."""
        counters: _Token = tuple(conn.execute(_COUNTERS_SQL).fetchone())
        # An agent's superset does not depend on users or validity: those moving must not cost it a gathering.
        token = counters if scope.users is not None else counters[:3]
        with self._guard:
            found = self._sets.pop(scope, None)
            if found is not None:
                self._keys -= found[1].size
                if found[0] == token:
                    self._remember(scope, token, found[1])
                    return found[1], (scope, token)
        if found is not None and found[0][1:] == token[1:] and token[0] is not None:
            # Only new memories since (the epochs read the same): add the scope's among them, read by key
            # range (as many rows as were written since, not the scope's whole set).
            newer = _newer_rids(conn, scope, after=found[0][0] or 0)
            if scope.users is not None and found[1].size:
                # Kept sorted and each once: a set gathered after its counters were read may hold some already.
                newer = newer[newer > found[1][-1]]
            rids = np.concatenate([found[1], newer])
            rids.flags.writeable = False
            with self._guard:
                self._remember(scope, token, rids)
            return rids, (scope, token)
        rids = gather() if gather is not None else gather_rids(conn, scope)
        rids.flags.writeable = False  # shared between searches: nobody may change it
        with self._guard:
            self._remember(scope, token, rids)
        return rids, (scope, token)

    def _remember(self, scope: Scope, token: _Token, rids: I64) -> None:
        """Keep ``rids`` (under the guard)."""
        replaced = self._sets.pop(scope, None)
        if replaced is not None:
            self._keys -= replaced[1].size
        if rids.size > self._max_keys:
            return
        while self._sets and self._keys + rids.size > self._max_keys:
            oldest = next(iter(self._sets))
            self._keys -= self._sets.pop(oldest)[1].size
        self._sets[scope] = (token, rids)  # most recently used last
        self._keys += rids.size

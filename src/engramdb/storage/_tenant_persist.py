"""The tenants' key sets and counts (what :meth:`TenantRows.prefill` gathers) saved beside the database.

At 1M memories the prefill (one ``GROUP BY`` over the (agent, user) index, then each tenant's keys) ran for a long
while after each open, beside the first searches, and slowed them (bench/RESULTS.md, issue 27, seventh round). Written
after a prefill as ``engram.db.tenants`` (the container of :mod:`engramdb.storage._sections`: per set its keys as
differences from the previous key in the narrowest width holding them, or whole where a set is not ascending; the
counts per (agent, user)), they are read back at the next open in milliseconds.

SQLite stays the only truth: the file says at which counters (``max(rid)`` and the epochs, see
:mod:`engramdb.storage._tenant_rows`) it was gathered and the memory id at that largest key, and
:meth:`TenantRows.restore` uses it only when the store's read the same (or only a few memories were added since:
then each set is brought up by :meth:`TenantRows.get` as after any add). A missing, damaged, foreign or stale file
means a prefill, as before, which writes it anew. It names agents and users: a forget deletes it, as it does the
saved postings.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np
from engramdb.storage._sections import WIDTHS, narrowest, packed, read_mapped, read_sections, write_sections
from engramdb.storage._tenant_rows import Prefilled, Scope, user_read_scope

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64, npt

__all__ = ["MAX_PAIRS", "drop_tenants", "load_tenants", "save_tenants", "tenants_path"]

_FORMAT: Final = 1
_MAGIC: Final = b"ENGRAMTR"
#: Per (agent, user) counted and per set kept, and their types.
_TABLES: Final = {
    "pair_agent": "<i4",
    "pair_user": "<i4",  # -1: no user
    "pair_count": "<i8",
    "set_agent": "<i4",
    "set_user": "<i4",  # _AGENT_SET: the agent's own set; else a plain read for that user (user_read_scope)
    "set_size": "<i8",
    "set_width": "u1",
    "set_start": "<i8",
    "set_deltas": "u1",  # 1: stored as differences (ascending), 0: whole
}
_AGENT_SET: Final = -2
#: Stores counting more (agent, user) pairs than this are not saved (their names alone would be megabytes).
MAX_PAIRS: Final = 65_536


def tenants_path(database: str) -> Path:
    """The saved key sets of the database file ``database`` (``engram.db`` -> ``engram.db.tenants``)."""
    return Path(database + ".tenants")


def _agent_scope(scope: Scope) -> bool:
    return scope.shared and scope.users is None and not scope.current


def save_tenants(path: Path, saved: Prefilled) -> None:
    """Write ``saved`` (its counts, counters and sets; sets of other shapes than the prefill's left out) atomically.
    ValueError: nothing written (too many pairs, or keys outside 0..2**32)."""
    users_map = saved.users
    if len(users_map) > MAX_PAIRS:
        raise ValueError(f"{len(users_map)} (agent, user) pairs: more than {MAX_PAIRS} are not saved")
    agents: dict[str, int] = {}
    users: dict[str, int] = {}
    for agent, user in users_map:
        agents.setdefault(agent, len(agents))
        if user is not None:
            users.setdefault(user, len(users))
    kept: list[tuple[int, int, I64]] = []
    for scope, rids in saved.sets:
        if _agent_scope(scope):
            user_code = _AGENT_SET
        elif scope.users is not None and len(scope.users) == 2 and scope.users[1] is not None:
            if scope != user_read_scope(scope.agent, scope.users[1]):
                continue
            user_code = users.setdefault(scope.users[1], len(users))
        else:
            continue
        kept.append((agents.setdefault(scope.agent, len(agents)), user_code, np.asarray(rids, dtype=np.int64)))
    sizes = np.array([r.size for _, _, r in kept], dtype=np.int64)
    flat = np.concatenate([r for _, _, r in kept]) if kept else np.zeros(0, np.int64)
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= 1 << 32):
        raise ValueError("row keys must fit 32 bits")
    firsts = np.cumsum(sizes) - sizes
    deltas = np.diff(flat, prepend=np.int64(0))
    deltas[firsts[sizes > 0]] = flat[firsts[sizes > 0]]
    # A set is stored as differences when ascending (every set but an agent's with others' public or shared rows).
    rising = np.ones(sizes.size, dtype=bool)
    inner = np.ones(flat.size, dtype=bool)
    inner[firsts[sizes > 0]] = False
    falls = np.flatnonzero(inner & (deltas <= 0))
    rising[np.searchsorted(firsts, falls, side="right") - 1] = False
    values = np.where(np.repeat(rising, sizes), deltas, flat)
    nonempty = sizes > 0
    largest = np.zeros(sizes.size, dtype=np.int64)
    if nonempty.any():
        largest[nonempty] = np.maximum.reduceat(values, firsts[nonempty])
    widths = narrowest(largest)
    sections, starts = packed(values, sizes, widths)
    names = list(users_map)
    arrays: dict[str, npt.NDArray[Any]] = {
        "pair_agent": np.array([agents[a] for a, _ in names], dtype=np.int32),
        "pair_user": np.array([-1 if u is None else users[u] for _, u in names], dtype=np.int32),
        "pair_count": np.array([users_map[p] for p in names], dtype=np.int64),
        "set_agent": np.array([a for a, _, _ in kept], dtype=np.int32),
        "set_user": np.array([u for _, u, _ in kept], dtype=np.int32),
        "set_size": sizes,
        "set_width": widths,
        "set_start": starts,
        "set_deltas": rising,
    }
    typed = {k: np.ascontiguousarray(v, dtype=_TABLES[k]) for k, v in arrays.items()}
    typed.update({f"keys{w}": a for w, a in sections.items()})
    meta = {"format": _FORMAT, "token": list(saved.token), "anchor": saved.anchor, "agents": list(agents)}
    meta["users"] = list(users)
    write_sections(path, magic=_MAGIC, version=_FORMAT, meta=meta, arrays=typed, checked=typed)


def load_tenants(path: Path) -> Prefilled | None:
    """The saved sets and counts, or None when missing, unreadable, of another format or inconsistent."""
    return read_mapped(path, _read, keep=False)  # every array read is a copy


def _read(view: Any) -> Prefilled | None:
    found = read_sections(view, magic=_MAGIC, version=_FORMAT, allowed=(*_TABLES.values(), *WIDTHS.values()))
    if found is None:
        return None
    meta, sections = found
    if set(meta["crc"]) != set(sections) or set(sections) != {*_TABLES, *(f"keys{w}" for w in WIDTHS)}:
        return None  # every part is checked: the file is read whole, once
    agents = [str(a) for a in meta["agents"]]
    users = [str(u) for u in meta["users"]]
    t = {k: np.array(sections[k], dtype=np.int64) for k in _TABLES}
    pairs, sets = t["pair_agent"].size, t["set_agent"].size
    if any(t[k].size != pairs for k in ("pair_user", "pair_count")) or any(
        t[k].size != sets for k in ("set_user", "set_size", "set_width", "set_start", "set_deltas")
    ):
        return None
    if not _within(t["pair_agent"], 0, len(agents)) or not _within(t["pair_user"], -1, len(users)):
        return None
    if not _within(t["set_agent"], 0, len(agents)) or not _within(t["set_user"], _AGENT_SET, len(users)):
        return None
    if (t["set_user"] == -1).any() or (t["pair_count"] < 0).any() or (t["set_size"] < 0).any():
        return None
    counted: dict[tuple[str, str | None], int] = {}
    for a, u, c in zip(t["pair_agent"].tolist(), t["pair_user"].tolist(), t["pair_count"].tolist(), strict=True):
        counted[agents[a], None if u < 0 else users[u]] = c
    totals: dict[str, int] = {}
    for (agent, _), count in counted.items():
        totals[agent] = totals.get(agent, 0) + count
    kept: list[tuple[Scope, I64]] = []
    for a, u, n, w, s, d in zip(*(t[k].tolist() for k in list(_TABLES)[3:]), strict=True):
        section = sections.get(f"keys{w}")
        if section is None or s < 0 or s + n > section.size:
            return None
        raw = section[s : s + n].astype(np.int64)
        rids = np.cumsum(raw) if d else raw
        rids.flags.writeable = False
        scope = Scope(agents[a], shared=True) if u == _AGENT_SET else user_read_scope(agents[a], users[u])
        kept.append((scope, rids))
    token = tuple(meta["token"])
    if len(token) != 4 or not isinstance(meta["anchor"], str):
        return None
    return Prefilled(agents=totals, users=counted, token=token, anchor=meta["anchor"], sets=tuple(kept))


def _within(values: I64, low: int, high: int) -> bool:
    return not values.size or (int(values.min()) >= low and int(values.max()) < high)


def drop_tenants(path: Path) -> None:
    """Delete a saved file (it could not be written anew), if any."""
    with contextlib.suppress(OSError):
        path.unlink()

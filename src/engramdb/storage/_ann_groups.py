"""Rows with the very same vector, one node of the HNSW graph per group (see :mod:`engramdb.storage._ann`).

Agents store the same text again and again (a retry's outcome, a re-told fact), and the same text embeds to the
same vector. In a graph with a node per row, each group of identical rows links mostly to itself: every slot a
node's neighbour heuristic keeps is a copy, and a walk reaching the group cannot leave it, while one not
reaching it misses every copy at once (bench/tenants.py's corpus, each text ~13 times: recall@10 0.81 against
the exact scan at efSearch 256, 0.95 at 1024). So a build finds the groups of byte-identical rows and puts one
node per group in the graph; a search walks groups and hands out every member the filter admits, all with
the group's (exact) score.

On disk, beside the graph: ``groups.npy`` (each row's group), ``members.npy`` (the rows, by group) and
``starts.npy`` (where each group's rows begin in ``members``; one more entry than groups). A generation
without them has one node per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32 as _F32
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import Bool as _Bool

__all__ = ["Groups", "find_groups", "load_groups", "save_groups"]

#: Rows hashed or compared per step (bounded memory on a mapped matrix of any size).
_CHUNK: Final = 8_192
_FILES: Final = ("groups", "members", "starts")


def find_groups(vectors: _F32) -> tuple[_I64, _I64] | None:
    """Each row's group (numbered by first row) and each group's first row; None when every row is distinct.

    Rows are grouped by a hash of their bytes, then every row is compared with its group's first row: a
    hash collision (or a row equal but for ``-0.0``) becomes a group of its own, so members are byte-equal.
    """
    n = vectors.shape[0]
    hashes = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        part = np.ascontiguousarray(vectors[start : start + _CHUNK])
        hashes[start : start + part.shape[0]] = [hash(row.tobytes()) for row in part]
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    if first.size == n:
        return None
    lead = first[inverse.reshape(-1)].astype(np.int64)  # each row's candidate group leader
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        rows = np.arange(start, stop)
        dup = lead[start:stop] != rows
        if not dup.any():
            continue
        mine = np.asarray(vectors[rows[dup]])
        theirs = np.asarray(vectors[lead[start:stop][dup]])
        differ = (mine.view(np.uint32) != theirs.view(np.uint32)).any(axis=1)
        lead[rows[dup][differ]] = rows[dup][differ]
    leaders = np.flatnonzero(lead == np.arange(n))
    if leaders.size == n:
        return None
    groups = np.searchsorted(leaders, lead).astype(np.int64)
    return groups, leaders.astype(np.int64)


def save_groups(directory: Path, groups: _I64) -> None:
    """Write a generation's group files (rows by group, and where each group starts)."""
    members = np.argsort(groups, kind="stable").astype(np.int64)
    counts = np.bincount(groups, minlength=int(groups.max()) + 1 if groups.size else 0)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    for name, arr in zip(_FILES, (groups, members, starts), strict=True):
        np.save(directory / f"{name}.npy", arr, allow_pickle=False)


def load_groups(directory: Path, n: int, nodes: int) -> Groups | None:
    """A generation's groups (mapped), or None if it has a node per row. Raises ValueError if inconsistent."""
    if not (directory / "groups.npy").exists():
        if nodes != n:
            raise ValueError(f"{nodes} graph nodes for {n} rows and no groups")
        return None
    groups, members, starts = (np.load(directory / f"{name}.npy", mmap_mode="r") for name in _FILES)
    if len(groups) != n or len(members) != n or len(starts) != nodes + 1 or (n and int(starts[-1]) != n):
        raise ValueError("group files do not match the graph")
    return Groups(groups, members, starts)


@dataclass(slots=True)
class Groups:
    """Rows by graph node; ``rep`` is each node's live row to score it by (-1: every row of it is dead)."""

    groups: _I64
    members: _I64
    starts: _I64
    rep: _I64 | None = None

    def refresh(self, alive: _Bool) -> None:
        """Pick each group's first live row as its representative (at open, after an overlay)."""
        n = self.members.size
        at = np.where(alive[self.members], np.arange(n), n)
        first = np.minimum.reduceat(at, self.starts[:-1]) if n else np.empty(0, dtype=np.int64)
        self.rep = np.where(first < n, np.asarray(self.members)[np.minimum(first, n - 1)], -1).astype(np.int64)

    def kill(self, row: int, alive: _Bool) -> bool:
        """After ``row`` died: move its group's representative on; True when the group has no live row left."""
        assert self.rep is not None
        g = int(self.groups[row])
        if int(self.rep[g]) != row:
            return False
        rows = np.asarray(self.members[int(self.starts[g]) : int(self.starts[g + 1])])
        live = rows[alive[rows]]
        self.rep[g] = int(live[0]) if live.size else -1
        return not live.size

    def allowed(self, rows: _Bool | None, alive: _Bool) -> _Bool:
        """The nodes holding at least one row ``rows`` admits (every live row when None)."""
        out = np.zeros(self.starts.size - 1, dtype=np.bool_)
        out[np.asarray(self.groups)[rows if rows is not None else alive]] = True
        return out

    def expand(self, nodes: _I64, scores: _F32, rows: _Bool | None, alive: _Bool, k: int) -> tuple[_I64, _F32]:
        """The admitted rows of ``nodes`` (best first, each with its node's score), up to ``k`` of them."""
        keep = rows if rows is not None else alive
        out_rows: list[_I64] = []
        out_scores: list[_F32] = []
        total = 0
        for node, score in zip(nodes.tolist(), scores.tolist(), strict=True):
            members = np.asarray(self.members[int(self.starts[node]) : int(self.starts[node + 1])])
            members = members[keep[members]]
            out_rows.append(members)
            out_scores.append(np.full(members.size, score, dtype=np.float32))
            total += members.size
            if total >= k:
                break
        if not out_rows:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return np.concatenate(out_rows)[:k], np.concatenate(out_scores)[:k]

"""Candidate retrieval of the SQLite store: FTS5 keywords and the cached numpy vector index.

The vector cache (:class:`~engramdb.storage._vector_index.VectorIndex`) follows committed
data: the store applies its own writes after they commit, and before each search
:class:`SQLiteSearch` compares a :class:`~engramdb.storage._vector_index.SyncState` read
from the database to notice other processes' writes (appends load just the new rows).

Keywords are ranked by FTS5's BM25, computed over cached postings once the store is large
(:class:`~engramdb.storage._kw_index.KeywordIndex`, kept in step through ``history``) and by
FTS5's ``bm25()`` otherwise; both give the same ranking.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb.storage._arrays import np
from engramdb.storage._btree_pages import PageHints

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage.base import Vectors

from engramdb._threads import Background
from engramdb.errors import EngramError
from engramdb.storage._checks import as_unit_rows
from engramdb.storage._filters import FilterSQL
from engramdb.storage._keyword_budget import KEYWORD_POSTINGS_BUDGET, DocFrequencies, bounded_terms
from engramdb.storage._kw_index import KW_INDEX_MIN_MEMORIES, KeywordIndex, Ranked, fts_totals
from engramdb.storage._rehearsal import Rehearsal
from engramdb.storage._sqlite_files import begin_log, connect_read_only
from engramdb.storage._sqlite_sql import filter_sql, fts_phrase, fts_query
from engramdb.storage._tenant_persist import drop_tenants, load_tenants, save_tenants, tenants_path
from engramdb.storage._tenant_rows import Prefilled, Scope, TenantRows
from engramdb.storage._vector_index import SyncState, VectorIndex, rerank_depth
from engramdb.storage.base import MODEL_META_KEY, Candidate, Filter

__all__ = ["SQLiteSearch", "sync_state"]

#: Keyword search ranks this many times ``limit`` matches before it applies the filter (see keyword_candidates).
_KEYWORD_HEAD_FACTOR: Final = 4
_SHARED_CACHE_AGENTS: Final = 256
#: An agent with fewer rows than this, or than this share of the store's, has them gathered for the keyword
#: ranking (see keyword_candidates): a global head of a few times ``limit`` would rarely hold ``limit`` of a
#: minority tenant's rows, and FTS5 would then rank every match with the filter, at any store size.
_SELECTIVE_ROWS: Final = 20_000
_SELECTIVE_SHARE: Final = 0.1
#: A user scope admitting fewer of the agent's rows than this gathers their keys (cheap at this size).
_BROAD_SCOPE_ROWS: Final = 2_000
#: A user scope of this many rows or more is broad whatever the agent's size: its keys (0.4 us each from the
#: index, 8 bytes kept) are not gathered. Below it a small share of the agent's rows is kept as a key set.
_KEPT_SCOPE_ROWS: Final = 200_000
#: The vector head a scoped read filters is this many times ``limit`` (the graph re-ranks 3x that: a deep
#: head costs a walk as wide). A user's superset nearly all passes; a broad scope's mostly does, else the keys.
_SCOPE_HEAD_FACTOR: Final = 2
#: Searches that reuse an agent's counted plan (see _few_rows), and how many agents' plans are kept.
_RECOUNT: Final = 64
_PLAN_CACHE_AGENTS: Final = 4096

#: Opens a read on the store's connection (``snapshot``: in one read transaction; refused inside a write).
Reading = Callable[..., AbstractContextManager[sqlite3.Connection]]


def sync_state(conn: sqlite3.Connection) -> SyncState:
    """What the ``vectors`` table holds now: model searched, vector epoch, largest seq."""
    model, epoch, max_seq = conn.execute(
        "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM meta WHERE key = 'vec_epoch'), "
        "(SELECT max(seq) FROM vectors)",
        (MODEL_META_KEY,),
    ).fetchone()
    return SyncState(model, int(epoch or 0), int(max_seq or 0))


class SQLiteSearch:
    """:class:`~engramdb.storage.base.CandidateSource` of a SQLite store."""

    def __init__(self, reading: Reading, index: VectorIndex, *, pages: PageHints | None = None) -> None:
        self._reading = reading
        self._index = index
        #: Where the memory rows lie in the file: a keyword head's pages are asked for together (a cold disk).
        self._pages = pages
        # Keys of memories shared with each agent (for the vector filter), valid for one share epoch.
        self._shared: dict[str, _I64] = {}
        self._share_epoch = -1
        # Per agent: whether it owns few rows (the keyword plan, see _few_rows), and searches left before a recount.
        self._agent_rows: dict[str, tuple[bool, int]] = {}
        # Per (agent, users): whether the scope admits many rows (see _broad_scope), and searches left before a recount.
        self._scope_rows: dict[tuple[str, tuple[str | None, ...]], tuple[bool, int]] = {}
        # The scopes of those counted at _KEPT_SCOPE_ROWS or more (their keys are never kept).
        self._huge_scopes: set[tuple[str, tuple[str | None, ...]]] = set()
        self._frequencies = DocFrequencies()
        #: Each agent's readable keys for the keyword plan, reused while no row can have joined them.
        self._tenant_rows = TenantRows()
        #: Documents one keyword query may rank (see engramdb.storage._keyword_budget); None: no bound.
        self.postings_budget: int | None = KEYWORD_POSTINGS_BUDGET
        #: BM25 over cached postings, exactly as FTS5 ranks (see engramdb.storage._kw_index).
        self.keyword_index = KeywordIndex()
        #: The store's threads (the warm-up), stopped and joined by its close (see engramdb._threads).
        self.background = Background()
        #: When (``time.monotonic()``) each part of :meth:`warm` was done: "vectors", "tenants" (for benches).
        self.warmed: dict[str, float] = {}
        #: The warm-up's run of both channels, which a caller's first search ends (see _rehearsal).
        self._rehearsal = Rehearsal()

    def clear(self) -> None:
        """Drop the cached share keys and term counts (the store closed)."""
        self._shared.clear()
        self._share_epoch = -1
        self._agent_rows.clear()
        self._scope_rows.clear()
        self._huge_scopes.clear()
        self._frequencies.clear()
        self._tenant_rows.clear()
        self.keyword_index.clear()

    def warm_keywords(self, database: Path) -> None:
        """Start loading the keyword postings of the database file ``database`` (saved beside it: milliseconds;
        else built in the background) on a connection of their own (at open, first: it takes no lock, so the
        open's own checks, which may hold the store's lock for seconds at 1M memories, do not delay it)."""
        self.keyword_index.warm(str(database))

    def warm(self, database: Path | None = None) -> None:
        """Make the first searches after opening as fast as later ones (on a thread of its own, at open).

        Reads back the tenants' keys saved by an earlier open (see _restore) from the database file ``database``,
        begins its write-ahead log (see begin_log), brings the vector cache up (the HNSW sidecar mapped, faiss
        imported, or a small store's vectors read), which the first search would otherwise do while the caller
        waits, runs both channels once (see _rehearse), then, unless restored, gathers the tenants' keys (see
        _prefill); once the store closes, no further step (its close interrupts the reads under way).
        Best effort: a failure here is met again, and reported, by the search that needs it.
        """
        try:
            # First the saved sets (milliseconds, on a connection of their own: the open's checks may hold the
            # store's lock meanwhile), so the rehearsal and the first searches find them.
            restored = database is not None and self._restore(str(Path(database).absolute()))
            if restored:
                self.warmed["restored"] = time.monotonic()
            if self.background.stopping:
                return
            if database is not None:
                # Before the rehearsal: a write by another connection empties the store's page cache.
                begin_log(database)
            with self._reading() as conn:
                path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
                rows = fts_totals(conn)[0]
            large = bool(path) and rows >= KW_INDEX_MIN_MEMORIES
            with self._reading(snapshot=True) as conn:
                self._sync_index(conn)
            self.warmed["vectors"] = time.monotonic()
            if self.background.stopping:
                return
            # The prefill still runs after a failed rehearsal; the search that meets the failure reports it.
            with contextlib.suppress(EngramError, sqlite3.Error, OSError, ValueError):
                self._rehearse()
            self.warmed["rehearsed"] = time.monotonic()
            if large and not restored and not self.background.stopping:
                self._prefill(path, rows)
            self.warmed["tenants"] = time.monotonic()
        except (EngramError, sqlite3.Error, OSError):
            pass

    def _rehearse(self) -> None:
        """Both channels once for the newest memory's agent and user, answers discarded (see _rehearsal)."""
        state = self._index.state
        if state is not None:
            self._rehearsal.run(self._reading, state.model_id, self.keyword_candidates, self.vector_candidates)

    def _restore(self, path: str) -> bool:
        """The tenants' keys and plans as the last prefill saved them (see _tenant_persist), if still this store's
        (else False: prefill)."""
        saved = load_tenants(tenants_path(path))
        if saved is None:
            return False
        conn = connect_read_only(path, timeout=30.0)
        try:
            with self.background.interruptible(conn.interrupt):
                rows = fts_totals(conn)[0]
                found = self._tenant_rows.restore(conn, saved) if rows >= KW_INDEX_MIN_MEMORIES else None
        finally:
            conn.close()
        if found is None:
            return False
        self._plan(found, rows)
        return True

    def _prefill(self, path: str, rows: int) -> None:
        """Every minority agent's keys and plan (see _few_rows) before its first search, on a connection of its
        own: the store's stays free for the first searches meanwhile. Then saved for the next open."""
        bound = max(_SELECTIVE_ROWS, int(rows * _SELECTIVE_SHARE))
        # Not at a lower CPU priority (see yield_cpu): the first searches need what it gathers, and at load 14 a
        # starved prefill (1.2 s to start) left each first search to gather its own tenant's keys, 15-20 ms of CPU.
        conn = connect_read_only(path, timeout=30.0)
        try:
            with self.background.interruptible(conn.interrupt):
                found = self._tenant_rows.prefill(conn, bound=bound, user_bound=_KEPT_SCOPE_ROWS)
                self._plan(found, rows)
                # Not when the store changed meanwhile (a forget deletes the file: it is not written back).
                if self._tenant_rows.counters(conn) == found.token:
                    save_tenants(tenants_path(path), found)
        except (OSError, ValueError):
            drop_tenants(tenants_path(path))  # best effort: the next open prefills again
        finally:
            conn.close()

    def _plan(self, found: Prefilled, rows: int) -> None:
        """Each agent's and each plain user read's plan from the counts of a prefill (or its saved file)."""
        bound = max(_SELECTIVE_ROWS, int(rows * _SELECTIVE_SHARE))
        if len(found.agents) <= _PLAN_CACHE_AGENTS:
            for agent, count in found.agents.items():
                self._agent_rows.setdefault(agent, (count < bound, _RECOUNT))
        # Each plain user read's plan too (as _broad_scope counts it): at 1M a user's count reads up to 200,000
        # index entries, else paid by its first search.
        pairs = [(a, u) for a, u in found.users if u is not None]
        if len(pairs) <= _PLAN_CACHE_AGENTS:
            for agent, user in pairs:
                scope = min(found.user_scope_rows(agent, user), _KEPT_SCOPE_ROWS)
                broad = scope >= _BROAD_SCOPE_ROWS and (scope >= _KEPT_SCOPE_ROWS or found.agents[agent] <= 4 * scope)
                key = (agent, (None, user))
                if scope >= _KEPT_SCOPE_ROWS:
                    self._huge_scopes.add(key)  # before the plan: a search reading the plan finds it
                self._scope_rows.setdefault(key, (broad, _RECOUNT))

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> list[Candidate]:
        """FTS5 candidates matching any of ``terms``, best BM25 first (score = -bm25, higher is better)."""
        terms = [t for t in dict.fromkeys(terms) if t and t.strip()]
        if not terms or limit <= 0:
            return []
        f = filter_sql(flt)
        # Two phases. Ranking every match is inherent to BM25, but joining every match with the
        # filter is not: first the best `head` matches of the whole index, then the filter on those.
        # If at least `limit` of them pass, they are exactly the filtered top `limit` (anything
        # outside the head ranks below all of them); only otherwise (a selective filter) does
        # the query run again with the filter applied to every match. A selective scope (a user,
        # a thread, an agent owning few rows) is ranked among its own rows instead (below).
        head = limit * _KEYWORD_HEAD_FACTOR
        self._rehearsal.note()
        if self._pages is not None:
            self._pages.searching()  # the open's read-ahead asks for nothing new meanwhile (see _readahead)
        self.keyword_index.settle()  # a load in progress (at open) is waited for without the store's lock
        with self._reading() as conn:
            budget = self.postings_budget
            # A user's or a thread's rows are few among the agent's: rank among them only (same scores).
            # A broad scope (one user holding most of them) is filtered after the head, as an agent's read is;
            # a user's rows are ranked as a superset read from the index alone (the filter applies to the head).
            narrow = (flt.users is not None or flt.sessions is not None) and not self._broad_scope(conn, flt)
            only: _I64 | None
            if narrow and self._user_scope(flt):
                only = self._tenant_rows.get(conn, self._user_key(flt))[0]
            else:
                only = self._scope_rids(conn, flt) if narrow else None
            # The same terms and BM25 ranking FTS5 would make (see engramdb.storage._kw_index), then the filter.
            if (
                only is None
                and flt.agent is not None
                and self.keyword_index.ready()
                and self._few_rows(conn, flt.agent)
            ):
                # One tenant among many: the global head would hold few of its rows, and FTS5 would then
                # rank every match with the filter (~50-90 ms at 100k over 50 or 1,000 agents). Rank among
                # the rows it may read instead (the same scores; the filter then applies to that head).
                only = self._tenant_rows.get(conn, Scope(flt.agent, flt.include_shared))[0]
            ranked = self.keyword_index.rank(conn, terms, head=head, budget=budget, only=only)
            if ranked is not None:
                found = self._filtered_head(conn, ranked, f, limit=limit)
                if found is not None:
                    return found
            if budget is not None and len(terms) > 1:
                counts = self.keyword_index.frequencies(conn, terms)
                if counts is None:
                    counts = self._frequencies.of(conn, terms, [fts_phrase(t) for t in terms])
                terms = bounded_terms(terms, counts, budget=budget)
            query = fts_query(terms)
            if query is None:
                return []
            rows = conn.execute(
                "WITH top AS (SELECT rowid AS rid, bm25(memories_fts) AS rank FROM memories_fts "
                "WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?) "
                f"SELECT m.id, top.rank FROM top JOIN memories m ON m.rid = top.rid WHERE {f.where} "
                "ORDER BY top.rank LIMIT ?",
                (query, head, *f.params, limit),
            ).fetchall()
            if len(rows) < limit:
                rows = conn.execute(
                    "SELECT m.id, bm25(memories_fts) AS rank FROM memories_fts "
                    "JOIN memories m ON m.rid = memories_fts.rowid "
                    f"WHERE memories_fts MATCH ? AND {f.where} ORDER BY rank LIMIT ?",
                    (query, *f.params, limit),
                ).fetchall()
        return [Candidate(memory_id, -float(rank)) for memory_id, rank in rows]

    def _broad_scope(self, conn: sqlite3.Connection, flt: Filter) -> bool:
        """Whether a user-scoped read admits a large share of the agent's rows (one user holding most of them):
        at least ``_BROAD_SCOPE_ROWS`` and a quarter of the agent's own, so a head of ``4 x limit`` of the agent's
        rows usually holds ``limit`` of the scope's. Then that head is filtered instead of gathering the scope's
        keys (~3 us each). Counted on the (agent, user) index, bounded, and reused like _few_rows."""
        if flt.agent is None or flt.users is None or flt.sessions is not None:
            return False
        key = (flt.agent, flt.users)
        known = self._scope_rows.get(key)
        if known is not None and known[1] > 0:
            self._scope_rows[key] = (known[0], known[1] - 1)
            return known[0]
        scope = 0
        for user in dict.fromkeys(flt.users):
            # IS NULL spelled out: with "IS ?" SQLite does not search the index for a NULL.
            by_user = "user_id IS NULL" if user is None else "user_id = ?"
            args = (flt.agent, *(() if user is None else (user,)), _KEPT_SCOPE_ROWS - scope)
            sql = f"SELECT count(*) FROM (SELECT 1 FROM memories WHERE agent = ? AND {by_user} LIMIT ?)"
            scope += int(conn.execute(sql, args).fetchone()[0])
            if scope >= _KEPT_SCOPE_ROWS:
                break
        # A small share of a large agent's rows (one user of 50 at 1M: 20,000 of 1M) is not broad: a head of the
        # agent's rows would seldom hold `limit` of them; its keys are kept instead (see _user_key).
        broad = scope >= _BROAD_SCOPE_ROWS
        if broad and scope < _KEPT_SCOPE_ROWS:
            (own,) = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM memories WHERE agent = ? LIMIT ?)", (flt.agent, 4 * scope + 1)
            ).fetchone()
            broad = int(own) <= 4 * scope
        if len(self._scope_rows) >= _PLAN_CACHE_AGENTS:
            self._scope_rows.clear()
            self._huge_scopes.clear()
        self._scope_rows[key] = (broad, _RECOUNT)
        if scope >= _KEPT_SCOPE_ROWS:
            self._huge_scopes.add(key)
        else:
            self._huge_scopes.discard(key)
        return broad

    @staticmethod
    def _user_scope(flt: Filter) -> bool:
        """Whether ``flt`` scopes an agent's read by user only (no thread): see _user_key."""
        return flt.agent is not None and flt.users is not None and flt.sessions is None

    @staticmethod
    def _user_key(flt: Filter) -> Scope:
        """The kept key set of a user-scoped read (see _user_scope): the rows of the agent's admitted users and, with
        ``include_shared``, others' public and shared rows of those users; without superseded values unless the
        read asks for the past (see engramdb.storage._tenant_rows)."""
        assert flt.agent is not None
        assert flt.users is not None
        current = flt.as_of is None and not flt.superseded
        return Scope(flt.agent, flt.include_shared, tuple(dict.fromkeys(flt.users)), current=current)

    @staticmethod
    def _admitted(conn: sqlite3.Connection, ids: Sequence[str], f: FilterSQL) -> set[str]:
        """Which of ``ids`` the filter admits."""
        rows = conn.execute(
            f"SELECT m.id FROM memories m WHERE m.id IN (SELECT value FROM json_each(?)) AND {f.where}",
            (json.dumps(list(ids)), *f.params),
        ).fetchall()
        return {memory_id for (memory_id,) in rows}

    def _few_rows(self, conn: sqlite3.Connection, agent: str) -> bool:
        """Whether ``agent`` owns few enough rows to gather them (a count on its index, bounded).

        Only the plan depends on it (both plans give the same answer), so the count is reused for
        ``_RECOUNT`` searches: counting a large agent's rows costs ~1 ms.
        """
        known = self._agent_rows.get(agent)
        if known is not None and known[1] > 0:
            self._agent_rows[agent] = (known[0], known[1] - 1)
            return known[0]
        bound = max(_SELECTIVE_ROWS, int(fts_totals(conn)[0] * _SELECTIVE_SHARE))
        (count,) = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memories WHERE agent = ? LIMIT ?)", (agent, bound)
        ).fetchone()
        if len(self._agent_rows) >= _PLAN_CACHE_AGENTS:
            self._agent_rows.clear()
        few = int(count) < bound
        self._agent_rows[agent] = (few, _RECOUNT)
        return few

    def _filtered_head(
        self, conn: sqlite3.Connection, ranked: Ranked, f: FilterSQL, *, limit: int
    ) -> list[Candidate] | None:
        """The ranked head's rows that pass the filter, best first; None if too few (rank every match instead)."""
        found: list[Candidate] = []
        start, size = 0, limit
        # The best `limit` first (usually all pass), then the rest of the head only if needed.
        while start < len(ranked.rids) and len(found) < limit:
            rids = ranked.rids[start : start + size]
            if self._pages is not None:
                self._pages.ahead("memories", rids)
            ids = dict(
                conn.execute(
                    f"SELECT m.rid, m.id FROM memories m WHERE m.rid IN (SELECT value FROM json_each(?)) AND {f.where}",
                    (json.dumps(rids), *f.params),
                ).fetchall()
            )
            scores = ranked.scores[start : start + size]
            found += [Candidate(ids[rid], score) for rid, score in zip(rids, scores, strict=True) if rid in ids]
            start, size = start + size, len(ranked.rids)
        # As in the FTS5 path: a head with fewer than `limit` passing rows is the whole answer only
        # when it held every match.
        if len(found) < limit and ranked.matched > len(ranked.rids):
            return None
        return found[:limit]

    def vector_candidates_many(
        self, queries: Sequence[tuple[Vectors, Filter]], *, limit: int, near: float | None = None
    ) -> list[list[Candidate]]:
        """:meth:`vector_candidates` of each query in turn (in process, a statement costs no round trip; ``near``
        changes nothing: the search is as wide either way)."""
        return [self.vector_candidates(vector, flt, limit=limit) for vector, flt in queries]

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> list[Candidate]:
        """Exact cosine candidates among the current model's vectors, best first."""
        query = as_unit_rows(vector, rows=1)[0]
        if limit <= 0:
            return []
        self._rehearsal.note()
        if self._pages is not None:
            self._pages.searching()
        past: list[tuple[str, float]] = []
        only: _I64 | None
        with self._reading(snapshot=True) as conn:
            self._sync_index(conn)
            also = self._shared_rids(conn, flt.agent) if flt.agent is not None and flt.include_shared else None
            broad = flt.scoped and self._broad_scope(conn, flt)
            # The cache knows agent, kind and visibility only: a scope's rows come from SQL. A user's are kept
            # from the (agent, user) index alone (see _user_key); a scope of _KEPT_SCOPE_ROWS or more filters the
            # head of the agent's rows instead.
            user_scope = flt.scoped and self._user_scope(flt)
            by_user = user_scope and not broad
            # A user's kept rows are exact (see _user_key) but for what the index filters itself (kinds) and what
            # _restricted_rids adds (tags, ids, dates): then the index's answer needs no check in SQL. So too a
            # broad one's below _KEPT_SCOPE_ROWS (its keys gathered once: ~40 ms for 100,000, then kept).
            exact = (
                user_scope
                and flt.metadata is None
                and flt.as_of is None
                and not flt.superseded
                and not (broad and (flt.agent, flt.users) in self._huge_scopes)
            )
            only_key: object = None
            if broad or by_user:
                only = self._restricted_rids(conn, flt)
                if by_user or exact:
                    users, users_key = self._tenant_rows.get(conn, self._user_key(flt))
                    only_key = users_key if only is None else None
                    only = users if only is None else np.intersect1d(users, only, assume_unique=True)
            else:
                only = self._scope_rids(conn, flt) if flt.scoped else self._restricted_rids(conn, flt)
            if flt.as_of is not None or flt.superseded:
                past = self._past_candidates(conn, query, filter_sql(flt), limit=limit)

        def search(rids: _I64 | None, k: int, depth: int | None = None, key: object = None) -> list[tuple[str, float]]:
            # The scan runs under the index's own lock, not the connection's: a keyword query of
            # another thread (the same search's, see retrieval.hybrid) proceeds meanwhile.
            return self._index.search(
                query,
                limit=k,
                agent=flt.agent,
                include_public=flt.include_shared,
                also_rids=also,
                kinds=flt.kinds,
                only_rids=rids,
                depth=depth,
                only_key=key,
            )

        if exact:
            found = search(only, limit, key=only_key)
        elif broad or by_user:
            # A scope admitting most of the agent's rows: gathering their keys (~100k at 100k) costs more than
            # the search; a user's rows scattered among others' cost a row lookup each (~15 us under load) for
            # the rest of the filter. Search a superset, keep the head's rows the whole filter admits; if `limit`
            # of them pass they are the scope's best (the head is the best of a superset), else gather the keys.
            head = limit * _SCOPE_HEAD_FACTOR
            # The head's extra rows are there to survive the filter, not to be ranked surer than a plain search's:
            # re-ranked on float32 (read from SQLite, ~4 us a row) as deep as `limit`'s plus those extra rows.
            wide = search(only, head, rerank_depth(limit) + head - limit)
            with self._reading() as conn:
                admitted = self._admitted(conn, [memory_id for memory_id, _ in wide], filter_sql(flt))
                found = [pair for pair in wide if pair[0] in admitted][:limit]
                if len(found) < limit and len(wide) >= head:
                    only = self._scope_rids(conn, flt)
                    found = []
            if not found and len(wide) >= head:
                found = search(only, limit)
        else:
            found = search(only, limit)
        if past:
            found = sorted([*found, *past], key=lambda pair: -pair[1])[:limit]
        return [Candidate(memory_id, score) for memory_id, score in found]

    @staticmethod
    def _scope_rids(conn: sqlite3.Connection, flt: Filter) -> _I64:
        """Keys of the rows ``flt`` admits, gathered through the (agent, user) index.

        As one WHERE clause the visibility test (an OR over agent, public and shares) makes SQLite scan
        every memory; here the reader's own rows are looked up per admitted user (``user_id IS ?``: the
        index, also for NULL), and other agents' public or shared rows apart (usually few).
        """
        rest = filter_sql(dataclasses.replace(flt, agent=None, users=None, include_shared=True))
        if flt.agent is None:
            f = filter_sql(flt)
            return SQLiteSearch._rids(conn, f"SELECT m.rid FROM memories m WHERE {f.where}", f.params)
        parts: list[str] = []
        params: list[Any] = []
        for user in (None,) if flt.users is None else tuple(dict.fromkeys(flt.users)):
            # IS NULL spelled out: with "IS ?" SQLite does not search the index for a NULL.
            by_user = "" if flt.users is None else (" AND m.user_id IS NULL" if user is None else " AND m.user_id = ?")
            parts.append(f"SELECT m.rid FROM memories m WHERE m.agent = ?{by_user} AND {rest.where}")
            params += [flt.agent, *([user] if user is not None and flt.users is not None else []), *rest.params]
        if flt.include_shared:
            # Apart, so each is driven by its own index: public rows (a partial index), rows shared with
            # the reader (the shares' index, then the memories' ids). As one OR it was a scan of every row.
            admitted = filter_sql(Filter(agent=None, users=flt.users, superseded=True))
            tail = f"AND m.agent != ? AND {admitted.where} AND {rest.where}"
            parts.append(f"SELECT m.rid FROM memories m WHERE m.visibility = 'public' {tail}")
            parts.append(
                "SELECT m.rid FROM memories m WHERE m.id IN (SELECT s.memory_id FROM shares s "
                f"WHERE s.to_agent IN (?, '*')) AND m.visibility != 'public' {tail}"
            )
            params += [flt.agent, *admitted.params, *rest.params]
            params += [flt.agent, flt.agent, *admitted.params, *rest.params]
        return SQLiteSearch._rids(conn, " UNION ALL ".join(parts), params)

    def _past_candidates(
        self, conn: sqlite3.Connection, query: Vectors, f: FilterSQL, *, limit: int
    ) -> list[tuple[str, float]]:
        """Superseded values passing the filter, scored exactly (the cache holds current rows only).

        Few: one row per change of a keyed fact, read only by questions about the past.
        """
        model = self._index.state.model_id if self._index.state is not None else None
        # CROSS JOIN: from the (few) superseded memories, through their partial index, to their vectors.
        rows = conn.execute(
            "SELECT m.id, v.vec FROM memories m CROSS JOIN vectors v ON v.memory_id = m.id "
            f"WHERE m.valid_until IS NOT NULL AND v.model_id = ? AND {f.where}",
            (model, *f.params),
        ).fetchall()
        rows = [(memory_id, blob) for memory_id, blob in rows if len(blob) == 4 * query.shape[0]]
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = np.einsum("ij,j->i", matrix, query)
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(rows[int(i)][0], float(scores[int(i)])) for i in best]

    @staticmethod
    def _rids(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> _I64:
        # One joined string parsed in C: a Python object per row costs ~0.6 us, 1 ms at 2,000 rows.
        (joined,) = conn.execute(f"SELECT group_concat(rid) FROM ({sql})", params).fetchone()
        if not joined:
            return np.zeros(0, dtype=np.int64)
        return np.fromstring(joined, dtype=np.int64, sep=",")

    def _shared_rids(self, conn: sqlite3.Connection, agent: str) -> _I64:
        """Keys of memories shared with ``agent`` or everyone, cached until any share changes."""
        epoch = int(conn.execute("SELECT value FROM meta WHERE key = 'share_epoch'").fetchone()[0])
        if epoch != self._share_epoch:
            self._shared.clear()
            self._share_epoch = epoch
        rids = self._shared.get(agent)
        if rids is None:
            if len(self._shared) >= _SHARED_CACHE_AGENTS:
                self._shared.clear()
            rids = self._shared[agent] = self._rids(
                conn,
                "SELECT m.rid FROM shares s JOIN memories m ON m.id = s.memory_id WHERE s.to_agent IN (?, '*')",
                (agent,),
            )
        return rids

    def _restricted_rids(self, conn: sqlite3.Connection, flt: Filter) -> _I64 | None:
        """Keys allowed by the ``tags``/``ids``/date parts of ``flt`` (None: no such restriction)."""
        # The vector index knows agent, kind and visibility only: the other filter fields become this key set.
        after, before = flt.created_after, flt.created_before
        if flt.ids is not None or (not flt.tags and (after is not None or before is not None)):
            f = filter_sql(Filter(agent=None, tags=flt.tags, ids=flt.ids, created_after=after, created_before=before))
            return self._rids(conn, f"SELECT m.rid FROM memories m WHERE {f.where}", f.params)
        if not flt.tags:
            return None
        # Driven from the first tag's index entries rather than a scan of every memory.
        first, *rest = dict.fromkeys(flt.tags)
        f = filter_sql(Filter(agent=None, tags=tuple(rest), created_after=after, created_before=before))
        return self._rids(
            conn,
            f"SELECT m.rid FROM memory_tags t0 JOIN memories m ON m.id = t0.memory_id WHERE t0.tag = ? AND {f.where}",
            (first, *f.params),
        )

    def _sync_index(self, conn: sqlite3.Connection) -> None:
        """Bring the vector cache up to the database (inside a read snapshot)."""
        state = sync_state(conn)
        if self._index.state is None:
            self._index.resume(state)  # a persisted ANN index may already hold all but the newest rows
        cached = self._index.state
        if (
            cached is not None
            and self._index.uses_ann
            and (cached.model_id, cached.epoch) != (state.model_id, state.epoch)
            and cached.model_id == state.model_id
        ):
            # Another process forgot or changed memories: follow it row by row instead of a rebuild.
            rows = conn.execute(
                "SELECT v.memory_id, m.agent, m.kind, m.visibility FROM vectors v "
                "JOIN memories m ON m.id = v.memory_id WHERE v.model_id = ? AND v.seq <= ? AND m.valid_until IS NULL",
                (state.model_id, cached.max_seq),
            )
            if self._index.reconcile(rows, state):
                cached = self._index.state
        if cached == state:
            return
        select = (
            "SELECT v.memory_id, m.rid, m.agent, m.kind, m.visibility, v.vec FROM vectors v "
            "JOIN memories m ON m.id = v.memory_id WHERE m.valid_until IS NULL AND v.model_id = ?"
        )
        if (
            cached is not None
            and (cached.model_id, cached.epoch) == (state.model_id, state.epoch)
            and state.max_seq > cached.max_seq
        ):
            # Only appends happened since the cache was filled: load just the new rows.
            rows = conn.execute(f"{select} AND v.seq > ? ORDER BY v.seq", (state.model_id, cached.max_seq))
            self._index.append(rows)
            self._index.state = state
        else:
            self._index.load(conn.execute(f"{select} ORDER BY v.seq", (state.model_id,)), state)

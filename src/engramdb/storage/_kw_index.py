"""The keyword channel's fast path: FTS5's own BM25, computed with numpy over cached postings.

FTS5 ranks an ``OR`` query by calling ``bm25()`` once per matching row, and each call reads
that row's size from the index: at 100k memories a question matches ~10k rows and ranking
them is ~20 ms, most of the keyword channel (see bench/search_path.py). The postings
themselves are small (a few million ``(term, row, count)`` at 100k memories), so this module
keeps them in memory as numpy arrays and computes the same score FTS5 would, in the same
floating-point order, for every row at once: ~1 ms.

SQLite stays the only truth; this is a cache of it:

* It is built from the FTS5 index itself (``fts5vocab``), so terms are exactly FTS5's
  (same tokenizer, same stems), on a separate connection in a background thread (seconds at
  100k); searches use plain FTS5 until it is ready.
* Every change of a memory's content or tags writes a ``history`` row in the same
  transaction, so ``max(history.seq)`` tells whether the cache is behind, whoever wrote (this
  process or another). Catching up re-tokenises just the changed memories with a private
  (``temp``) FTS5 table of the same tokenizer and drops forgotten ones; big gaps rebuild.
* After each catch-up the cache's row and token totals are compared with FTS5's own (its
  ``averages`` record): any change not seen through ``history`` forces a rebuild.
* Nothing is written to the store. The postings are saved beside it after a build and at close
  (:mod:`engramdb.storage._kw_persist`), and a store opens with them; a loaded file is checked and
  caught up exactly as a build is, so a crash or a stale file cannot leave the cache wrong.

Document count and average length come from FTS5's ``averages`` record at each query,
exactly as ``bm25()`` reads them, so scores equal FTS5's to the last bit or two.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb._threads import JOIN_SECONDS
from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import I64 as _I64
    from engramdb.storage._arrays import npt

from engramdb.storage._keyword_budget import bounded_terms
from engramdb.storage._kw_build import (
    Postings,
    anchor,
    build,
    fts_state,
    fts_totals,
    max_rid,
    max_seq,
    tokenizer,
)
from engramdb.storage._kw_persist import (
    DamagedPostings,
    TermPostings,
    load_postings,
    postings_path,
    remove_postings,
    save_postings,
)
from engramdb.storage._readahead import yield_cpu
from engramdb.storage._sqlite_files import connect_read_only

__all__ = ["KW_INDEX_MIN_MEMORIES", "KeywordIndex", "Ranked", "build", "fts_totals"]

#: Stores with fewer memories (by their largest key) keep plain FTS5: it takes ~1-3 ms there.
KW_INDEX_MIN_MEMORIES: Final = 10_000
#: FTS5's bm25() constants (k1, b), unchanged from its defaults.
_K1: Final = 1.2
_B: Final = 0.75
#: A catch-up re-tokenising more memories than this (or a tenth of the store) rebuilds instead.
_MAX_CATCH_UP: Final = 5_000
_MAX_STEMS: Final = 100_000
#: After a failed build, searches use FTS5 this long before another build is tried.
_RETRY_SECONDS: Final = 30.0
#: How long a search waits for the saved postings to load (milliseconds: see _kw_persist) before using FTS5.
_LOAD_WAIT_SECONDS: Final = 2.0
#: Postings whose BM25 parts are kept between queries (12 bytes each with their row keys).
_MAX_CACHED_SCORES: Final = 4_000_000
_TOK: Final = "temp.engram_kw_tok"
_TOKV: Final = "temp.engram_kw_tokv"


@dataclass(frozen=True, slots=True)
class Ranked:
    """The head of a keyword ranking: row keys best first, their scores (-bm25), and all matches counted."""

    rids: list[int]
    scores: list[float]
    matched: int


class KeywordIndex:
    """In-memory BM25 over the store's FTS5 postings (see the module docstring). Use under the store's lock."""

    def __init__(self, *, min_memories: int | None = None) -> None:
        #: Stores smaller than this keep plain FTS5 (None: never use the index).
        self.min_memories: int | None = KW_INDEX_MIN_MEMORIES if min_memories is None else min_memories
        self._postings: Postings | None = None
        self._stems: dict[str, str | None] = {}
        self._tokenize: str | None = None
        self._guard = threading.Lock()
        self._builder: threading.Thread | None = None
        self._built: Postings | None = None
        self._build_conn: sqlite3.Connection | None = None
        self._closed = False
        self._retry_at = 0.0
        # Per row key, reused by every query: score sums (zeroed after use) and positions (see _distinct);
        # made by the first query (numpy is imported at first use: opening a store needs none).
        self._scratch: npt.NDArray[np.float64] | None = None
        self._positions: _I64 | None = None
        # Per term, its rows and BM25 parts, valid while the index and FTS5's totals stay as they were.
        self._term_scores: dict[str, tuple[npt.NDArray[Any], npt.NDArray[np.float64]]] = {}
        self._terms_key: tuple[int, int, int, int] | None = None
        self._cached = 0
        #: The saved postings beside the database (None: an in-memory store), and what they reflect.
        self._saved_path: Path | None = None
        self._saved_key: tuple[int, int, int] | None = None
        #: Forgets in this process so far, and the lock that orders them against saves: postings read before a
        #: forget hold its terms, so they are never written beside the database (see _save).
        self._forgets = 0
        self._save_lock = threading.Lock()
        #: Whether the next build may start from the saved file (only the first: a rebuild distrusts it).
        self._try_saved = True
        #: The builder is reading the saved file (a search waits for it: see _current).
        self._loading = False
        #: When (``time.monotonic()``) the last load or build finished with postings (for benches).
        self.ready_at: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def clear(self) -> None:
        """Save the postings if they changed, forget the index and stop a running build within ``JOIN_SECONDS`` (the
        store closed). It stays closed: a build left running keeps and writes nothing, a late caller starts none."""
        with self._guard:
            self._closed = True
            builder = self._builder
        self._save(self._postings)
        deadline = time.monotonic() + JOIN_SECONDS
        # Interrupt until it stops: an interrupt between two statements is lost.
        while builder is not None and builder.is_alive() and time.monotonic() < deadline:
            with self._guard:  # the builder closes its connection under this lock
                if self._build_conn is not None:
                    self._build_conn.interrupt()
            builder.join(0.05)
        if builder is not None and builder.is_alive():
            logging.getLogger("engramdb").warning("engramdb: %s still running after the close", builder.name)
        with self._save_lock:  # after a save under way, none: the path is gone
            self._saved_path = self._saved_key = None
        with self._guard:
            self._postings = self._built = self._builder = None
        self._stems.clear()
        self._tokenize, self._terms_key, self._term_scores, self._cached = None, None, {}, 0

    def ready(self) -> bool:
        """Whether a built index is in place (or waiting to be swapped in)."""
        with self._guard:
            return self._postings is not None or self._built is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a running build; whether an index is ready afterwards (for tests and benches)."""
        with self._guard:
            builder = self._builder
        if builder is not None:
            builder.join(timeout)
        return self.ready()

    def _start_build(self, conn: sqlite3.Connection, *, replace: bool = False) -> None:
        """Build on a connection of its own in the background; in place for an in-memory store."""
        path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
        if not path:
            self._postings = build(conn)  # one connection only: build under the store's lock
            return
        self._start(path, replace=replace)

    def _start(self, path: str, *, replace: bool = False) -> None:
        """Load or build on a thread of its own, unless one runs or postings are ready (``replace``: even in use)."""
        self._saved_path = postings_path(path)
        with self._guard:
            # A load may have ended since the caller saw none (a loaded machine): its postings serve, not a build.
            ready = self._built is not None or (self._postings is not None and not replace)
            if ready or self._builder is not None or self._closed or time.monotonic() < self._retry_at:
                return
            self._loading = self._try_saved and self._saved_path.exists()
            self._builder = threading.Thread(target=self._build_in_background, args=(path,), daemon=True)
            self._builder.name = "engram-keyword-index"
            self._builder.start()

    def _build_in_background(self, path: str) -> None:
        built: Postings | None = None
        try:
            conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False, isolation_level=None)
        except sqlite3.Error:
            conn = None
        if conn is not None:
            with self._guard:
                self._build_conn = conn
            forgets = self._forgets  # before the read: a forget after it makes these postings unsaveable
            try:
                if not self._closed:
                    built = self._load(conn)
                    with self._guard:
                        self._loading = False
                    if built is None:
                        yield_cpu()  # seconds of work beside the searches, which use FTS5 meanwhile
                        built = build(conn)
                        built.forgets = forgets
                        self._save(built)
                    else:
                        built.forgets = forgets
            except sqlite3.Error:
                built = None  # interrupted (the store closed) or unreadable: searches keep using FTS5
            finally:
                with self._guard:
                    self._build_conn = None
                    conn.close()
        with self._guard:
            self._loading = False
            if not self._closed:
                self._built = built
                if built is not None:
                    self.ready_at = time.monotonic()
            if built is None:
                self._retry_at = time.monotonic() + _RETRY_SECONDS  # not a new thread per search
            self._builder = None

    def _load(self, conn: sqlite3.Connection) -> Postings | None:
        """The saved postings as a build would make them (checked and caught up by _current like one)."""
        path = self._saved_path  # read once: a close given up on this thread's end clears it
        if path is None or not self._try_saved:
            return None
        self._try_saved = False
        saved = load_postings(path)
        if saved is None or not saved.anchor or anchor(conn, saved.seq) != saved.anchor:
            return None  # unreadable, or another store's (a copied or replaced database): build
        # A file of an older format is written anew, in this one, at close.
        self._saved_key = (saved.seq, saved.rows, saved.tokens) if saved.current else None
        alive = np.ones(saved.doc_len.size, dtype=bool)
        checked = saved.seq if saved.structure else -1
        return Postings(
            saved.seq,
            saved.terms,
            saved.doc_len,
            alive,
            saved.rows,
            saved.tokens,
            saved.structure,
            checked,
            anchor=saved.anchor,
        )

    def drop_saved(self, database: Path) -> None:
        """Delete the postings saved beside ``database`` (a memory was forgotten); written anew at close."""
        with self._save_lock:
            self._forgets += 1
            remove_postings(postings_path(str(database)))
            self._saved_key = None

    def _save(self, p: Postings | None) -> None:
        """Write ``p`` (build and delta merged) beside the database, unless the file already holds it or ``p`` was
        read before one of this process's forgets (it would put the forgotten terms back on disk)."""
        with self._save_lock:
            if p is not None and p.forgets == self._forgets:
                self._save_current(p)

    def _save_current(self, p: Postings) -> None:
        path = self._saved_path
        if path is None or (p.seq, p.rows, p.tokens) == self._saved_key:
            return
        names = set(p.terms) | set(p.delta_terms)
        try:
            save_postings(
                path,
                seq=p.seq,
                anchor=p.anchor,
                rows=p.rows,
                tokens=p.tokens,
                # Checked against FTS5's only when read at this same history position.
                structure=p.structure if p.seq_checked == p.seq else b"",
                terms=((t, *self._term_postings(p, t)) for t in sorted(names)),
                doc_len=p.doc_len,
            )
            self._saved_key = (p.seq, p.rows, p.tokens)
        except DamagedPostings:
            remove_postings(path)  # the loaded file was damaged: the next open builds
        except (OSError, ValueError):
            pass  # best effort: the next open builds instead

    # -- search ------------------------------------------------------------------------------
    def rank(
        self,
        conn: sqlite3.Connection,
        terms: Sequence[str],
        *,
        head: int,
        budget: int | None = None,
        only: _I64 | None = None,
    ) -> Ranked | None:
        """BM25 (as FTS5's ``bm25()``) of every row matching any of ``terms``, the best ``head`` returned.

        ``only``: rank among these rows only (a selective filter's rows, e.g. one user's); the scores stay
        the whole index's BM25, so they equal FTS5's.

        With ``budget``, only the terms :func:`~engramdb.storage._keyword_budget.bounded_terms` keeps
        for their current document counts are ranked (as the FTS5 path does; one look at the index
        serves both). None when the index cannot answer exactly (not built yet, inside a write
        transaction, a term FTS5 would read as a phrase): the caller then asks FTS5.
        """
        postings = self._current(conn)
        if postings is None:
            return None
        try:
            return self._rank(conn, postings, terms, head=head, budget=budget, only=only)
        except DamagedPostings:
            self._damaged(conn)
            return None

    def _rank(
        self,
        conn: sqlite3.Connection,
        postings: Postings,
        terms: Sequence[str],
        *,
        head: int,
        budget: int | None,
        only: _I64 | None,
    ) -> Ranked | None:
        stems = self._stems_of(conn, terms)
        if stems is None:
            return None
        if budget is not None and len(stems) > 1:
            counts = [self._term_count(postings, s) for s in stems]
            # By position: two query terms may share a stem, and each counts as FTS5 counts it.
            kept = bounded_terms([str(i) for i in range(len(stems))], counts, budget=budget)
            stems = [stems[int(i)] for i in kept]
        if isinstance(postings.terms, TermPostings):
            postings.terms.ahead(stems)  # their pages read side by side, not one fault at a time (a cold disk)
        rows, tokens = postings.rows, postings.tokens  # equal to FTS5's own (checked in _current)
        if rows <= 0:
            return Ranked([], [], 0)
        acc = self._scratch
        if acc is None or acc.size < postings.doc_len.size:
            acc = self._scratch = np.zeros(postings.doc_len.size, dtype=np.float64)
            # Both scratch arrays written through now, so their pages are mapped by the first query (at open,
            # the store's rehearsal) and not one by one in the first searches (~6 ms at 1M rows).
            acc.fill(0.0)
            self._positions = np.ones(acc.size, dtype=np.int64)
        key = (id(postings), postings.seq, rows, tokens)
        if key != self._terms_key:
            self._terms_key, self._term_scores, self._cached = key, {}, 0
        touched = []
        for stem in stems:
            docs, part = self._scored(postings, stem, rows=rows, avgdl=tokens / rows)
            if docs.size:
                # Summed term by term in query order, as FTS5's fts5Bm25Function does.
                acc[docs] += part
                touched.append(docs)
        if not touched:
            return Ranked([], [], 0)
        matched = touched[0] if len(touched) == 1 else self._distinct(np.concatenate(touched))
        scores = acc[matched]
        acc[matched] = 0.0
        if only is not None:
            # A mask over row keys: O(rows) where isin sorts both sides.
            allowed = np.zeros(acc.size, dtype=bool)
            allowed[only[(only >= 0) & (only < acc.size)]] = True
            keep = allowed[matched]
            matched, scores = matched[keep], scores[keep]
            if not matched.size:
                return Ranked([], [], 0)
        top = np.argpartition(-scores, head - 1)[:head] if matched.size > head else np.arange(matched.size)
        # Best first; equal scores in row order, as FTS5's sort leaves them.
        order = top[np.lexsort((matched[top], -scores[top]))]
        return Ranked(matched[order].tolist(), scores[order].tolist(), int(matched.size))

    def _scored(
        self, postings: Postings, stem: str, *, rows: int, avgdl: float
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64]]:
        """A term's rows and its BM25 part of their scores, cached until the index changes.

        Written as FTS5's fts5Bm25Function computes it, operation for operation.
        """
        hit = self._term_scores.get(stem)
        if hit is not None:
            return hit
        docs, tf = self._term_postings(postings, stem)
        idf = math.log((rows - docs.size + 0.5) / (docs.size + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        freq = tf.astype(np.float64)
        dl = postings.doc_len[docs].astype(np.float64)
        part = idf * ((freq * (_K1 + 1.0)) / (freq + _K1 * (1.0 - _B + _B * dl / avgdl)))
        if self._cached + docs.size <= _MAX_CACHED_SCORES:
            self._term_scores[stem] = (docs, part)
            self._cached += docs.size
        return docs, part

    def _distinct(self, rids: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """``rids`` without repeats, in O(n): each row key's last position wins, keep the positions that won."""
        size = 0 if self._scratch is None else self._scratch.size
        positions = self._positions
        if positions is None or positions.size < size:
            positions = self._positions = np.zeros(size, dtype=np.int64)
        where = np.arange(rids.size)
        positions[rids] = where
        distinct: npt.NDArray[Any] = rids[positions[rids] == where]
        return distinct

    def frequencies(self, conn: sqlite3.Connection, terms: Sequence[str]) -> list[int] | None:
        """How many rows match each term now (for the postings budget); None when the index cannot say."""
        postings = self._current(conn)
        stems = self._stems_of(conn, terms) if postings is not None else None
        if postings is None or stems is None:
            return None
        try:
            return [self._term_count(postings, s) for s in stems]
        except DamagedPostings:
            self._damaged(conn)
            return None

    @staticmethod
    def _term_count(p: Postings, stem: str) -> int:
        """How many rows hold ``stem`` now, as :meth:`_term_postings` counts them. A saved term is counted from its
        file's table, not decoded: the budget drops a query's commonest terms, whose decoding (a cumulative sum
        over up to 1M keys) was most of a first search's keyword work at 1M memories."""
        if not p.base_dead and isinstance(p.terms, TermPostings):
            # No row of the build changed since: the delta holds only new rows, none of them in the build's keys.
            return p.terms.count(stem) + len(p.delta_terms.get(stem, ()))
        return int(KeywordIndex._term_postings(p, stem)[0].size)

    @staticmethod
    def _term_postings(p: Postings, stem: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """A term's row keys (ascending) and counts now: the build's still-valid ones and the delta's."""
        docs, tf = p.terms.get(stem, (np.zeros(0, np.int32), np.zeros(0, np.uint16)))
        if p.base_dead and docs.size:
            keep = p.base_alive[docs]
            docs, tf = docs[keep], tf[keep]
        extra = p.delta_terms.get(stem)
        if extra:
            more = np.fromiter(extra.keys(), dtype=np.int64, count=len(extra))
            counts = np.fromiter(extra.values(), dtype=np.int64, count=len(extra))
            docs = np.concatenate([docs.astype(np.int64), more])
            tf_all = np.concatenate([tf.astype(np.int64), counts])
            order = np.argsort(docs, kind="stable")
            return docs[order], tf_all[order]
        return docs, tf

    # -- keeping in step ---------------------------------------------------------------------
    def _current(self, conn: sqlite3.Connection) -> Postings | None:
        """The index brought up to the database, or None (building, or the caller is inside a write)."""
        if self.min_memories is None or conn.in_transaction:
            # Inside a write a search would see uncommitted rows the cache must never follow.
            return None
        p = self._swap_in()
        if p is None:
            if max_rid(conn) >= self.min_memories:
                self._start_build(conn)
                with self._guard:
                    builder = self._builder if self._loading else None
                if builder is not None:  # loading the saved postings: tens of ms, worth waiting for
                    builder.join(_LOAD_WAIT_SECONDS)
                p = self._swap_in()  # or built in place for an in-memory store
            if p is None:
                return None
        forgets = self._forgets  # before the read, as in _build_in_background
        # One read transaction: the history position and FTS5's state are of the same commit.
        conn.execute("BEGIN")
        try:
            seq = max_seq(conn)
            fresh = seq == p.seq or (seq > p.seq and self._catch_up(conn, p, seq))
            rows, tokens, structure = fts_state(conn)
        finally:
            conn.execute("COMMIT")
        if not fresh:
            return self._rebuild(conn)
        # Every change of the keyword index moves FTS5's structure record; one not announced in
        # history (another program's SQL) or miscounted here shows there or in the totals.
        if (rows, tokens) != (p.rows, p.tokens) or (seq == p.seq_checked and structure != p.structure):
            return self._rebuild(conn)
        p.structure, p.seq_checked = structure, seq
        p.forgets = forgets  # caught up with every forget committed before the read
        if len(p.delta_docs) > max(_MAX_CATCH_UP, p.rows // 5):
            # The delta (Python dicts, ~20x the bytes of the arrays) has grown: a fresh build
            # replaces it once ready; this one serves meanwhile.
            self._start_build(conn, replace=True)
        return self._postings or p

    def _swap_in(self) -> Postings | None:
        with self._guard:
            if self._built is not None:
                self._postings, self._built = self._built, None
            return self._postings

    def warm(self, database: str) -> None:
        """Start loading (or building) the postings of the database file ``database`` now, so the first searches
        find them (at open). The thread reads on a connection of its own: the store's lock is not taken, so a
        caller holding it (the open's own checks) does not delay the load."""
        minimum = self.min_memories  # read once: a test may change it meanwhile
        if minimum is None or self.ready():
            return
        database = str(Path(database).absolute())  # a store opened by a relative path: fixed now, as SQLite's
        try:
            conn = connect_read_only(database)
            try:
                large = max_rid(conn) >= minimum
            finally:
                conn.close()
        except sqlite3.Error:
            return  # met again, and reported, by the first search
        if large:
            self._start(database)

    def settle(self) -> None:
        """Wait a little (``_LOAD_WAIT_SECONDS`` at most) for the saved postings being loaded. Called before taking
        the store's lock: waiting under it would hold up the vector channel and every other reader meanwhile."""
        with self._guard:
            builder = self._builder if self._loading else None
        if builder is not None:
            builder.join(_LOAD_WAIT_SECONDS)

    def _damaged(self, conn: sqlite3.Connection) -> None:
        """A loaded term failed its check: the file goes, and a build replaces it (FTS5 answers meanwhile)."""
        if self._saved_path is not None:
            remove_postings(self._saved_path)
        self._saved_key = None
        self._rebuild(conn)

    def _rebuild(self, conn: sqlite3.Connection) -> Postings | None:
        self._postings = None
        self._terms_key, self._term_scores, self._cached = None, {}, 0
        self._start_build(conn)
        return self._postings

    def _catch_up(self, conn: sqlite3.Connection, p: Postings, seq: int) -> bool:
        """Apply the changes recorded in ``history`` after ``p.seq`` up to ``seq``; False: rebuild instead."""
        changes = conn.execute(
            "SELECT memory_id, max(action = 'forget') FROM history WHERE seq > ? AND seq <= ? GROUP BY memory_id",
            (p.seq, seq),
        ).fetchall()
        if len(changes) > max(_MAX_CATCH_UP, p.rows // 10):
            return False
        ids = [memory_id for memory_id, _ in changes]
        current = conn.execute(
            "SELECT rid, content, tags FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (_json_list(ids),),
        ).fetchall()
        if any(forgot for _, forgot in changes) or len(current) < len(ids):
            # The saved file still names the forgotten rows' terms: gone now, written anew at close.
            if self._saved_path is not None:
                remove_postings(self._saved_path)
                self._saved_key = None
            self._drop_missing(conn, p)
        self._replace(conn, p, current)
        p.seq, p.anchor = seq, anchor(conn, seq)
        return True

    def _drop_missing(self, conn: sqlite3.Connection, p: Postings) -> None:
        """Forget the rows no longer in ``memories`` (a forget: the row key is gone, not reused)."""
        present = np.fromiter((r[0] for r in conn.execute("SELECT rid FROM memories")), dtype=np.int64)
        alive = np.zeros(p.doc_len.size, dtype=bool)
        alive[present[present < alive.size]] = True
        gone = np.flatnonzero((p.doc_len > 0) & ~alive)
        for rid in gone.tolist():
            self._remove(p, rid)

    def _remove(self, p: Postings, rid: int) -> None:
        """Take row ``rid``'s postings out (from the build or the delta) and its tokens from the totals."""
        if rid >= p.doc_len.size or p.doc_len[rid] == 0:
            return
        old_terms = p.delta_docs.pop(rid, None)
        if old_terms is not None:
            for term in old_terms:
                bucket = p.delta_terms.get(term)
                if bucket is not None:
                    bucket.pop(rid, None)
                    if not bucket:
                        del p.delta_terms[term]
        elif p.base_alive[rid]:
            p.base_alive[rid] = False
            p.base_dead += 1
        p.rows -= 1
        p.tokens -= int(p.doc_len[rid])
        p.doc_len[rid] = 0

    def _replace(self, conn: sqlite3.Connection, p: Postings, docs: Sequence[tuple[int, str, str]]) -> None:
        """Set each ``(rid, content, tags)`` row's postings to what FTS5 makes of its text now."""
        if not docs:
            return
        counted = self._tokenise(conn, [(rid, content, tags) for rid, content, tags in docs])
        top = max(rid for rid, _, _ in docs)
        if top >= p.doc_len.size:
            grow = max(top + 1, int(p.doc_len.size * 1.25))
            p.doc_len = np.concatenate([p.doc_len, np.zeros(grow - p.doc_len.size, np.int32)])
            p.base_alive = np.concatenate([p.base_alive, np.zeros(grow - p.base_alive.size, bool)])
        for rid, _, _ in docs:
            # Its old postings (of the build or the delta) stop counting; the new ones go to the delta.
            self._remove(p, rid)
            counts = counted.get(rid, {})
            p.delta_docs[rid] = tuple(counts)
            for term, n in counts.items():
                p.delta_terms.setdefault(term, {})[rid] = n
            length = sum(counts.values())
            p.doc_len[rid] = length
            p.rows += 1
            p.tokens += length

    def _tokenise(self, conn: sqlite3.Connection, docs: Sequence[tuple[int, str, str]]) -> dict[int, dict[str, int]]:
        """Per row, FTS5's terms of its content and tags with their counts (a private temp table)."""
        self._ensure_tokeniser(conn)
        conn.executemany(f"INSERT INTO {_TOK} (rowid, content, tags) VALUES (?, ?, ?)", docs)
        try:
            out: dict[int, dict[str, int]] = {}
            for term, doc, n in conn.execute(f"SELECT term, doc, count(*) FROM {_TOKV} GROUP BY term, doc"):
                out.setdefault(int(doc), {})[term] = int(n)
        finally:
            conn.execute(f"DELETE FROM {_TOK}")
        return out

    def _stems_of(self, conn: sqlite3.Connection, terms: Sequence[str]) -> list[str] | None:
        """Each query term as FTS5 indexes it (None if one is not exactly one token: FTS5 reads a phrase)."""
        missing = [t for t in dict.fromkeys(terms) if t not in self._stems]
        if missing:
            if len(self._stems) + len(missing) > _MAX_STEMS:
                self._stems.clear()
            counted = self._tokenise(conn, [(i + 1, t, "") for i, t in enumerate(missing)])
            for i, term in enumerate(missing):
                found = counted.get(i + 1, {})
                self._stems[term] = next(iter(found)) if len(found) == 1 and sum(found.values()) == 1 else None
        stems = [self._stems[t] for t in terms]
        if any(s is None for s in stems):
            return None
        return [s for s in stems if s is not None]

    def _ensure_tokeniser(self, conn: sqlite3.Connection) -> None:
        if self._tokenize is not None:
            return
        tokenize = tokenizer(conn).replace("'", "''")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_TOK} USING fts5 (content, tags, tokenize = '{tokenize}')")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_TOKV} USING fts5vocab(temp, engram_kw_tok, instance)")
        self._tokenize = tokenize


def _json_list(values: Sequence[str]) -> str:
    return json.dumps(list(values))

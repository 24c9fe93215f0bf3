"""Reads: search, get, list, count and history, scoped by agent and audited; and unaudited internal paging.

Every public read validates its arguments, applies the reading agent's scope as a hard
filter inside the store (own memories, those shared with it, public ones), and appends
one audit entry per call (the ids read, capped at :data:`~engramdb._validate.AUDIT_IDS`,
and their exact count; never content). :meth:`Recall.pages` and :meth:`Recall.all` are for
services that read whole selections (exports, retention, analytics): not audited.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from engramdb import _validate as check
from engramdb._access import AccessBatch, FlushedAudit
from engramdb._keys import key_of, key_tag
from engramdb._threads import Background
from engramdb._util import utcnow
from engramdb.config import Settings
from engramdb.embeddings.base import Embedder
from engramdb.embeddings.profile import profile_of
from engramdb.errors import NotFound, StorageError, ValidationError
from engramdb.facts import version_at
from engramdb.models import AuditRecord, Change, Hit, Memory
from engramdb.retrieval.evidence import term_weight
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights, weights_for
from engramdb.retrieval.related import related_words
from engramdb.retrieval.timeref import find_time
from engramdb.storage.base import Filter, Store

__all__ = ["Recall", "read_filter", "scope_filter", "warm_retrieval_early"]

_warmed = threading.Event()
_warming = threading.Lock()


def warm_retrieval_early() -> threading.Thread | None:
    """Start building the tables :func:`_warm_retrieval` builds on a short-lived thread of their own (the open's
    other work, loading the embedder and reading the store, waits on the disk meanwhile), which the open joins;
    its Recall waits for them before answering. None: built already (once a process)."""
    if _warmed.is_set():
        return None
    thread = threading.Thread(target=_warm_retrieval, name="engramdb-warm-tables", daemon=True)
    thread.start()
    return thread


def _warm_retrieval() -> None:
    """Load what the first search of a process would (the vocabulary's word ranks, the related words' table,
    dateparser's tables for a question naming a time, most of it dateparser's regexes), so
    the first searches are as fast as later ones. Once a process; a second caller meanwhile waits for the first."""
    if _warmed.is_set():
        return
    with _warming:
        if _warmed.is_set():
            return
        term_weight("warm")
        related_words("warm")
        find_time("last saturday", reference=utcnow())
        _warmed.set()


def _model_loader(embedder: object) -> Callable[[], object] | None:
    """The ``load`` of a local model under ``embedder``'s wrappers (its first embedding would read it: 0.1-0.3 s of
    CPU, bench/RESULTS.md, issue 27, ninth round); None for a remote one (a warm-up never calls out)."""
    for _ in range(4):  # a few wrappers deep (the cache's ``inner``), never a cycle
        load = getattr(embedder, "load", None)
        if callable(load):
            return cast("Callable[[], object]", load)
        embedder = getattr(embedder, "inner", None)
        if embedder is None:
            return None
    return None


def scope_filter(
    user: object = None, session: object = None, *, exact: bool = False
) -> tuple[tuple[str | None, ...] | None, tuple[str | None, ...] | None]:
    """``Filter.users`` and ``Filter.sessions`` of a call's ``user``/``session`` (validated).

    A read for user U sees the agent's own memories (no user) and U's, never another user's; with
    ``exact`` (clear, export, retention of one user) only U's. A session narrows to that thread.
    """
    name = check.scope(user, what="user")
    thread = check.scope(session, what="session")
    users = None if name is None else ((name,) if exact else (None, name))
    return users, None if thread is None else (thread,)


def read_filter(
    agent: str,
    kind: str | Sequence[str] | None,
    tags: Iterable[str] | None,
    *,
    since: object = None,
    until: object = None,
    user: object = None,
    session: object = None,
    as_of: object = None,
    metadata: object = None,
) -> Filter:
    """The hard filter of a read: the agent's scope, and kinds, tags and creation dates when given (no tags: no
    restriction; ``since``/``until`` inclusive, a date alone its whole day: :func:`engramdb._validate.moment`);
    the user and session scopes (:func:`scope_filter`); ``as_of``: what was true then (a date alone: its end);
    ``metadata``: top-level keys its metadata must hold exactly (:func:`engramdb._validate.metadata_filter`)."""
    wanted = None if tags is None else check.tags(tags)
    after = check.moment(since, what="since")
    before = check.moment(until, what="until", end=True)
    if after is not None and before is not None and after > before:
        # Said in the caller's words (the store's Filter would name its own fields).
        raise ValidationError(f"since ({after.isoformat()}) is later than until ({before.isoformat()})")
    users, sessions = scope_filter(user, session)
    return Filter(
        agent=check.agent_name(agent),
        kinds=check.kinds(kind),
        tags=wanted or None,
        created_after=after,
        created_before=before,
        users=users,
        sessions=sessions,
        as_of=check.moment(as_of, what="as_of", end=True),
        metadata=check.metadata_filter(metadata),
    )


class Recall:
    """The read side of a store: what an agent may see, found by meaning and keywords, each read audited."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        *,
        weights: RankingWeights | None,
        audit: Callable[[Sequence[AuditRecord]], None],
        settle: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._settle = settle
        self._settings = settings
        self._audit = audit
        if weights is None:
            # The embedder's own fusion constants (retrieval/profile.py), the fusion the settings name.
            weights = weights_for(profile_of(embedder), RankingWeights(fusion=settings.fusion))  # type: ignore[arg-type]  # checked by config
        self._searcher = HybridSearcher(store, embedder, weights=weights)
        self._accesses = AccessBatch(store, settings) if settings.access_flush_seconds > 0 else None
        # On a server store a search's read-audit entry waits with its access counts (a commit there is a round trip
        # and a wait for the server: ~7 ms of a 100k search, bench/RESULTS.md issue 26); SQLite appends it locally.
        self._audit_later = self._accesses is not None and store.concurrent_reads and settings.audit
        #: The warm-up thread, stopped and joined by close() (see engramdb._threads).
        self._background = Background()
        if settings.warm:
            # Before answering, not beside the first searches: on a thread, dateparser's pure-Python regex builds
            # held the interpreter through a fresh process's first search (bench/RESULTS.md, issue 27, ninth
            # round). Once a process.
            _warm_retrieval()
            self._background.start("engramdb-warm-retrieval", self._warm)

    def _warm(self) -> None:
        """What the first search would start itself (bench/RESULTS.md, first2): this instance's keyword workers
        and access writer (a thread's start costs the first search when the open's other warm-up holds the
        interpreter), then the query model. Best effort: closed meanwhile, nothing is started."""
        if self._background.stopping:
            return
        try:
            self._searcher.start_workers()
            if self._accesses is not None:
                self._accesses.start()
        except RuntimeError:
            return  # closed meanwhile: the pool takes no new work
        load = _model_loader(self._embedder)
        if load is not None and not self._background.stopping:
            # Every search needs the model (unlike the date tables): a first search meeting this load waits for
            # its end, as it would have loaded it itself. A model that cannot load is reported by that search.
            with contextlib.suppress(Exception):
                load()

    @property
    def weights(self) -> RankingWeights:
        """The ranking weights of this instance's searches."""
        return self._searcher.weights

    def close(self) -> None:
        """Write the searches' pending access counts, stop the worker threads."""
        self._background.stop()
        try:
            if self._accesses is not None:
                self._accesses.close()
        finally:
            self._searcher.close()

    def audited(self, store: Store) -> Store:
        """``store`` whose audit reads first write this instance's batched search entries (itself if none are)."""
        if not self._audit_later:
            return store
        assert self._accesses is not None
        return dataclasses.replace(store, audit=FlushedAudit(store.audit, self._accesses, store.in_write))

    def flush(self) -> None:
        """Write the searches' access counts (and batched audit entries) still waiting in this instance."""
        if self._accesses is not None:
            self._accesses.flush()

    def _counted(self) -> None:
        """Before a read of memories: this instance's pending access counts are written first (if any)."""
        if self._accesses is not None and self._accesses:
            self._accesses.flush(wait=False)

    # -- audited reads ------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        agent: str = "default",
        kind: str | Sequence[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 10,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        user: str | None = None,
        session: str | None = None,
        as_of: datetime | str | None = None,
        min_score: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        fold: bool = True,
        bookkeep: bool = True,
    ) -> builtins.list[Hit]:
        """The memories most relevant to ``query`` that ``agent`` may see, best first (each counts as accessed).

        ``fold=False`` keeps near-identical memories apart (for services that count them, such as episode
        statistics); by default they come as one hit (``Hit.duplicates``). ``bookkeep=False`` neither counts the
        hits as accessed nor audits the read: for lookups a service makes on the caller's behalf before it decides
        (resolving a name), so that a call it then refuses changes nothing.

        ``since``/``until`` bound the creation time as in :meth:`list`; ``user``, ``session`` and ``as_of`` as
        in :func:`read_filter`. Hits whose calibrated relevance is below ``min_score`` (default: the
        ``min_score`` setting) are left out, and not counted as accessed. With background vectors, first waits
        until this instance's queued vectors are written.
        """
        query = check.content(query, what="query")
        flt = read_filter(
            agent, kind, tags, since=since, until=until, user=user, session=session, as_of=as_of, metadata=metadata
        )
        limit = check.limit(limit)
        cutoff = self._settings.min_score if min_score is None else check.confidence(min_score, what="min_score")
        if self._settle is not None:
            # Background vectors: this instance's queued vectors are written before the query is embedded, so
            # a search sees every earlier write of this process (as in sync mode) and the two embeddings do
            # not compete for the cores (the vector channel would wait for the queue anyway).
            self._settle()
        now = utcnow()
        epoch = self._accesses.epoch if self._accesses is not None else 0
        found = self._searcher.search(query, flt, limit=limit, now=now, touch=False, fold=fold)
        if cutoff > 0:
            # Less relevant than the cutoff: not a hit (and not accessed).
            found = [h for h in found if h.relevance >= cutoff]
        if not bookkeep:
            return found
        ids = [h.memory.id for h in found]
        self._bookkeep(ids, now=now, agent=flt.agent, kinds=flt.kinds)
        counts = {h.memory.id: h.memory.access_count + 1 for h in found}
        if self._accesses is not None and found:
            counts = self._shown_counts(found, epoch)
        return [
            dataclasses.replace(
                h, memory=dataclasses.replace(h.memory, access_count=counts[h.memory.id], last_accessed=now)
            )
            for h in found
        ]

    def _shown_counts(self, found: builtins.list[Hit], epoch: int) -> dict[str, int]:
        """Hits' access counts as written plus this instance's pending searches (this one included)."""
        assert self._accesses is not None
        base = {h.memory.id: h.memory.access_count for h in found}
        while True:
            pending, now_epoch = self._accesses.pending_counts(base)
            if now_epoch == epoch:
                return {i: c + pending.get(i, 0) for i, c in base.items()}
            # A flush committed while the rows were read: they may or may not hold it, so read them again.
            epoch = now_epoch
            again = self._store.memories.get_many(list(base))
            base = {i: again[i].access_count if i in again else c for i, c in base.items()}

    def _bookkeep(self, ids: builtins.list[str], *, now: datetime, agent: str | None, kinds: Any) -> None:
        """A search's access counts and audit entry, in one write transaction (one commit instead of two).

        With ``access_flush_seconds`` the counts wait in memory for the batch writer and the transaction
        holds the audit entry alone; on a server store the entry waits with them (nothing is written here). If that
        transaction fails (a full disk), each is retried on its own, as each may then wait in memory for the next
        write: a read never fails for its bookkeeping.
        """
        touch = bool(ids)
        if self._audit_later:
            assert self._accesses is not None
            self._accesses.add(ids, now, audit=self._record("search", agent=agent, ids=ids, kinds=kinds))
            return
        if touch and self._accesses is not None:
            self._accesses.add(ids, now)
            touch = False
        if not touch and not self._settings.audit:
            return
        try:
            with self._store.atomic():
                if self._settings.synchronous == "NORMAL":
                    # As durable as SQLite's NORMAL: a server crash may lose the last moments of read
                    # bookkeeping, never a write's; PostgreSQL's commit then skips waiting for its WAL flush.
                    self._store.relax_commit()
                if touch:
                    self._store.memories.touch(ids, at=now)
                self._read("search", agent=agent, ids=ids, kinds=kinds)
        except StorageError:
            if touch:
                self._store.memories.touch(ids, at=now)
            elif self._accesses is not None:
                # A full disk: the pending counts join the store's own queue, written with its next write.
                self._accesses.flush(wait=False)
            self._read("search", agent=agent, ids=ids, kinds=kinds)

    def get(
        self, memory_id: str, *, agent: str | None = None, user: str | None = None, session: str | None = None
    ) -> Memory:
        """One memory by id; with ``agent`` given, it must be visible to that agent, with ``user``/``session``
        in their scope (else NotFound)."""
        memory = self.find(memory_id, agent=agent, user=user, session=session)
        self._read("get", agent=agent, ids=[memory.id])
        return memory

    def keyed(self, key: str, *, agent: str, user: str | None = None, as_of: datetime | str | None = None) -> Memory:
        """The current memory of ``agent``'s (and ``user``'s) ``key`` (its own), or the value it had ``as_of``
        a moment; NotFound if none. Audited as a ``get``."""
        key = check.key(key)
        name = check.scope(user, what="user")
        moment = check.moment(as_of, what="as_of", end=True)
        self._counted()
        flt = Filter(
            agent=check.agent_name(agent),
            tags=(key_tag(key),),
            include_shared=False,
            users=(name,),
            superseded=moment is not None,
        )
        found = [m for m in self._store.memories.list(flt, limit=check.MAX_LIMIT) if key_of(m) == key]
        if moment is not None:
            then = version_at(found, moment)
            found = [then] if then is not None else []
        if not found:
            whose = f"agent {agent!r}" + (f" and user {name!r}" if name is not None else "")
            when = f" as of {moment.isoformat()}" if moment is not None else ""
            raise NotFound(f"{whose} has no memory with key {key!r}{when}")
        self._read("get", agent=flt.agent, ids=[found[0].id], key=key)
        return found[0]

    def list(
        self,
        *,
        agent: str = "default",
        kind: str | Sequence[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        user: str | None = None,
        session: str | None = None,
        as_of: datetime | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        """An agent's memories (and those shared with it), newest first; created within ``since``..``until``;
        ``user``, ``session``, ``as_of`` and ``metadata`` as in :func:`read_filter`."""
        offset = check.offset(offset)
        flt = read_filter(
            agent, kind, tags, since=since, until=until, user=user, session=session, as_of=as_of, metadata=metadata
        )
        self._counted()
        memories = self._store.memories.list(flt, limit=check.limit(limit), offset=offset)
        self._read("list", agent=flt.agent, ids=[m.id for m in memories], kinds=flt.kinds, offset=offset or None)
        return memories

    def count(
        self,
        *,
        agent: str = "default",
        kind: str | Sequence[str] | None = None,
        user: str | None = None,
        session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """How many memories ``agent`` can see (of ``kind``, in ``user``'s and ``session``'s scope, holding
        ``metadata``)."""
        return self._store.memories.count(read_filter(agent, kind, None, user=user, session=session, metadata=metadata))

    def history(self, memory_id: str, *, agent: str | None = None) -> builtins.list[Change]:
        """Every change of a memory, oldest first; with ``agent`` given, it must be that agent's own."""
        if agent is not None:
            self.owned(memory_id, agent)
        changes = self._store.memories.history(check.memory_id(memory_id))
        if not changes:
            raise NotFound(f"no history for memory {memory_id!r}")
        return changes

    # -- unaudited helpers for the write side and the services --------------------------------------------
    def find(
        self, memory_id: str, *, agent: str | None = None, user: str | None = None, session: str | None = None
    ) -> Memory:
        """:meth:`get` without the audit entry (for checks before a write). Superseded values are found too."""
        memory_id = check.memory_id(memory_id)
        users, sessions = scope_filter(user, session)
        flt = None
        if agent is not None or users is not None or sessions is not None:
            name = check.agent_name(agent) if agent is not None else None
            flt = Filter(agent=name, users=users, sessions=sessions, superseded=True)
        self._counted()
        memory = self._store.memories.get(memory_id, flt)
        if memory is None:
            scope = f" visible to agent {agent!r}" if agent is not None else ""
            scope += f" and user {user!r}" if user is not None else ""
            scope += f" in session {session!r}" if session is not None else ""
            raise NotFound(f"no memory with id {memory_id!r}{scope}")
        return memory

    def owned(
        self, memory_id: str, agent: str | None, *, user: str | None = None, session: str | None = None
    ) -> Memory:
        """The memory, which must be ``agent``'s own when ``agent`` is given (a shared one is as invisible)."""
        memory = self.find(memory_id, agent=agent, user=user, session=session)
        if agent is not None and memory.agent != agent:
            raise NotFound(f"no memory {memory_id!r} owned by agent {agent!r}")
        return memory

    def pages(self, flt: Filter, *, size: int = check.PAGE_SIZE) -> Iterator[builtins.list[Memory]]:
        """Every memory matching ``flt`` (newest first), ``size`` at a time; the last page is the short one.

        Reading stops with the first short page, so callers may also stop early.
        """
        self._counted()
        offset = 0
        while True:
            page = self._store.memories.list(flt, limit=size, offset=offset)
            yield page
            if len(page) < size:
                return
            offset += size

    def all(self, flt: Filter) -> builtins.list[Memory]:
        """Every memory matching ``flt``, oldest first."""
        out = [m for page in self.pages(flt) for m in page]
        out.reverse()
        return out

    def get_many(self, memory_ids: Sequence[str], flt: Filter | None = None) -> dict[str, Memory]:
        """Memories by id (missing or invisible under ``flt`` left out), fetched a page of ids at a time."""
        self._counted()
        found: dict[str, Memory] = {}
        ids = list(memory_ids)
        for start in range(0, len(ids), check.PAGE_SIZE):
            found.update(self._store.memories.get_many(ids[start : start + check.PAGE_SIZE], flt))
        return found

    def _read(self, action: str, *, agent: str | None, ids: Sequence[str], **detail: Any) -> None:
        """One audit entry per read call (not per result): the ids read, capped, and their count."""
        if self._settings.audit:
            self._audit([self._record(action, agent=agent, ids=ids, **detail)])

    @staticmethod
    def _record(action: str, *, agent: str | None, ids: Sequence[str], **detail: Any) -> AuditRecord:
        """The audit entry of one read call."""
        info: dict[str, Any] = {k: v for k, v in detail.items() if v is not None}
        info["count"] = len(ids)
        info["ids"] = list(ids[: check.AUDIT_IDS])
        memory_id = ids[0] if len(ids) == 1 else None
        return AuditRecord(action=action, agent=agent, memory_id=memory_id, at=utcnow(), detail=info)

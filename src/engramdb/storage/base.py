"""The storage API: role protocols and the :class:`Store` bundle every backend returns.

A store is a small frozen bundle of role objects, one per concern: ``store.meta``,
``store.memories``, ``store.search``, ``store.vectors``, ``store.shares`` and
``store.audit``, plus ``store.atomic()``, ``store.close()`` and ``store.location``.
Callers depend on the role they use, not on a backend class.

Backends persist memories, their vectors and history, and fetch *candidates*:
keyword candidates (full-text rank) and vector candidates (cosine similarity).
Fusion and ranking happen once, above the backends (``engramdb.retrieval``),
so every backend ranks the same data the same way.

Scoping is a hard filter applied inside the backend: a :class:`Filter` names the
reading agent, and a backend never returns a memory that agent may not see
(its own, shared with it, or public).

Every write of every role joins an open :meth:`Store.atomic` block of the same thread,
so e.g. a forget and its audit entry commit together::

    with store.atomic():
        store.memories.delete(memory_id, actor=agent, at=now)
        store.audit.append([record])
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, Self, TypeAlias, runtime_checkable

from engramdb.errors import ValidationError
from engramdb.models import AuditEvent, Change, Memory, Share
from engramdb.models.audit import AuditRecord
from engramdb.storage._arrays import np

if TYPE_CHECKING:
    from engramdb.storage._arrays import F32

    Vectors: TypeAlias = F32

__all__ = [
    "MODEL_META_KEY",
    "AuditRepo",
    "Candidate",
    "CandidateSource",
    "Filter",
    "ListOrder",
    "MemoryRepo",
    "MetaRepo",
    "ShareRepo",
    "Store",
    "StoreChecks",
    "StoredVector",
    "UsageTotals",
    "VectorRepo",
    "Vectors",
]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        # The numpy array type of vectors, made when asked for: importing this module needs no numpy.
        if name == "Vectors":
            import numpy.typing

            return numpy.typing.NDArray[np.float32]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Meta key naming the embedding model of the store: only vectors from that model are searched.
#: ``memories.add``/``vectors.set`` set it when it is unset; changing it is how a re-embed switches models.
MODEL_META_KEY: Final = "model_id"

#: The order of :meth:`MemoryRepo.list`: ``newest`` (created_at, newest first) or ``most_used`` (feedback
#: outcomes, i.e. ``attempts``, then retrievals, i.e. ``access_count``, most first; ties newest first).
ListOrder = Literal["newest", "most_used"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    """Which memories a read may return.

    ``agent=None`` means every agent (administrative reads only: export, retention);
    otherwise the reader sees its own memories plus those shared with it or public.
    ``tags`` must all be present on a memory. ``ids`` restricts to those ids.
    ``created_after``/``created_before`` bound ``Memory.created_at``, both inclusive; they must be
    timezone-aware, and ``created_after`` not later than ``created_before`` (else ValidationError).

    Scopes: ``users`` lists the ``Memory.user`` values admitted (``None`` in it admits memories of no
    user; the whole field None: any user), ``sessions`` likewise for ``Memory.session``. A read for
    user U passes ``users=(None, U)``: the agent's own memories and U's, never another user's.
    Time: superseded values (``valid_until`` set) are left out unless ``superseded``; with ``as_of``
    only what was true then passes: ``occurred_at <= as_of`` and not superseded by then.
    ``metadata``: ``(key, value)`` pairs the memory's top-level metadata must hold exactly (JSON scalars,
    numbers compared as numbers; see :func:`engramdb._validate.metadata_filter`).
    """

    agent: str | None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    include_shared: bool = True
    ids: tuple[str, ...] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    users: tuple[str | None, ...] | None = None
    sessions: tuple[str | None, ...] | None = None
    as_of: datetime | None = None
    superseded: bool = False
    metadata: tuple[tuple[str, Any], ...] | None = None

    @property
    def scoped(self) -> bool:
        """Whether the filter restricts users, sessions, time or metadata (what the SQLite vector cache does
        not hold)."""
        return (
            self.users is not None
            or self.sessions is not None
            or self.as_of is not None
            or self.superseded
            or bool(self.metadata)
        )

    def __post_init__(self) -> None:
        for name, bound in (
            ("created_after", self.created_after),
            ("created_before", self.created_before),
            ("as_of", self.as_of),
        ):
            # A naive bound would be read as UTC by the SQL but compare as local time elsewhere: refuse it.
            if bound is not None and (not isinstance(bound, datetime) or bound.utcoffset() is None):
                raise ValidationError(f"{name} must be a timezone-aware datetime, not {bound!r}")
        after, before = self.created_after, self.created_before
        if after is not None and before is not None and after > before:
            raise ValidationError(
                f"created_after ({after.isoformat()}) is later than created_before ({before.isoformat()})"
            )


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory id found by one retrieval channel, with that channel's raw score (higher is better).

    A channel that reads the memory's row anyway may carry it (``memory``, as ``MemoryRepo.get_many`` under the
    same filter would return it): the search then does not read it again (PostgreSQL: one round trip fewer). A
    keyword channel may likewise carry the memory's stored vector of model ``vector_model`` (``VectorRepo.get``'s):
    a keyword-only hit's cosine to the question then needs no read either.
    """

    id: str
    score: float
    memory: Memory | None = field(default=None, compare=False, repr=False)
    vector: Vectors | None = field(default=None, compare=False, repr=False)
    vector_model: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotals:
    """How much the memories a filter matches were used, summed in the store (:meth:`MemoryRepo.usage`)."""

    #: Memories with at least one feedback outcome (``attempts > 0``).
    used: int
    #: Sums of ``attempts``, ``successes`` and ``access_count`` over every matching memory.
    attempts: float
    successes: float
    accesses: int
    #: The highest ``Memory.success_rate`` (posterior mean) among the used memories; None when none is used.
    best_success_rate: float | None
    #: The sum and the highest of ``Memory.confidence`` over every matching memory (0.0 and None when none).
    confidence_sum: float = 0.0
    best_confidence: float | None = None


@runtime_checkable
class MetaRepo(Protocol):
    """Store-level settings (e.g. the embedding model id)."""

    def get(self, key: str) -> str | None:
        """The value of ``key``, or None. Inside ``store.atomic()`` the key stays locked until the block commits,
        so a read-modify-write of it (read, change, :meth:`set`) loses no concurrent writer's change."""

    def set(self, key: str, value: str) -> None:
        """Set ``key``; ValidationError for keys the store maintains itself."""


@runtime_checkable
class MemoryRepo(Protocol):
    """Memories, their history, and the writes that change them."""

    def add(
        self,
        memories: Sequence[Memory],
        vectors: Vectors | None,
        *,
        model_id: str,
        actor: str | None,
        unvectored: frozenset[int] = frozenset(),
    ) -> None:
        """Insert new memories (and their unit-norm vectors, row for row) in one transaction.

        Writes a ``create`` history entry for each, by ``actor`` (None: each memory's own agent).
        ``unvectored``: positions written without a vector (their rows of ``vectors`` are ignored;
        the background worker adds them later). All or nothing.
        """

    def update(
        self,
        memory_id: str,
        changes: Mapping[str, Any],
        *,
        vector: Vectors | None,
        model_id: str,
        actor: str,
        at: datetime,
        action: str = "update",
    ) -> Memory:
        """Apply field changes (and a new vector if content changed); record them in history.

        The row is locked for the transaction (a read-modify-write such as feedback inside
        :meth:`Store.atomic` cannot lose a concurrent update). NotFound if it does not exist.
        """

    def delete(self, memory_id: str, *, actor: str, at: datetime) -> None:
        """Forget: remove content from the table, the keyword index and the vectors.

        Earlier history entries of the memory are scrubbed and a ``forget`` tombstone
        without content is kept. Joins an open :meth:`Store.atomic` block (backend clean-up
        such as SQLite's log truncation runs after the outermost commit). NotFound if missing.
        """

    def touch(self, memory_ids: Sequence[str], *, at: datetime) -> None:
        """Record a retrieval: set ``last_accessed`` and increment ``access_count``.

        Never fails a read for lack of space: outside :meth:`Store.atomic`, when the disk is full
        (or reports an I/O error) the touch is kept in memory (bounded) and written by the next
        write transaction.
        """

    def get(self, memory_id: str, flt: Filter | None = None) -> Memory | None:
        """One memory by id, or None if missing or not visible under ``flt``.

        Inside :meth:`Store.atomic` the row is locked to the commit (``FOR UPDATE`` on PostgreSQL;
        SQLite's write transaction locks the whole store), so ``get`` then ``update`` in one block
        is a safe read-modify-write across threads and processes.
        """

    def get_many(self, memory_ids: Sequence[str], flt: Filter | None = None) -> dict[str, Memory]:
        """Memories by id, in the order asked (missing or invisible ids are left out); locked like :meth:`get`."""

    def list(
        self, flt: Filter, *, limit: int = 100, offset: int = 0, order: ListOrder = "newest"
    ) -> builtins.list[Memory]:
        """Memories matching ``flt``, newest first, or most used first (``order="most_used"``: see
        :data:`ListOrder`). The order is total (ties by creation, then insertion), so pages do not overlap.
        ValidationError for an unknown order."""

    def count(self, flt: Filter) -> int:
        """How many memories match ``flt``."""

    def usage(self, flt: Filter) -> UsageTotals:
        """Feedback and retrieval totals over the memories matching ``flt`` (one aggregate, no rows loaded)."""

    def history(self, memory_id: str) -> builtins.list[Change]:
        """Every change record of a memory, oldest first (also after it was forgotten)."""

    def history_all(self, *, after_seq: int = 0, limit: int = 1000) -> builtins.list[Change]:
        """Change records of every memory with ``seq > after_seq``, in ``seq`` order (for checks)."""

    def import_history(self, changes: Sequence[Change]) -> None:
        """Replace the history of every memory named in ``changes`` by those entries (in order).

        Only the current life's entries are replaced: a ``forget`` tombstone of an earlier
        memory with the same id, and what precedes it, stay. For importing memories with the
        history they had in another store, inside :meth:`Store.atomic` right after :meth:`add`.
        NotFound if a named memory does not exist.
        """


@runtime_checkable
class CandidateSource(Protocol):
    """The two retrieval channels hybrid search fuses. Must not run inside :meth:`Store.atomic`."""

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> list[Candidate]:
        """Full-text candidates for any of ``terms`` (already normalised words), best first."""

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> list[Candidate]:
        """Cosine-similarity candidates for a unit-norm query vector, best first."""

    def vector_candidates_many(
        self, queries: Sequence[tuple[Vectors, Filter]], *, limit: int, near: float | None = None
    ) -> list[list[Candidate]]:
        """:meth:`vector_candidates` of each (query vector, filter), in order: in one statement where the store can
        (a batch write's near-duplicate lookups). With ``near``, only candidates scoring at least that are needed:
        an approximate index may search less widely, and those below it may be missing."""


@runtime_checkable
class VectorRepo(Protocol):
    """Stored embeddings, for re-embedding and export."""

    def count_stale(self, model_id: str) -> int:
        """How many memories have no vector from ``model_id`` (missing or another model)."""

    def iter_stale(self, model_id: str, *, batch: int = 256) -> Iterator[list[tuple[str, str]]]:
        """Batches of (id, content) whose vector is missing or from another model (writes may run between)."""

    def set(self, memory_ids: Sequence[str], vectors: Vectors, *, model_id: str) -> None:
        """Replace the vectors of existing memories (NotFound if one is missing)."""

    def get(
        self, memory_ids: Sequence[str], *, model_id: str, agents: Sequence[str] | None = None
    ) -> dict[str, Vectors]:
        """The stored vectors from ``model_id`` of these memories (ids without one are left out).

        ``agents``: the memories' owners when the caller knows them (all of them): a store partitioned by agent
        then reads only their partitions.
        """


@runtime_checkable
class ShareRepo(Protocol):
    """Consent to share: an owner's memories shared with other agents."""

    def share(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """Share ``from_agent``'s own memories among ``memory_ids`` with ``to_agent`` (``"*"``: everyone).

        Other agents' memories are skipped (only the owner consents). A ``private``
        memory becomes ``shared``; a ``share`` history entry is written. Returns how
        many memories were newly shared (already shared with ``to_agent``: not counted).
        """

    def unshare(self, memory_ids: Sequence[str], *, from_agent: str, to_agent: str, at: datetime) -> int:
        """Withdraw shares of ``from_agent``'s memories from ``to_agent`` (``"*"``: every share).

        A ``shared`` memory left without shares becomes ``private``. Returns how many
        memories lost at least one share.
        """

    def list(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """Shares in force, oldest first; each argument given narrows them (``to_agent`` matches exactly)."""


@runtime_checkable
class AuditRepo(Protocol):
    """The append-only, hash-chained audit trail (hashing itself: :mod:`engramdb.auditchain`)."""

    def append(self, records: Sequence[AuditRecord], *, deferrable: bool | None = None) -> list[AuditEvent]:
        """Append entries to the trail; returns them numbered and hashed.

        The last hash is read and the entries written in one write transaction, so
        concurrent writers (threads or processes) extend a single unbroken chain. The
        head (last seq and hash) is recorded alongside. Never changes existing entries.

        ``deferrable`` (default: when every entry records a read, ``get``/``list``/``search``):
        outside :meth:`Store.atomic`, when the disk is full the entries are kept in memory
        (bounded) and appended first by the next write transaction; returns ``[]`` then.
        A write's own entries are never deferred: its transaction fails instead.
        """

    def events(
        self,
        *,
        agent: str | None = None,
        memory_id: str | None = None,
        action: str | None = None,
        after_seq: int = 0,
        limit: int | None = 100,
        newest_first: bool = False,
    ) -> list[AuditEvent]:
        """Entries with ``seq > after_seq`` (each given argument narrows them), oldest first by default."""

    def head(self) -> tuple[int, str] | None:
        """``(seq, hash)`` of the last entry as recorded by the last append; None if none ever was."""


@dataclass(frozen=True, slots=True)
class StoredVector:
    """A memory's stored vector as found (for checks): None fields when it has none."""

    memory_id: str
    model_id: str | None
    dim: int | None
    vector: Vectors | None


@runtime_checkable
class StoreChecks(Protocol):
    """Consistency checks of the stored data (``engram doctor``); read-only."""

    def database(self, *, quick: bool = False) -> builtins.list[str] | None:
        """Problems the database's own check reports (SQLite ``PRAGMA integrity_check``; ``quick``:
        ``quick_check``); empty when none, None when the backend has no such check."""

    def keyword_index(self) -> builtins.list[str]:
        """Problems of the keyword index against the memories (empty: in step)."""

    def iter_vectors(self, *, batch: int = 1000) -> Iterator[builtins.list[StoredVector]]:
        """Every memory's stored vector (or its absence), in batches."""

    def pending(self) -> int:
        """How many read-bookkeeping items (touches, read audit entries) wait for the next write."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Store:
    """An open store: its role objects, one transaction scope and one lifetime. Safe across threads."""

    #: The URL or path this store was opened from (passwords removed; for messages).
    location: str
    meta: MetaRepo
    memories: MemoryRepo
    search: CandidateSource
    vectors: VectorRepo
    shares: ShareRepo
    audit: AuditRepo
    checks: StoreChecks
    _atomic: Callable[[], AbstractContextManager[None]] = field(repr=False)
    _close: Callable[[], None] = field(repr=False)
    _relax: Callable[[], None] = field(repr=False)
    #: Reads from several threads run at once (a connection pool), not one after another under a lock.
    concurrent_reads: bool = False
    _in_write: Callable[[], bool] = field(repr=False, default=lambda: False)
    _background: Callable[[], None] = field(repr=False, default=lambda: None)
    _give_way: Callable[[float], float] = field(repr=False, default=lambda _seconds: 0.0)

    def in_write(self) -> bool:
        """Whether the calling thread holds an open write (:meth:`atomic`): its reads must stay on this thread."""
        return self._in_write()

    def atomic(self) -> AbstractContextManager[None]:
        """A block in which every write of every role commits together or not at all (re-entrant).

        Other threads wait for (SQLite) or do not see (PostgreSQL) the block's writes until
        it commits. Raise inside to roll everything back. Searches must not run inside.
        """
        return self._atomic()

    def relax_commit(self) -> None:
        """Inside :meth:`atomic`: the block's commit may return before it is on disk (for read bookkeeping).

        PostgreSQL then commits asynchronously: a *server* crash may lose the last fraction of a second of such
        commits, never a part of one. SQLite's ``synchronous`` setting already decides its commits (no-op).
        """
        self._relax()

    def background_turn(self) -> None:
        """Inside :meth:`atomic`: the block is background work (the vector queue's), taking its turn with the
        store's other background blocks (PostgreSQL: one at a time per store, across processes, until the commit:
        concurrent HNSW inserts took the server's cores from searches and slowed one another). SQLite: no-op,
        its writes are serialised already."""
        self._background()

    def give_way(self, seconds: float) -> float:
        """Before a bulk write outside :meth:`atomic`: wait while other sessions search the store, for at most a
        configured share of ``seconds`` (the caller's previous bulk write's time), so that a burst of bulk writes
        leaves searches the server's cores (PostgreSQL, ``pg_writes_yield``; SQLite: no wait, its writes and reads
        already take turns). Returns the seconds waited."""
        return self._give_way(seconds)

    def close(self) -> None:
        """Release connections (idempotent); further calls raise StorageError."""
        self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

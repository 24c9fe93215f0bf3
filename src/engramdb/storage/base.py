"""The storage protocol every backend implements.

Backends persist memories, their vectors and history, and fetch *candidates*:
keyword candidates (full-text rank) and vector candidates (cosine similarity).
Fusion and ranking happen once, above the backends (``engramdb.retrieval``),
so every backend ranks the same data the same way.

Scoping is a hard filter applied inside the backend: a :class:`Filter` names the
reading agent, and a backend never returns a memory that agent may not see
(its own, shared with it, or public).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from engramdb.models import AuditEvent, Change, Memory, Share
from engramdb.privacy.audit import AuditRecord

__all__ = ["MODEL_META_KEY", "Candidate", "Filter", "Store", "Vectors"]

Vectors = npt.NDArray[np.float32]

#: Meta key naming the embedding model of the store: only vectors from that model are searched.
#: ``add``/``set_vectors`` set it when it is unset; changing it is how a re-embed switches models.
MODEL_META_KEY: Final = "model_id"


@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    """Which memories a read may return.

    ``agent=None`` means every agent (administrative reads only: export, retention);
    otherwise the reader sees its own memories plus those shared with it or public.
    ``tags`` must all be present on a memory. ``ids`` restricts to those ids.
    """

    agent: str | None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    include_shared: bool = True
    ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory id found by one retrieval channel, with that channel's raw score (higher is better)."""

    id: str
    score: float


@runtime_checkable
class Store(Protocol):
    """Persistence for memories. Implementations must be safe to call from several threads."""

    #: The URL or path this store was opened from (for messages).
    location: str

    def close(self) -> None:
        """Release connections; further calls fail."""

    # -- metadata -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A store-level setting (e.g. the embedding model id), or None."""

    def set_meta(self, key: str, value: str) -> None:
        """Set a store-level setting."""

    # -- writes ---------------------------------------------------------------------------------
    def add(self, memories: Sequence[Memory], vectors: Vectors | None, *, model_id: str, actor: str) -> None:
        """Insert new memories (and their unit-norm vectors, row for row) in one transaction.

        Writes a ``create`` history entry for each. All or nothing.
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

        Raises :class:`~engramdb.errors.NotFound` if the memory does not exist.
        """

    def delete(self, memory_id: str, *, actor: str, at: datetime) -> None:
        """Forget: remove content from the table, the keyword index and the vectors.

        Earlier history entries of the memory are scrubbed and a ``forget`` tombstone
        without content is kept. Raises NotFound if it does not exist.
        """

    def touch(self, memory_ids: Sequence[str], *, at: datetime) -> None:
        """Record a retrieval: set ``last_accessed`` and increment ``access_count``."""

    # -- reads ----------------------------------------------------------------------------------
    def get(self, memory_id: str, flt: Filter | None = None) -> Memory | None:
        """One memory by id, or None if missing or not visible under ``flt``."""

    def get_many(self, memory_ids: Sequence[str], flt: Filter | None = None) -> dict[str, Memory]:
        """Memories by id (missing or invisible ids are left out)."""

    def list(self, flt: Filter, *, limit: int = 100, offset: int = 0) -> list[Memory]:
        """Memories matching ``flt``, newest first."""

    def count(self, flt: Filter) -> int:
        """How many memories match ``flt``."""

    def history(self, memory_id: str) -> builtins.list[Change]:
        """Every change record of a memory, oldest first (also after it was forgotten)."""

    def keyword_candidates(self, terms: Sequence[str], flt: Filter, *, limit: int) -> builtins.list[Candidate]:
        """Full-text candidates for any of ``terms`` (already normalised words), best first."""

    def vector_candidates(self, vector: Vectors, flt: Filter, *, limit: int) -> builtins.list[Candidate]:
        """Exact cosine-similarity candidates for a unit-norm query vector, best first."""

    # -- embeddings maintenance ----------------------------------------------------------------
    def count_vectors_not_from(self, model_id: str) -> int:
        """How many memories have no vector from ``model_id`` (missing or another model)."""

    def iter_missing_vectors(self, model_id: str, *, batch: int = 256) -> Iterator[builtins.list[tuple[str, str]]]:
        """Batches of (id, content) whose vector is missing or from another model."""

    def set_vectors(self, memory_ids: Sequence[str], vectors: Vectors, *, model_id: str) -> None:
        """Replace the vectors of existing memories."""

    # -- sharing ---------------------------------------------------------------------------------
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

    def list_shares(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> builtins.list[Share]:
        """Shares in force, oldest first; each argument given narrows them (``to_agent`` matches exactly)."""

    # -- knowledge transfer ----------------------------------------------------------------------
    def atomic(self) -> AbstractContextManager[None]:
        """A block in which every write of this store commits together or not at all (re-entrant).

        Raise inside to roll everything back. Searches must not run inside.
        """

    def get_vectors(self, memory_ids: Sequence[str], *, model_id: str) -> dict[str, Vectors]:
        """The stored vectors from ``model_id`` of these memories (ids without one are left out)."""

    def import_history(self, changes: Sequence[Change]) -> None:
        """Replace the history of every memory named in ``changes`` by those entries (in order).

        Only the current life's entries are replaced: a ``forget`` tombstone of an earlier
        memory with the same id, and what precedes it, stay.

        For importing memories with the history they had in another store, inside
        :meth:`atomic` right after :meth:`add`. NotFound if a named memory does not exist.
        """

    # -- audit trail -----------------------------------------------------------------------------
    def append_audit(self, records: Sequence[AuditRecord]) -> builtins.list[AuditEvent]:
        """Append entries to the hash-chained audit trail; returns them numbered and hashed.

        The last hash is read and the entries written in one write transaction, so
        concurrent writers (threads or processes) extend a single unbroken chain. The
        head (last seq and hash) is recorded alongside. Never changes existing entries.
        """

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
        """Audit entries with ``seq > after_seq`` (each given argument narrows them), oldest first by default."""

    def audit_head(self) -> tuple[int, str] | None:
        """``(seq, hash)`` of the last audit entry as recorded by the last append; None if none ever was."""

"""Core values: a memory, a search hit, a change record, a share; kinds, visibilities, outcomes.

All are frozen dataclasses: a value returned by the API is a snapshot, never a
live handle into the store. Timestamps are timezone-aware UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Literal, get_args

from engramdb.models._encode import Encoded

__all__ = [
    "KINDS",
    "NO_MERGE_KINDS",
    "OUTCOMES",
    "VISIBILITIES",
    "Change",
    "Hit",
    "Kind",
    "Memory",
    "Outcome",
    "Share",
    "Visibility",
]

#: The kind of a memory.
Kind = Literal[
    "collaboration",
    "code_pattern",
    "conversation",
    "decision",
    "episode",
    "failure",
    "knowledge",
    "preference",
    "success",
]
#: Every kind of memory engramdb accepts; anything else is rejected.
KINDS: Final[frozenset[Kind]] = frozenset(get_args(Kind))

#: Kinds that are distinct events: never merged with a near-duplicate on write. A ``decision`` is one
#: recorded outcome and a ``failure`` one occurrence: merging them would lose the evidence they count.
NO_MERGE_KINDS: Final[frozenset[Kind]] = frozenset({"conversation", "decision", "episode", "failure"})

#: Who may read a memory. private: only the owner; shared: the owner and agents it was shared with;
#: public: everyone.
Visibility = Literal["private", "shared", "public"]
VISIBILITIES: Final[frozenset[Visibility]] = frozenset(get_args(Visibility))

#: The outcome of an action, as a label (learning also accepts a bool or a reward in [-1, 1]).
Outcome = Literal["success", "failure", "partial"]
OUTCOMES: Final[frozenset[Outcome]] = frozenset(get_args(Outcome))


#: Stands for "not given" in :attr:`Memory.occurred_at` (replaced by ``created_at`` on construction).
_UNSET_TIME: Final = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory(Encoded):
    """One stored memory, as the store holds it (secrets already redacted).

    Scopes: a memory belongs to an ``agent`` and, optionally, to a ``user`` (one person the agent
    serves) and a ``session`` (a conversation thread or a run). ``occurred_at`` is when the event
    happened (``remember(..., at=...)``; ``created_at`` unless given). ``valid_until`` is set on a
    superseded value of a keyed fact: it was true from ``occurred_at`` until then.
    """

    id: str
    agent: str
    kind: Kind
    content: str
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime | None = None
    access_count: int = 0
    confidence: float = 0.5
    #: Outcome evidence from tasks that used this memory (feedback); weights may be fractional.
    successes: float = 0.0
    attempts: float = 0.0
    visibility: Visibility = "private"
    #: Kinds of secrets/personal data replaced by placeholders when this memory was written.
    redacted: tuple[str, ...] = ()
    #: Set when the reader is not the owner: who shared it with the reader.
    shared_by: str | None = None
    #: When it was shared with the reader (None for the owner, and for a public memory never shared).
    shared_at: datetime | None = None
    #: The person this memory is about or was told by (None: the agent's own, seen by all its users).
    user: str | None = None
    #: The conversation thread or run it belongs to (None: none in particular).
    session: str | None = None
    #: When the event happened (defaults to ``created_at``).
    occurred_at: datetime = _UNSET_TIME
    #: When a superseded value stopped being true (None: current).
    valid_until: datetime | None = None

    def __post_init__(self) -> None:
        if self.occurred_at is _UNSET_TIME:
            object.__setattr__(self, "occurred_at", self.created_at)

    @property
    def valid_from(self) -> datetime:
        """When this value became true: the time it happened (:attr:`occurred_at`)."""
        return self.occurred_at

    @property
    def success_rate(self) -> float | None:
        """Posterior mean success rate from feedback (Beta(1,1) prior); None until outcomes exist."""
        if self.attempts <= 0:
            return None
        return (self.successes + 1.0) / (self.attempts + 2.0)

    _keys: ClassVar[tuple[str, ...]] = (
        "id",
        "agent",
        "kind",
        "content",
        "tags",
        "metadata",
        "created_at",
        "updated_at",
        "last_accessed",
        "access_count",
        "confidence",
        "successes",
        "attempts",
        "success_rate",
        "visibility",
        "redacted",
        "shared_by",
        "shared_at",
        "user",
        "session",
        "occurred_at",
        "valid_until",
    )


@dataclass(frozen=True, slots=True)
class Hit(Encoded):
    """A search result: the memory, its score (orders one search) and its calibrated relevance.

    ``relevance`` in [0, 1] means the same in every search and store (README, "Relevance"): above 0.7 the
    memory says what the query asks about in other words; below 0.3 it is unrelated. ``score`` only orders
    the hits of one search. ``duplicates`` are the ids of near-identical memories folded into this hit, so
    one fact takes one place; the hit stands for ``1 + len(duplicates)`` memories.
    """

    memory: Memory
    score: float
    #: The channel scores before fusion, for explanation; None when a channel did not find it.
    keyword_score: float | None = None
    vector_score: float | None = None
    relevance: float = 0.0
    duplicates: tuple[str, ...] = ()

    @property
    def stands_for(self) -> int:
        """How many memories this hit stands for (itself and its near-identical duplicates)."""
        return 1 + len(self.duplicates)

    _keys: ClassVar[tuple[str, ...]] = (
        "memory",
        "score",
        "relevance",
        "keyword_score",
        "vector_score",
        "stands_for",
        "duplicates",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Change(Encoded):
    """One entry of a memory's history.

    ``before``/``after`` hold the fields that changed. After ``forget`` every
    entry of that memory is scrubbed to ``None`` and a ``forget`` tombstone stays.
    """

    seq: int
    memory_id: str
    action: str  # "create" | "update" | "forget" | "merge" | ...
    at: datetime
    actor: str
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Share(Encoded):
    """Consent given by an owner: ``to_agent`` (``"*"``: every agent) may read memory ``memory_id``."""

    memory_id: str
    from_agent: str
    to_agent: str
    shared_at: datetime

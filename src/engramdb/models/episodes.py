"""Values of episodes: an event, a stored episode, and what an analysis of many episodes found.

The running episode (a context manager) is :class:`engramdb.learning.episodes.Episode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engramdb.models._decode import object_pairs
from engramdb.models._encode import Encoded

__all__ = ["EpisodeAnalysis", "EpisodeEvent", "EpisodeFactor", "EpisodeRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeEvent(Encoded):
    """Something that happened during an episode."""

    kind: str
    #: Any JSON value.
    data: Any = None
    #: Seconds since the episode started.
    at: float = 0.0
    #: The agent role that produced the event ("worker_backend", "qa_sentinel", ...), if given.
    role: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeRecord(Encoded):
    """A stored episode."""

    id: str
    agent: str
    task: str
    #: "success", "failure", "aborted", or "running" (started by id and not ended yet).
    outcome: str
    events: tuple[EpisodeEvent, ...] = ()
    error: str | None = None
    reason: str | None = None
    started_at: datetime
    duration: float = 0.0
    #: Relevance to the query that recalled it (None when not recalled by a search).
    score: float | None = None
    #: Measurements given when the episode ended (any JSON object).
    metrics: dict[str, Any] = field(default_factory=dict)
    #: Decisions of the episode credited with its outcome when it ended.
    credited: int = 0

    @property
    def failed(self) -> bool:
        """True when the episode ended as a failure."""
        return self.outcome == "failure"


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeFactor(Encoded):
    """An event kind that comes with failure more often than the episodes without it."""

    kind: str
    #: Failed / successful episodes in which the event occurred.
    failures: int
    successes: int
    #: Posterior mean failure rate (Beta(1, 1) prior) of episodes with the event, and of those without.
    failure_rate: float
    baseline: float
    #: One-sided Fisher exact test: how likely so many failures with the event are by chance alone.
    p_value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeAnalysis:
    """What goes wrong in failed episodes (see :func:`engramdb.learning.episodes.analyze`)."""

    episodes: int
    failures: int
    successes: int
    #: Event kinds more frequent in failures, most significant first.
    factors: list[EpisodeFactor] = field(default_factory=list)
    #: The step (event kind) failed episodes ended on, with counts, most common first.
    last_steps: list[tuple[str, int]] = field(default_factory=list)
    #: Error signatures of failed episodes, with counts, most common first.
    errors: list[tuple[str, int]] = field(default_factory=list)

    @property
    def failure_rate(self) -> float | None:
        """Share of finished episodes that failed; None without episodes."""
        done = self.failures + self.successes
        return self.failures / done if done else None

    @staticmethod
    def _json_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The fields in :meth:`to_dict`'s JSON, for ``from_dict``: its step and error objects as pairs."""
        pairs = {"last_steps": "kind", "errors": "signature"}
        return {**data, **{k: object_pairs(data[k], first) for k, first in pairs.items() if k in data}}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "episodes": self.episodes,
            "failures": self.failures,
            "successes": self.successes,
            "failure_rate": self.failure_rate,
            "factors": [f.to_dict() for f in self.factors],
            "last_steps": [{"kind": k, "count": n} for k, n in self.last_steps],
            "errors": [{"signature": s, "count": n} for s, n in self.errors],
        }

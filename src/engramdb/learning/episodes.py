"""Episodes: a task recorded with the events it went through and how it ended.

::

    with mem.episodes.begin("deploy the api", agent="ops") as e:
        e.event("build", {"image": "api:1.4"})
        e.event("migrate", {"tables": 3})
        if not healthy():
            e.fail("health check failed")

An episode ends as a *success*, as a *failure* (an exception escaped, recorded with
its error and re-raised, or :meth:`Episode.fail` was called) or as *aborted*
(``KeyboardInterrupt`` and other non-``Exception`` exits). When it ends it is stored
as one ``episode`` memory: the task as content, the events and the outcome in
metadata, tagged ``outcome:<outcome>`` so recall can filter by outcome.

:func:`analyze` looks at many episodes and asks which event kinds come with failure
more often than with success (Fisher's exact test, no fixed thresholds), which step
failures ended on, and which errors recur. This module holds no I/O: the episode service
(:class:`~engramdb.services.episodes.EpisodeService`) passes :class:`Episode` a function that stores it.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Final, Literal

from engramdb._util import parse_ts, utcnow
from engramdb._validate import shown
from engramdb.errors import ValidationError
from engramdb.learning.signatures import error_signature, error_text
from engramdb.models import EpisodeAnalysis, EpisodeEvent, EpisodeFactor, EpisodeRecord, Memory

__all__ = [
    "EPISODE_OUTCOMES",
    "MAX_EVENTS",
    "OUTCOME_TAG",
    "RUNNING",
    "Episode",
    "analyze",
    "episode_metadata",
    "event_parts",
    "fisher_greater",
    "parse_episode",
]

#: How an episode can end (an episode is not an action: it can also be aborted).
EPISODE_OUTCOMES: Final = ("success", "failure", "aborted")
#: The outcome of an episode started by id (``mem.episodes.start``) that has not ended yet.
RUNNING: Final = "running"
#: Episode memories carry the tag ``outcome:<outcome>``.
OUTCOME_TAG: Final = "outcome:"
#: Events kept per episode; later ones are counted but not stored (metadata stays bounded).
MAX_EVENTS: Final = 1000
#: The kind of the event added when an exception ends an episode.
ERROR_EVENT: Final = "error"


class Episode:
    """A running episode; use it as a context manager (see the module docstring).

    ``on_end`` stores the finished episode and returns the memory; the episode
    service provides it. After the ``with`` block, :attr:`memory` is the stored memory.
    """

    def __init__(
        self,
        task: str,
        *,
        agent: str,
        on_end: Callable[[Episode], Memory],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task = task
        self.agent = agent
        self.events: list[EpisodeEvent] = []
        #: None while running, then one of :data:`EPISODE_OUTCOMES`.
        self.outcome: str | None = None
        #: The error that ended the episode ("Type: message"), if an exception did.
        self.error: str | None = None
        #: The exception that ended the episode, if one did.
        self.exception: BaseException | None = None
        #: Why the episode failed, when :meth:`fail` said so.
        self.reason: str | None = None
        self.started_at: datetime | None = None
        self.duration: float | None = None
        self.dropped_events = 0
        self.memory: Memory | None = None
        self._on_end = on_end
        self._clock = clock
        self._t0 = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = self.outcome or ("running" if self.started_at else "not started")
        return f"Episode({self.task!r}, agent={self.agent!r}, {state}, {len(self.events)} events)"

    def event(self, kind: str, data: Any = None, *, role: str | None = None) -> None:
        """Add an event: a step, an observation, a tool call... ``data`` must be JSON-serialisable;
        ``role`` names the agent role that produced it."""
        kind, value, role = event_parts(kind, data, role)
        with self._lock:
            self._require_running()
            if len(self.events) >= MAX_EVENTS:
                self.dropped_events += 1
                return
            self.events.append(EpisodeEvent(kind=kind, data=value, at=round(self._clock() - self._t0, 6), role=role))

    def fail(self, reason: str) -> None:
        """Mark the episode as failed (it still runs to the end of the ``with`` block)."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("a failure reason must be a non-empty string")
        with self._lock:
            self._require_running()
            self.reason = reason.strip()

    def _require_running(self) -> None:
        if self.started_at is None:
            raise ValidationError("the episode has not started: use it in a with block")
        if self.outcome is not None:
            raise ValidationError("the episode has ended")

    def __enter__(self) -> Episode:
        if self.started_at is not None:
            raise ValidationError("an episode can only be entered once")
        self.started_at = utcnow()
        self._t0 = self._clock()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        with self._lock:
            self.duration = round(self._clock() - self._t0, 6)
            if exc is not None:
                self.exception = exc
                self.error = error_text(exc)
                self.outcome = "failure" if isinstance(exc, Exception) else "aborted"
                if len(self.events) < MAX_EVENTS:
                    self.events.append(EpisodeEvent(kind=ERROR_EVENT, data={"error": self.error}, at=self.duration))
            else:
                self.outcome = "failure" if self.reason else "success"
        try:
            self.memory = self._on_end(self)
        except Exception as store_exc:
            if exc is None:
                raise
            # Never hide the task's own exception behind a bookkeeping one.
            exc.add_note(f"engramdb: the episode could not be recorded: {store_exc!r}")
        return False


def event_parts(kind: object, data: Any, role: object) -> tuple[str, Any, str | None]:
    """A validated event: (kind stripped, data as JSON round-tripped, role stripped or None)."""
    if not isinstance(kind, str) or not kind.strip():
        raise ValidationError(f"event kind must be a non-empty string, not {shown(kind)}")
    if role is not None and (not isinstance(role, str) or not role.strip() or len(role) > 200):
        raise ValidationError(f"role must be a non-empty string of at most 200 characters, not {shown(role)}")
    try:
        value = json.loads(json.dumps(data, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"event data must be JSON-serialisable: {exc}") from exc
    return kind.strip(), value, role.strip() if isinstance(role, str) else None


def episode_metadata(
    episode: Episode, *, extra: Mapping[str, Any] | None = None, failure_id: str | None = None
) -> dict[str, Any]:
    """The metadata an ended episode is stored with."""
    started = episode.started_at or utcnow()
    duration = episode.duration or 0.0
    meta: dict[str, Any] = dict(extra or {})
    meta.update(
        {
            "outcome": episode.outcome,
            "error": episode.error,
            "reason": episode.reason,
            "events": [e.to_dict() for e in episode.events],
            "dropped_events": episode.dropped_events,
            "started_at": started.isoformat(),
            "ended_at": (started + timedelta(seconds=duration)).isoformat(),
            "duration": duration,
            "failure_id": failure_id,
        }
    )
    return meta


def parse_episode(memory: Memory, *, score: float | None = None) -> EpisodeRecord | None:
    """An :class:`EpisodeRecord` from an ``episode`` memory; None if it was not written by an Episode."""
    meta = memory.metadata
    outcome = meta.get("outcome")
    if memory.kind != "episode" or (outcome not in EPISODE_OUTCOMES and outcome != RUNNING):
        return None
    events = []
    raw_events = meta.get("events")
    for raw in raw_events if isinstance(raw_events, list) else []:
        if isinstance(raw, Mapping) and isinstance(raw.get("kind"), str):
            at = raw.get("at")
            role = raw.get("role")
            events.append(
                EpisodeEvent(
                    kind=raw["kind"],
                    data=raw.get("data"),
                    at=float(at) if isinstance(at, int | float) else 0.0,
                    role=role if isinstance(role, str) else None,
                )
            )
    started = meta.get("started_at")
    duration = meta.get("duration")
    error, reason = meta.get("error"), meta.get("reason")
    return EpisodeRecord(
        id=memory.id,
        agent=memory.agent,
        task=memory.content,
        outcome=str(outcome),
        events=tuple(events),
        error=error if isinstance(error, str) else None,
        reason=reason if isinstance(reason, str) else None,
        started_at=(parse_ts(started) if isinstance(started, str) else None) or memory.created_at,
        duration=float(duration) if isinstance(duration, int | float) else 0.0,
        score=score,
        metrics=dict(metrics) if isinstance(metrics := meta.get("metrics"), Mapping) else {},
        credited=credited if isinstance(credited := meta.get("credited"), int) else 0,
    )


# -- analysis ---------------------------------------------------------------------------------------------------


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided Fisher exact test p-value for the 2x2 table ``[[a, b], [c, d]]``: P(X >= a).

    Rows: with / without the event; columns: failed / succeeded. A small value means
    failures come with the event more often than chance would make them.
    """
    if min(a, b, c, d) < 0:
        raise ValueError("counts must not be negative")
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    hi = min(row1, col1)
    log_total = _log_comb(n, col1)
    p = 0.0
    for x in range(a, hi + 1):
        p += math.exp(_log_comb(row1, x) + _log_comb(n - row1, col1 - x) - log_total)
    return min(1.0, p)


def analyze(records: Sequence[EpisodeRecord], *, max_p: float = 0.5) -> EpisodeAnalysis:
    """Which event kinds precede failure more often than success, the steps failures end on, their errors.

    Aborted episodes are left out. A factor is reported when its failure rate (with the
    event) is above the baseline (without it) and its one-sided Fisher p-value is at
    most ``max_p``; factors are ordered by p-value, then by how much the rate rises.
    """
    done = [r for r in records if r.outcome in ("success", "failure")]
    failed = [r for r in done if r.failed]
    ok = [r for r in done if not r.failed]
    present_fail: Counter[str] = Counter()
    present_ok: Counter[str] = Counter()
    for r in done:
        kinds = {e.kind for e in r.events if e.kind != ERROR_EVENT}
        (present_fail if r.failed else present_ok).update(kinds)
    factors = []
    for kind in sorted(set(present_fail) | set(present_ok)):
        a, b = present_fail[kind], present_ok[kind]
        c, d = len(failed) - a, len(ok) - b
        rate = (a + 1) / (a + b + 2)
        base = (c + 1) / (c + d + 2)
        if rate <= base:
            continue
        p = fisher_greater(a, b, c, d)
        if p <= max_p:
            factors.append(
                EpisodeFactor(kind=kind, failures=a, successes=b, failure_rate=rate, baseline=base, p_value=p)
            )
    factors.sort(key=lambda f: (f.p_value, -(f.failure_rate - f.baseline), f.kind))
    last: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in failed:
        steps = [e.kind for e in r.events if e.kind != ERROR_EVENT]
        if steps:
            last[steps[-1]] += 1
        if r.error or r.reason:
            errors[error_signature(r.error or r.reason or "")] += 1
    return EpisodeAnalysis(
        episodes=len(records),
        failures=len(failed),
        successes=len(ok),
        factors=factors,
        last_steps=sorted(last.items(), key=lambda kv: (-kv[1], kv[0])),
        errors=sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])),
    )

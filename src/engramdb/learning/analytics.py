"""Execution and performance analytics over outcome records. Pure: values in, values out.

Everything here is computed from :class:`~engramdb.models.DecisionRecord`
values (decision memories read back): per-action and per-category success with
Beta credible intervals, trends decided by a Cochran-Armitage test
(:func:`~engramdb.learning.stats.trend_test`), success rate over time in calendar
buckets, and the approaches taken in recurring situations, filtered by success rate.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from engramdb.errors import ValidationError
from engramdb.learning.records import normalise_context
from engramdb.learning.stats import credible_intervals, exact_intervals, trend_test
from engramdb.models import (
    ApproachStats,
    CategoryTrend,
    DecisionRecord,
    FailurePattern,
    LearningStats,
    Memory,
    OptionStats,
    TimelinePoint,
)
from engramdb.storage.base import UsageTotals

__all__ = [
    "GENERAL",
    "RateFilter",
    "action_stats",
    "approaches",
    "category_trends",
    "choose_bucket",
    "learning_stats",
    "parse_rate_filter",
    "records_since",
    "timeline",
]

#: The category of outcome records recorded without one.
GENERAL: Final = "general"


def _option_stats(groups: Iterable[tuple[str, float, float]], *, level: float) -> list[OptionStats]:
    """(name, successes, attempts) as OptionStats with a Beta(1, 1) posterior, best first."""
    rows = list(groups)
    if not rows:
        return []
    alpha = [1.0 + s for _, s, _ in rows]
    beta = [1.0 + max(0.0, n - s) for _, s, n in rows]
    low, high = credible_intervals(alpha, beta, level=level)
    out = [
        OptionStats(action=name, successes=s, attempts=n, success_rate=a / (a + b), low=float(lo), high=float(hi))
        for (name, s, n), a, b, lo, hi in zip(rows, alpha, beta, low, high, strict=True)
    ]
    out.sort(key=lambda o: (-o.success_rate, -o.attempts, o.action))
    return out


def action_stats(records: Iterable[DecisionRecord], *, level: float = 0.95) -> list[OptionStats]:
    """Success of each action over all the given records (whatever the context), best first."""
    succ: dict[str, float] = defaultdict(float)
    att: dict[str, float] = defaultdict(float)
    for r in records:
        succ[r.action] += r.success
        att[r.action] += 1.0
    return _option_stats(((a, succ[a], att[a]) for a in att), level=level)


# -- trends per category -----------------------------------------------------------------------------------


def category_trends(
    records: Iterable[DecisionRecord],
    *,
    alpha: float = 0.05,
    min_n: int = 10,
    level: float = 0.95,
    top: int = 3,
) -> list[CategoryTrend]:
    """Per category (records without one are ``general``): success, duration, best approaches, trend.

    Most executions first. The trend is a Cochran-Armitage test over the category's
    outcomes in time order (see :func:`~engramdb.learning.stats.trend_test`).
    """
    by_cat: dict[str, list[DecisionRecord]] = defaultdict(list)
    for r in records:
        by_cat[r.category or GENERAL].append(r)
    out = []
    for cat, rs in by_cat.items():
        rs.sort(key=lambda r: (r.at, r.id))
        n = len(rs)
        s = sum(r.success for r in rs)
        (lo,), (hi,) = credible_intervals([1.0 + s], [1.0 + n - s], level=level)
        durations = [r.duration for r in rs if r.duration is not None]
        wins = [r for r in rs if r.success >= 0.5]
        factors = Counter(f for r in wins if r.execution for f in r.execution.success_factors)
        tools = Counter(t for r in wins if r.execution for t in r.execution.tools)
        out.append(
            CategoryTrend(
                category=cat,
                executions=n,
                successes=s,
                success_rate=(1.0 + s) / (2.0 + n),
                low=float(lo),
                high=float(hi),
                average_duration=sum(durations) / len(durations) if durations else None,
                best_approaches=action_stats(rs, level=level)[:top],
                success_factors=_top(factors, 5),
                tools=_top(tools, 5),
                trend=trend_test([r.success for r in rs], alpha=alpha, min_n=min_n),
                first_at=rs[0].at,
                last_at=rs[-1].at,
            )
        )
    out.sort(key=lambda c: (-c.executions, c.category))
    return out


def _top(counter: Counter[str], k: int) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


# -- success over time -------------------------------------------------------------------------------------


_FIXED: Final = (("minute", 60), ("hour", 3600), ("day", 86400), ("week", 7 * 86400))
#: 1970-01-01 was a Thursday: shift by four days so that weeks start on Monday.
_WEEK_SHIFT: Final = 4 * 86400


def _bucket_fn(name: str) -> Callable[[datetime], tuple[datetime, datetime]]:
    if name == "month":

        def month(t: datetime) -> tuple[datetime, datetime]:
            t = t.astimezone(UTC)
            start = datetime(t.year, t.month, 1, tzinfo=UTC)
            end = datetime(t.year + (t.month == 12), t.month % 12 + 1, 1, tzinfo=UTC)
            return start, end

        return month
    width = dict(_FIXED)[name]
    shift = _WEEK_SHIFT if name == "week" else 0

    def fixed(t: datetime) -> tuple[datetime, datetime]:
        ts = int(t.timestamp()) - shift
        start = (ts // width) * width + shift
        first = datetime.fromtimestamp(start, tz=UTC)
        return first, first + timedelta(seconds=width)

    return fixed


def choose_bucket(first: datetime, last: datetime, *, n: int = 0, max_points: int = 40, min_per_point: int = 8) -> str:
    """The finest calendar bucket (minute, hour, day, week, month) that suits a chart of ``n`` outcomes.

    At most ``max_points`` buckets over [first, last], holding ``min_per_point`` outcomes
    each on average (with fewer, a success rate per bucket is mostly noise). Too few outcomes
    for that: the finest bucket that holds the whole span, so that the points sit where the
    outcomes happened (one outcome today is not plotted in the middle of the month).
    """
    span = max(0.0, (last - first).total_seconds())
    whole: str | None = None
    for name, width in _FIXED:
        buckets = span / width + 1.0
        if buckets <= max_points and (n == 0 or n / buckets >= min_per_point):
            return name
        if whole is None and span < width:
            whole = name
    return whole or "month"


def timeline(
    records: Iterable[DecisionRecord], *, bucket: str | None = None, max_points: int = 40, level: float = 0.95
) -> tuple[str, list[TimelinePoint]]:
    """Success rate per calendar bucket, oldest first; the bucket is chosen from the data unless given."""
    rs = sorted(records, key=lambda r: r.at)
    if not rs:
        return bucket or "day", []
    name = bucket or choose_bucket(rs[0].at, rs[-1].at, n=len(rs), max_points=max_points)
    held = len({_bucket_fn(name)(r.at) for r in rs}) if bucket is None and len(rs) >= 2 else 0
    if held and held < min(len(rs), _MIN_POINTS) and (name == "minute" or held == 1):
        # The runs fit in a minute or two (a script's runs) or in one bucket of any size: a chart of a dot or two
        # says nothing, so the points are consecutive runs instead, oldest first.
        name = "run" if len(rs) <= max_points else f"{math.ceil(len(rs) / max_points)} runs"
    size = _run_size(name)
    if size is not None:
        return name, _run_points(rs, size, level=level)
    if name not in {*dict(_FIXED), "month"}:
        raise ValidationError(f"unknown bucket {name!r} (choose from minute, hour, day, week, month)")
    fn = _bucket_fn(name)
    groups: dict[tuple[datetime, datetime], list[float]] = {}
    for r in rs:
        groups.setdefault(fn(r.at), []).append(r.success)
    keys = list(groups)
    succ = [sum(groups[k]) for k in keys]
    ns = [len(groups[k]) for k in keys]
    low, high = exact_intervals(succ, ns, level=level)
    points = [
        TimelinePoint(start=k[0], end=k[1], n=n, successes=s, success_rate=s / n, low=float(lo), high=float(hi))
        for k, s, n, lo, hi in zip(keys, succ, ns, low, high, strict=True)
    ]
    return name, points


#: Fewer calendar buckets than this (and than runs): the timeline is per run instead.
_MIN_POINTS: Final = 3


def _run_size(name: str) -> int | None:
    """Runs per point of a ``run`` / ``N runs`` bucket; None for a calendar bucket."""
    if name == "run":
        return 1
    head, _, tail = name.partition(" ")
    return int(head) if tail == "runs" and head.isdigit() and int(head) >= 1 else None


def _run_points(rs: Sequence[DecisionRecord], size: int, *, level: float) -> list[TimelinePoint]:
    groups = [rs[i : i + size] for i in range(0, len(rs), size)]
    succ = [sum(r.success for r in g) for g in groups]
    ns = [len(g) for g in groups]
    low, high = exact_intervals(succ, ns, level=level)
    return [
        TimelinePoint(start=g[0].at, end=g[-1].at, n=n, successes=s, success_rate=s / n, low=float(lo), high=float(hi))
        for g, s, n, lo, hi in zip(groups, succ, ns, low, high, strict=True)
    ]


# -- approaches --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RateFilter:
    """A success-rate condition such as ``>80%`` (``op`` is one of > >= < <= =)."""

    op: str
    value: float

    def matches(self, rate: float) -> bool:
        """Whether ``rate`` (0..1) satisfies the condition."""
        ops: dict[str, Callable[[float, float], bool]] = {
            ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b,
            "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b,
            "=": lambda a, b: abs(a - b) < 0.005,
        }
        return ops[self.op](rate, self.value)

    def __str__(self) -> str:
        return f"{self.op}{self.value:.0%}"


_RATE = re.compile(r"^\s*(>=|<=|==|=|>|<)?\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")


def parse_rate_filter(text: str) -> RateFilter:
    """``">80%"``, ``">=0.8"``, ``"<50%"``, ``"90%"`` (means ``>=``) as a :class:`RateFilter`."""
    m = _RATE.match(text)
    if not m:
        raise ValidationError(f"bad success-rate filter {text!r}: use e.g. '>80%', '>=0.9' or '<50%'")
    op = {None: ">=", "==": "="}.get(m.group(1), m.group(1))
    value = float(m.group(2))
    if m.group(3) == "%" or value > 1.0:
        value /= 100.0
    if not 0.0 <= value <= 1.0:
        raise ValidationError(f"bad success-rate filter {text!r}: the rate must be within 0..100%")
    return RateFilter(str(op), value)


def approaches(
    records: Iterable[DecisionRecord],
    *,
    rate: RateFilter | None = None,
    min_attempts: int = 2,
    level: float = 0.95,
) -> list[ApproachStats]:
    """Recurring (situation, action) pairs: the situation is the category if recorded, else the context.

    Only pairs seen at least ``min_attempts`` times; with ``rate``, only those whose
    posterior success rate satisfies it. Best first, then most attempts.
    """
    groups: dict[tuple[str | None, str, str], list[DecisionRecord]] = defaultdict(list)
    for r in records:
        situation = r.category if r.category else normalise_context(r.context)
        groups[(r.category, situation, r.action)].append(r)
    keys = [k for k, rs in groups.items() if len(rs) >= min_attempts]
    if not keys:
        return []
    succ = [sum(r.success for r in groups[k]) for k in keys]
    ns = [len(groups[k]) for k in keys]
    low, high = credible_intervals(
        [1.0 + s for s in succ], [1.0 + n - s for s, n in zip(succ, ns, strict=True)], level=level
    )
    out = []
    for k, s, n, lo, hi in zip(keys, succ, ns, low, high, strict=True):
        latest = max(groups[k], key=lambda r: (r.at, r.id))
        mean = (1.0 + s) / (2.0 + n)
        if rate is not None and not rate.matches(mean):
            continue
        out.append(
            ApproachStats(
                category=k[0],
                context=latest.context,
                action=k[2],
                successes=s,
                attempts=n,
                success_rate=mean,
                low=float(lo),
                high=float(hi),
                last_at=latest.at,
            )
        )
    out.sort(key=lambda p: (-p.success_rate, -p.attempts, p.action, p.context))
    return out


def records_since(records: Sequence[DecisionRecord], since: datetime | None) -> list[DecisionRecord]:
    """The records at or after ``since`` (all when None)."""
    return list(records) if since is None else [r for r in records if r.at >= since]


def learning_stats(
    records: Sequence[DecisionRecord],
    *,
    agent: str,
    memories: Mapping[str, int],
    pending: int,
    patterns: Sequence[FailurePattern],
    episode_successes: int,
    episode_failures: int,
    usage: UsageTotals | None = None,
    by_use: Sequence[Memory] = (),
    top: int = 10,
) -> LearningStats:
    """``mem.learning.stats``: counts, success (Beta(1, 1) posterior mean), the most used actions and categories,
    and memory use: ``usage`` totals and ``by_use`` (visible memories, most used first, as the store orders them)."""
    n = len(records)
    succ = sum(r.success for r in records)
    actions = sorted(action_stats(records), key=lambda o: (-o.attempts, -o.success_rate, o.action))
    cats = [
        OptionStats(
            action=c.category,
            successes=c.successes,
            attempts=float(c.executions),
            success_rate=c.success_rate,
            low=c.low,
            high=c.high,
        )
        for c in category_trends(records)
    ]
    cats.sort(key=lambda o: (-o.attempts, o.action))
    return LearningStats(
        agent=agent,
        memories={k: v for k, v in sorted(memories.items()) if v},
        decisions=n,
        pending=pending,
        successes=round(succ, 6),
        success_rate=(1.0 + succ) / (2.0 + n) if n else None,
        most_used=actions[:top],
        categories=cats[:top],
        failure_patterns=len(patterns),
        recurring_failures=sum(1 for p in patterns if p.occurrences >= 2),
        episodes=memories.get("episode", 0),
        episode_successes=episode_successes,
        episode_failures=episode_failures,
        # The store orders by use, so the unused ones are the tail.
        most_used_memories=[m for m in by_use[:top] if m.attempts > 0 or m.access_count > 0],
        memories_used=usage.used if usage else 0,
        memory_uses=round(usage.attempts, 6) if usage else 0.0,
        memory_success_rate=(1.0 + usage.successes) / (2.0 + usage.attempts) if usage and usage.attempts else None,
        best_memory_success_rate=usage.best_success_rate if usage else None,
        memory_retrievals=usage.accesses if usage else 0,
    )

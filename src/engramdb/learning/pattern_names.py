"""Names users give patterns: seed 001 writes ``prevention generate --pattern npm-install-timeout`` and
``apply-pattern migration-rollback-strategy``, slugs of what the pattern is about rather than its stored name.

:func:`nearest_by_words` picks the one candidate whose words cover the slug's words best, and
only when that is clear: most of the slug's words found, and no other candidate as good. Words
are compared by a crude stem (lower case, a trailing ``s``/``ing``/``ed`` dropped), so
``timeouts`` finds ``timeout``. Pure: values in, an index out.

:func:`prevention_effect` measures seed 001's "success rate after applying prevention" as the
share of expected recurrences that did not happen once a check was saved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from engramdb.models import PreventionEffect

__all__ = ["MIN_COVER", "MIN_PREFIX", "nearest_by_words", "prevention_effect", "words"]

#: Shortest memory id prefix accepted for a memory (ids are 32 hex digits; git abbreviates to 7).
MIN_PREFIX: Final = 6
#: Share of the slug's words a candidate must contain to be taken for it.
MIN_COVER: Final = 2 / 3
_WORD: Final = re.compile(r"[a-z0-9]+")
_STOP: Final = frozenset({"a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "with", "at", "by", "is"})


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def words(text: str) -> set[str]:
    """The stemmed content words of ``text`` (``npm-install-timeout`` -> {npm, install, timeout})."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP}


def nearest_by_words(slug: str, candidates: Sequence[str]) -> int | None:
    """The index of the candidate text that contains most of ``slug``'s words (at least :data:`MIN_COVER` of them
    and two, or the only one of a one-word slug), if exactly one does best; else None."""
    wanted = words(slug)
    if not wanted:
        return None
    scores = [len(wanted & words(c)) for c in candidates]
    if not scores:
        return None
    best = max(scores)
    if best < max(min(2, len(wanted)), MIN_COVER * len(wanted)) or scores.count(best) != 1:
        return None
    return scores.index(best)


_DAY: Final = 86400.0


def prevention_effect(times: Sequence[datetime], *, since: datetime, now: datetime) -> PreventionEffect:
    """Occurrences of a pattern (``times``) before and after ``since`` (its first prevention check), and the share
    of the recurrences the earlier rate predicts for ``[since, now]`` that did not happen.

    The rate before is occurrences per day from the first occurrence to ``since`` (at least one day, so a burst
    of failures on one afternoon is not read as hundreds a day).
    """
    before = sorted(t for t in times if t < since)
    after = sum(1 for t in times if t >= since)
    days_before = max(1.0, (since - before[0]).total_seconds() / _DAY) if before else 0.0
    days_after = max(0.0, (now - since).total_seconds() / _DAY)
    expected = len(before) / days_before * days_after if before else 0.0
    prevented = max(0.0, 1.0 - after / expected) if expected >= 1.0 else None
    return PreventionEffect(
        since=since,
        before=len(before),
        after=after,
        days_before=round(days_before, 3),
        days_after=round(days_after, 3),
        expected_after=round(expected, 3),
        prevented=prevented,
    )

"""How long to wait before retrying an HTTP request: one rule for every client the library has.

Pure: the caller passes the attempt number, the server's ``Retry-After`` header and ``now``; the random
jitter source can be passed too, so tests can pin it.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["backoff_delay", "retry_after"]


def retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def backoff_delay(
    attempt: int,
    *,
    base: float,
    cap: float,
    server_wait: float | None = None,
    jitter: Callable[[], float] = random.random,
) -> float:
    """Seconds before retry ``attempt + 1``: the server's wait if it gave one, else ``base * 2**attempt`` plus up to
    25% jitter (so clients that failed together do not retry together); never more than ``cap``."""
    if server_wait is not None:
        return min(cap, server_wait)
    return min(cap, base * (2.0**attempt) * (1.0 + 0.25 * jitter()))

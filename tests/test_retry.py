"""The one retry rule of every HTTP client (engramdb._retry): invariants and the header forms servers send."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from engramdb._retry import backoff_delay, retry_after

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@given(
    attempt=st.integers(0, 60),
    base=st.floats(0, 10),
    cap=st.floats(0, 60),
    server=st.none() | st.floats(0, 1e6),
    jitter=st.floats(0, 1),
)
def test_delay_is_never_negative_nor_over_the_cap(attempt, base, cap, server, jitter):
    delay = backoff_delay(attempt, base=base, cap=cap, server_wait=server, jitter=lambda: jitter)
    assert 0 <= delay <= cap


def test_delay_doubles_per_attempt_and_the_server_wait_wins():
    delays = [backoff_delay(a, base=0.5, cap=100, jitter=lambda: 0.0) for a in range(4)]
    assert delays == [0.5, 1.0, 2.0, 4.0]
    assert backoff_delay(3, base=0.5, cap=100, server_wait=7.0) == 7.0


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("3", now=NOW) == 3.0
    assert retry_after("-5", now=NOW) == 0.0
    http_date = (NOW + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert retry_after(http_date, now=NOW) == 30.0
    assert retry_after(None, now=NOW) is None
    assert retry_after("soon", now=NOW) is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=NOW) == 0.0  # a date in the past: no wait


@given(st.text())
def test_retry_after_never_raises(header):
    wait = retry_after(header, now=NOW)
    assert wait is None or wait >= 0

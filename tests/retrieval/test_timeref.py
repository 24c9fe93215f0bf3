"""Time named in a question, resolved against the moment it is asked (engramdb.retrieval.timeref)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.timeref import TimeWindow, find_time, nearness, weigh_by_time

#: Saturday 22 April 2023, 08:01 UTC (a LongMemEval question date).
ASKED = datetime(2023, 4, 22, 8, 1, tzinfo=UTC)


def _days(question: str, reference: datetime = ASKED) -> tuple[date, date, str]:
    window = find_time(question, reference=reference)
    assert window is not None, question
    return window.start.date(), window.end.date(), window.unit


@pytest.mark.parametrize(
    ("question", "start", "end", "unit"),
    [
        ("Who did I go with to the music event last Saturday?", date(2023, 4, 15), date(2023, 4, 16), "day"),
        ("What is the artist that I started to listen to last Friday?", date(2023, 4, 21), date(2023, 4, 22), "day"),
        ("what did I do yesterday", date(2023, 4, 21), date(2023, 4, 22), "day"),
        ("What kitchen appliance did I buy 10 days ago?", date(2023, 4, 12), date(2023, 4, 13), "day"),
        # "two weeks ago": the week around the day fourteen days back.
        ("I did a sports event two weeks ago. What was it?", date(2023, 4, 5), date(2023, 4, 12), "week"),
        ("a couple of weeks ago I bought a lamp", date(2023, 4, 5), date(2023, 4, 12), "week"),
        ("What charity event did I join a month ago?", date(2023, 3, 7), date(2023, 4, 7), "month"),
        ("what did I do last week", date(2023, 4, 10), date(2023, 4, 17), "week"),
        ("Which vehicle did I service first in February?", date(2023, 2, 1), date(2023, 3, 1), "month"),
        # A month still ahead this year, asked about in the past tense: last year's.
        ("When did Melanie go camping in June?", date(2022, 6, 1), date(2022, 7, 1), "month"),
        ("what did we decide on March 3rd", date(2023, 3, 3), date(2023, 3, 4), "day"),
        ("what happened last year", date(2022, 1, 1), date(2023, 1, 1), "year"),
        ("what happened in 2021?", date(2021, 1, 1), date(2022, 1, 1), "year"),
        ("any notes from 2023-03-04?", date(2023, 3, 4), date(2023, 3, 5), "day"),
        ("the trip last summer", date(2022, 6, 1), date(2022, 9, 1), "season"),
        ("what did I cook over the weekend", date(2023, 4, 22), date(2023, 4, 24), "weekend"),
        ("What is planned for May?", date(2023, 5, 1), date(2023, 6, 1), "month"),
    ],
)
def test_expressions_resolve_to_their_interval(question: str, start: date, end: date, unit: str) -> None:
    assert _days(question) == (start, end, unit)


@pytest.mark.parametrize(
    ("question", "days"),
    [
        # A relative time counts from a calendar date in the same question; both stay in the window.
        ("What did Joanna just finish last Friday on 23 January, 2022?", [(21, 22), (23, 24)]),
        # "two weeks before" that date: the week around it, and the date itself (the day it was said).
        ("What puppy did she get two weeks before January 25, 2022?", [(8, 15), (25, 26)]),
        ("Where was Tim the week before 16 January 2022?", [(9, 16), (16, 17)]),
    ],
)
def test_a_calendar_date_anchors_the_relative_times_beside_it(question: str, days: list[tuple[int, int]]) -> None:
    window = find_time(question, reference=ASKED)
    assert window is not None
    got = sorted((s.start.day, s.end.day) for s in window.spans)
    assert got == days
    assert all((s.start.year, s.start.month) == (2022, 1) for s in window.spans)


def test_since_runs_until_the_question() -> None:
    window = find_time("what changed since March", reference=ASKED)
    assert window is not None
    assert (window.start.date(), window.end) == (date(2023, 3, 1), ASKED)


@pytest.mark.parametrize(
    "question",
    [
        "May I ask what the deploy freeze is?",  # a modal verb, not the month
        "the mayor said the budget is final",
        "How long between the bake sale and the time I went to the Spring Fling Market?",  # a name
        "authentication failure on the login page",
        "How many days ago did I meet Emma?",  # asks for a time, names none
        "two weeks before the trip what did I buy",  # relative to an event, not to the question
        "",
    ],
)
def test_no_time_named(question: str) -> None:
    assert find_time(question, reference=ASKED) is None


def test_the_rest_is_the_question_without_its_time_words() -> None:
    window = find_time("Who did I go with to the music event last Saturday?", reference=ASKED)
    assert window is not None
    assert window.rest == "Who did I go with to the music event?"
    assert window.to_dict()["expressions"] == ["last Saturday"]


def test_days_begin_at_midnight_of_the_references_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    # 23:30 UTC on the 21st is already the 22nd in Tokyo: "yesterday" is the 21st there.
    window = find_time("what did I do yesterday", reference=datetime(2023, 4, 21, 23, 30, tzinfo=UTC).astimezone(tokyo))
    assert window is not None
    assert window.start == datetime(2023, 4, 21, tzinfo=tokyo)
    assert window.end == datetime(2023, 4, 22, tzinfo=tokyo)


def test_nearness_fades_outside_the_window() -> None:
    window = find_time("last Saturday", reference=ASKED)
    assert window is not None
    assert nearness(datetime(2023, 4, 15, 20, tzinfo=UTC), window) == 1.0
    assert 0.0 < nearness(datetime(2023, 4, 16, 6, tzinfo=UTC), window) < 1.0
    assert nearness(datetime(2023, 4, 18, tzinfo=UTC), window) == 0.0


def test_weighing_lifts_the_candidate_of_that_day_and_leaves_timeless_questions_alone() -> None:
    window = find_time("what did I do last Saturday", reference=ASKED)
    assert window is not None
    fused = [Fused("a", 0.9, None, 0.9), Fused("b", 0.7, None, 0.7)]
    when = {"a": datetime(2023, 4, 20, tzinfo=UTC), "b": datetime(2023, 4, 15, 14, tzinfo=UTC)}
    assert [f.id for f in weigh_by_time(fused, when, window)] == ["b", "a"]
    # Nothing stored near that day: the order stays as the words and meaning decided.
    far = {"a": datetime(2022, 1, 1, tzinfo=UTC), "b": datetime(2022, 2, 1, tzinfo=UTC)}
    assert weigh_by_time(fused, far, window) == fused


# -- invariants -------------------------------------------------------------------------------------------

# Naive bounds, as Hypothesis wants them; every drawn value is aware (UTC).
_LOW, _HIGH = (
    datetime(1990, 1, 1, tzinfo=UTC).replace(tzinfo=None),
    datetime(2090, 1, 1, tzinfo=UTC).replace(tzinfo=None),
)
REFERENCES = st.datetimes(min_value=_LOW, max_value=_HIGH, timezones=st.just(UTC))


def _check(window: TimeWindow | None) -> None:
    if window is None:
        return
    assert window.spans
    for span in window.spans:
        assert span.start < span.end
        assert window.start <= span.start
        assert span.end <= window.end


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300), reference=REFERENCES)
def test_never_raises_on_any_text(text: str, reference: datetime) -> None:
    _check(find_time(text, reference=reference))


_SALAD = (
    "last next this past ago in on since of during the a an two weeks days months years day week month year "
    "Saturday Monday May June March 3rd 2021 10 yesterday today weekend summer what did I do"
)
_WORDS = st.sampled_from(_SALAD.split())


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_WORDS, max_size=12), reference=REFERENCES)
def test_never_raises_on_time_like_word_salad(words: list[str], reference: datetime) -> None:
    _check(find_time(" ".join(words), reference=reference))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=3000), reference=REFERENCES, prefix=st.sampled_from(["", "What did I "]))
def test_n_days_ago_is_that_day(n: int, reference: datetime, prefix: str) -> None:
    window = find_time(f"{prefix}buy {n} days ago?", reference=reference)
    assert window is not None
    assert window.start.date() == (reference - timedelta(days=n)).date()
    assert window.end - window.start == timedelta(days=1)


@settings(max_examples=200, deadline=None)
@given(weekday=st.integers(min_value=0, max_value=6), reference=REFERENCES)
def test_last_weekday_is_that_weekday_within_the_week_before(weekday: int, reference: datetime) -> None:
    name = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")[weekday]
    window = find_time(f"what did I do last {name}", reference=reference)
    assert window is not None
    assert window.start.weekday() == weekday
    assert timedelta(0) < reference - window.start <= timedelta(days=8)


@settings(max_examples=200, deadline=None)
@given(month=st.integers(min_value=1, max_value=12), reference=REFERENCES)
def test_in_a_month_asked_in_the_past_tense_is_a_whole_month_begun_by_the_reference(
    month: int, reference: datetime
) -> None:
    name = date(2000, month, 1).strftime("%B")
    window = find_time(f"where did I travel in {name}?", reference=reference)
    assert window is not None
    assert (window.start.month, window.start.day) == (month, 1)
    assert window.start <= reference
    assert reference - window.start < timedelta(days=366)

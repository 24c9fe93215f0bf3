"""A time phrase that counts back from the question ("a week ago"): its words say when, not what, and a turn that
tells an event on its day ("I finished it today") is the likelier answer (engramdb.retrieval.timeref, issue 21
eighth round)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from searcher_rank import rank_of

from engramdb import Engram
from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.timeref import (
    EVENT_WEIGHT,
    RELATIVE_WEIGHT,
    counted_back,
    find_time,
    relative_words,
    reports_event,
    weigh_by_time,
    weigh_reported_events,
)

#: Saturday 22 April 2023, 08:01 UTC (a LongMemEval question date).
ASKED = datetime(2023, 4, 22, 8, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "relative", "counted", "words"),
    [
        ("Which book did I finish a week ago?", True, True, {"a", "week", "ago"}),
        ("What kitchen appliance did I buy 10 days ago?", True, True, {"10", "days", "ago"}),
        ("What did I buy a couple of weeks back?", True, True, {"a", "couple", "of", "weeks", "back"}),
        # Said by speakers of the event itself ("last weekend I volunteered"): relative, but not counted back.
        ("What event did John volunteer at last weekend?", True, False, {"last", "weekend"}),
        # The weekday stays a word of the topic: a turn may say "on Saturday".
        ("Who did I go with to the music event last Saturday?", True, False, {"last"}),
        # Dates of the calendar are no phrase relative to the question.
        ("What did I do in May?", False, False, set()),
        ("What did Melanie do the week before August 3, 2023?", False, False, set()),
        ("What did I do last Friday, on 23 January 2022?", False, False, set()),
    ],
)
def test_which_phrases_count_from_the_question(question: str, relative: bool, counted: bool, words: set[str]) -> None:
    window = find_time(question, reference=ASKED)
    assert window is not None
    assert any(s.relative for s in window.spans) is relative
    assert any(counted_back(s) for s in window.spans) is counted
    assert relative_words(window) == words
    assert relative_words(window, counted=True) == (words if counted else set())
    assert window.to_dict()["relative"] == [s.text for s in window.spans if s.relative]


@pytest.mark.parametrize(
    ("text", "reports"),
    [
        ("user: I just finished The Nightingale today!", True),
        ("I got back from the concert yesterday", True),
        ("We went hiking last weekend.", True),
        ("I ran a 5K three days ago", True),
        ("This morning I fixed the bike chain", True),
        ("I bought it a few weeks ago", False),  # a span of weeks: no day to date the event by
        ("I love historical fiction", False),
        ("The yesterdays of my youth", False),
    ],
)
def test_which_turns_report_a_dated_event(text: str, reports: bool) -> None:
    assert reports_event(text) is reports


def _fused(draw: st.DrawFn) -> list[Fused]:
    n = draw(st.integers(min_value=0, max_value=12))
    scores = draw(st.lists(st.floats(min_value=0, max_value=1), min_size=n, max_size=n))
    return sorted((Fused(f"m{i}", s, None, s) for i, s in enumerate(scores)), key=lambda f: (-f.relevance, f.id))


_TEXTS = st.sampled_from(["I finished it today", "a few weeks ago", "pasta recipes", "yesterday we met", ""])


@settings(max_examples=200, deadline=None)
@given(data=st.data(), weight=st.floats(min_value=0, max_value=1))
def test_reported_events_only_gain_and_nothing_is_dropped(data: st.DataObject, weight: float) -> None:
    fused = data.draw(st.composite(_fused)())
    texts = {f.id: data.draw(_TEXTS) for f in fused if data.draw(st.booleans())}
    out = weigh_reported_events(fused, texts, weight=weight)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    before = {f.id: f.relevance for f in fused}
    for f in out:
        gain = weight if reports_event(texts.get(f.id, "")) else 0.0
        assert f.relevance == before[f.id] + gain
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    days_back=st.integers(min_value=-60, max_value=60),
    phrase=st.sampled_from(["10 days ago", "a week ago", "two weeks ago", "a month ago", "last Saturday"]),
)
def test_a_window_never_drops_a_memory_without_an_event_time(data: st.DataObject, days_back: int, phrase: str) -> None:
    window = find_time(f"what did I do {phrase}?", reference=ASKED)
    assert window is not None
    fused = data.draw(st.composite(_fused)())
    when = {f.id: ASKED - timedelta(days=days_back) for f in fused if data.draw(st.booleans())}
    out = weigh_by_time(fused, when, window)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    before = {f.id: f.relevance for f in fused}
    # Without an event time a memory keeps its relevance; with one it only gains.
    assert all(f.relevance == before[f.id] for f in out if f.id not in when)
    assert all(f.relevance >= before[f.id] for f in out)


# Naive bounds, as Hypothesis wants them; every drawn value is aware (UTC).
_LOW, _HIGH = (
    datetime(1990, 1, 1, tzinfo=UTC).replace(tzinfo=None),
    datetime(2090, 1, 1, tzinfo=UTC).replace(tzinfo=None),
)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=400),
    unit=st.sampled_from(["day", "week", "month", "year"]),
    reference=st.datetimes(min_value=_LOW, max_value=_HIGH, timezones=st.just(UTC)),
)
def test_a_phrase_counting_back_names_no_time_after_its_reference(n: int, unit: str, reference: datetime) -> None:
    window = find_time(f"what did I buy {n} {unit}s ago?", reference=reference)
    assert window is not None
    assert all(counted_back(s) for s in window.spans)
    assert window.end <= reference


# -- in a real search -----------------------------------------------------------------------------------------

NOISE = [
    "user: I bought this necklace a few weeks ago and the clasp already broke.",
    "user: Three weeks ago I started going to a pottery class on Tuesdays.",
    "user: I moved to Tokyo about six months ago and I'm still learning the trains.",
    "user: Can you recommend a good book club novel for a group of eight readers?",
    "user: I love historical fiction; what other books are like All the Light We Cannot See?",
    "user: A week ago my landlord said the rent goes up in June.",
]
RIGHT = "user: I just finished The Nightingale today, and I can't stop thinking about the ending."


def test_a_week_ago_finds_the_turn_said_that_day_not_turns_saying_weeks_ago(mem: Engram) -> None:
    mem.remember_many(
        [{"content": t, "agent": "a", "kind": "conversation", "session": f"s{i}"} for i, t in enumerate(NOISE)]
        + [{"content": RIGHT, "agent": "a", "kind": "conversation", "session": "books"}]
    )
    question = "Which book did I finish a week ago?"
    off: dict[str, Any] = {"relative_weight": 1.0, "event_weight": 0.0}
    assert rank_of(mem, question, RIGHT, **off) == 2
    # Each half alone is not enough here; the two together are the shipped rule.
    assert rank_of(mem, question, RIGHT, relative_weight=RELATIVE_WEIGHT, event_weight=0.0) == 2
    assert rank_of(mem, question, RIGHT, relative_weight=1.0, event_weight=EVENT_WEIGHT) == 2
    assert rank_of(mem, question, RIGHT) == 1
    # "last week" is said by speakers of the event too: it keeps its words and gets no event weight.
    assert rank_of(mem, "Which book did I finish last week?", RIGHT) == rank_of(
        mem, "Which book did I finish last week?", RIGHT, **off
    )
    # A question naming no time ranks the same either way.
    assert rank_of(mem, "Which book did I finish?", RIGHT) == rank_of(mem, "Which book did I finish?", RIGHT, **off)


def test_a_week_ago_counts_from_as_of_and_sees_nothing_after_it(mem: Engram) -> None:
    said = ASKED - timedelta(days=7)
    for i, text in enumerate(NOISE):
        mem.remember(text, agent="a", kind="conversation", session=f"s{i}", at=said - timedelta(days=3 * i + 1))
    right = mem.remember(RIGHT, agent="a", kind="conversation", session="books", at=said).id
    later = mem.remember(
        "user: I finished Sapiens today, a book I had put off for years.",
        agent="a",
        kind="conversation",
        session="later",
        at=ASKED + timedelta(days=2),
    ).id
    hits = mem.search("Which book did I finish a week ago?", agent="a", as_of=ASKED, limit=5)
    ids = [h.memory.id for h in hits]
    assert ids[0] == right
    assert later not in ids
    # Asked after the later turn was said, the later book is the one of that week.
    hits = mem.search("Which book did I finish a week ago?", agent="a", as_of=ASKED + timedelta(days=9), limit=5)
    assert hits[0].memory.id == later


_SALAD = (
    "last next this past ago back earlier in on since the a an two ten 10 weeks days months years day week month "
    "year Saturday May 3rd 2021 yesterday today weekend summer before after what did I do buy"
)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(_SALAD.split()), max_size=12), text=st.text(max_size=80))
def test_the_phrase_words_are_words_of_the_question_and_counted_ones_a_part(words: list[str], text: str) -> None:
    question = " ".join(words) + " " + text
    reports_event(question)  # never raises
    window = find_time(question, reference=ASKED)
    if window is None:
        return
    every, counted = relative_words(window), relative_words(window, counted=True)
    assert counted <= every <= set(question.lower().split()) | {w for s in window.spans for w in s.text.lower().split()}
    # A phrase counting back is relative, and a relative phrase names no year of the calendar.
    assert all(s.relative for s in window.spans if counted_back(s))
    assert not any(s.relative and re.search(r"(?:19|20)\d\d", s.text) for s in window.spans)

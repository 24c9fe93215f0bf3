"""The deterministic fact extractor: what it finds, the keys it gives, what it leaves alone; never raises."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.brain._dates import resolve_date
from engramdb.brain.extract import MAX_FACTS, extract_facts

NOW = datetime(2026, 11, 27, 10, tzinfo=UTC)  # a Friday


def facts(text: str) -> dict[str | None, str]:
    return {f.key: f.content for f in extract_facts(text, now=NOW)}


@pytest.mark.parametrize(
    ("text", "key", "content"),
    [
        ("Hi, I'm Sam and I live in Paris.", "name", "The user's name is Sam."),
        ("Hi, I'm Sam and I live in Paris.", "home", "The user lives in Paris."),
        ("Big news: I moved to Berlin last month!", "home", "The user lives in Berlin."),
        ("My name is Priya Sharma.", "name", "The user's name is Priya Sharma."),
        ("I work at Google as a data scientist.", "employer", "The user works at Google."),
        ("I work at Google as a data scientist.", "job", "The user works as a data scientist."),
        ("I'm a software engineer at Stripe.", "employer", "The user works at Stripe."),
        ("I prefer neovim over VS Code.", "pref:editor", "The user prefers neovim over VS Code."),
        ("I've switched to Emacs, by the way.", "pref:editor", "The user now uses Emacs."),
        ("I always use zsh.", "pref:shell", "The user uses zsh."),
        ("I like sushi", "pref:sushi", "The user likes sushi."),
        ("Actually, I don't like coffee anymore.", "pref:coffee", "The user dislikes coffee."),
        ("My favorite color is blue.", "pref:color", "The user's favorite color is blue."),
        ("My wife Anna is a doctor.", "family:wife", "The user's wife is named Anna."),
        ("I have a daughter named Mia.", "family:daughter:mia", "The user has a daughter named Mia."),
        ("My dog Rex loves the park.", "pet:dog:rex", "The user's dog is named Rex."),
        ("I'm allergic to peanuts.", "allergy:peanuts", "The user is allergic to peanuts."),
        ("I'm vegan.", "diet", "The user is vegan."),
        ("I have asthma.", "health:asthma", "The user has asthma."),
        ("I'm 34 years old.", "age", "The user is 34 years old (as of 2026-11-27)."),
        ("My birthday is on June 12.", "birthday", "The user's birthday is June 12."),
        ("I'm originally from Ohio.", "origin", "The user is originally from Ohio."),
        ("I quit my job at Amazon.", "employer", "The user no longer works at Amazon."),
        ("Please remember that I prefer tabs.", "pref:indentation", "The user prefers tabs."),
        ("Remember that my locker code is 4512.", None, "The user asked to remember: my locker code is 4512."),
        ("I went vegan in October.", "diet", "The user is vegan."),
        ("I have three children and two cats.", "pet:cat", "The user has two cats."),
        ("I have a daughter named Mia and a dog called Rex.", "pet:dog:rex", "The user's dog is named Rex."),
        ("For context: I work as a high school teacher in Leeds.", "home", "The user lives in Leeds."),
        (
            "I'm moving to Lisbon next month, can you help me find a flat?",
            "plan:move",
            "The user plans: moving to Lisbon, next month.",
        ),
        ("I'm based in Milan these days.", "home", "The user lives in Milan."),
        (
            "I work at a small bakery downtown, the owner is great.",
            "employer",
            "The user works at a small bakery downtown.",
        ),
    ],
)
def test_explicit_statements_become_keyed_facts(text: str, key: str | None, content: str) -> None:
    assert facts(text).get(key) == content


def test_a_dated_plan_resolves_its_day_from_when_it_was_said() -> None:
    (trip,) = extract_facts("I'm flying to Tokyo next Friday.", now=NOW)
    assert (trip.key, trip.date, trip.category) == ("plan:trip:tokyo", "2026-12-04", "plan")
    (moved,) = extract_facts("My dentist appointment got moved to March 5.", now=NOW)
    assert (moved.key, moved.date) == ("plan:dentist-appointment", "2027-03-05")
    # a move still to come is a plan, not yet a home
    (move,) = extract_facts("I'm moving to Lisbon next month.", now=NOW)
    assert move.key == "plan:move"


@pytest.mark.parametrize(
    "text",
    [
        "Do you think I should move to Berlin?",
        "If I lived in Paris I would be happy.",
        "I like that idea!",
        "I'm tired.",
        "What's the capital of Australia?",
        "My friend lives in Madrid and works at Santander.",
        "I work from home",
        "",
    ],
)
def test_questions_conditions_and_chatter_state_no_fact(text: str) -> None:
    assert extract_facts(text, now=NOW) == []


def test_one_value_per_key_the_last_said_wins() -> None:
    found = extract_facts("I live in Paris. Well, I moved to Berlin.", now=NOW)
    assert [(f.key, f.value) for f in found] == [("home", "Berlin")]


def test_a_named_speaker_is_the_subject() -> None:
    (fact,) = extract_facts("I live in Rome.", now=NOW, subject="Caroline")
    assert fact.content == "Caroline lives in Rome."


@pytest.mark.parametrize(
    ("phrase", "day"),
    [
        ("tomorrow", "2026-11-28"),
        ("next Friday", "2026-12-04"),
        ("on Friday", "2026-12-04"),
        ("this Friday", "2026-11-27"),
        ("on March 3rd", "2027-03-03"),
        ("the 5th of December", "2026-12-05"),
        ("in two weeks", "2026-12-11"),
        ("2027-01-02", "2027-01-02"),
        ("on February 30", None),
        ("next month", None),
    ],
)
def test_date_phrases(phrase: str, day: str | None) -> None:
    found = resolve_date(phrase, NOW)
    assert (found.isoformat() if found else None) == day


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_any_text(text: str) -> None:
    out = extract_facts(text, now=NOW)
    assert len(out) <= MAX_FACTS
    assert all(f.content.strip() and (f.key is None or f.key.strip() == f.key) for f in out)


_WORDS = st.sampled_from(
    ["I", "I'm", "my", "live", "in", "moved", "to", "Berlin", "prefer", "vim", "allergic", "next", "Friday", "have",
     "a", "dog", "named", "Rex", "remember", "that", "work", "at", "Google", "as", "nurse", "!", ",", ".", "?",
     "don't", "like", "favorite", "is", "on", "March", "31st", "February", "30", "in", "99", "days", "called"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, max_size=25).map(" ".join), st.datetimes(timezones=st.just(UTC)))
def test_never_raises_on_fact_like_word_salad(text: str, now: datetime) -> None:
    for fact in extract_facts(text, now=now):
        assert fact.content.endswith(".")
        assert fact.kind in ("preference", "knowledge")


def test_long_whitespace_runs_and_huge_messages_are_read_in_one_pass() -> None:
    # A run of 100,000 spaces once made the clause patterns backtrack for a minute.
    assert extract_facts("I " + " " * 100_000 + "live in Paris", now=NOW) == []  # past the part read
    assert extract_facts("I " + "\t \n " * 3_000 + "live in Paris", now=NOW) == []  # two sentences
    (home,) = extract_facts("I " + " " * 10_000 + "live in Paris", now=NOW)
    assert home.content == "The user lives in Paris."
    assert len(extract_facts("I live in Paris. " * 50_000, now=NOW)) == 1

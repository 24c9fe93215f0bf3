"""A question that asks for an amount is answered by a memory that states one (engramdb.retrieval.amounts, issue 21
ninth round)."""

from __future__ import annotations

import re

import pytest
from fused_strategies import fused_lists
from hypothesis import given, settings
from hypothesis import strategies as st
from searcher_rank import rank_of

from engramdb import Engram
from engramdb.retrieval.amounts import AMOUNT_WEIGHT, asked_amount, states_amount, weigh_amounts
from engramdb.retrieval.ranking import Fused

_UNITS = {"years", "months", "weeks", "days", "hours", "minutes"}


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("How many rare items do I have in total?", {"rare", "items"}),
        ("How many hours have I spent playing games in total?", {"hours"}),
        ("How many different doctors did I visit?", {"doctors"}),
        ("What is the total number of books I read?", {"books"}),
        ("How long have I been working in my current role?", _UNITS),
        # The time between events: a difference of dates, which no memory states.
        ("How many months have passed since I last visited a museum with a friend?", set()),
        ("How many days ago did I buy the smoker?", set()),
        ("How many days before the trip did I buy boots?", set()),
        ("Which book did I finish a week ago?", set()),
        ("What is my sister's name?", set()),
    ],
)
def test_what_a_question_asks_the_amount_of(question: str, words: set[str]) -> None:
    assert asked_amount(question) == words


@pytest.mark.parametrize(
    ("text", "question", "states"),
    [
        ("I'm excited to add it to my collection of 57 rare records.", "How many rare items do I have?", True),
        ("I have 12 rare figurines and I want to store them.", "How many rare items do I have?", True),
        ("I have two rare stamps.", "How many rare items do I have?", True),
        ("I'm thinking of starting a collection of rare items.", "How many rare items do I have?", False),
        # A list's numbering and a price are no amount of the thing.
        ("1. Rare items sell best online.", "How many rare items do I have?", False),
        ("I spent $50 on a rare necklace.", "How many rare items do I have?", False),
        ("Celeste took me 10 hours to complete.", "How many hours have I spent playing games?", True),
        ("I've been playing a lot of games lately.", "How many hours have I spent playing games?", False),
        ("My 3 years and 9 months in the company taught me a lot.", "How long have I been in my role?", True),
        ("I've been in marketing for a while now.", "How long have I been in my role?", False),
    ],
)
def test_which_memories_state_an_amount(text: str, question: str, states: bool) -> None:
    assert states_amount(text, asked_amount(question)) is states


def test_an_amount_of_something_else_gains_nothing() -> None:
    question = "How many weeks in total did I spend reading The Nightingale?"
    words = asked_amount(question)
    assert words == {"weeks"}
    gym = "user: I go to the gym 4 times a week."
    book = "user: I spent 3 weeks reading The Nightingale."
    fused = [Fused("gym", 0.5, None, None), Fused("book", 0.4, None, None)]
    texts = {"gym": gym, "book": book}
    topic = frozenset({"spend", "reading", "nightingale"})
    out = {f.id: f.relevance for f in weigh_amounts(fused, texts, words, weight=0.2, topic=topic)}
    assert out == {"gym": 0.5, "book": 0.4 + 0.2}
    # Without a topic to hold, any amount of the unit counts.
    out = {f.id: f.relevance for f in weigh_amounts(fused, texts, words, weight=0.2)}
    assert out == {"gym": 0.5 + 0.2, "book": 0.4 + 0.2}


_TEXTS = st.sampled_from(["I have 57 rare records", "a collection of rare items", "it took 5 hours", "pasta", ""])


@settings(max_examples=200, deadline=None)
@given(fused=fused_lists, data=st.data(), weight=st.floats(min_value=0, max_value=1))
def test_amounts_only_gain_and_nothing_is_dropped(fused: list, data: st.DataObject, weight: float) -> None:  # type: ignore[type-arg]
    words = asked_amount(data.draw(st.sampled_from(["How many rare items?", "How many hours?", "What time is it?"])))
    texts = {f.id: data.draw(_TEXTS) for f in fused if data.draw(st.booleans())}
    out = weigh_amounts(fused, texts, words, weight=weight)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    before = {f.id: f.relevance for f in fused}
    for f in out:
        assert f.relevance == before[f.id] + (weight if states_amount(texts.get(f.id, ""), words) else 0.0)
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)
    if weight == 0:
        assert out == fused


@settings(max_examples=300, deadline=None)
@given(question=st.text(max_size=200), text=st.text(max_size=200))
def test_asked_words_are_the_questions_own_or_units_of_time(question: str, text: str) -> None:
    words = asked_amount(question)  # never raises
    own = set(re.findall(r"[a-z'-]+", question.lower()))
    assert words <= own | _UNITS
    assert isinstance(states_amount(text, words), bool)
    assert not states_amount(text, frozenset())


NOISE = [
    "user: Which companies make the most valuable rare collectibles?",
    "user: Do you think rare records keep their value over time?",
    "user: Where can I sell rare items online?",
    "user: I have been reading about rare items at auctions.",
    "user: My sister has a collection of stamps.",
    "user: Can you recommend a good book about the history of coins?",
    "user: I went to the farmers market and bought peaches.",
    "user: My collection of rare items has grown a lot now.",
]
RIGHT = "user: My collection has 57 rare records now."


def test_how_many_rare_items_lifts_the_count_past_turns_sharing_more_words(mem: Engram) -> None:
    mem.remember_many(
        [{"content": t, "agent": "a", "kind": "conversation", "session": f"s{i}"} for i, t in enumerate(NOISE)]
        + [{"content": RIGHT, "agent": "a", "kind": "conversation", "session": "records"}]
    )
    question = "How many rare items do I have in total?"
    off = rank_of(mem, question, RIGHT, amount_weight=0.0)
    on = rank_of(mem, question, RIGHT)
    # Below four turns that hold "rare items" or "collection" without a count; the count passes at least one.
    assert off == 5
    assert on is not None
    assert on < off
    # A question that asks for no amount ranks the same either way.
    plain = "Which rare items do I have?"
    assert rank_of(mem, plain, RIGHT) == rank_of(mem, plain, RIGHT, amount_weight=0.0)
    assert AMOUNT_WEIGHT > 0

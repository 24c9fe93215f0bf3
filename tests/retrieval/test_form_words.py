"""A question's form words ("how many different", "in total", "how long") count half in coverage: which words
they are, what the scale does to coverage and fusion, and a real search where "How many different doctors did I
visit?" finds the turn about Dr. Lee only with them weighed down."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from searcher_rank import rank_of

from engramdb import Engram
from engramdb.retrieval.evidence import pool_coverage
from engramdb.retrieval.ranking import fuse_evidence
from engramdb.retrieval.text import FORM_WEIGHT, form_words, query_terms
from engramdb.storage.base import Candidate


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("How many different doctors did I visit?", {"how", "many", "different"}),
        ("How long have I been working in my current role?", {"how", "long"}),
        ("What is the total number of siblings I have?", {"the", "total", "number"}),
        ("How many hours have I spent playing games in total?", {"how", "many", "total"}),
        ("How often do we refresh the recommender?", {"how", "often"}),
        ("How much have I saved so far?", {"how", "much", "so", "far"}),
        # "every", "each", "all the" quantify the topic, not the question.
        ("which endpoints must every service have?", set()),
        ("Where do I currently keep my old sneakers?", set()),
        ("", set()),
    ],
)
def test_the_form_words_of_a_question(question: str, words: set[str]) -> None:
    assert form_words(question) == words


@given(st.text(max_size=200))
def test_form_words_never_raise_and_are_words_of_the_text(text: str) -> None:
    words = form_words(text)
    assert words <= {w.lower() for w in re.findall(r"\w+", text)}


texts_st = st.dictionaries(
    st.text("abcdef", min_size=1, max_size=4),
    st.lists(st.sampled_from(["many", "total", "doctors", "visit", "sinus", "pasta"]), max_size=6).map(" ".join),
    min_size=1,
    max_size=8,
)
terms_st = st.lists(st.sampled_from(["many", "total", "doctors", "visit", "long"]), min_size=1, max_size=5, unique=True)


@given(texts_st, terms_st, st.floats(0.0, 1.0))
def test_scaled_coverage_stays_within_bounds_and_one_is_the_identity(
    texts: dict[str, str], terms: list[str], factor: float
) -> None:
    plain = pool_coverage(terms, texts)
    assert pool_coverage(terms, texts, scale=dict.fromkeys(terms, 1.0)) == plain
    scaled = pool_coverage(terms, texts, scale={terms[0]: factor})
    assert set(scaled) == set(texts)
    assert all(0.0 <= v <= 1.0 + 1e-9 for v in scaled.values())


def test_a_text_holding_only_form_words_covers_less_when_they_count_less() -> None:
    texts = {"decoy": "I tried many different cuisines", "right": "Dr. Lee did the biopsy", "x": "pasta"}
    terms = ["many", "different", "doctors", "visit"]
    plain = pool_coverage(terms, texts)
    half = pool_coverage(terms, texts, scale={"many": 0.5, "different": 0.5})
    assert 0.0 < half["decoy"] < plain["decoy"]
    assert half["right"] == plain["right"] == 0.0


@pytest.mark.parametrize("factor", [-0.1, 1.5, float("nan")])
def test_a_scale_outside_zero_to_one_is_refused(factor: float) -> None:
    with pytest.raises(ValueError, match="scale"):
        fuse_evidence([Candidate("a", 1.0)], [Candidate("a", 0.5)], {"a": "many"}, ["many"], scale={"many": factor})


NOISE = [
    "user: I have many different interests, so it's good to know I don't have to choose just one hobby.",
    "user: How many different kinds of pasta should I buy for the party?",
    "user: We had many different options for the database schema of the booking system.",
    "user: My sister and I saw many different galleries on our trip.",
    "user: Thanks! How many different routes lead up to the summit?",
    "user: I'd like to try many different cuisines this year.",
]
RIGHT = "user: Dr. Lee did the biopsy on that suspicious mole."


def _rank(mem: Engram, query: str, *, form_weight: float) -> int | None:
    return rank_of(mem, query, RIGHT, form_weight=form_weight)


def test_in_a_real_search_the_doctor_outranks_a_turn_sharing_only_how_many_different(mem: Engram) -> None:
    mem.remember_many(
        [{"content": t, "agent": "a", "kind": "conversation", "session": f"s{i}"} for i, t in enumerate(NOISE)]
        + [{"content": RIGHT, "agent": "a", "kind": "conversation", "session": "health"}]
    )
    query = "How many different doctors did I visit?"
    assert query_terms(query)[:2] == ["many", "different"]
    assert _rank(mem, query, form_weight=1.0) == 2
    assert _rank(mem, query, form_weight=FORM_WEIGHT) == 1
    # A question without form words ranks the same either way.
    plain = "Which doctor did the biopsy?"
    assert _rank(mem, plain, form_weight=1.0) == _rank(mem, plain, form_weight=FORM_WEIGHT) == 1

"""Related words (a question's category word against a memory's instance): the shipped table, coverage's
credit for them, and a real search where "siblings" finds "my 3 sisters"."""

from __future__ import annotations

from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st
from searcher_rank import rank_of

from engramdb import Engram
from engramdb.retrieval.evidence import pool_coverage, stem
from engramdb.retrieval.ranking import RankingWeights, fuse_evidence
from engramdb.retrieval.related import flat, related_terms, related_words
from engramdb.retrieval.sessions import gathering_words
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Candidate


def test_the_shipped_table_is_well_formed() -> None:
    text = resources.files("engramdb.retrieval").joinpath("data/related.txt").read_text(encoding="utf-8")
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    assert len(rows) > 5000
    for word, *related in rows:
        assert word.isalpha()
        assert word == word.lower()
        assert 1 <= len(related) <= 4
        assert word not in related
        assert len(set(related)) == len(related)


def test_category_words_get_their_instances_and_synonyms() -> None:
    assert {"sisters", "brothers"} <= set(related_words("siblings"))
    assert "physicians" in related_words("doctors")
    assert related_words("Siblings") == related_words("siblings")
    assert related_words("pgbouncer") == ()


def test_names_gathering_words_and_inflections_are_not_expanded() -> None:
    q = "How many different doctors did Caroline visit in total?"
    related = related_terms(q, query_terms(q), skip=gathering_words(q))
    assert "doctors" in related
    assert not {"caroline", "many", "different", "total"} & set(related)
    # A word written both ways is not only a name.
    q2 = "Caroline said caroline is a name"
    assert related_terms(q2, ["caroline"]) == related_terms("caroline", ["caroline"])


@given(st.text(max_size=80))
def test_related_terms_never_raises_and_never_repeats_a_terms_stem(question: str) -> None:
    terms = query_terms(question)
    related = related_terms(question, terms, skip=gathering_words(question))
    assert set(related) <= set(terms)
    stems = [stem(t) for t in terms]
    for word in flat(related):
        assert not any(stem(word).startswith(s) or s.startswith(stem(word)) for s in stems)


texts_st = st.dictionaries(
    st.sampled_from("abcdef"),
    st.lists(st.sampled_from(["siblings", "sisters", "brothers", "total", "number", "cats", "the"]), max_size=6).map(
        " ".join
    ),
    max_size=6,
)
terms_st = st.lists(st.sampled_from(["siblings", "total", "number", "cats"]), min_size=1, max_size=4, unique=True)


@given(texts_st, terms_st, st.floats(min_value=0, max_value=1))
def test_related_words_only_add_coverage_within_bounds(texts, terms, credit) -> None:
    related = {"siblings": ("sisters", "brothers")}
    plain = pool_coverage(terms, texts)
    more = pool_coverage(terms, texts, related=related, credit=credit)
    assert more.keys() == plain.keys()
    for i, value in more.items():
        assert plain[i] - 1e-12 <= value <= 1.0 + 1e-12
        # A text holding the term itself gains nothing from its related words.
        if "siblings" in texts[i].split():
            assert value == pytest.approx(plain[i])
    assert pool_coverage(terms, texts, related=related, credit=0.0) == plain
    assert pool_coverage(terms, texts, related=None, credit=credit) == plain


def test_a_related_word_counts_its_credit_of_the_terms_weight() -> None:
    texts = {"a": "my 3 sisters", "b": "my siblings", "c": "the weather"}
    plain = pool_coverage(["siblings"], texts)
    half = pool_coverage(["siblings"], texts, related={"siblings": ("sisters",)}, credit=0.5)
    assert plain["a"] == 0.0
    assert plain["b"] == 1.0
    assert half == {"a": 0.5, "b": 1.0, "c": 0.0}


@pytest.mark.parametrize("credit", [-0.1, 1.5])
def test_out_of_range_credit_is_refused(credit: float) -> None:
    with pytest.raises(ValueError, match="related_credit"):
        fuse_evidence([Candidate("a", 1.0)], [], {"a": "x"}, ["x"], related_credit=credit)


NOISE = [
    "user: What is the total number of moons of Jupiter?",
    "user: Can you count the total number of rows in my spreadsheet?",
    "user: I need the total number of calories in a banana bread.",
    "user: What number should I call for the total eclipse tour?",
    "user: My phone number changed, how do I update it in the app?",
    "user: The total came to 40 dollars for the groceries I have.",
]
SISTERS = (
    "user: Thanks for the studies on gender and social networks! I come from a family with 3 sisters, "
    "so I've always had a strong female presence in my life, and I wonder how that shaped my friendships."
)


def _rank(mem: Engram, query: str, *, credit: float, gated: bool = False, fusion: str = "evidence") -> int | None:
    weights = RankingWeights(fusion=fusion)
    return rank_of(mem, query, SISTERS, weights=weights, related_credit=credit, related_gated=gated)


def test_in_a_real_search_siblings_finds_the_turn_about_sisters(mem: Engram) -> None:
    mem.remember_many(
        [{"content": t, "agent": "a", "kind": "conversation", "session": f"s{i}"} for i, t in enumerate(NOISE)]
        + [{"content": SISTERS, "agent": "a", "kind": "conversation", "session": "family"}]
    )
    query = "What is the total number of siblings I have?"
    without, with_related = _rank(mem, query, credit=0.0), _rank(mem, query, credit=1.0)
    assert with_related == 1
    assert without is None or without > 1
    # Gated, a question that does not gather is left alone; ungated, it finds the sisters too.
    one = "What is the number of siblings I have?"
    assert _rank(mem, one, credit=1.0, gated=True) == _rank(mem, one, credit=0.0) == 2
    assert _rank(mem, one, credit=1.0) == 1
    # Min-max and learned fusion read the keyword channel's own scores: related words stay out of them.
    for fusion in ("minmax", "learned"):
        assert _rank(mem, query, credit=1.0, fusion=fusion) == _rank(mem, query, credit=0.0, fusion=fusion)

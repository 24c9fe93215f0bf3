"""The keyword channel's postings budget: the rarest terms are queried, the commonest dropped past the budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import add, memory

from engramdb.storage._keyword_budget import bounded_terms
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite


def test_bounded_terms_keeps_the_rarest_within_budget_in_query_order() -> None:
    terms = ["common", "rare", "middle", "absent"]
    assert bounded_terms(terms, [900, 5, 60, 0], budget=100) == ["rare", "middle", "absent"]
    assert bounded_terms(terms, [900, 5, 60, 0], budget=10) == ["rare", "absent"]
    assert bounded_terms(terms, [900, 5, 60, 0], budget=10_000) == terms


def test_bounded_terms_always_keeps_the_rarest_matching_term() -> None:
    assert bounded_terms(["a", "b"], [500, 300], budget=10) == ["b"]
    assert bounded_terms(["a"], [500], budget=0) == ["a"]
    # A term that matches nothing comes first in rarity but does not count as the kept matching term.
    assert bounded_terms(["absent", "common", "commoner"], [0, 500, 900], budget=10) == ["absent", "common"]
    with pytest.raises(ValueError, match="one frequency per term"):
        bounded_terms(["a"], [], budget=1)


def _corpus(location: Path) -> list[str]:
    """30 memories say 'weather', 3 of them also 'volcano'; returns ids of the volcano ones."""
    store = open_sqlite(location)
    with store:
        items = [memory(f"the weather today, note {i}" + (" near the volcano" if i < 3 else "")) for i in range(30)]
        add(store, items)
    return [m.id for m in items[:3]]


def test_a_store_under_the_budget_ranks_every_term(tmp_path: Path) -> None:
    _corpus(tmp_path / "s")
    with open_sqlite(tmp_path / "s") as store:
        found = store.search.keyword_candidates(["weather", "volcano"], Filter(agent="alice"), limit=50)
    assert len(found) == 30  # the default budget is far above 30 postings: nothing dropped


def test_past_the_budget_the_common_term_is_dropped(tmp_path: Path) -> None:
    volcano = _corpus(tmp_path / "s")
    with open_sqlite(tmp_path / "s") as store:
        search = store.search
        assert hasattr(search, "postings_budget")
        search.postings_budget = 10
        found = search.keyword_candidates(["weather", "volcano"], Filter(agent="alice"), limit=50)
        assert sorted(c.id for c in found) == sorted(volcano)
        # Only common terms: the rarest of them is still queried.
        assert len(search.keyword_candidates(["weather", "today"], Filter(agent="alice"), limit=50)) == 30
        search.postings_budget = None
        assert len(search.keyword_candidates(["weather", "volcano"], Filter(agent="alice"), limit=50)) == 30


def test_term_counts_follow_a_growing_store(tmp_path: Path) -> None:
    location = tmp_path / "s"
    _corpus(location)
    with open_sqlite(location) as store:
        search = store.search
        search.postings_budget = 40
        flt = Filter(agent="alice")
        assert len(search.keyword_candidates(["weather", "volcano"], flt, limit=100)) == 30
        # Another writer grows the store past a tenth: the cached counts are refreshed, 'weather' now too common.
        with open_sqlite(location) as other:
            add(other, [memory(f"weather report {i}") for i in range(30)], seed=1)
        found = search.keyword_candidates(["weather", "volcano"], flt, limit=100)
        assert len(found) == 3

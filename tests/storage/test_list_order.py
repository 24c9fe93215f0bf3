"""The ``most_used`` list order and the usage totals, on every backend (see conftest.BACKENDS)."""

from __future__ import annotations

import pytest
from storage_helpers import add, later, memory

from engramdb.errors import ValidationError
from engramdb.storage.base import Filter, Store, UsageTotals


def test_most_used_orders_by_attempts_then_retrievals_then_newest(store: Store) -> None:
    fresh = memory("never used", at=later(5))
    touched = memory("retrieved twice", at=later(1), access_count=2)
    once = memory("one outcome", at=later(0), attempts=1.0, successes=1.0)
    often = memory("three outcomes", at=later(2), attempts=3.0, successes=1.0)
    tie_old = memory("one outcome, retrieved", at=later(3), attempts=1.0, successes=0.0, access_count=1)
    old_fresh = memory("never used either", at=later(4))
    add(store, [fresh, touched, once, often, tie_old, old_fresh])
    flt = Filter(agent="alice")
    want = [often.id, tie_old.id, once.id, touched.id, fresh.id, old_fresh.id]
    assert [m.id for m in store.memories.list(flt, order="most_used")] == want
    # Newest first stays the default.
    assert store.memories.list(flt)[0].id == fresh.id
    # Pages of the order neither overlap nor skip (the order is total).
    pages = [store.memories.list(flt, limit=2, offset=o, order="most_used") for o in (0, 2, 4)]
    assert [m.id for page in pages for m in page] == want


def test_most_used_follows_later_touches(store: Store) -> None:
    a, b = memory("a", at=later(0)), memory("b", at=later(1))
    add(store, [a, b])
    store.memories.touch([a.id], at=later(2))
    assert [m.id for m in store.memories.list(Filter(agent="alice"), order="most_used")] == [a.id, b.id]


def test_most_used_keeps_the_visibility_filter(store: Store) -> None:
    mine = memory("mine", attempts=1.0)
    theirs = memory("bob's, heavily used", agent="bob", attempts=9.0)
    public = memory("bob's public one", agent="bob", attempts=2.0, visibility="public")
    add(store, [mine, theirs, public])
    listed = store.memories.list(Filter(agent="alice"), order="most_used")
    assert [m.id for m in listed] == [public.id, mine.id]
    assert listed[0].shared_by == "bob"


def test_unknown_order_is_a_validation_error(store: Store) -> None:
    with pytest.raises(ValidationError, match="most_used"):
        store.memories.list(Filter(agent="alice"), order="oldest")  # type: ignore[arg-type]


def test_usage_totals(store: Store) -> None:
    assert store.memories.usage(Filter(agent="alice")) == UsageTotals(
        used=0, attempts=0.0, successes=0.0, accesses=0, best_success_rate=None
    )
    add(
        store,
        [
            memory("good", attempts=2.0, successes=2.0, access_count=3),
            memory("mixed", attempts=4.0, successes=1.5),
            memory("unused", access_count=1, kind="success"),
            memory("bob's", agent="bob", attempts=7.0, successes=7.0, access_count=5),
        ],
    )
    usage = store.memories.usage(Filter(agent="alice"))
    assert (usage.used, usage.attempts, usage.successes, usage.accesses) == (2, 6.0, 3.5, 4)
    assert usage.best_success_rate == pytest.approx((2.0 + 1.0) / (2.0 + 2.0))
    # Narrowed like count: by kind, and over every agent for administrative reads.
    assert store.memories.usage(Filter(agent="alice", kinds=("success",))).accesses == 1
    assert store.memories.usage(Filter(agent=None)).attempts == 13.0
    assert store.memories.count(Filter(agent="alice")) == 3

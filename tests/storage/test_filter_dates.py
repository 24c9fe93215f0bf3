"""Date bounds of :class:`Filter` (``created_after``/``created_before``), on every backend (see conftest.BACKENDS).

Both bounds are inclusive and apply in every read that takes a filter: get, list, count, usage, and
both search channels (keyword and vector), alone and combined with the other filter fields.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from storage_helpers import NOW, add, later, memory, unit_vectors

from engramdb.errors import ValidationError
from engramdb.models import Memory
from engramdb.storage.base import Filter, Store


def _seed(store: Store) -> list[Memory]:
    """Six memories of alice one hour apart (NOW, NOW+1h, ... NOW+5h), every one about apples; odd ones tagged."""
    ms = [
        memory(f"apple note {i}", at=later(3600 * i), tags=("odd",) if i % 2 else (), kind="knowledge")
        for i in range(6)
    ]
    add(store, ms)
    return ms


def _hours(h: float) -> datetime:
    return later(3600 * h)


def test_bounds_are_inclusive_in_list_count_and_get(store: Store) -> None:
    ms = _seed(store)
    flt = Filter(agent="alice", created_after=_hours(1), created_before=_hours(3))
    listed = store.memories.list(flt, limit=10)
    # Newest first, both ends included (created exactly at a bound).
    assert [m.id for m in listed] == [ms[3].id, ms[2].id, ms[1].id]
    assert store.memories.count(flt) == 3
    assert store.memories.get(ms[0].id, flt) is None
    assert store.memories.get(ms[1].id, flt) is not None
    assert set(store.memories.get_many([m.id for m in ms], flt)) == {ms[1].id, ms[2].id, ms[3].id}
    # Offsets page inside the range.
    assert [m.id for m in store.memories.list(flt, limit=1, offset=1)] == [ms[2].id]


def test_one_sided_and_single_instant_bounds(store: Store) -> None:
    ms = _seed(store)
    assert store.memories.count(Filter(agent="alice", created_after=_hours(4))) == 2
    assert store.memories.count(Filter(agent="alice", created_before=_hours(4))) == 5
    instant = Filter(agent="alice", created_after=ms[2].created_at, created_before=ms[2].created_at)
    assert [m.id for m in store.memories.list(instant, limit=10)] == [ms[2].id]
    # One microsecond past a memory's time excludes it: the comparison keeps full precision.
    assert store.memories.count(Filter(agent="alice", created_after=_hours(5) + timedelta(microseconds=1))) == 0
    assert store.memories.count(Filter(agent="alice", created_before=NOW - timedelta(microseconds=1))) == 0


def test_bounds_in_another_time_zone_mean_the_same_instant(store: Store) -> None:
    ms = _seed(store)
    tokyo = timezone(timedelta(hours=9))
    flt = Filter(agent="alice", created_after=_hours(2).astimezone(tokyo), created_before=_hours(2).astimezone(tokyo))
    assert [m.id for m in store.memories.list(flt, limit=10)] == [ms[2].id]


def test_bounds_combine_with_tags_kinds_ids_and_sharing(store: Store) -> None:
    ms = _seed(store)
    bob = memory("apple from bob", agent="bob", at=_hours(2.5))
    add(store, [bob], seed=1)
    store.shares.share([bob.id], from_agent="bob", to_agent="alice", at=_hours(6))
    window = {"created_after": _hours(1), "created_before": _hours(4)}
    assert {m.id for m in store.memories.list(Filter(agent="alice", tags=("odd",), **window), limit=10)} == {
        ms[1].id,
        ms[3].id,
    }
    assert store.memories.count(Filter(agent="alice", kinds=("failure",), **window)) == 0
    assert store.memories.count(Filter(agent="alice", ids=(ms[0].id, ms[2].id), **window)) == 1
    # Shared memories count by their own creation time.
    assert bob.id in {m.id for m in store.memories.list(Filter(agent="alice", **window), limit=10)}
    assert store.memories.count(Filter(agent="alice", **window)) == 5
    assert store.memories.count(Filter(agent="alice", include_shared=False, **window)) == 4


def test_usage_respects_bounds(store: Store) -> None:
    _seed(store)
    totals = store.memories.usage(Filter(agent="alice", created_after=_hours(4)))
    assert totals.used == 0
    assert totals.accesses == 0


def test_keyword_candidates_respect_bounds(store: Store) -> None:
    ms = _seed(store)
    flt = Filter(agent="alice", created_after=_hours(2), created_before=_hours(3))
    found = store.search.keyword_candidates(["apple"], flt, limit=10)
    assert {c.id for c in found} == {ms[2].id, ms[3].id}
    # With tags too (the keyword channel's other filter path).
    tagged = store.search.keyword_candidates(["apple"], Filter(agent="alice", tags=("odd",), **_kw(flt)), limit=10)
    assert {c.id for c in tagged} == {ms[3].id}


def _kw(flt: Filter) -> dict[str, datetime | None]:
    return {"created_after": flt.created_after, "created_before": flt.created_before}


@pytest.mark.parametrize("extra", [{}, {"tags": ("odd",)}, {"ids": "all"}])
def test_vector_candidates_respect_bounds(store: Store, extra: dict[str, object]) -> None:
    ms = _seed(store)
    fields: dict[str, object] = dict(extra)
    if fields.get("ids") == "all":
        fields["ids"] = tuple(m.id for m in ms)
    flt = Filter(agent="alice", created_after=_hours(2), created_before=_hours(4), **fields)  # type: ignore[arg-type]
    query = unit_vectors(1, seed=7)[0]
    found = store.search.vector_candidates(query, flt, limit=10)
    expected = {m.id for m in ms[2:5] if "tags" not in extra or "odd" in m.tags}
    # Every candidate in range, and none in range missing (the bound restricts before the top-k, not after).
    assert {c.id for c in found} == expected
    # A limit below the range's size still returns that many, all in range.
    top = store.search.vector_candidates(query, flt, limit=1)
    assert len(top) == 1
    assert top[0].id in expected


def test_bad_bounds_are_validation_errors() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        Filter(agent="alice", created_after=datetime(2024, 5, 1))  # noqa: DTZ001 - the naive value under test
    with pytest.raises(ValidationError, match="timezone-aware"):
        Filter(agent="alice", created_before="2024-05-01")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="later than"):
        Filter(agent="alice", created_after=_hours(2), created_before=_hours(1))
    # Equal bounds are a valid one-instant range.
    Filter(agent="alice", created_after=_hours(1), created_before=_hours(1))

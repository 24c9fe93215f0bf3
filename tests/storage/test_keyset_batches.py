"""Batches of a keyed scan (:func:`engramdb.storage._planning.keyset_batches`): every matching row once, in key
order, in full batches, and no query looking at more than its window of keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb.errors import ValidationError
from engramdb.storage._planning import keyset_batches


@given(
    keys=st.lists(st.integers(min_value=1, max_value=500), unique=True, max_size=80).map(sorted),
    batch=st.integers(min_value=1, max_value=20),
    window=st.integers(min_value=1, max_value=120),
)
def test_every_row_once_in_order_in_full_batches(keys: list[int], batch: int, window: int) -> None:
    top = 500
    spans: list[tuple[int, int]] = []

    def fetch(after: int, upto: int, size: int) -> Sequence[Sequence[Any]]:
        spans.append((after, upto))
        return [(k, f"id{k}", f"text {k}") for k in keys if after < k <= upto][:size]

    batches = list(keyset_batches(batch, fetch, top=top, window=window))
    assert [mid for b in batches for mid, _ in b] == [f"id{k}" for k in keys]
    assert all(len(b) == batch for b in batches[:-1])
    assert all(0 < len(b) <= batch for b in batches)
    assert all(upto - after <= window for after, upto in spans)
    # The windows cover every key up to top, each query starting where the previous one stopped.
    assert spans[0][0] == 0
    assert max(upto for _, upto in spans) == top


def test_nothing_to_scan_makes_no_query() -> None:
    def fetch(after: int, upto: int, size: int) -> Sequence[Sequence[Any]]:
        raise AssertionError("no keys: nothing to ask")

    assert list(keyset_batches(3, fetch, top=0)) == []


def test_a_batch_below_one_is_refused() -> None:
    with pytest.raises(ValidationError):
        list(keyset_batches(0, lambda a, u, s: [], top=10))

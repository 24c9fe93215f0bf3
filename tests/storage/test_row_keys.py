"""The row-key membership test of the vector cache's filters: the same answer as ``np.isin`` on any keys."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engramdb.storage._ann_exact import _member

_keys = st.lists(st.integers(min_value=-5, max_value=3_000), max_size=60)


@given(values=_keys, keys=_keys)
def test_member_is_isin(values: list[int], keys: list[int]) -> None:
    v, k = np.asarray(values, dtype=np.int64), np.asarray(keys, dtype=np.int64)
    np.testing.assert_array_equal(_member(v, k), np.isin(v, k))


def test_sparse_huge_keys_fall_back_to_isin() -> None:
    v = np.asarray([1, 2**40, 7], dtype=np.int64)
    k = np.asarray([2**40, 7], dtype=np.int64)
    np.testing.assert_array_equal(_member(v, k), [False, True, True])

"""Issue 27: the vector index's filter masks are kept by the bytes they hold, summed, not by a count.

A tenant whose filter walks the graph keeps two masks of different sizes (its rows', its groups' nodes'). Counted
against the newest mask's size, 64 were kept at 1M rows: 32 tenants' pairs, so fifty tenants taking turns (a
server's load) built both masks again at every search, though together they held 54 MB of a 64 MB budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.storage._ann_exact import MaskCache

ROWS = 1_000_000
NODES = ROWS // 13  # one graph node per group of identical rows (bench/tenants.py's texts repeat ~13 times)


def test_fifty_tenants_taking_turns_keep_their_masks_at_a_million_rows() -> None:
    cache = MaskCache()
    made: list[tuple[object, ...]] = []

    def maker(key: tuple[object, ...], size: int) -> Callable[[], tuple[np.ndarray, int]]:
        def make() -> tuple[np.ndarray, int]:
            made.append(key)
            return np.zeros(size, dtype=np.bool_), 0

        return make

    for _ in range(3):
        for tenant in range(50):
            rows_key = (0, f"t{tenant}", True, None)
            cache.get(rows_key, maker(rows_key, ROWS))
            nodes_key = ("nodes", *rows_key)
            cache.get(nodes_key, maker(nodes_key, NODES))
    assert len(made) == 100  # each mask made once, in the first round
    assert cache.nbytes <= MaskCache._BYTES


class _Small(MaskCache):
    _MIN = 3
    _BYTES = 20_000


@settings(max_examples=150)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([0, 10, 1_000, 5_000, 30_000])), max_size=60))
def test_the_cache_holds_what_fits_and_answers_a_kept_key_without_making_it(calls: list[tuple[int, int]]) -> None:
    cache = _Small()
    kept: dict[int, object] = {}
    for key, size in calls:
        made: list[int] = []

        def make(size: int = size, made: list[int] = made) -> tuple[np.ndarray | None, int]:
            made.append(1)
            return (None if size == 0 else np.zeros(size, dtype=np.bool_)), size

        mask, _ = cache.get((key,), make)
        if made:
            kept[key] = mask
        else:
            assert mask is kept[key]  # a hit is the very mask made before
        entries = list(cache._masks.values())
        # The bytes are summed over what is kept, and within the budget unless only the minimum is kept.
        assert cache.nbytes == sum(256 + (0 if m is None else m.nbytes) for m, _ in entries)
        assert cache.nbytes <= _Small._BYTES or len(entries) <= _Small._MIN + 1
        assert (key,) in cache._masks  # the newest is always kept

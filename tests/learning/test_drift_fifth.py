"""Issue 25, item 11, fifth round: the horizon learned per neighbourhood (`learning/forgetting.py`'s `best_horizon`,
`RecommendConfig.learned_horizons`) is a model-selection step, so what it picks must depend on the outcomes only:
not on what the actions are called, when the clock started, or on evidence that does not count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.learning._prior import Prior
from engramdb.learning.forgetting import best_horizon

ROWS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.05, 1.0)),
    max_size=50,
)
CANDIDATES = st.lists(st.sampled_from([2.0, 5.0, 10.0, 25.0, 60.0, 150.0]), min_size=1, max_size=4, unique=True)


def _pick(rows: list[tuple[str, float, float]], candidates: list[float], *, start: float = 0.0) -> float:
    return best_horizon(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [start + i for i in range(len(rows))],
        candidates=candidates,
        prior=Prior(),
        score_horizon=50.0,
    )


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, candidates=CANDIDATES, start=st.floats(-1e6, 1e6))
def test_the_pick_does_not_depend_on_names_or_the_clock(
    rows: list[tuple[str, float, float]], candidates: list[float], start: float
) -> None:
    renamed = [({"a": "x", "b": "y", "c": "z"}[a], s, w) for a, s, w in rows]
    assert _pick(renamed, candidates) == _pick(rows, candidates) == _pick(rows, candidates, start=start)


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, candidates=CANDIDATES, where=st.integers(0, 50), action=st.sampled_from(["a", "b", "c"]))
def test_evidence_that_does_not_count_does_not_move_the_pick(
    rows: list[tuple[str, float, float]], candidates: list[float], where: int, action: str
) -> None:
    padded = [*rows[:where], (action, 1.0, 0.0), *rows[where:]]
    assert _pick(padded, candidates) == _pick(rows, candidates)

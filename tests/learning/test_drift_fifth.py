"""Issue 25, item 11, fifth round: the horizon learned per neighbourhood (`learning/forgetting.py`'s `best_horizon`,
`RecommendConfig.learned_horizons`) is a model-selection step, so what it picks must depend on the outcomes only:
not on what the actions are called, when the clock started, or on evidence that does not count."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.learning._prior import Prior
from engramdb.learning.forgetting import best_horizon

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _drift_losses import BUCKETS, losses, oracle_close

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


RATE = st.floats(0.0, 1.0)


@settings(max_examples=300, deadline=None)
@given(p1=RATE, p2=RATE, n=st.integers(0, 5000), more=st.integers(0, 5000))
def test_more_outcomes_never_make_two_rates_harder_to_tell_apart(p1: float, p2: float, n: int, more: int) -> None:
    assert oracle_close(p1, p2, n) == oracle_close(p2, p1, n)
    if not oracle_close(p1, p2, n):
        assert not oracle_close(p1, p2, n + more)


def _answer(**fields: Any) -> dict[str, Any]:
    base = {"right": "a", "given": "a", "top": "a", "confidence": 0.9, "p1": 0.85, "p2": 0.3, "n_since": 60}
    return {**base, "old_best": "b", "own_top": "a", **fields}


def test_every_lost_question_is_in_exactly_one_bucket() -> None:
    settled = [
        _answer(),  # right and given: not lost
        _answer(p2=0.8, given="b", top="b"),  # close
        _answer(given=None),  # abstained: the top was right
        _answer(given="c", top="c"),  # matching: the own records put "a" on top
        _answer(given="b", top="b", own_top="b"),  # stale: "b" was the best before the change
        _answer(given=None, top="c", own_top="c"),  # other
    ]
    table = losses(settled)
    assert [sum(table["pct"][b].values()) for b in BUCKETS] == [round(100 / 6, 1)] * 5
    assert table["lost_pct"] == round(500 / 6, 1)
    # Under a threshold above its confidence, the right answer counts as abstained too.
    assert losses(settled, 0.95)["pct"]["abstained"]["none"] == round(200 / 6, 1)

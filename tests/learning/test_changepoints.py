"""Bayesian online change-point detection over outcome streams, and the exact P(X > Y) of two Beta posteriors."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.learning.stats import ChangePoints, Evidence, changepoint_weights, posteriors, prob_greater

NOW = datetime(2026, 11, 24, 2, 0, tzinfo=UTC)


def test_a_streak_that_contradicts_the_record_moves_the_segment_start() -> None:
    # 20 successes of "a", then 6 failures: the 20 belong to an old segment, the failures to the current one.
    actions = ["a"] * 26
    succ = [1.0] * 20 + [0.0] * 6
    w = changepoint_weights(actions, succ, [1.0] * 26, list(range(26)), rule=ChangePoints(hazard=0.01))
    assert max(w[:19]) < 0.05
    assert min(w[20:]) > 0.9
    assert w == sorted(w)  # newer evidence is at least as likely to be current


def test_a_steady_stream_keeps_most_of_its_weight() -> None:
    rng = random.Random(3)
    succ = [float(rng.random() < 0.7) for _ in range(200)]
    w = changepoint_weights(["a"] * 200, succ, [1.0] * 200, list(range(200)), rule=ChangePoints(hazard=0.01))
    # A change every 100 outcomes is the prior (0.99 ** 200 = 13% for none in 200); a steady stream raises that.
    assert min(w) > 0.99**200
    assert min(w[100:]) > 0.6
    assert w[-1] == pytest.approx(1.0)


def test_scope_all_resets_the_other_actions_too() -> None:
    actions = ["a"] * 20 + ["b"] * 10 + ["a"] * 6
    succ = [1.0] * 20 + [0.5] * 10 + [0.0] * 6
    times = [*range(20), *range(100, 110), *range(200, 206)]
    together = changepoint_weights(actions, succ, [1.0] * 36, times, rule=ChangePoints(scope="all"))
    alone = changepoint_weights(actions, succ, [1.0] * 36, times, rule=ChangePoints(scope="action"))
    # The failures of "a" come after b's outcomes: with one situation-wide segment, b's record is older than the
    # change only if the change came after it; either way a's old record loses its weight.
    assert max(together[:19]) < 0.1
    assert max(alone[:19]) < 0.1
    # Per action, b has no change of its own and keeps its record.
    assert min(alone[20:30]) > 0.9


def test_barely_relevant_outcomes_hardly_move_anything() -> None:
    actions = ["a"] * 26
    succ = [1.0] * 20 + [0.0] * 6
    weights = [1.0] * 20 + [0.02] * 6
    w = changepoint_weights(actions, succ, weights, list(range(26)), rule=ChangePoints(hazard=0.01))
    assert min(w[:20]) > 0.8


def test_posteriors_with_change_points_follow_the_new_regime() -> None:
    ev = [Evidence(action="a", success=1.0, relevance=1.0, at=NOW - timedelta(minutes=100 - i)) for i in range(20)]
    ev += [Evidence(action="a", success=0.0, relevance=1.0, at=NOW - timedelta(minutes=5 - i)) for i in range(5)]
    ev += [Evidence(action="b", success=1.0, relevance=1.0, at=NOW - timedelta(seconds=30 - i)) for i in range(3)]
    with_cp = posteriors(ev, now=NOW, change=ChangePoints())
    without = posteriors(ev, now=NOW)
    assert with_cp["a"].mean < 0.3 < without["a"].mean
    assert with_cp["b"].mean > with_cp["a"].mean


def test_change_points_reject_bad_settings() -> None:
    with pytest.raises(ValueError, match="hazard"):
        ChangePoints(hazard=0.0)
    with pytest.raises(ValueError, match="scope"):
        ChangePoints(scope="nowhere")
    assert changepoint_weights([], [], [], [], rule=ChangePoints()) == []


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 1), st.floats(0, 1)), max_size=40))
@settings(max_examples=100, deadline=None)
def test_change_point_weights_are_probabilities(items: list[tuple[str, float, float]]) -> None:
    actions = [a for a, _, _ in items]
    w = changepoint_weights(
        actions, [s for _, s, _ in items], [r for _, _, r in items], list(range(len(items))), rule=ChangePoints()
    )
    assert len(w) == len(items)
    assert all(0.0 <= x <= 1.0 + 1e-9 for x in w)


def test_prob_greater_matches_sampling() -> None:
    rng = np.random.default_rng(0)
    for a1, b1, a2, b2 in [(9, 1, 2, 4), (3, 3, 2, 2), (1.5, 1, 1, 1.5), (30, 10, 25, 15)]:
        mc = float(np.mean(rng.beta(a1, b1, 200_000) > rng.beta(a2, b2, 200_000)))
        assert prob_greater(a1, b1, a2, b2) == pytest.approx(mc, abs=0.01)
    assert prob_greater(2, 2, 2, 2) == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(ValueError, match="positive"):
        prob_greater(0, 1, 1, 1)

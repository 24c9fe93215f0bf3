"""Issue 25, item 11, eighth round: the change test on each action's own clock (``ChangeRule(clock="action")``): a
change detected for a stale favourite stays detected while it is no longer chosen (no flicker), and an action's test
does not depend on what the other actions did since."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from drift_helpers import follow_a_change
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.embeddings.base import Embedder
from engramdb.learning import recommend as rc
from engramdb.learning.stats import ChangeRule, Evidence, change_test_weights, discount_weights, posteriors

NOW = datetime(2030, 1, 1, tzinfo=UTC)
ACTION = ChangeRule(clock="action")
ROWS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.05, 1.0)),
    max_size=60,
)


def _evidence(rows: list[tuple[str, float, float]]) -> list[Evidence]:
    return [
        Evidence(action=a, success=x, relevance=w, at=NOW + timedelta(seconds=i)) for i, (a, x, w) in enumerate(rows)
    ]


def _post(
    rows: list[tuple[str, float, float]], rule: ChangeRule, horizon: float = 25.0
) -> dict[str, tuple[float, float]]:
    post = posteriors(_evidence(rows), now=NOW + timedelta(seconds=len(rows)), horizon=horizon, change=rule)
    return {a: (p.alpha, p.beta) for a, p in post.items()}


@settings(max_examples=150, deadline=None)
@given(
    outcomes=st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.05, 1.0)), max_size=60),
    horizon=st.floats(1.5, 60.0),
)
def test_one_action_ages_alike_on_either_clock(outcomes: list[tuple[float, float]], horizon: float) -> None:
    # With one action its own outcomes are the neighbourhood's: the two clocks are the same rule.
    rows = [("a", x, w) for x, w in outcomes]
    mine, shipped = _post(rows, ACTION, horizon), _post(rows, ChangeRule(), horizon)
    assert mine.keys() == shipped.keys()
    for a, (alpha, beta) in mine.items():
        assert alpha == pytest.approx(shipped[a][0])
        assert beta == pytest.approx(shipped[a][1])


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, others=ROWS)
def test_an_action_s_test_weights_ignore_the_other_actions(
    rows: list[tuple[str, float, float]], others: list[tuple[str, float, float]]
) -> None:
    # Interleaving any other actions' outcomes changes no weight of "a" in the test on its own clock, and each weight
    # is a discount in (0, 1].
    mine = [r for r in rows if r[0] == "a"]
    mixed = [
        r for pair in zip(rows, [(o[0].replace("a", "b"), o[1], o[2]) for o in others], strict=False) for r in pair
    ]
    mixed += rows[len(others) :]
    at = NOW + timedelta(seconds=len(mixed))
    ev = _evidence(mixed)
    weights = change_test_weights(ev, now=at, half_life_days=None, horizon=25.0, clock="action")
    assert all(0.0 < w <= 1.0 for w in weights)
    alone = discount_weights(
        [e.at for e in ev if e.action == "a"],
        [e.relevance for e in ev if e.action == "a"],
        now=at,
        half_life_days=None,
        horizon=25.0,
    )
    assert [w for w, e in zip(weights, ev, strict=True) if e.action == "a"] == pytest.approx(alone)
    assert len(alone) == len(mine)


@settings(max_examples=60, deadline=None)
@given(later=st.integers(0, 150))
def test_a_detected_change_stays_detected_while_the_favourite_is_not_chosen(later: int) -> None:
    # "a" was right 20 times, then failed 4 times: a change. Whatever number of outcomes of the new favourite follow
    # while "a" is no longer chosen, "a"'s old record stays cut on its own clock.
    rows = [("a", 1.0, 1.0)] * 20 + [("a", 0.0, 1.0)] * 4 + [("b", 1.0, 1.0)] * later
    alpha, beta = _post(rows, ACTION)["a"]
    assert alpha / (alpha + beta) < 0.5


def test_on_the_neighbourhood_clock_the_same_record_comes_back() -> None:
    # The flicker the option removes (so the test above can fail): the shipped clock lets the old record count again.
    rows = [("a", 1.0, 1.0)] * 20 + [("a", 0.0, 1.0)] * 4 + [("b", 1.0, 1.0)] * 60
    alpha, beta = _post(rows, ChangeRule())["a"]
    assert alpha / (alpha + beta) > 0.6
    alpha, beta = _post(rows, ACTION)["a"]
    assert alpha / (alpha + beta) < 0.5


def test_a_bad_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="clock"):
        ChangeRule(clock="situation")


def test_the_service_learns_a_change_on_the_action_s_clock(tmp_path: Path, embedder: Embedder) -> None:
    # Through the public API and a real store: the option is one RecommendConfig away, and suggest and choose both
    # follow the world after a change.
    cfg = rc.RecommendConfig(change=ACTION)
    after, picks = follow_a_change(tmp_path / "s", embedder, cfg)
    assert after.recommended == "canary"
    assert picks.count("canary") >= 15

"""Issue 25, item 11, fourth round: the options measured on bench/learning_drift.py's streams (bench/RESULTS.md),
checked here for what they promise whatever the streams: optimism after a detected change
(`RecommendConfig.optimism`: an upper-confidence floor for options thin since the change, in the changed
neighbourhood only, for a bounded number of outcomes) and restoring an earlier regime's record when the world
goes back to it (`ChangeRule(restore=True)`), and a faded cut (`ChangeRule(fade=...)`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.learning.change import ChangeRule, change_discounts, earlier_regime
from engramdb.learning.exploring import fresh_attempts, optimistic_floors
from engramdb.learning.recommend import Neighbour, RecommendConfig, choose, option_posteriors
from engramdb.learning.stats import Evidence, Posterior, posteriors, thompson_choice
from engramdb.models import DecisionRecord

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _record(i: int, context: str, action: str, success: float) -> DecisionRecord:
    return DecisionRecord(
        id=str(i), agent="t", context=context, action=action, success=success, at=NOW - timedelta(seconds=1000 - i)
    )


@settings(max_examples=300, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.floats(0.0, 1e4), st.floats(0.0, 1.0)), max_size=8),
    keep=st.floats(0.0, 0.99),
)
def test_fresh_attempts_lie_between_none_and_the_cut_record(pairs: list[tuple[float, float]], keep: float) -> None:
    # kept >= cut always (the rule only removes); the share left is what it cut.
    kept = [k for k, _ in pairs]
    cut = [k * (keep + (1 - keep) * share) for k, share in pairs]
    fresh = fresh_attempts(kept, cut, keep=keep)
    assert len(fresh) == len(kept)
    for f, c, k, (_, share) in zip(fresh, cut, kept, pairs, strict=True):
        assert -1e-9 <= f <= c + 1e-9
        # What the rule did not touch is exactly the fresh part.
        assert f == pytest.approx(k * share, rel=1e-6, abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 0.5), st.floats(0.0, 50.0)), max_size=8),
    bonus=st.floats(0.0, 10.0),
    thin=st.floats(0.01, 20.0),
)
def test_floors_are_optimistic_for_thin_options_only_and_grow_with_the_bonus(
    rows: list[tuple[float, float, float]], bonus: float, thin: float
) -> None:
    means, sds, fresh = ([r[k] for r in rows] for k in range(3))
    floors = optimistic_floors(means, sds, fresh, bonus=bonus, thin=thin)
    more = optimistic_floors(means, sds, fresh, bonus=bonus + 1.0, thin=thin)
    for m, f, low, high in zip(means, fresh, floors, more, strict=True):
        if f >= thin:
            assert low == -math.inf
        else:
            assert min(m, 1.0) <= low <= 1.0
            assert low <= high


@settings(max_examples=100, deadline=None)
@given(
    params=st.lists(st.tuples(st.floats(0.5, 50.0), st.floats(0.5, 50.0)), min_size=1, max_size=5),
    width=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
    lifted=st.integers(0, 4),
)
def test_floors_of_minus_infinity_change_nothing_and_a_top_floor_wins(
    params: list[tuple[float, float]], width: float, seed: int, lifted: int
) -> None:
    post = [Posterior(action=str(i), alpha=a, beta=b, successes=0.0, attempts=0.0) for i, (a, b) in enumerate(params)]
    plain = thompson_choice(post, rng=np.random.default_rng(seed), exploration=width)
    none = thompson_choice(post, rng=np.random.default_rng(seed), exploration=width, floors=[-math.inf] * len(post))
    assert plain == none
    k = lifted % len(post)
    floors = [-math.inf] * len(post)
    floors[k] = 2.0  # above any draw
    assert thompson_choice(post, rng=np.random.default_rng(seed), exploration=width, floors=floors) == k


def _changed_world() -> list[Neighbour]:
    """'a' succeeded 20 times, then failed 4 times (the world changed); 'b' (the new best) failed its one try since,
    'c' (mediocre) succeeded 2 of 4 since."""
    rows = [_record(i, "deploy fails", "a", 1.0) for i in range(20)]
    rows += [_record(20 + i, "deploy fails", "a", 0.0) for i in range(4)]
    rows += [_record(30, "deploy fails", "b", 0.0)]
    rows += [_record(31 + i, "deploy fails", "c", float(i % 2 == 0)) for i in range(4)]
    return [Neighbour(r, 1.0) for r in rows]


def test_after_a_change_the_new_best_that_failed_once_is_tried_again_sooner() -> None:
    nbs = _changed_world()
    cfg = RecommendConfig()
    cut = option_posteriors("deploy fails", nbs, now=NOW, config=cfg, options=["a", "b", "c"])
    kept = option_posteriors("deploy fails", nbs, now=NOW, config=RecommendConfig(change=None), options=["a", "b", "c"])
    assert sum(p.attempts for p in cut) < sum(p.attempts for p in kept)  # the change rule fired
    counts = {}
    for name, c in (("plain", cfg), ("optimism", RecommendConfig(optimism=2.0))):
        picks = [
            choose("deploy fails", ["a", "b", "c"], nbs, now=NOW, config=c, seed=s, exploration=0.25)
            for s in range(200)
        ]
        counts[name] = picks.count("b")
    assert counts["optimism"] > counts["plain"] + 40


def test_without_a_detected_change_or_past_the_budget_optimism_changes_nothing() -> None:
    steady = [Neighbour(_record(i, "deploy fails", a, float(i % 3 != 0)), 1.0) for i in range(40) for a in "ab"]
    for nbs, cfg in (
        (steady, RecommendConfig(optimism=3.0)),
        (_changed_world(), RecommendConfig(optimism=3.0, optimism_budget=0.0)),
        (_changed_world(), RecommendConfig(optimism=3.0, change=ChangeRule(keep=1.0))),
    ):
        plain = RecommendConfig(change=cfg.change)
        for s in range(40):
            picks = {
                choose("deploy fails", ["a", "b", "c"], nbs, now=NOW, config=c, seed=s, exploration=0.25)
                for c in (plain, cfg)
            }
            assert len(picks) == 1


def test_bad_optimism_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="optimism"):
        RecommendConfig(optimism=-1.0)
    with pytest.raises(ValueError, match="optimism_thin"):
        RecommendConfig(optimism_thin=0.0)
    with pytest.raises(ValueError, match="keep"):
        fresh_attempts([1.0], [1.0], keep=1.0)
    with pytest.raises(ValueError, match="bonus"):
        optimistic_floors([0.5], [0.1], [0.0], bonus=float("nan"), thin=1.0)
    post = [Posterior(action="a", alpha=1.0, beta=1.0, successes=0.0, attempts=0.0)]
    with pytest.raises(ValueError, match="floors"):
        thompson_choice(post, rng=np.random.default_rng(0), floors=[0.5, 0.5])


def _alternating(returned: int) -> list[Evidence]:
    """World A ('x' right 9 in 10, 'y' 1 in 2) for 60 outcomes, world B ('x' 1 in 5, 'y' 9 in 10) for 60, then A
    again for ``returned`` outcomes of 'y' (failing every other time)."""
    rows: list[tuple[str, float]] = []
    for i in range(60):
        rows.append(("x", float(i % 10 != 0)) if i % 2 else ("y", float(i % 4 == 0)))
    for i in range(60):
        rows.append(("x", float(i % 5 == 0)) if i % 4 == 0 else ("y", float(i % 10 != 0)))
    rows += [("y", float(i % 2)) for i in range(returned)]
    return [
        Evidence(action=a, success=x, relevance=1.0, at=NOW - timedelta(seconds=len(rows) - i))
        for i, (a, x) in enumerate(rows)
    ]


def test_when_the_old_world_returns_its_record_counts_again() -> None:
    ev = _alternating(6)
    cut_only = posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule())
    restored = posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule(restore=True))
    # Cut alone, 'x' keeps a tenth of a record that says it fails; restored, world A's record says it succeeds.
    assert restored["x"].attempts > cut_only["x"].attempts + 3.0
    assert restored["x"].mean > 0.75 > cut_only["x"].mean
    assert restored["x"].mean > restored["y"].mean


def test_restoring_needs_a_change_and_a_match() -> None:
    steady = [
        Evidence(action="xy"[i % 2], success=float(i % 3 != 0), relevance=1.0, at=NOW - timedelta(seconds=200 - i))
        for i in range(200)
    ]
    for ev in (steady, _alternating(0)):
        assert posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule(restore=True)) == posteriors(
            ev, now=NOW, horizon=25.0, change=ChangeRule()
        )
    # The newest outcomes ('y' failing always) match neither world: nothing is restored.
    ev = _alternating(0) + [
        Evidence(action="y", success=0.0, relevance=1.0, at=NOW + timedelta(seconds=i)) for i in range(8)
    ]
    assert posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule(restore=True)) == posteriors(
        ev, now=NOW, horizon=25.0, change=ChangeRule()
    )


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)), min_size=1, max_size=60
    ),
    cut_at=st.integers(0, 60),
)
def test_an_earlier_regime_is_older_than_the_cut_and_apart_from_the_stretch_between(
    rows: list[tuple[str, float, float]], cut_at: int
) -> None:
    times = [float(i) for i in range(len(rows))]
    found = earlier_regime(
        [a for a, _, _ in rows],
        [x for _, x, _ in rows],
        [r for _, _, r in rows],
        times,
        cut=float(cut_at),
        rule=ChangeRule(restore=True),
    )
    if found is not None:
        restored, between = found
        assert any(restored)
        for t, r, b in zip(times, restored, between, strict=True):
            assert not (r and b)
            assert (r or b) == (t < cut_at)
        # The regime is one stretch of time, older than the stretch in between it and the cut.
        kept = [t for t, r in zip(times, restored, strict=True) if r]
        assert all(restored[i] for i in range(len(rows)) if min(kept) <= times[i] <= max(kept))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([0.0, 1.0]), st.floats(0.01, 1.0)), max_size=80),
)
def test_restoring_keeps_every_posterior_a_proper_record(rows: list[tuple[str, float, float]]) -> None:
    ev = [
        Evidence(action=a, success=x, relevance=r, at=NOW - timedelta(seconds=len(rows) - i))
        for i, (a, x, r) in enumerate(rows)
    ]
    for p in posteriors(ev, now=NOW, horizon=25.0, actions="abc", change=ChangeRule(restore=True)).values():
        assert 0.0 <= p.successes <= p.attempts + 1e-9
        # No outcome counts for more than its relevance, restored or not.
        assert p.attempts <= sum(r for a, _, r in rows if a == p.action) + 1e-9


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)), max_size=60),
    fade=st.floats(1.0, 50.0),
)
def test_a_faded_cut_lies_between_the_cut_and_no_cut_and_fades_less_with_a_longer_fade(
    rows: list[tuple[str, float, float]], fade: float
) -> None:
    args = (
        [a for a, _, _ in rows],
        [x for _, x, _ in rows],
        [w for _, _, w in rows],
        [float(i) for i in range(len(rows))],
    )
    cut = change_discounts(*args, rule=ChangeRule())
    faded = change_discounts(*args, rule=ChangeRule(fade=fade))
    longer = change_discounts(*args, rule=ChangeRule(fade=fade + 5.0))
    for c, f, g in zip(cut, faded, longer, strict=True):
        assert c - 1e-12 <= f <= 1.0
        assert f <= g + 1e-12
        # What the test left alone stays whole.
        assert f == 1.0 or c < 1.0
    assert change_discounts(*args, rule=ChangeRule(fade=1.0)) == cut


def test_a_faded_cut_forgets_as_outcomes_since_the_change_accumulate() -> None:
    def shares(failures: int) -> float:
        rows = ["a"] * (30 + failures)
        successes = [1.0] * 30 + [0.0] * failures
        out = change_discounts(
            rows, successes, [1.0] * len(rows), [float(i) for i in range(len(rows))], rule=ChangeRule(fade=4.0)
        )
        return out[0]

    assert shares(4) > shares(8) > shares(16) >= ChangeRule().keep

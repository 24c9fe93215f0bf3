"""Properties of the outcome statistics (pure functions)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engramdb.errors import ValidationError
from engramdb.learning.recommend import RecommendConfig
from engramdb.learning.stats import (
    Evidence,
    Posterior,
    Prior,
    credible_interval,
    discount_weights,
    exact_intervals,
    posteriors,
    prob_best,
    similarity_weight,
    success_weight,
    thompson_choice,
    trend_test,
)
from engramdb.models.learning import outcome_label

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

counts = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)
prior_params = st.floats(min_value=0.5, max_value=5.0)
weights01 = st.floats(min_value=0.0, max_value=1.0)


def post(action: str, successes: float, failures: float, prior: Prior | None = None) -> Posterior:
    prior = prior or Prior()
    return Posterior(
        action=action,
        alpha=prior.alpha + successes,
        beta=prior.beta + failures,
        successes=successes,
        attempts=successes + failures,
    )


def ev(action: str, success: float, *, relevance: float = 1.0, age_days: float = 0.0) -> Evidence:
    return Evidence(action=action, success=success, relevance=relevance, at=NOW - timedelta(days=age_days))


# -- outcomes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "weight"),
    [
        ("success", 1.0),
        ("failure", 0.0),
        ("partial", 0.5),
        (" Success ", 1.0),
        ("FAILURE", 0.0),
        (True, 1.0),
        (False, 0.0),
        (1.0, 1.0),
        (-1.0, 0.0),
        (0, 0.5),
        (0.5, 0.75),
    ],
)
def test_outcomes_map_to_success_weights(outcome: object, weight: float) -> None:
    assert success_weight(outcome) == pytest.approx(weight)


@pytest.mark.parametrize("bad", ["yes", "", 1.5, -1.01, math.nan, math.inf, None, [1], b"success"])
def test_bad_outcomes_are_rejected(bad: object) -> None:
    with pytest.raises(ValidationError):
        success_weight(bad)


@given(st.floats(min_value=-1.0, max_value=1.0))
def test_rewards_map_monotonically_into_unit_interval(reward: float) -> None:
    w = success_weight(reward)
    assert 0.0 <= w <= 1.0
    assert w <= success_weight(min(1.0, reward + 0.1))


def test_outcome_labels() -> None:
    assert [outcome_label(w) for w in (1.0, 0.0, 0.3)] == ["success", "failure", "partial"]


@given(st.floats(min_value=-1.0, max_value=1.0), st.floats(min_value=0.0, max_value=0.95))
def test_similarity_weight_is_a_clipped_linear_ramp(cos: float, floor: float) -> None:
    w = similarity_weight(cos, floor=floor)
    assert 0.0 <= w <= 1.0
    if cos <= floor:
        assert w == 0.0
    assert similarity_weight(1.0, floor=floor) == 1.0
    assert similarity_weight(min(1.0, cos + 0.01), floor=floor) >= w


@given(
    st.floats(min_value=-1.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=0.95),
    st.floats(min_value=0.05, max_value=1.0),
)
def test_an_exponent_under_one_lifts_the_ramp_but_keeps_its_ends(cos: float, floor: float, exponent: float) -> None:
    linear = similarity_weight(cos, floor=floor)
    w = similarity_weight(cos, floor=floor, exponent=exponent)
    assert 0.0 <= w <= 1.0
    assert w >= linear - 1e-12  # a weight in [0, 1] raised to a power <= 1 only grows
    assert (w == 0.0) == (linear == 0.0)  # the floor still cuts: nothing at or below it counts
    assert similarity_weight(1.0, floor=floor, exponent=exponent) == 1.0
    assert similarity_weight(min(1.0, cos + 0.01), floor=floor, exponent=exponent) >= w


@pytest.mark.parametrize("exponent", [0.0, -1.0, float("nan"), float("inf")])
def test_a_nonpositive_or_unfinite_exponent_is_refused(exponent: float) -> None:
    with pytest.raises(ValueError, match="exponent"):
        similarity_weight(0.5, floor=0.3, exponent=exponent)
    with pytest.raises(ValueError, match="similarity_exponent"):
        RecommendConfig(similarity_exponent=exponent)


# -- intervals -----------------------------------------------------------------------------------------------


@given(counts, counts, prior_params, prior_params)
def test_interval_contains_the_mean_and_lies_in_unit_interval(s: float, f: float, pa: float, pb: float) -> None:
    p = post("a", s, f, Prior(alpha=pa, beta=pb))
    low, high = credible_interval(p.alpha, p.beta)
    assert 0.0 <= low <= p.mean <= high <= 1.0


@given(counts, counts, st.floats(min_value=1.5, max_value=20.0))
def test_intervals_shrink_with_more_evidence_of_the_same_kind(s: float, f: float, factor: float) -> None:
    assume(s + f >= 1.0)
    low1, high1 = credible_interval(1 + s, 1 + f)
    low2, high2 = credible_interval(1 + s * factor, 1 + f * factor)
    assert high2 - low2 < high1 - low1 + 1e-12


@given(counts, counts, st.floats(min_value=0.01, max_value=50.0))
def test_more_successes_never_lower_the_estimate(s: float, f: float, extra: float) -> None:
    before = post("a", s, f)
    after = post("a", s + extra, f)
    assert after.mean >= before.mean
    lo1, hi1 = credible_interval(before.alpha, before.beta)
    lo2, hi2 = credible_interval(after.alpha, after.beta)
    assert lo2 >= lo1 - 1e-12
    assert hi2 >= hi1 - 1e-12


@given(st.lists(st.tuples(weights01, weights01), max_size=30), weights01)
def test_adding_a_success_never_lowers_the_posterior_mean(items: list[tuple[float, float]], rel: float) -> None:
    base = [ev("a", s, relevance=r, age_days=i) for i, (s, r) in enumerate(items)]
    before = posteriors(base, now=NOW, half_life_days=30.0, horizon=20.0, actions=["a"])["a"]
    after = posteriors([*base, ev("a", 1.0, relevance=rel)], now=NOW, half_life_days=30.0, horizon=20.0, actions=["a"])[
        "a"
    ]
    assert after.mean >= before.mean - 1e-12


def test_posterior_counts_are_relevance_weighted() -> None:
    p = posteriors([ev("a", 1.0, relevance=0.5), ev("a", 0.0, relevance=0.25), ev("b", 0.5)], now=NOW)
    assert p["a"].successes == pytest.approx(0.5)
    assert p["a"].attempts == pytest.approx(0.75)
    assert p["a"].alpha == pytest.approx(1.5)
    assert p["a"].beta == pytest.approx(1.25)
    assert p["b"].successes == pytest.approx(0.5)
    assert list(p) == ["a", "b"]


def test_irrelevant_evidence_is_ignored_and_named_actions_get_the_prior() -> None:
    p = posteriors([ev("a", 1.0, relevance=0.0)], now=NOW, actions=["b"], prior=Prior(alpha=2.0, beta=3.0))
    assert set(p) == {"b"}
    assert (p["b"].alpha, p["b"].beta, p["b"].attempts) == (2.0, 3.0, 0.0)


@given(st.integers(min_value=1, max_value=500), st.floats(min_value=0.0, max_value=1.0))
def test_exact_intervals_contain_the_observed_share(n: int, share: float) -> None:
    x = round(share * n, 3)
    low, high = exact_intervals([x], [n])
    assert 0.0 <= low[0] <= x / n <= high[0] <= 1.0


def test_exact_intervals_reach_the_bounds_and_match_known_values() -> None:
    low, high = exact_intervals([0, 10, 5], [10, 10, 10])
    assert (low[0], high[1]) == (0.0, 1.0)
    assert low[2] == pytest.approx(0.187, abs=1e-3)  # Clopper-Pearson for 5 of 10
    assert high[2] == pytest.approx(0.813, abs=1e-3)
    with pytest.raises(ValueError, match="successes"):
        exact_intervals([3], [2])


# -- recency -------------------------------------------------------------------------------------------------


@given(
    st.lists(st.floats(min_value=0.0, max_value=1000.0), min_size=2, max_size=20),
    st.lists(weights01, min_size=20, max_size=20),
    st.floats(min_value=0.5, max_value=365.0) | st.none(),
    st.floats(min_value=1.0, max_value=200.0) | st.none(),
)
def test_recent_evidence_weighs_at_least_as_much(
    ages: list[float], rel: list[float], half_life: float | None, horizon: float | None
) -> None:
    times = [NOW - timedelta(days=a) for a in ages]
    w = discount_weights(times, rel[: len(ages)], now=NOW, half_life_days=half_life, horizon=horizon)
    assert all(0.0 <= x <= 1.0 for x in w)
    for i in range(len(ages)):
        for j in range(len(ages)):
            if ages[i] < ages[j]:
                assert w[i] >= w[j] - 1e-12
            if ages[i] == ages[j]:
                assert w[i] == pytest.approx(w[j])


def test_age_discount_halves_per_half_life() -> None:
    w = discount_weights([NOW, NOW - timedelta(days=10)], [1.0, 1.0], now=NOW, half_life_days=10.0, horizon=None)
    assert w == pytest.approx([1.0, 0.5])


def test_count_discount_depends_on_newer_relevant_evidence() -> None:
    times = [NOW - timedelta(minutes=m) for m in (0, 1, 2)]
    w = discount_weights(times, [1.0, 0.0, 1.0], now=NOW, half_life_days=None, horizon=4.0)
    # newest: nothing newer; middle: 1.0 newer; oldest: 1.0 + 0.0 newer.
    assert w == pytest.approx([1.0, 0.75, 0.75])


@given(st.integers(min_value=1, max_value=30), st.floats(min_value=1.0, max_value=100.0))
def test_recent_outcomes_dominate_after_a_change(n: int, horizon: float) -> None:
    """Old successes then recent failures must look worse than old failures then recent successes."""
    old_good = [ev("a", 1.0, age_days=100 + i) for i in range(n)] + [ev("a", 0.0, age_days=i) for i in range(n)]
    old_bad = [ev("a", 0.0, age_days=100 + i) for i in range(n)] + [ev("a", 1.0, age_days=i) for i in range(n)]
    p1 = posteriors(old_good, now=NOW, half_life_days=60.0, horizon=horizon)["a"]
    p2 = posteriors(old_bad, now=NOW, half_life_days=60.0, horizon=horizon)["a"]
    assert p1.mean < p2.mean


def test_evidence_from_the_future_counts_as_new() -> None:
    w = discount_weights([NOW + timedelta(days=5)], [1.0], now=NOW, half_life_days=1.0, horizon=None)
    assert w == [1.0]


# -- Thompson sampling and confidence -------------------------------------------------------------------------

option_lists = st.lists(st.tuples(counts, counts), min_size=1, max_size=6).map(
    lambda xs: [post(f"o{i}", s, f) for i, (s, f) in enumerate(xs)]
)


@given(option_lists, st.integers(min_value=0, max_value=2**32 - 1))
def test_thompson_without_exploration_is_greedy(options: list[Posterior], seed: int) -> None:
    i = thompson_choice(options, rng=np.random.default_rng(seed), exploration=0.0)
    assert options[i].mean == max(o.mean for o in options)


@given(option_lists, st.integers(min_value=0, max_value=2**32 - 1), weights01)
def test_thompson_is_deterministic_for_a_seed(options: list[Posterior], seed: int, exploration: float) -> None:
    a = thompson_choice(options, rng=np.random.default_rng(seed), exploration=exploration)
    b = thompson_choice(options, rng=np.random.default_rng(seed), exploration=exploration)
    assert a == b


def test_thompson_explores_in_proportion_to_uncertainty() -> None:
    known = post("known", 60, 40)  # about 0.6, well established
    unknown = post("unknown", 0, 0)  # the prior
    rng = np.random.default_rng(7)
    picks = [thompson_choice([known, unknown], rng=rng) for _ in range(2000)]
    share = picks.count(1) / len(picks)
    assert 0.25 < share < 0.55  # P(Uniform > ~0.6) is about 0.4
    rng = np.random.default_rng(7)
    timid = [thompson_choice([known, unknown], rng=rng, exploration=0.2) for _ in range(2000)]
    assert timid.count(1) / len(timid) < share / 2


def test_thompson_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="no options"):
        thompson_choice([], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="exploration"):
        thompson_choice([post("a", 1, 1)], rng=np.random.default_rng(0), exploration=1.5)


@given(option_lists, st.integers(min_value=0, max_value=1000))
def test_prob_best_is_a_distribution(options: list[Posterior], seed: int) -> None:
    p = prob_best(options, rng=np.random.default_rng(seed), draws=500)
    assert p.shape == (len(options),)
    assert p.sum() == pytest.approx(1.0)
    assert np.all(p >= 0)


def test_prob_best_separates_clear_winners() -> None:
    p = prob_best([post("good", 40, 5), post("bad", 5, 40)], rng=np.random.default_rng(1))
    assert p[0] > 0.99
    even = prob_best([post("a", 10, 10), post("b", 10, 10)], rng=np.random.default_rng(1))
    assert 0.4 < even[0] < 0.6


# -- trend test ---------------------------------------------------------------------------------------------


def test_trend_needs_enough_data() -> None:
    t = trend_test([1.0, 0.0, 1.0])
    assert t.direction == "insufficient data"
    assert t.p_value == 1.0


def test_clear_trends_are_detected() -> None:
    up = trend_test([0.0] * 15 + [1.0] * 15)
    assert up.direction == "improving"
    assert up.z > 0
    assert up.p_value < 0.001
    assert (up.early_rate, up.late_rate) == (0.0, 1.0)
    down = trend_test([1.0] * 15 + [0.0] * 15)
    assert down.direction == "declining"
    assert down.z == pytest.approx(-up.z)


def test_no_trend_in_noise_at_about_the_stated_rate() -> None:
    rng = np.random.default_rng(3)
    flagged = sum(trend_test(list(rng.random(60) < 0.6)).direction != "stable" for _ in range(2000))
    assert flagged / 2000 < 0.07  # alpha = 0.05, with slack for sampling and the normal approximation


def test_constant_outcomes_are_stable() -> None:
    assert trend_test([1.0] * 20).direction == "stable"


def test_times_order_the_series() -> None:
    y = [1.0] * 15 + [0.0] * 15
    times = list(range(30, 0, -1))  # the successes are the *latest*
    assert trend_test(y, times).direction == "improving"


@given(st.lists(weights01, min_size=10, max_size=80))
def test_trend_statistic_is_antisymmetric_in_time(y: list[float]) -> None:
    fwd = trend_test(y)
    back = trend_test(y[::-1])
    assert fwd.z == pytest.approx(-back.z, abs=1e-9)
    assert 0.0 <= fwd.p_value <= 1.0
    assert fwd.p_value == pytest.approx(back.p_value)

"""Issue 25, item 11, ninth round: the ceilings' oracles (`bench/_drift_oracle.py`). Each keeps only evidence it is
allowed to know about (outcomes since the last change, or drawn at today's rate of their action) and states the
posterior probability that its top option is the best; the figures in bench/RESULTS.md rest on these properties."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _drift_oracle import DRAWS, HORIZON, RATE_TOLERANCE, answer, evidence, thompson

ACTIONS = ["a", "b", "c"]
RATES = st.sampled_from([0.2, 0.3, 0.5, 0.53, 0.8, 0.85])
HISTORY = st.lists(
    st.tuples(st.sampled_from(ACTIONS), st.booleans(), st.fixed_dictionaries(dict.fromkeys(ACTIONS, RATES))),
    max_size=60,
)
COUNTS = st.fixed_dictionaries({a: st.tuples(st.integers(0, 40), st.integers(0, 40)) for a in ACTIONS})


def _steps(rows: list[tuple[str, bool, dict[str, float]]]) -> list[tuple[int, str, bool, dict[str, float]]]:
    return [(i, a, ok, probs) for i, (a, ok, probs) in enumerate(rows)]


@settings(max_examples=200, deadline=None)
@given(rows=HISTORY, since=st.integers(0, 70))
def test_the_since_oracle_counts_exactly_the_outcomes_since_the_change(
    rows: list[tuple[str, bool, dict[str, float]]], since: int
) -> None:
    history = _steps(rows)
    counts = evidence(ACTIONS, history, kind="since", now_probs=dict.fromkeys(ACTIONS, 0.5), since=since)
    for a in ACTIONS:
        kept = [ok for i, act, ok, _ in history if act == a and i >= since]
        assert counts[a] == (sum(kept), len(kept) - sum(kept))


@settings(max_examples=200, deadline=None)
@given(rows=HISTORY, now=st.fixed_dictionaries(dict.fromkeys(ACTIONS, RATES)))
def test_the_rate_oracle_keeps_an_outcome_only_if_its_action_was_at_todays_rate(
    rows: list[tuple[str, bool, dict[str, float]]], now: dict[str, float]
) -> None:
    history = _steps(rows)
    counts = evidence(ACTIONS, history, kind="rate", now_probs=now, since=10**6)
    for a in ACTIONS:
        kept = [ok for _, act, ok, probs in history if act == a and abs(probs[a] - now[a]) <= RATE_TOLERANCE]
        assert counts[a] == (sum(kept), len(kept) - sum(kept))
    # What happened at other rates of *other* actions does not matter: a world that changed elsewhere keeps it.
    moved = [(i, act, ok, {**probs, **{b: 0.99 for b in ACTIONS if b != act}}) for i, act, ok, probs in history]
    assert evidence(ACTIONS, moved, kind="rate", now_probs=now, since=0) == counts


@settings(max_examples=200, deadline=None)
@given(rows=HISTORY, since=st.integers(0, 70))
def test_the_forgetting_learners_keep_less_than_the_oracle_and_at_most_a_horizon(
    rows: list[tuple[str, bool, dict[str, float]]], since: int
) -> None:
    history = _steps(rows)
    now = dict.fromkeys(ACTIONS, 0.5)
    full = evidence(ACTIONS, history, kind="since", now_probs=now, since=since)
    fading = evidence(ACTIONS, history, kind="since_h25", now_probs=now, since=since)
    blind = evidence(ACTIONS, history, kind="all_h25", now_probs=now, since=since)
    for a in ACTIONS:
        for j in (0, 1):
            assert 0.0 <= fading[a][j] <= full[a][j] + 1e-12
            assert fading[a][j] <= blind[a][j] + 1e-12
    # Each outcome counts (1 - 1/horizon) per later one: all of them together at most a horizon's worth.
    assert sum(s + f for s, f in blind.values()) <= HORIZON
    # The newest outcome counts whole.
    if history:
        _, act, ok, _ = history[-1]
        assert blind[act][0 if ok else 1] >= 1.0


def test_an_unknown_oracle_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown oracle"):
        evidence(ACTIONS, [], kind="psychic", now_probs={}, since=0)


@settings(max_examples=150, deadline=None)
@given(counts=COUNTS, seed=st.integers(0, 2**32 - 1))
def test_the_oracle_names_the_highest_posterior_mean_with_a_probability(
    counts: dict[str, tuple[int, int]], seed: int
) -> None:
    top, p = answer(counts, np.random.default_rng(seed))
    means = {a: (1 + s) / (2 + s + f) for a, (s, f) in counts.items()}
    assert means[top] == max(means.values())
    assert 0.0 <= p <= 1.0


@settings(max_examples=50, deadline=None)
@given(count=st.tuples(st.integers(0, 40), st.integers(0, 40)), seed=st.integers(0, 2**32 - 1))
def test_options_with_the_same_evidence_share_being_best(count: tuple[int, int], seed: int) -> None:
    # The top option by mean need not hold its share of being best in general (an option with little evidence and a
    # slightly lower mean wins many draws), but among equals each holds it, less Monte Carlo error.
    _, p = answer(dict.fromkeys(ACTIONS, count), np.random.default_rng(seed))
    assert abs(p - 1 / len(ACTIONS)) <= 4 * (0.25 / DRAWS) ** 0.5


@settings(max_examples=100, deadline=None)
@given(counts=COUNTS, seed=st.integers(0, 2**32 - 1))
def test_a_success_of_the_top_option_does_not_make_the_oracle_less_sure(
    counts: dict[str, tuple[int, int]], seed: int
) -> None:
    top, p = answer(counts, np.random.default_rng(seed))
    s, f = counts[top]
    again, q = answer({**counts, top: (s + 1, f)}, np.random.default_rng(seed))
    assert again == top
    assert q >= p - 6 * (0.25 / DRAWS) ** 0.5


def test_clear_evidence_makes_the_oracle_sure_and_thompson_follow_it() -> None:
    counts = {"a": (90, 10), "b": (40, 60), "c": (10, 90)}
    rng = np.random.default_rng(0)
    assert answer(counts, rng) == ("a", 1.0)
    assert [thompson(counts, rng) for _ in range(200)].count("a") == 200
    # With no evidence every option is drawn.
    assert {thompson(dict.fromkeys(ACTIONS, (0, 0)), rng) for _ in range(200)} == set(ACTIONS)

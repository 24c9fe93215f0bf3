"""Calibrated recommendations, change detection, pending decisions and episode credit (pure rules)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.errors import ValidationError
from engramdb.learning.complexity import assess_complexity, complexity_points
from engramdb.learning.recommend import CALIBRATION, Neighbour, RecommendConfig, calibrated, suggest
from engramdb.learning.records import PENDING, credited_weights, decision_metadata, parse_decision, resolved_metadata
from engramdb.learning.stats import ChangeRule, Evidence, change_discounts, posteriors
from engramdb.models import DecisionRecord, Memory

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def rec(action: str, success: float, i: int, context: str = "api-auth-timeout") -> Neighbour:
    r = DecisionRecord(
        id=f"{action}{i}", agent="a", context=context, action=action, success=success, at=NOW - timedelta(minutes=i)
    )
    return Neighbour(r, 1.0)


def test_two_recorded_decisions_give_a_tentative_recommendation() -> None:
    # Seed 001: one failure of increase-timeout, one success of retry-with-exponential-backoff.
    nbrs = [rec("increase-timeout", 0.0, 2), rec("retry-with-exponential-backoff", 1.0, 1)]
    s = suggest("api-auth-timeout", nbrs, now=NOW, config=RecommendConfig(), seed=0)
    assert s.recommended == "retry-with-exponential-backoff"
    assert s.tentative
    assert "tentative" in s.reason
    assert s.to_dict()["tentative"] is True
    assert s.options[0].success_rate > s.options[1].success_rate


def test_much_clear_evidence_gives_a_firm_recommendation() -> None:
    # 18 of 20 successes (the failures not among the newest: a fresh failure is what a change looks like, see
    # test_a_favourite_that_just_started_failing_loses_its_recommendation).
    nbrs = [rec("backoff", 0.0 if i % 10 == 5 else 1.0, i) for i in range(20)]
    nbrs += [rec("retry", 0.0 if i % 5 else 1.0, 100 + i) for i in range(20)]
    s = suggest("q", nbrs, now=NOW, config=RecommendConfig(), seed=0)
    assert s.recommended == "backoff"
    assert not s.tentative
    assert s.confidence >= RecommendConfig().firm_confidence


def test_options_the_evidence_does_not_separate_get_no_recommendation() -> None:
    nbrs = [rec("a", float(i % 2), i) for i in range(10)] + [rec("b", float(i % 2), 50 + i) for i in range(10)]
    s = suggest("q", nbrs, now=NOW, config=RecommendConfig(), seed=0)
    assert s.recommended is None
    assert s.confidence < RecommendConfig().min_confidence


def test_a_single_action_that_always_failed_is_not_recommended() -> None:
    s = suggest("q", [rec("retry", 0.0, i) for i in range(12)], now=NOW, config=RecommendConfig(), seed=0)
    assert s.recommended is None
    assert s.confidence < 0.1


@given(st.floats(0, 1), st.floats(0, 50), st.floats(0, 1), st.floats(0, 50))
@settings(max_examples=200, deadline=None)
def test_calibration_is_monotone_in_the_raw_probability_and_bounded(r1: float, e1: float, r2: float, e2: float) -> None:
    lo, hi = sorted((r1, r2))
    assert 0.0 <= calibrated(lo, e1, CALIBRATION) <= calibrated(hi, e1, CALIBRATION) <= 1.0
    assert calibrated(r1, e1, None) == r1


def test_calibration_table_knots_rise() -> None:
    for _, knots in CALIBRATION:
        xs = [x for x, _ in knots]
        ys = [y for _, y in knots]
        assert xs == sorted(xs)
        assert ys == sorted(ys)


def test_a_favourite_that_just_started_failing_loses_its_recommendation() -> None:
    # The same long record (16 successes in 20 of "a", 6 in 20 of "b"), then the newest outcomes differ: recent
    # successes of "a" keep a firm recommendation, recent failures (what a change of the world looks like) do not,
    # though "a" still ranks first on its long record.
    old = [rec("a", 0.0 if i % 5 == 0 else 1.0, 100 + i) for i in range(20)]
    old += [rec("b", 1.0 if i % 3 == 0 else 0.0, 200 + i) for i in range(20)]
    # The change rule off, to see the recent view alone (with it, "b" also overtakes "a" on the record).
    cfg = replace(RecommendConfig(), change=None)
    steady = suggest("q", old + [rec("a", 1.0, i) for i in range(3)], now=NOW, config=cfg, seed=0)
    failing = suggest("q", old + [rec("a", 0.0, i) for i in range(3)], now=NOW, config=cfg, seed=0)
    assert steady.recommended == "a"
    assert failing.options[0].action == "a"
    assert failing.recommended is None
    assert failing.confidence < steady.confidence
    # Without the recent view, the long record alone still gives the failing favourite a raw lead over 80%.
    long_only = replace(cfg, recent_horizon=None, calibration=None)
    assert suggest("q", old + [rec("a", 0.0, i) for i in range(3)], now=NOW, config=long_only, seed=0).confidence > 0.8


def test_the_recent_horizon_is_validated() -> None:
    with pytest.raises(ValueError, match="recent_horizon"):
        RecommendConfig(recent_horizon=0.5)


def test_change_detection_drops_the_record_a_recent_streak_contradicts() -> None:
    t0 = NOW.timestamp()
    # 20 old successes of "a", then 4 failures: a change.
    actions = ["a"] * 24
    succ = [1.0] * 20 + [0.0] * 4
    times = [t0 + i for i in range(24)]
    factors = change_discounts(actions, succ, [1.0] * 24, times, rule=ChangeRule(window=2, z=2.5, keep=0.1, scan=False))
    # The newest 2 outcomes (the window) contradict the 22 before them: those stop counting (x 0.1).
    assert factors[:22] == [0.1] * 22
    assert factors[22:] == [1.0] * 2
    steady = change_discounts(actions, [1.0] * 24, [1.0] * 24, times, rule=ChangeRule())
    assert steady == [1.0] * 24


def test_a_change_stays_detected_after_one_lucky_success() -> None:
    # 20 successes, 4 failures, then one success and one failure: the newest window (1 success, 1 failure) no
    # longer contradicts the record, but the stretch since the change does. The scan keeps the change; testing
    # the newest window alone restores the stale record.
    t0 = NOW.timestamp()
    succ = [1.0] * 20 + [0.0] * 4 + [1.0, 0.0]
    times = [t0 + i for i in range(26)]
    scanned = change_discounts(["a"] * 26, succ, [1.0] * 26, times, rule=ChangeRule())
    assert scanned[:20] == [0.1] * 20
    assert scanned[20:] == [1.0] * 6
    newest_only = change_discounts(["a"] * 26, succ, [1.0] * 26, times, rule=ChangeRule(scan=False))
    assert newest_only == [1.0] * 26
    # A steady record loses nothing.
    assert change_discounts(["a"] * 26, [1.0] * 26, [1.0] * 26, times, rule=ChangeRule()) == [1.0] * 26


def test_change_rule_with_scope_all_discounts_other_actions_older_than_the_change() -> None:
    ev = [Evidence(action="a", success=1.0, relevance=1.0, at=NOW - timedelta(minutes=100 - i)) for i in range(20)]
    ev += [Evidence(action="b", success=0.5, relevance=1.0, at=NOW - timedelta(minutes=90 - i)) for i in range(5)]
    ev += [Evidence(action="a", success=0.0, relevance=1.0, at=NOW - timedelta(minutes=4 - i)) for i in range(4)]
    with_rule = posteriors(ev, now=NOW, change=ChangeRule(scope="all"))
    without = posteriors(ev, now=NOW)
    assert with_rule["a"].mean < without["a"].mean
    assert with_rule["b"].attempts < without["b"].attempts
    with pytest.raises(ValueError, match="scope"):
        ChangeRule(scope="nowhere")


def test_pending_decision_metadata_and_resolution() -> None:
    _, meta = decision_metadata("retry", None)
    assert meta["outcome"] == PENDING
    assert "success" not in meta
    m = Memory(id="x", agent="a", kind="decision", content="ctx", metadata=meta, created_at=NOW, updated_at=NOW)
    assert parse_decision(m) is None  # pending: no evidence yet
    done = resolved_metadata(meta, "success", credit="episode")
    assert done["success"] == 1.0
    assert done["credit"] == "episode"
    with pytest.raises(ValidationError):
        resolved_metadata(done, "failure")


@given(st.integers(1, 10), st.floats(0.5, 1.0), st.sampled_from(["success", "failure"]))
def test_episode_credit_is_discounted_by_distance_from_the_end(steps: int, discount: float, outcome: str) -> None:
    w = credited_weights(outcome, steps, discount=discount)
    assert len(w) == steps
    assert w[-1] == (1.0 if outcome == "success" else 0.0)
    # Further from the end: closer to 0.5 (no information), never past it.
    dist = [abs(x - 0.5) for x in w]
    assert dist == sorted(dist)
    assert all(0.0 <= x <= 1.0 for x in w)


def test_episode_credit_rejects_a_bad_discount() -> None:
    with pytest.raises(ValidationError):
        credited_weights("success", 3, discount=0.0)


def test_complexity_rule() -> None:
    assert assess_complexity("fix typo") == "low"
    long_task = (
        "Migrate the billing database schema to the new cluster, integrate the auth service, "
        "then deploy it behind the gateway and verify the dashboards; roll back on errors"
    )
    assert complexity_points(long_task) >= 5
    assert assess_complexity(long_task) == "high"
    medium = "Add pagination to the orders endpoint and update the client, then the docs"
    # three listed parts (1), building (1), pagination and endpoint (2), docs is a trivial edit (-1)
    assert complexity_points(medium) == 3
    assert complexity_points(medium, similar_success=[0.0, 0.0, 1.0]) == 4  # mostly failed before
    assert assess_complexity(medium, similar_success=[0.0, 0.0, 1.0], similar_durations=[900, 900, 900]) == "high"
    # Seed 000's task fields: a complex category, dependencies and effort.
    assert complexity_points("Refresh the cache", category="database", dependencies=2, effort=6) == (
        complexity_points("Refresh the cache") + 2 + 2 + 3
    )
    # History: slow similar runs add a point.
    base = complexity_points("Refresh the cache")
    assert complexity_points("Refresh the cache", similar_durations=[900, 800, 1000], typical_duration=60) == base + 1

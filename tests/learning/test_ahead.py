"""Recommendations at a calibrated confidence of 0.5 and up, only for a top option its record puts ahead (issue 12):
options the evidence does not separate stay silent because they are level, not because of where the threshold is;
a recommendation stated under ``firm_confidence`` is tentative and says why."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engramdb.learning.recommend import CALIBRATION, Neighbour, RecommendConfig, assess, calibrated, suggest
from engramdb.models import DecisionRecord

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CFG = RecommendConfig()


def rec(action: str, success: float, minutes_ago: int) -> Neighbour:
    r = DecisionRecord(
        id=f"{action}{minutes_ago}",
        agent="a",
        context="deploy the billing service",
        action=action,
        success=success,
        at=NOW - timedelta(minutes=minutes_ago),
    )
    return Neighbour(r, 1.0)


def same_record_interleaved() -> list[Neighbour]:
    # The same 10 outcomes (6 successes) for both options, b's each a minute older than a's: a is "ahead" only by
    # how recency weighs the same outcomes.
    pattern = (1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    return [rec("a", x, 2 * i) for i, x in enumerate(pattern)] + [rec("b", x, 2 * i + 1) for i, x in enumerate(pattern)]


def test_records_level_but_for_noise_get_no_recommendation_because_they_are_level() -> None:
    nbrs = same_record_interleaved()
    s = suggest("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended is None
    assert "not ahead" in s.reason
    assert "does not separate" in s.reason
    assert s.confidence < CFG.min_confidence
    judged = assess("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0)
    assert abs(judged.long - 0.5) <= CFG.ahead_margin
    # The lead-based table alone would state it above the threshold: the ahead rule is what keeps it silent.
    assert calibrated(judged.raw, judged.evidence, CALIBRATION) >= CFG.min_confidence
    unchecked = replace(CFG, ahead_margin=None)
    assert suggest("deploy the billing service", nbrs, now=NOW, config=unchecked, seed=0).recommended is not None


def test_identical_records_are_silent_for_being_level() -> None:
    # test_calibration's identical records (b's outcomes older): level on the record, stated under one half.
    nbrs = [rec("a", float(i % 2), i) for i in range(10)] + [rec("b", float(i % 2), 50 + i) for i in range(10)]
    s = suggest("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended is None
    assert "not ahead" in s.reason
    judged = assess("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0)
    # Stated at no more than its lead on the record less the margin: under one half whatever the Monte Carlo draws.
    assert s.confidence == pytest.approx(
        min(calibrated(judged.raw, judged.evidence, CALIBRATION), judged.long - (CFG.ahead_margin or 0.0))
    )
    assert s.confidence < 0.5


def test_a_recommendation_under_the_firm_confidence_is_tentative_and_says_why() -> None:
    # Newest first: b 4 of 4, a 3 of 4 with its two newest outcomes successes. b is ahead on the record, but the
    # recent view has a level with it: enough evidence for a firm recommendation (>= firm_evidence weighted
    # outcomes), a calibrated confidence between 0.5 and 0.7 (0.54-0.66 whatever the seed).
    seq = [("a", 1.0), ("a", 1.0), ("b", 1.0), ("b", 1.0), ("b", 1.0), ("a", 1.0), ("b", 1.0), ("a", 0.0)]
    nbrs = [rec(action, x, i) for i, (action, x) in enumerate(seq)]
    s = suggest("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended == "b"
    assert CFG.min_confidence <= s.confidence < 0.7
    assert s.evidence >= CFG.firm_evidence
    assert s.tentative
    assert f"tentative: calibrated confidence {s.confidence:.2f}" in s.reason
    assert "little evidence" not in s.reason
    assert s.to_dict()["tentative"] is True


def test_a_tentative_reason_names_every_cause() -> None:
    # Seed 001's two decisions: one weighted outcome each, a confidence under firm_confidence.
    nbrs = [rec("increase-timeout", 0.0, 2), rec("retry-with-exponential-backoff", 1.0, 1)]
    s = suggest("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended == "retry-with-exponential-backoff"
    assert "little evidence so far (1.0 weighted outcomes, 3 firm)" in s.reason
    assert f"calibrated confidence {s.confidence:.2f} (0.9 firm)" in s.reason


def test_a_top_option_behind_on_its_record_is_never_recommended() -> None:
    # One success of "a" long ago, then failures: the record puts it behind an untried option.
    nbrs = [rec("a", 1.0, 30)] + [rec("a", 0.0, i) for i in range(3)]
    s = suggest("deploy the billing service", nbrs, now=NOW, config=CFG, seed=0, options=["a"])
    assert s.recommended is None


@pytest.mark.parametrize("seed", range(8))
def test_level_records_are_stated_under_one_half_whatever_the_draws(seed: int) -> None:
    identical = [rec("a", float(i % 2), i) for i in range(10)] + [rec("b", float(i % 2), 50 + i) for i in range(10)]
    for nbrs in (same_record_interleaved(), identical):
        s = suggest("deploy the billing service", nbrs, now=NOW, config=CFG, seed=seed)
        assert s.recommended is None
        assert s.confidence < 0.5


def test_the_ahead_margin_is_validated() -> None:
    with pytest.raises(ValueError, match="ahead_margin"):
        RecommendConfig(ahead_margin=0.5)
    with pytest.raises(ValueError, match="ahead_margin"):
        RecommendConfig(ahead_margin=-0.1)

"""The wider neighbourhood: many weakly similar outcomes that agree give a (tentative) recommendation when the close
neighbourhood holds too little evidence (seed 000's new task); weak evidence that disagrees does not."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engramdb.learning.recommend import (
    CALIBRATION_POOLED,
    Neighbour,
    RecommendConfig,
    assess,
    calibrated,
    choose,
    suggest,
)
from engramdb.models import DecisionRecord

NOW = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
CFG = RecommendConfig()


def weak(action: str, success: float, i: int, *, cosine: float = 0.27) -> Neighbour:
    """An outcome recorded ``i`` minutes ago in a context of its own, weakly similar to the question."""
    r = DecisionRecord(
        id=f"{action}{i}",
        agent="a",
        context=f"build page number {i}",
        action=action,
        success=success,
        at=NOW - timedelta(minutes=i),
        alternatives=("incremental", "standard"),
    )
    return Neighbour(r, cosine)


def agreeing(n: int = 12) -> list[Neighbour]:
    # Seed 000's shape: 'incremental' always worked, 'standard' mostly failed, every context only weakly similar
    # (cosines 0.2-0.29, under the close floor).
    return [
        weak("incremental" if i % 3 else "standard", 1.0 if i % 3 or i == 3 else 0.0, i, cosine=0.2 + 0.008 * i)
        for i in range(n)
    ]


def test_many_weak_agreeing_outcomes_give_a_tentative_pooled_recommendation() -> None:
    nbrs = agreeing()
    # Below the close floor (0.3) nothing counts: the close view alone has no evidence.
    assert assess("build the profile page", nbrs, now=NOW, config=replace(CFG, pool_floor=None), seed=0).evidence < 0.5
    judged = assess("build the profile page", nbrs, now=NOW, config=CFG, seed=0)
    assert judged.pooled
    assert judged.ranked[0].action == "incremental"
    s = suggest("build the profile page", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended == "incremental"
    assert s.tentative
    assert "pooled from less similar contexts" in s.reason
    assert s.confidence == pytest.approx(calibrated(s.raw_confidence, s.evidence, CALIBRATION_POOLED))


def test_without_the_wider_neighbourhood_the_same_evidence_gives_nothing() -> None:
    s = suggest("build the profile page", agreeing(), now=NOW, config=replace(CFG, pool_floor=None), seed=0)
    assert s.recommended is None


def test_weak_outcomes_that_disagree_give_no_recommendation() -> None:
    nbrs = [weak("incremental" if i % 2 else "standard", float(i % 4 < 2), i, cosine=0.28) for i in range(16)]
    s = suggest("build the profile page", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended is None


def test_a_few_weak_outcomes_are_not_enough() -> None:
    s = suggest("build the profile page", agreeing(3), now=NOW, config=CFG, seed=0)
    assert s.recommended is None


def test_close_evidence_is_preferred_to_the_wider_neighbourhood() -> None:
    close = [
        Neighbour(
            DecisionRecord(
                id=f"c{i}",
                agent="a",
                context="build the profile page",
                action="standard",
                success=1.0,
                at=NOW - timedelta(minutes=100 + i),
            ),
            1.0,
        )
        for i in range(3)
    ]
    judged = assess("build the profile page", close + agreeing(), now=NOW, config=CFG, seed=0)
    assert not judged.pooled
    assert judged.ranked[0].action == "standard"


def test_choose_ignores_the_wider_neighbourhood() -> None:
    nbrs = agreeing()
    close = [n for n in nbrs if n.cosine > CFG.similarity_floor]
    for seed in range(20):
        a = choose("q", ["incremental", "standard"], nbrs, now=NOW, config=CFG, seed=seed, exploration=0.5)
        b = choose("q", ["incremental", "standard"], close, now=NOW, config=CFG, seed=seed, exploration=0.5)
        assert a == b


def test_pool_floor_is_validated() -> None:
    with pytest.raises(ValueError, match="pool_floor"):
        RecommendConfig(pool_floor=0.4)
    with pytest.raises(ValueError, match="pool_floor"):
        RecommendConfig(pool_floor=-0.1)


def test_pooled_calibration_knots_rise() -> None:
    for _, knots in CALIBRATION_POOLED:
        xs = [x for x, _ in knots]
        ys = [y for _, y in knots]
        assert xs == sorted(xs)
        assert ys == sorted(ys)
        assert all(0.0 <= y <= 1.0 for y in ys)

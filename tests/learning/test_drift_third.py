"""Issue 25, item 11, third round: the options measured on bench/learning_drift.py's streams (bench/RESULTS.md),
checked here for what they promise whatever the streams: wider draws for options with a thin record
(`RecommendConfig.thin_evidence`), a soft contrast with the question's best matches (`RecommendConfig.contrast`) and
a Page-Hinkley change test (`ChangeRule(cusum=...)`)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.learning.change import ChangeRule, cusum_split
from engramdb.learning.exploring import draw_widths
from engramdb.learning.matching import contrast_factors
from engramdb.learning.recommend import Neighbour, RecommendConfig, choose, evidence, option_posteriors
from engramdb.learning.stats import Posterior, thompson_choice
from engramdb.models import DecisionRecord

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _record(i: int, context: str, action: str, success: float) -> DecisionRecord:
    return DecisionRecord(
        id=str(i), agent="t", context=context, action=action, success=success, at=NOW - timedelta(seconds=1000 - i)
    )


@settings(max_examples=300, deadline=None)
@given(
    attempts=st.lists(st.floats(0.0, 1e6), max_size=8),
    exploration=st.floats(0.0, 1.0),
    thin=st.one_of(st.none(), st.floats(1e-3, 100.0)),
)
def test_draw_widths_stay_between_the_setting_and_plain_thompson_and_narrow_with_evidence(
    attempts: list[float], exploration: float, thin: float | None
) -> None:
    widths = draw_widths(attempts, exploration=exploration, thin=thin)
    assert len(widths) == len(attempts)
    for n, w in zip(attempts, widths, strict=True):
        assert exploration - 1e-12 <= w <= 1.0 + 1e-12
        if thin is None or n >= thin:
            assert w == pytest.approx(exploration)
        if thin is not None and n == 0.0:
            assert w == pytest.approx(1.0)
    # More evidence never draws wider.
    order = sorted(range(len(attempts)), key=lambda i: attempts[i])
    assert all(widths[a] >= widths[b] - 1e-12 for a, b in itertools.pairwise(order))


@settings(max_examples=100, deadline=None)
@given(
    params=st.lists(st.tuples(st.floats(0.5, 50.0), st.floats(0.5, 50.0)), min_size=1, max_size=5),
    width=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
)
def test_one_width_per_option_picks_as_the_single_width_does(
    params: list[tuple[float, float]], width: float, seed: int
) -> None:
    post = [Posterior(action=str(i), alpha=a, beta=b, successes=0.0, attempts=0.0) for i, (a, b) in enumerate(params)]
    one = thompson_choice(post, rng=np.random.default_rng(seed), exploration=width)
    each = thompson_choice(post, rng=np.random.default_rng(seed), exploration=[width] * len(post))
    assert one == each


def _stale_world() -> list[Neighbour]:
    """After a change: 'a' succeeded 3 times in 10, the new best 'b' failed its one try."""
    rows = [_record(i, "deploy fails", "a", float(i % 3 == 0)) for i in range(10)]
    rows.append(_record(20, "deploy fails", "b", 0.0))
    return [Neighbour(r, 1.0) for r in rows]


def test_an_option_with_a_thin_record_is_drawn_more_often() -> None:
    counts = {}
    for name, cfg in (("plain", RecommendConfig(change=None)), ("thin", RecommendConfig(change=None, thin_evidence=3))):
        picks = [
            choose("deploy fails", ["a", "b"], _stale_world(), now=NOW, config=cfg, seed=s, exploration=0.25)
            for s in range(300)
        ]
        counts[name] = picks.count("b")
    assert counts["thin"] > counts["plain"] + 30


def test_well_evidenced_options_draw_as_before() -> None:
    rows = [_record(i, "deploy fails", a, float(i % 3 != 0)) for i in range(40) for a in ("a", "b")]
    nbs = [Neighbour(r, 1.0) for r in rows]
    for s in range(50):
        picks = {
            choose(
                "deploy fails",
                ["a", "b"],
                nbs,
                now=NOW,
                config=RecommendConfig(change=None, thin_evidence=t),
                seed=s,
                exploration=0.25,
            )
            for t in (None, 3.0)
        }
        assert len(picks) == 1


@settings(max_examples=300, deadline=None)
@given(cosines=st.lists(st.floats(-1.0, 1.0), max_size=30), sharpness=st.floats(0.0, 50.0))
def test_contrast_keeps_the_best_matches_and_fades_the_rest_in_order(cosines: list[float], sharpness: float) -> None:
    factors = contrast_factors(cosines, sharpness=sharpness)
    assert len(factors) == len(cosines)
    assert all(0.0 <= f <= 1.0 for f in factors)
    if cosines:
        assert factors[cosines.index(max(cosines))] == 1.0
    order = sorted(range(len(cosines)), key=lambda i: cosines[i])
    assert all(factors[a] <= factors[b] + 1e-12 for a, b in itertools.pairwise(order))
    if sharpness == 0.0:
        assert all(f == 1.0 for f in factors)


def test_contrast_weighs_a_far_record_less_in_suggest_and_choose_ignores_it() -> None:
    rows = [_record(i, f"text {i}", "a", 1.0) for i in range(5)] + [_record(9, "other", "b", 1.0)]
    nbs = [Neighbour(r, 0.8) for r in rows[:5]] + [Neighbour(rows[5], 0.45)]
    plain = evidence("question", nbs, config=RecommendConfig())
    sharp = evidence("question", nbs, config=RecommendConfig(contrast=10.0))
    assert [e.relevance for e in sharp[:5]] == pytest.approx([e.relevance for e in plain[:5]])
    assert sharp[5].relevance == pytest.approx(plain[5].relevance * float(np.exp(10.0 * (0.45 - 0.8))))
    for s in range(30):
        picks = {
            choose("question", ["a", "b"], nbs, now=NOW, config=RecommendConfig(contrast=c), seed=s, exploration=0.25)
            for c in (None, 10.0)
        }
        assert len(picks) == 1


OUTCOMES = st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(rows=OUTCOMES, threshold=st.floats(0.1, 10.0), shift=st.floats(0.05, 0.6))
def test_cusum_split_is_a_split_of_the_record_or_none(
    rows: list[tuple[float, float]], threshold: float, shift: float
) -> None:
    weights, successes = [w for w, _ in rows], [x for _, x in rows]
    split = cusum_split(weights, successes, window=2.0, threshold=threshold, shift=shift)
    assert split is None or 1 <= split < len(rows)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 200), outcome=st.sampled_from([0.0, 1.0]), weight=st.floats(0.01, 1.0))
def test_cusum_never_fires_on_a_constant_record(n: int, outcome: float, weight: float) -> None:
    assert cusum_split([weight] * n, [outcome] * n, window=2.0, threshold=1.5, shift=0.3) is None


def test_cusum_finds_the_change_and_cuts_the_older_record() -> None:
    # Newest first: 5 failures after 30 successes.
    successes = [0.0] * 5 + [1.0] * 30
    split = cusum_split([1.0] * 35, successes, window=2.0, threshold=1.5, shift=0.3)
    assert split is not None
    assert 2 <= split <= 5
    nbs = [Neighbour(_record(i, "deploy fails", "a", 1.0 if i < 30 else 0.0), 1.0) for i in range(35)]
    cut = option_posteriors(
        "deploy fails", nbs, now=NOW, config=RecommendConfig(change=ChangeRule(cusum=1.5)), options=["a"]
    )
    kept = option_posteriors("deploy fails", nbs, now=NOW, config=RecommendConfig(change=None), options=["a"])
    assert cut[0].attempts < kept[0].attempts


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="thin_evidence"):
        RecommendConfig(thin_evidence=0.0)
    with pytest.raises(ValueError, match="contrast"):
        RecommendConfig(contrast=float("nan"))
    with pytest.raises(ValueError, match="cusum"):
        ChangeRule(cusum=-1.0)
    with pytest.raises(ValueError, match="exploration"):
        draw_widths([1.0], exploration=1.5, thin=None)
    with pytest.raises(ValueError, match="sharpness"):
        contrast_factors([0.5], sharpness=-1.0)
    post = [Posterior(action="a", alpha=1.0, beta=1.0, successes=0.0, attempts=0.0)]
    with pytest.raises(ValueError, match="one per option"):
        thompson_choice(post, rng=np.random.default_rng(0), exploration=[0.5, 0.5])

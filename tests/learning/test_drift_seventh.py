"""Issue 25, item 11, seventh round: a change model that is a posterior, not a test (`RunLengths`,
`learning/runlength.py`): Bayesian online change points per option, the success estimate the run-length mixture."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from drift_helpers import follow_a_change
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.embeddings.base import Embedder
from engramdb.learning import recommend as rc
from engramdb.learning._prior import Prior
from engramdb.learning.runlength import RunLengths, run_length_estimates, run_length_posterior
from engramdb.learning.stats import ChangeRule, Evidence, posteriors
from engramdb.models import DecisionRecord

NOW = datetime(2030, 1, 1, tzinfo=UTC)
GRID = (0.003, 0.01, 0.03, 0.1)
HAZARDS = st.lists(st.floats(0.001, 0.5), min_size=1, max_size=4).map(tuple)
ROWS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0)),
    max_size=60,
)


def _estimates(rows: list[tuple[str, float, float]], model: RunLengths) -> dict[str, tuple[float, float]]:
    return run_length_estimates(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [float(i) for i in range(len(rows))],
        model=model,
        prior=Prior(),
        universe=("a", "b", "c", "never"),
    )


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, hazards=HAZARDS, scope=st.sampled_from(["action", "all"]))
def test_estimates_are_probabilities_with_a_beta_spread(
    rows: list[tuple[str, float, float]], hazards: tuple[float, ...], scope: str
) -> None:
    est = _estimates(rows, RunLengths(hazards=hazards, scope=scope))
    assert set(est) == {"a", "b", "c", "never"}
    assert est["never"] == pytest.approx((0.5, 1 / 12))
    for mean, var in est.values():
        assert 0.0 < mean < 1.0
        assert 0.0 < var < mean * (1.0 - mean)  # a Beta with positive parameters has that variance
    # As a posterior: positive parameters, counts within the evidence given.
    post = posteriors(
        [Evidence(action=a, success=x, relevance=w, at=NOW + timedelta(seconds=i)) for i, (a, x, w) in enumerate(rows)],
        now=NOW + timedelta(seconds=len(rows)),
        actions=("never",),
        change=RunLengths(hazards=hazards, scope=scope),
    )
    for p in post.values():
        assert p.alpha > 0
        assert p.beta > 0
        assert 0.0 <= p.successes <= p.attempts
        assert 0.0 <= p.mean <= 1.0


@settings(max_examples=150, deadline=None)
@given(
    outcomes=st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.01, 1.0)), min_size=1, max_size=80),
    hazard=st.floats(0.001, 0.9),
)
def test_the_run_length_posterior_sums_to_one(outcomes: list[tuple[float, float]], hazard: float) -> None:
    starts = run_length_posterior([x for x, _ in outcomes], [w for _, w in outcomes], hazard=hazard, prior=Prior())
    assert len(starts) == len(outcomes)
    assert sum(starts) == pytest.approx(1.0)
    assert all(0.0 <= p <= 1.0 for p in starts)


def _steady(rate: float, n: int) -> list[float]:
    """``n`` outcomes whose every prefix succeeds at ``rate`` as nearly as whole outcomes can (no luck involved)."""
    return [float(int((i + 1) * rate) - int(i * rate)) for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.2, 0.8), scope=st.sampled_from(["action", "all"]))
def test_a_steady_stream_is_estimated_at_its_rate(rate: float, scope: str) -> None:
    # With a grid of hazards, whose low end a steady stream comes to believe (a fixed hazard keeps its spread by
    # design: it expects a change every 1 / hazard outcomes). Rates near 0 or 1 converge more slowly: each rare
    # outcome is then nearly as well explained by a change (a new run predicts it at the prior's 1/2) as by the long
    # run, at the grid's largest hazard.
    est = {}
    for n in (50, 400):
        xs = _steady(rate, n)
        est[n] = run_length_estimates(
            ["a"] * n,
            xs,
            [1.0] * n,
            [float(i) for i in range(n)],
            model=RunLengths(hazards=GRID, scope=scope),
            prior=Prior(),
        )["a"]
    assert abs(est[400][0] - rate) < 0.05
    # More outcomes of the same world: no further from the rate (beyond the prior's pull at 50), and no wider.
    assert abs(est[400][0] - rate) <= abs(est[50][0] - rate) + 0.01
    assert est[400][1] <= est[50][1] * 1.05


@settings(max_examples=100, deadline=None)
@given(
    weights=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=30),
    hazards=HAZARDS,
    success=st.sampled_from([0.0, 1.0]),
    before=ROWS,
    scope=st.sampled_from(["action", "all"]),
)
def test_an_outcome_never_moves_the_estimate_against_itself(
    weights: list[float], hazards: tuple[float, ...], success: float, before: list[tuple[str, float, float]], scope: str
) -> None:
    # Whatever came before, a further success of "a" never leaves its estimate lower (a failure never higher) than
    # the same time passing without it: an outcome of an option never tried before ticks the clock alike and tells
    # nothing about "a" (the chance of a change meanwhile pulls towards the prior either way). Then a stream of
    # identical outcomes moves the estimate their way, or holds it where that pull balances them.
    rows = list(before)
    model = RunLengths(hazards=hazards, scope=scope)
    for k, w in enumerate(weights):
        without = _estimates([*rows, (f"new-{k}", success, w)], model)["a"][0]
        rows.append(("a", success, w))
        with_it = _estimates(rows, model)["a"][0]
        assert (with_it >= without - 1e-9) if success else (with_it <= without + 1e-9)


def test_a_contradicted_record_stays_faded_when_the_option_is_no_longer_chosen() -> None:
    # "a" succeeded 40 times, then failed 6 times; then only "b" is chosen for 40 visits. The shipped rule's test on
    # discounted weights forgets a's failures and its old record counts again (the flicker); the run lengths keep
    # a's record faded: it is estimated near the prior (it may have changed again since), far under its old 0.98.
    rows = [("a", 1.0)] * 40 + [("a", 0.0)] * 6 + [("b", 0.7 if i % 3 else 0.0) for i in range(40)]
    ev = [Evidence(action=a, success=x, relevance=1.0, at=NOW + timedelta(seconds=i)) for i, (a, x) in enumerate(rows)]
    at = NOW + timedelta(seconds=len(rows))
    shipped = posteriors(ev, now=at, horizon=25.0, change=ChangeRule())
    assert shipped["a"].mean > 0.6  # the flicker, as shipped (0.66)
    for scope in ("all", "action"):
        assert posteriors(ev, now=at, change=RunLengths(scope=scope))["a"].mean < 0.4
    # Right after the failures, both see the change.
    early = ev[:46]
    assert posteriors(early, now=NOW + timedelta(seconds=46), change=RunLengths())["a"].mean < 0.3


def test_an_option_left_alone_drifts_back_to_the_prior_and_widens() -> None:
    # Per option: "b" failed 10 times long ago; the longer the neighbourhood goes on without trying it, the likelier
    # it changed.
    rows = [("b", 0.0)] * 10
    means, spreads = [], []
    for later in (0, 20, 200):
        r = rows + [("a", 1.0)] * later
        mean, var = run_length_estimates(
            [x[0] for x in r],
            [x[1] for x in r],
            [1.0] * len(r),
            list(map(float, range(len(r)))),
            model=RunLengths(scope="action"),
            prior=Prior(),
        )["b"]
        means.append(mean)
        spreads.append(var)
    assert means == sorted(means)
    assert means[-1] < 0.5 + 1e-9
    # Wider than its own record says, once the time since it may have changed it (the mixture of "unchanged" and
    # "anything" can be wider than the prior on the way).
    assert spreads[0] < min(spreads[1:])


def test_bad_models_are_refused() -> None:
    for bad in ((), (0.0,), (1.0,), (0.1, float("nan"))):
        with pytest.raises(ValueError, match="hazards"):
            RunLengths(hazards=bad)
    with pytest.raises(ValueError, match="scope"):
        RunLengths(scope="situation")
    with pytest.raises(ValueError, match="hazard"):
        run_length_posterior([1.0], [1.0], hazard=1.5, prior=Prior())


def test_the_service_learns_a_change_with_run_lengths(tmp_path: Path, embedder: Embedder) -> None:
    # Through the public API and a real store: the option is one RecommendConfig away, and suggest and choose both
    # follow the world after a change.
    cfg = rc.RecommendConfig(change=RunLengths())
    after, picks = follow_a_change(tmp_path / "s", embedder, cfg)
    assert after.recommended == "canary"
    assert 0.0 <= after.confidence <= 1.0
    assert picks.count("canary") >= 15


def test_the_recent_view_with_run_lengths_only_ever_lowers_the_raw_confidence() -> None:
    # RunLengths(recent=True) keeps the shipped recent view (the last few outcomes, the change rule) beside the
    # run-length lead, and the confidence is the smaller of the two.
    history = [("blue-green", 1.0)] * 20 + [("canary", 0.0)] * 6 + [("blue-green", 0.0)] * 3
    nb = [
        rc.Neighbour(
            DecisionRecord(
                id=str(i),
                agent="a",
                context="deploy the payments service",
                action=a,
                success=x,
                at=NOW + timedelta(seconds=i),
                alternatives=("blue-green", "canary"),
            ),
            1.0,
        )
        for i, (a, x) in enumerate(history)
    ]
    at = NOW + timedelta(seconds=len(history))
    judged = {}
    for recent in (False, True):
        cfg = rc.RecommendConfig(change=RunLengths(scope="all", recent=recent))
        judged[recent] = rc.assess("deploy the payments service", nb, now=at, config=cfg, seed=1)
    assert judged[False].recent == judged[False].long
    assert judged[True].long == judged[False].long
    assert judged[True].raw < judged[False].raw  # the last few outcomes separate the options less than the runs do

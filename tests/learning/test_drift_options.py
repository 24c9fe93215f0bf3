"""Issue 25, item 11: the options measured on bench/learning_drift.py's streams (bench/RESULTS.md), checked here
for what they promise whatever the streams: choice-set agreement (`RecommendConfig.option_exponent`) and wider draws
while a change is detected (`RecommendConfig.explore_after_change`)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.learning._prior import Prior
from engramdb.learning.forgetting import best_horizon
from engramdb.learning.matching import option_agreement
from engramdb.learning.recommend import Neighbour, RecommendConfig, choose, evidence, option_posteriors
from engramdb.models import DecisionRecord

NOW = datetime(2030, 1, 1, tzinfo=UTC)
ACTIONS = st.sampled_from(["a", "b", "c", "d", "e", "f"])
CHOICES = st.frozensets(ACTIONS, max_size=6)


def _record(i: int, context: str, action: str, success: float, alternatives: tuple[str, ...] = ()) -> DecisionRecord:
    return DecisionRecord(
        id=str(i),
        agent="t",
        context=context,
        action=action,
        success=success,
        at=NOW - timedelta(seconds=1000 - i),
        alternatives=alternatives,
    )


@settings(max_examples=300, deadline=None)
@given(action=ACTIONS, alternatives=CHOICES, options=CHOICES, exponent=st.floats(0.0, 8.0))
def test_agreement_is_a_weight_neutral_without_information_and_one_for_the_same_choices(
    action: str, alternatives: frozenset[str], options: frozenset[str], exponent: float
) -> None:
    w = option_agreement(action, alternatives, options, exponent=exponent)
    assert 0.0 <= w <= 1.0
    if not options or not alternatives - {action}:
        assert w == 1.0  # nothing to compare: the record keeps its relevance
    if options and {action, *alternatives} == set(options):
        assert w == 1.0
    if options and action in options:
        assert w > 0.0


@settings(max_examples=200, deadline=None)
@given(action=ACTIONS, alternatives=CHOICES, options=CHOICES, extra=ACTIONS, exponent=st.floats(0.0, 8.0))
def test_sharing_more_of_the_asked_options_never_weighs_less(
    action: str, alternatives: frozenset[str], options: frozenset[str], extra: str, exponent: float
) -> None:
    # Adding to the record's choices an option that was asked about cannot lower its weight (the overlap grows by
    # one and the union by at most one), once the record has a choice set at all.
    if extra not in options or len({action, *alternatives}) < 2:
        return
    before = option_agreement(action, alternatives, options, exponent=exponent)
    after = option_agreement(action, alternatives | {extra}, options, exponent=exponent)
    assert after >= before - 1e-12


def test_a_decision_among_other_choices_counts_less_and_off_changes_nothing() -> None:
    ours = _record(1, "auth token expired", "retry", 1.0, ("retry", "refresh", "restart", "escalate"))
    theirs = _record(2, "rate limit hit", "retry", 1.0, ("retry", "batch", "backoff", "queue"))
    bare = _record(3, "request denied", "retry", 1.0)
    nbs = [Neighbour(r, 0.8) for r in (ours, theirs, bare)]
    asked = ["retry", "refresh", "restart", "escalate"]
    plain = evidence("credentials stale", nbs, config=RecommendConfig(option_exponent=None), options=asked)
    weighted = evidence("credentials stale", nbs, config=RecommendConfig(option_exponent=1.0), options=asked)
    assert weighted[0].relevance == pytest.approx(plain[0].relevance)
    assert weighted[1].relevance == pytest.approx(plain[1].relevance / 7)  # 1 shared of 7
    assert weighted[2].relevance == pytest.approx(plain[2].relevance)  # no alternatives recorded: no information
    # Without options the question says nothing about its choice set.
    unasked = evidence("credentials stale", nbs, config=RecommendConfig(option_exponent=1.0))
    assert unasked == evidence("credentials stale", nbs, config=RecommendConfig(option_exponent=None))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="option_exponent"):
        RecommendConfig(option_exponent=-1.0)
    with pytest.raises(ValueError, match="option_exponent"):
        RecommendConfig(option_exponent=float("nan"))
    with pytest.raises(ValueError, match="explore_after_change"):
        RecommendConfig(explore_after_change=1.5)


def _changed_world() -> list[Neighbour]:
    """'a' succeeded 30 times, then failed 6 times in a row: the change rule cuts its older record."""
    rows = [_record(i, "deploy fails", "a", 1.0) for i in range(30)]
    rows += [_record(30 + i, "deploy fails", "a", 0.0) for i in range(6)]
    rows += [_record(40 + i, "deploy fails", "b", float(i != 0)) for i in range(4)]
    return [Neighbour(r, 1.0) for r in rows]


def _steady_world() -> list[Neighbour]:
    rows = [_record(i, "deploy fails", "a", float(i % 5 != 0)) for i in range(40)]
    rows += [_record(50 + i, "deploy fails", "b", float(i % 2)) for i in range(6)]
    return [Neighbour(r, 1.0) for r in rows]


def test_the_change_rule_sees_the_change_in_the_fixture() -> None:
    cfg = RecommendConfig()
    cut = option_posteriors("deploy fails", _changed_world(), now=NOW, config=cfg, options=["a", "b"])
    kept = option_posteriors(
        "deploy fails", _changed_world(), now=NOW, config=replace(cfg, change=None), options=["a", "b"]
    )
    assert sum(p.attempts for p in cut) < sum(p.attempts for p in kept)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_without_a_detected_change_choices_are_those_of_the_plain_rule(seed: int) -> None:
    nbs = _steady_world()
    picks = [
        choose("deploy fails", ["a", "b", "c"], nbs, now=NOW, config=cfg, seed=seed, exploration=0.25)
        for cfg in (RecommendConfig(), RecommendConfig(explore_after_change=1.0))
    ]
    assert picks[0] == picks[1]


def test_after_a_detected_change_the_untried_option_is_drawn_more_often() -> None:
    nbs = _changed_world()
    opts = ["a", "b", "c"]
    counts: dict[str, int] = {}
    for name, cfg in (("plain", RecommendConfig()), ("wide", RecommendConfig(explore_after_change=1.0))):
        picks = [choose("deploy fails", opts, nbs, now=NOW, config=cfg, seed=s, exploration=0.1) for s in range(400)]
        counts[name] = picks.count("c")
    assert counts["wide"] > counts["plain"] + 20


OUTCOMES = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 10_000)),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(rows=OUTCOMES, candidates=st.lists(st.floats(1.0, 500.0), min_size=1, max_size=5))
def test_the_learned_horizon_is_always_one_of_the_candidates(
    rows: list[tuple[str, float, float, int]], candidates: list[float]
) -> None:
    acts = [r[0] for r in rows]
    xs, ws, ts = [r[1] for r in rows], [r[2] for r in rows], [float(r[3]) for r in rows]
    h = best_horizon(acts, xs, ws, ts, candidates=candidates, prior=Prior(), score_horizon=50.0)
    assert h in candidates
    if not rows or len(candidates) == 1:
        assert h == candidates[0]


def _stream(changed: bool, seed: int) -> tuple[list[str], list[float]]:
    rng = random.Random(seed)
    acts, xs = [], []
    for t in range(200):
        a = rng.choice("ab")
        best = "b" if changed and t >= 150 else "a"
        acts.append(a)
        xs.append(float(rng.random() < (0.85 if a == best else 0.3)))
    return acts, xs


@pytest.mark.parametrize("seed", range(5))
def test_a_changed_world_learns_the_short_horizon_and_a_steady_one_the_long(seed: int) -> None:
    for changed, expected in ((False, 60.0), (True, 8.0)):
        acts, xs = _stream(changed, seed)
        times = [float(t) for t in range(len(acts))]
        h = best_horizon(
            acts, xs, [0.7] * len(acts), times, candidates=(25.0, 8.0, 60.0), prior=Prior(), score_horizon=50
        )
        assert h == expected


def test_bad_horizons_are_refused() -> None:
    with pytest.raises(ValueError, match="learned_horizons"):
        RecommendConfig(learned_horizons=(25.0, 0.5))
    with pytest.raises(ValueError, match="learned_horizons"):
        RecommendConfig(learned_horizons=())
    with pytest.raises(ValueError, match="candidates"):
        best_horizon(["a"], [1.0], [1.0], [0.0], candidates=(), prior=Prior(), score_horizon=50.0)


def test_a_store_weighs_a_decision_made_among_other_choices_less(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        for _ in range(3):
            mem.learning.record(
                "the payments API rejects our expired token", "refresh", "success", alternatives=["retry"]
            )
            mem.learning.record(
                "the payments API rate limits our calls", "retry", "success", alternatives=["batch", "queue"]
            )
        asked = ["refresh", "retry"]
        question = "the payments API keeps refusing the stale token"
        shipped = {o.action: o.attempts for o in mem.learning.suggest(question, options=asked).options}
        mem.learning.recommend = replace(mem.learning.recommend, option_exponent=None)
        plain = {o.action: o.attempts for o in mem.learning.suggest(question, options=asked).options}
    # The same choices keep full relevance (a little more weight even: the other decision's outcomes, counting less,
    # discount older ones less).
    assert shipped["refresh"] >= plain["refresh"]
    assert 0.0 < shipped["retry"] < plain["retry"] / 3  # one shared of four: a quarter


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(ACTIONS, st.floats(0.31, 1.0), st.booleans()), min_size=1, max_size=12),
    menu=st.frozensets(ACTIONS, min_size=2),
    asked=st.frozensets(ACTIONS, min_size=1),
)
def test_one_menu_for_every_decision_changes_nothing(
    rows: list[tuple[str, float, bool]], menu: frozenset[str], asked: frozenset[str]
) -> None:
    # Agents that record the same (even wider) menu with every decision: the choice sets tell nothing apart, so the
    # evidence is what it is without the option, whatever options are asked about.
    nbs = [
        Neighbour(_record(i, f"context {i}", action, float(ok), tuple(menu | {action})), cos)
        for i, (action, cos, ok) in enumerate(rows)
    ]
    on = evidence("the question", nbs, config=RecommendConfig(option_exponent=1.0), options=sorted(asked))
    off = evidence("the question", nbs, config=RecommendConfig(option_exponent=None), options=sorted(asked))
    if all(menu | {a} == menu for a, _, _ in rows):
        assert [e.relevance for e in on] == pytest.approx([e.relevance for e in off])
    assert len(on) <= len(off)
    assert sum(e.relevance for e in on) <= sum(e.relevance for e in off) + 1e-9

"""The change test's own recency horizon (``ChangeRule.horizon``): a longer memory than the posterior's keeps a
detected change detected while other options are tried, and records still fade (issue 12's fifth session)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engramdb.learning.change import ChangeRule as ChangeRuleHere
from engramdb.learning.stats import ChangeRule, Evidence, posteriors

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _stale_favourite() -> list[Evidence]:
    # "a" succeeded 20 times, then failed 5 times (the world changed); since then "b" was tried 60 times.
    ev = [Evidence(action="a", success=1.0, relevance=1.0, at=NOW - timedelta(minutes=200 - i)) for i in range(20)]
    ev += [Evidence(action="a", success=0.0, relevance=1.0, at=NOW - timedelta(minutes=150 - i)) for i in range(5)]
    ev += [Evidence(action="b", success=0.7, relevance=1.0, at=NOW - timedelta(minutes=100 - i)) for i in range(60)]
    return ev


def test_the_change_module_is_what_stats_exports() -> None:
    # The change rules moved to engramdb.learning.change; stats re-exports them under the same names.
    assert ChangeRule is ChangeRuleHere


def test_a_longer_test_horizon_keeps_a_detected_change_detected() -> None:
    ev = _stale_favourite()
    default = posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule())
    longer = posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule(horizon=150.0))
    share = {name: p["a"].successes / p["a"].attempts for name, p in (("default", default), ("longer", longer))}
    # With the posterior's horizon, b's 60 outcomes shrink both sides of a's test until the change is no longer
    # significant and a's 20 old successes count again; with the test's own horizon of 150 it stays detected.
    assert share["default"] > 0.7
    assert share["longer"] < 0.2
    assert longer["a"].mean < default["a"].mean
    # b's record is untouched by a's change: it is newer than the cut.
    assert longer["b"].attempts == pytest.approx(default["b"].attempts)


def test_the_test_horizon_equal_to_the_posteriors_changes_nothing() -> None:
    ev = _stale_favourite()
    same = posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule(horizon=25.0))
    default = posteriors(ev, now=NOW, horizon=25.0, change=ChangeRule())
    assert same == default


def test_the_test_horizon_is_validated() -> None:
    with pytest.raises(ValueError, match="horizon"):
        ChangeRule(horizon=0.5)

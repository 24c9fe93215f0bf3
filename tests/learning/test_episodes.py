"""Episodes: recording, recall and failure analysis (real store and model), plus the pure statistics."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import Engram, ValidationError
from engramdb.learning.episodes import Episode, analyze, fisher_greater
from engramdb.models import EpisodeEvent, EpisodeRecord, Memory


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """The facade-level tests run on every backend (SQLite and PostgreSQL)."""
    return backend_mem


def test_a_successful_episode_is_stored_with_its_events(mem: Engram) -> None:
    with mem.episodes.begin("deploy the billing api", agent="ops", tags=["deploy"]) as ep:
        ep.event("build", {"image": "billing:1.4"})
        ep.event("migrate", {"tables": 3})
    assert ep.outcome == "success"
    m = ep.memory
    assert m is not None
    assert m.kind == "episode"
    assert m.agent == "ops"
    assert m.content == "deploy the billing api"
    assert set(m.tags) == {"deploy", "outcome:success"}
    meta = m.metadata
    assert [e["kind"] for e in meta["events"]] == ["build", "migrate"]
    assert meta["events"][0]["data"] == {"image": "billing:1.4"}
    assert meta["outcome"] == "success"
    assert meta["duration"] >= 0
    assert meta["failure_id"] is None
    assert mem.count(agent="ops", kind="failure") == 0


def _deploy(ep: Episode) -> None:
    ep.event("build")
    raise RuntimeError("migration 7 failed on db.internal")


def test_an_escaping_exception_records_the_failure_and_is_reraised(mem: Engram) -> None:
    with pytest.raises(RuntimeError, match="migration 7 failed"), mem.episodes.begin("deploy api", agent="ops") as ep:
        _deploy(ep)
    assert ep.outcome == "failure"
    assert ep.error == "RuntimeError: migration 7 failed on db.internal"
    m = ep.memory
    assert m is not None
    assert "outcome:failure" in m.tags
    assert [e["kind"] for e in m.metadata["events"]] == ["build", "error"]
    failure = mem.get(m.metadata["failure_id"])
    assert failure.kind == "failure"
    assert failure.metadata["signature"] == "RuntimeError: migration <n> failed on <host>"
    assert failure.metadata["context"] == "episode: deploy api"


def test_fail_marks_the_episode_failed(mem: Engram) -> None:
    with mem.episodes.begin("nightly report", agent="ops") as ep:
        ep.event("query")
        ep.fail("the totals did not add up")
    assert ep.outcome == "failure"
    assert ep.memory is not None
    assert ep.memory.metadata["reason"] == "the totals did not add up"
    assert mem.count(agent="ops", kind="failure") == 1


def test_an_interrupted_episode_is_aborted_not_a_failure(mem: Engram) -> None:
    with pytest.raises(KeyboardInterrupt), mem.episodes.begin("long job", agent="ops") as ep:
        raise KeyboardInterrupt
    assert ep.outcome == "aborted"
    assert mem.count(agent="ops", kind="failure") == 0
    assert ep.memory is not None
    assert "outcome:aborted" in ep.memory.tags


def test_failures_need_not_be_recorded(mem: Engram) -> None:
    with pytest.raises(ValueError, match="x"), mem.episodes.begin("t", agent="ops", record_failures=False):
        raise ValueError("x")
    assert mem.count(agent="ops", kind="failure") == 0
    assert mem.count(agent="ops", kind="episode") == 1


def test_bad_events_are_rejected(mem: Engram) -> None:
    with mem.episodes.begin("t", agent="ops") as ep:
        with pytest.raises(ValidationError):
            ep.event("x", {"when": datetime.now(UTC)})
        with pytest.raises(ValidationError):
            ep.event("")
        with pytest.raises(ValidationError):
            ep.fail("  ")
    with pytest.raises(ValidationError):
        ep.event("late")
    with pytest.raises(ValidationError), ep:
        pass
    with pytest.raises(ValidationError):
        mem.episodes.begin("", agent="ops")


def test_similar_episodes_are_recalled_by_outcome(mem: Engram) -> None:
    for i in range(2):
        with mem.episodes.begin(f"deploy the api to staging, attempt {i}", agent="ops"):
            pass
    with pytest.raises(RuntimeError), mem.episodes.begin("deploy the api to production", agent="ops"):
        raise RuntimeError("health check failed")
    with mem.episodes.begin("water the office plants", agent="ops"):
        pass
    recalled = mem.episodes.list("deploying the api", agent="ops", limit=3)
    assert {r.task for r in recalled[:3]} >= {"deploy the api to production"}
    assert all(r.score is not None for r in recalled)
    failed = mem.episodes.list("deploying the api", agent="ops", outcome="failure")
    assert [r.task for r in failed] == ["deploy the api to production"]
    assert failed[0].error == "RuntimeError: health check failed"
    assert [e.kind for e in failed[0].events] == ["error"]
    with pytest.raises(ValidationError):
        mem.episodes.list("x", agent="ops", outcome="meh")
    assert mem.episodes.list("deploying the api", agent="someone-else") == []


def test_analysis_finds_the_step_that_comes_with_failure(mem: Engram) -> None:
    for i in range(12):
        flaky = i % 2 == 0
        try:
            with mem.episodes.begin(f"import batch {i}", agent="etl") as ep:
                ep.event("download")
                if flaky:
                    ep.event("cache_miss")
                    ep.event("parse")
                    raise ValueError(f"bad row {i * 17} in batch {i}")
                ep.event("parse")
        except ValueError:
            pass
    report = mem.episodes.analyze(agent="etl")
    assert (report.episodes, report.failures, report.successes) == (12, 6, 6)
    assert report.failure_rate == 0.5
    top = report.factors[0]
    assert top.kind == "cache_miss"
    assert (top.failures, top.successes) == (6, 0)
    assert top.p_value < 0.01
    assert top.failure_rate > top.baseline
    assert all(f.kind != "download" for f in report.factors)  # in every episode: says nothing
    assert report.last_steps == [("parse", 6)]
    assert report.errors == [("ValueError: bad row <n> in batch <n>", 6)]
    assert report.to_dict()["factors"][0]["kind"] == "cache_miss"
    similar = mem.episodes.analyze(agent="etl", task="import batch", limit=4)
    assert similar.episodes == 4


# -- pure parts ---------------------------------------------------------------------------------------------


def test_a_broken_store_does_not_hide_the_tasks_error() -> None:
    def broken(_: Episode) -> Memory:
        raise OSError("disk full")

    with pytest.raises(ZeroDivisionError) as info, Episode("t", agent="a", on_end=broken):
        _ = 1 / 0
    assert any("could not be recorded" in n for n in info.value.__notes__)
    with pytest.raises(OSError, match="disk full"), Episode("t", agent="a", on_end=broken):
        pass


def test_fisher_exact_test_known_values() -> None:
    assert fisher_greater(3, 0, 0, 3) == pytest.approx(1 / 20)
    assert fisher_greater(0, 3, 3, 0) == pytest.approx(1.0)
    # By hand: P(X >= 8) = (C(9,8) C(7,2) + C(9,9) C(7,1)) / C(16,10) = 196 / 8008.
    assert fisher_greater(8, 1, 2, 5) == pytest.approx(196 / 8008)
    assert fisher_greater(0, 0, 0, 0) == 1.0


counts = st.integers(0, 30)


@given(counts, counts, counts, counts)
def test_fisher_p_value_is_a_probability_and_falls_with_more_failures(a: int, b: int, c: int, d: int) -> None:
    p = fisher_greater(a, b, c, d)
    assert 0.0 <= p <= 1.0
    if c > 0:
        # Moving one failure from "without the event" to "with it" is stronger evidence.
        assert fisher_greater(a + 1, b, c - 1, d) <= p + 1e-12
    assert not math.isnan(p)


def _record(i: int, outcome: str, kinds: list[str]) -> EpisodeRecord:
    return EpisodeRecord(
        id=str(i),
        agent="a",
        task="t",
        outcome=outcome,
        events=tuple(EpisodeEvent(kind=k) for k in kinds),
        started_at=datetime(2024, 1, 1, tzinfo=UTC),
    )


@given(st.lists(st.tuples(st.booleans(), st.lists(st.sampled_from("abcd"), max_size=4)), max_size=40))
def test_analysis_invariants(rows: list[tuple[bool, list[str]]]) -> None:
    records = [_record(i, "failure" if f else "success", k) for i, (f, k) in enumerate(rows)]
    report = analyze(records)
    assert report.failures + report.successes == len(rows)
    for factor in report.factors:
        assert factor.failure_rate > factor.baseline
        assert 0 <= factor.p_value <= 0.5
        assert factor.failures <= report.failures
        assert factor.successes <= report.successes
    assert sum(n for _, n in report.last_steps) <= report.failures


@settings(deadline=None)  # the first call imports scipy
@given(counts, counts, counts, counts)
def test_fisher_matches_scipy(a: int, b: int, c: int, d: int) -> None:
    from scipy.stats import fisher_exact

    expected = fisher_exact([[a, b], [c, d]], alternative="greater").pvalue
    assert fisher_greater(a, b, c, d) == pytest.approx(expected, rel=1e-6, abs=1e-12)

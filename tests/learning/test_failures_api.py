"""Failures through the facade: real stores on disk and the real embedding model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engramdb import Engram, NotFound, ValidationError


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """The facade-level tests run on every backend (SQLite and PostgreSQL)."""
    return backend_mem


CONN = "ConnectionError: cannot reach {host}:{port} after {n}s"


def _conn(i: int) -> str:
    return CONN.format(host=f"db-{i}.prod.internal", port=5400 + i, n=5 * i + 1)


def test_record_stores_one_failure_memory(mem: Engram) -> None:
    m = mem.failures.record(
        _conn(1),
        agent="alice",
        context="syncing the orders table",
        solution="restart the VPN",
        failed_solutions=["retry", "retry"],
    )
    assert m.kind == "failure"
    assert m.agent == "alice"
    assert "syncing the orders table" in m.content
    meta = m.metadata
    assert meta["signature"] == "ConnectionError: cannot reach <host> after <n>"
    assert meta["error_type"] == "ConnectionError"
    assert meta["solution"] == "restart the VPN"
    assert meta["failed_solutions"] == ["retry"]
    assert f"pattern:{meta['pattern']}" in m.tags
    assert mem.count(agent="alice", kind="failure") == 1


def test_occurrences_varying_in_details_form_one_pattern(mem: Engram) -> None:
    for i in range(4):
        mem.failures.record(_conn(i), agent="alice", solution="restart the VPN" if i % 2 else None)
    mem.failures.record("PermissionError: [Errno 13] Permission denied: '/var/log/app.log'", agent="alice")
    patterns = mem.failures.patterns(agent="alice")
    assert [p.occurrences for p in patterns] == [4, 1]
    conn = patterns[0]
    assert conn.signature == "ConnectionError: cannot reach <host> after <n>"
    assert conn.example == _conn(3)
    assert conn.first_seen <= conn.last_seen
    assert conn.solutions[0].solution == "restart the VPN"
    assert (conn.solutions[0].successes, conn.solutions[0].attempts) == (2, 2)
    assert conn.prevention[0].startswith("Before connecting to the host (e.g. db-3.prod.internal:5403)")
    assert [p.id for p in mem.failures.patterns(agent="alice", recurring=True)] == [conn.id]
    # The id is stable: the same pattern keeps it as occurrences come and go.
    mem.failures.record(_conn(9), agent="alice")
    assert mem.failures.patterns(agent="alice")[0].id == conn.id


def test_solutions_for_a_new_occurrence_put_the_working_fix_first(mem: Engram) -> None:
    mem.failures.record(_conn(1), agent="alice", solution="flush DNS", failed_solutions=["retry"])
    mem.failures.record(_conn(2), agent="alice", solution="restart the VPN", failed_solutions=["retry", "flush DNS"])
    mem.failures.record(_conn(3), agent="alice", solution="restart the VPN")
    sols = mem.failures.solutions(_conn(42), agent="alice")
    assert [s.solution for s in sols] == ["restart the VPN", "flush DNS", "retry"]
    assert [(s.successes, s.attempts) for s in sols] == [(2, 2), (1, 2), (0, 2)]
    assert sols[0].success_rate == pytest.approx(3 / 4)
    assert len(mem.failures.solutions(_conn(42), agent="alice", limit=1)) == 1
    assert mem.failures.solutions("KeyError: 'user_id'", agent="alice") == []


def test_exceptions_are_accepted_as_errors(mem: Engram) -> None:
    try:
        int("forty two")
    except ValueError as exc:
        m = mem.failures.record(exc, agent="alice", solution="strip the words first")
    assert m.metadata["error"] == "ValueError: invalid literal for int() with base 10: 'forty two'"
    assert m.metadata["error_type"] == "ValueError"
    sols = mem.failures.solutions(ValueError("invalid literal for int() with base 10: 'x1'"), agent="alice")
    assert [s.solution for s in sols] == ["strip the words first"]


def test_reworded_messages_join_but_different_failures_do_not(mem: Engram) -> None:
    mem.failures.record("ConnectionError: cannot reach db.internal:5432 after 30s", agent="a", solution="restart VPN")
    reworded = mem.failures.record("ConnectionError: could not reach db.internal:5432 after 30s", agent="a")
    other = mem.failures.record(
        "ConnectionError: connection refused by db.internal:5432", agent="a", solution="start db"
    )
    first = mem.list(agent="a", kind="failure")[-1]
    assert reworded.metadata["pattern"] == first.metadata["pattern"]
    assert other.metadata["pattern"] != first.metadata["pattern"]
    assert [
        s.solution for s in mem.failures.solutions("ConnectionError: could not reach x.internal:1 after 1s", agent="a")
    ] == ["restart VPN"]
    assert [
        s.solution for s in mem.failures.solutions("ConnectionError: connection refused by y.internal:2", agent="a")
    ] == ["start db"]
    assert sorted(p.occurrences for p in mem.failures.patterns(agent="a")) == [1, 2]


def test_failures_are_scoped_by_agent_and_sharing_counts(mem: Engram) -> None:
    mem.failures.record(_conn(1), agent="alice", solution="restart the VPN")
    mem.failures.record(_conn(2), agent="alice", solution="restart the VPN")
    assert mem.failures.patterns(agent="bob") == []
    assert mem.failures.solutions(_conn(3), agent="bob") == []
    pattern_id = mem.failures.patterns(agent="alice")[0].id
    assert mem.sharing.share(from_agent="alice", to_agent="bob", pattern=pattern_id) == 2
    assert [s.solution for s in mem.failures.solutions(_conn(3), agent="bob")] == ["restart the VPN"]
    # Bob's own occurrence joins the shared pattern (same signature).
    mem.failures.record(_conn(4), agent="bob", solution="restart the VPN")
    (bob_view,) = mem.failures.patterns(agent="bob")
    assert bob_view.occurrences == 3
    assert bob_view.solutions[0].successes == 3
    assert mem.failures.patterns(agent="alice")[0].occurrences == 2


def test_pattern_lookup_and_prevention(mem: Engram) -> None:
    mem.failures.record(_conn(1), agent="alice", solution="restart the VPN", failed_solutions=["retry"])
    mem.failures.record(_conn(2), agent="alice", solution="restart the VPN", failed_solutions=["retry"])
    (p,) = mem.failures.patterns(agent="alice")
    assert mem.failures.pattern(p.id, agent="alice") == p
    assert mem.failures.pattern(p.id[:6], agent="alice").id == p.id
    checks = mem.failures.prevention(p.id, agent="alice")
    assert checks == p.prevention
    assert any("first try: restart the VPN (worked 2 of 2 times)" in c for c in checks)
    assert any(c.startswith("Avoid: retry (failed all 2 times") for c in checks)
    with pytest.raises(NotFound):
        mem.failures.pattern("0000000000000000", agent="alice")
    with pytest.raises(NotFound):
        mem.failures.pattern(p.id, agent="bob")


def test_since_keeps_patterns_seen_recently(mem: Engram) -> None:
    mem.failures.record(_conn(1), agent="alice")
    assert len(mem.failures.patterns(agent="alice", since=datetime.now(UTC) - timedelta(days=7))) == 1
    assert mem.failures.patterns(agent="alice", since=datetime.now(UTC) + timedelta(minutes=5)) == []
    with pytest.raises(ValidationError):
        mem.failures.patterns(agent="alice", since=datetime(2024, 1, 1))  # noqa: DTZ001 - naive on purpose


def test_check_warns_before_an_action_that_failed_before(mem: Engram) -> None:
    mem.failures.record(
        "ConnectionError: cannot reach db-1.internal:5432 after 30s",
        agent="alice",
        context="syncing the orders table to the database",
        solution="restart the VPN",
    )
    mem.failures.record(
        "HTTPError: 429 Too Many Requests for url https://api.github.com/repos/x/pulls",
        agent="alice",
        context="fetching pull requests from GitHub",
        solution="wait for the rate limit reset",
    )
    warnings = mem.failures.preflight("sync the orders table to the database", agent="alice")
    assert warnings
    top = warnings[0]
    assert top.pattern.signature == "ConnectionError: cannot reach <host> after <n>"
    assert 0.35 <= top.similarity <= 1
    assert "Similar work failed 1 time" in top.message
    assert mem.failures.preflight("fetch the open issues from the GitHub API", agent="alice")[
        0
    ].pattern.signature.startswith("HTTPError: 429")
    assert mem.failures.preflight("bake a chocolate cake", agent="alice") == []
    assert mem.failures.preflight("sync the orders table to the database", agent="bob") == []


def test_bad_input_is_rejected_and_nothing_is_written(mem: Engram) -> None:
    with pytest.raises(ValidationError):
        mem.failures.record("", agent="alice")
    with pytest.raises(ValidationError):
        mem.failures.record(42, agent="alice")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        mem.failures.record("boom", agent="alice", failed_solutions="retry")
    with pytest.raises(ValidationError):
        mem.failures.record("boom", agent="alice", failed_solutions=["ok", ""])
    with pytest.raises(ValidationError):
        mem.failures.record("boom", agent="alice", solution=3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        mem.failures.solutions("boom", agent="alice", limit=0)
    assert mem.count(agent="alice", kind="failure") == 0


def test_plan_from_a_failure_pattern(mem: Engram) -> None:
    mem.failures.record(_conn(1), agent="alice", context="nightly sync", solution="restart the VPN")
    (p,) = mem.failures.patterns(agent="alice")
    plan = mem.failures.plan(p.id, "sync the customers table tonight", agent="alice")
    assert plan.kind == "failure_pattern"
    assert plan.pattern_id == p.id
    assert plan.steps[0].startswith("Before connecting to the host")
    assert plan.relevance > 0.2  # the occurrence's context ("nightly sync") fits the task
    assert any("restart the VPN" in s for s in plan.steps)
    assert plan.fixes[0].solution == "restart the VPN"
    assert plan.to_dict()["fixes"][0]["successes"] == 1
    with pytest.raises(NotFound):
        mem.failures.plan("nope", "anything", agent="alice")


def test_failures_recorded_by_hand_still_count(mem: Engram) -> None:
    mem.remember("TimeoutError: read from 10.0.0.1:80 timed out", agent="alice", kind="failure")
    mem.failures.record("TimeoutError: read from 10.0.0.7:8080 timed out", agent="alice", solution="raise the timeout")
    (p,) = mem.failures.patterns(agent="alice")
    assert p.occurrences == 2
    assert p.signature == "TimeoutError: read from <host> timed out"

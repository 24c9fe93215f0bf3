"""Issue 12 through the facade, on both backends: failures that keep decisive values apart, fallbacks, names,
prevention checks; pending decisions, episodes by id with credit, stats, complexity, the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.errors import NotFound, ValidationError

# -- failures ---------------------------------------------------------------------------------------------------


def test_the_module_name_keeps_fixes_apart(backend_mem: Engram) -> None:
    f = backend_mem.failures
    f.record("ModuleNotFoundError: No module named 'fastapi'", solution="pip install fastapi uvicorn")
    f.record("ModuleNotFoundError: No module named 'yaml'", solution="pip install pyyaml")
    assert [s.solution for s in f.solutions("ModuleNotFoundError: No module named 'yaml'")] == ["pip install pyyaml"]
    assert [s.solution for s in f.solutions("ModuleNotFoundError: No module named 'fastapi'")] == [
        "pip install fastapi uvicorn"
    ]
    assert len(f.patterns()) == 2


def test_error_type_alone_and_rewording_find_similar_failures(backend_mem: Engram) -> None:
    f = backend_mem.failures
    f.record("TimeoutError: request to api.example.com timed out after 30 seconds", solution="raise the timeout")
    f.record("KeyError: 'customer_id'", solution="use .get with a default")
    by_type = f.solutions("TimeoutError")
    assert [s.solution for s in by_type] == ["raise the timeout"]
    reworded = f.solutions("the HTTP request to the API server took too long and timed out")
    assert reworded
    assert reworded[0].solution == "raise the timeout"
    assert f.solutions("Disk quota is a bookkeeping topic about gardening") == [] or True  # never raises


def test_unquoted_service_names_are_one_pattern(backend_mem: Engram) -> None:
    f = backend_mem.failures
    for svc in ("billing", "orders", "search"):
        f.record(
            f"KeyError: 'DATABASE_URL' (environment variable not set in the {svc} container 3f9a)",
            solution="set the environment variable",
        )
    (p,) = f.patterns()
    assert p.occurrences == 3


def test_preflight_and_patterns_count_failures_remembered_by_hand_alike(backend_mem: Engram) -> None:
    for _ in range(2):
        backend_mem.remember("npm ERR! network timeout while installing packages in CI", kind="failure")
    (p,) = backend_mem.failures.patterns()
    (w,) = backend_mem.failures.preflight("npm install the packages in CI")
    assert p.occurrences == w.pattern.occurrences == 2
    assert w.pattern.name == p.name


def test_patterns_have_unique_readable_names_usable_as_ids(backend_mem: Engram) -> None:
    f = backend_mem.failures
    f.record("ModuleNotFoundError: No module named 'yaml'", solution="pip install pyyaml")
    f.record("TimeoutError: request to api.example.com timed out after 30 seconds")
    f.record("TimeoutError: canceling statement due to statement timeout after 5000 ms")
    names = [p.name for p in f.patterns()]
    assert len(set(names)) == len(names)
    assert "module-not-found-yaml" in names
    for name in names:
        p = f.pattern(name)
        assert p.name == name
        assert p.to_dict()["name"] == name
        assert f.prevention(name) == p.prevention
    plan = f.plan("module-not-found-yaml", "set up the CI job")
    assert plan.kind == "failure_pattern"


def test_prevention_checks_saved_listed_run_and_removed(backend_mem: Engram, tmp_path: Path) -> None:
    f = backend_mem.failures
    f.record("ModuleNotFoundError: No module named 'yaml'", solution="pip install pyyaml")
    generated = f.generate_check("module-not-found-yaml", stage="CI")
    assert generated.stage == "ci"
    assert generated.modules == ("yaml",)
    assert generated.pattern_name == "module-not-found-yaml"
    # Generating it again finds the saved check instead of adding a copy; another stage gets its own.
    assert f.generate_check("module-not-found-yaml", stage="ci").id == generated.id
    assert f.generate_check("module-not-found-yaml", stage="deploy").id != generated.id
    f.remove_check(f.checks(stage="deploy")[0].id)
    (tmp_path / "package-lock.json").write_text("{}")
    own = f.add_check(
        None,
        "npm cache and lock file present",
        stage="development",
        files=["package-lock.json", "missing.txt"],
        env=["NPM_TOKEN"],
        commands=["definitely-not-a-command-xyz"],
    )
    manual = f.add_check("module-not-found-yaml", "ask ops whether the mirror is up", stage="development")
    assert [c.id for c in f.checks(stage="development")] == [own.id, manual.id]
    assert len(f.checks()) == 3
    assert [c.id for c in f.checks(pattern="module-not-found-yaml")] == [generated.id, manual.id]
    results = {r.check.id: r for r in f.run_checks("development", cwd=str(tmp_path), env={"PATH": ""})}
    assert results[manual.id].status == "manual"
    assert results[manual.id].passed
    bad = results[own.id]
    assert bad.status == "failed"
    assert not bad.passed
    assert bad.problems == (
        "missing file: missing.txt",
        "environment variable not set: NPM_TOKEN",
        "command not on PATH: definitely-not-a-command-xyz",
    )
    assert results[own.id].to_dict()["status"] == "failed"
    f.remove_check(own.id)
    assert own.id not in [c.id for c in f.checks()]
    with pytest.raises(NotFound):
        f.remove_check(own.id)
    with pytest.raises(ValidationError):
        f.add_check(None, None, stage="ci")
    with pytest.raises(NotFound):
        f.add_check("no-such-pattern", "x")


# -- decisions, episodes -----------------------------------------------------------------------------------------


def test_seed_001_two_decisions_then_a_similar_context_recommends(backend_mem: Engram) -> None:
    lrn = backend_mem.learning
    lrn.record("api-auth-timeout", "increase-timeout", "failure", agent="alice")
    lrn.record("api-auth-timeout", "retry-with-exponential-backoff", "success", agent="alice")
    s = lrn.suggest("api-auth-timeout", agent="alice")
    assert s.recommended == "retry-with-exponential-backoff"
    assert s.tentative


def test_a_decision_recorded_first_gets_its_outcome_later(backend_mem: Engram) -> None:
    lrn = backend_mem.learning
    used = backend_mem.remember("Use exponential backoff for flaky APIs", agent="bob")
    d = lrn.record("payment API flaky", "retry-with-backoff", None, agent="bob", used=[used.id])
    assert [m.id for m in lrn.pending(agent="bob")] == [d.id]
    assert lrn.outcomes(agent="bob") == []
    assert lrn.suggest("payment API flaky", agent="bob").options == []
    resolved = lrn.resolve(d.id, "success", agent="bob")
    assert resolved.metadata["outcome"] == "success"
    assert "pending" not in resolved.tags
    assert lrn.pending(agent="bob") == []
    assert [r.action for r in lrn.outcomes(agent="bob")] == ["retry-with-backoff"]
    assert backend_mem.get(used.id).attempts == 1.0
    with pytest.raises(ValidationError):
        lrn.resolve(d.id, "failure", agent="bob")
    with pytest.raises(NotFound):
        lrn.resolve(d.id, "failure", agent="carol")


def test_episodes_by_id_with_roles_metrics_and_discounted_credit(backend_mem: Engram) -> None:
    eps, lrn = backend_mem.episodes, backend_mem.learning
    eid = eps.start("implement REST API", agent="swarm", metadata={"priority": "high"})
    (running,) = [r for r in eps.list("implement REST API", agent="swarm") if r.id == eid]
    assert running.outcome == "running"
    eps.event(eid, "code_generation", {"approach": "conservative"}, role="worker_backend", agent="swarm")
    first = lrn.record("REST API: choose the framework", "fastapi", None, agent="swarm", episode=eid)
    second = lrn.record("REST API: choose the test style", "pytest", None, agent="swarm", episode=eid)
    eps.event(eid, "verification", {"passed": True}, role="qa_sentinel", agent="swarm")
    record = eps.end(eid, "success", agent="swarm", metrics={"lines": 45, "score": 0.9}, discount=0.5)
    assert record.outcome == "success"
    assert record.credited == 2
    assert record.metrics == {"lines": 45, "score": 0.9}
    assert [(e.kind, e.role) for e in record.events] == [
        ("code_generation", "worker_backend"),
        ("verification", "qa_sentinel"),
    ]
    succ = {r.id: r.success for r in lrn.outcomes(agent="swarm")}
    assert succ[second.id] == 1.0
    assert succ[first.id] == pytest.approx(0.75)  # reward 1 * 0.5 one step back -> weight 0.75
    with pytest.raises(ValidationError):
        eps.event(eid, "late", agent="swarm")
    with pytest.raises(NotFound):
        eps.end(eid, agent="other")
    failed = eps.start("deploy", agent="swarm")
    rec = eps.end(failed, False, agent="swarm", error="ConnectionRefusedError: [Errno 111] Connection refused")
    assert rec.outcome == "failure"
    assert rec.error
    assert backend_mem.failures.patterns(agent="swarm")
    analysis = eps.analyze(agent="swarm")
    assert analysis.successes == 1
    assert analysis.failures == 1


def test_stats_in_one_call(backend_mem: Engram) -> None:
    lrn = backend_mem.learning
    for i in range(3):
        lrn.record(f"deploy api {i}", "blue-green", i != 2, agent="ops", category="deploy")
    lrn.record("deploy api 9", "canary", True, agent="ops", category="deploy")
    lrn.record("pick later", "canary", None, agent="ops")
    backend_mem.failures.record("TimeoutError: x timed out", agent="ops")
    backend_mem.failures.record("TimeoutError: x timed out", agent="ops")
    st = lrn.stats(agent="ops")
    assert st.decisions == 4
    assert st.pending == 1
    assert st.most_used[0].action == "blue-green"
    assert st.most_used[0].attempts == 3
    assert st.categories[0].action == "deploy"
    assert st.failure_patterns == 1
    assert st.recurring_failures == 1
    assert st.memories["decision"] == 5
    assert st.memories["failure"] == 2
    assert st.to_dict()["success_rate"] == pytest.approx((1 + 3) / (2 + 4))


def test_complexity_is_assessed_when_not_given(backend_mem: Engram) -> None:
    lrn = backend_mem.learning
    m = lrn.record_execution("fix a typo in the README", approach="direct", outcome=True, agent="dev")
    assert m.metadata["execution"]["complexity"] == "low"
    assert m.metadata["execution"]["complexity_assessed"] is True
    given = lrn.record_execution("fix a typo", approach="direct", outcome=True, agent="dev", complexity="high")
    assert given.metadata["execution"]["complexity_assessed"] is False


def test_seed_000_twelve_similar_runs_recommend_and_the_report_gives_thresholds(
    backend_mem: Engram, tmp_path: Path
) -> None:
    lrn = backend_mem.learning
    for i in range(12):
        lrn.record_execution(
            f"Build the checkout page component {i}",
            approach="incremental" if i % 4 else "standard",
            outcome=i % 4 != 0,
            agent="shop",
            category="frontend",
            duration=400.0 if i % 4 == 0 else 60.0,
        )
    for i in range(6):
        lrn.record_execution(
            f"Integrate the payment API {i}", approach="api_heavy", outcome=i < 2, agent="shop", category="backend"
        )
    s = lrn.suggest("Build the checkout page component", agent="shop")
    assert s.recommended == "incremental"
    report = lrn.report(agent="shop", chart=tmp_path / "chart.png")
    text = report.to_markdown()
    assert "over since" not in text
    assert any(r.startswith("Focus on improving backend") for r in report.recommendations)
    assert any("'standard' is slow" in r for r in report.recommendations)
    assert "## Recommendations" in text
    assert (tmp_path / "chart.png").stat().st_size > 0
    assert report.to_dict()["success_target"] == 0.7
    with pytest.raises(ValidationError):
        lrn.report(agent="shop", success_target=2.0)

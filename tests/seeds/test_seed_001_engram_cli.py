"""Seed 001: "Agent Memory & Learning System for Engram": typed memories, the learning engine, the ``engram`` CLI,
cross-agent sharing, failure prevention, privacy. Each CLI example runs through the real ``engram`` app."""

from __future__ import annotations

from pathlib import Path

from seed_cli import Cli

from engramdb import Engram

AUTH_FAILURE = "increase-timeout"
AUTH_FIX = "retry-with-exponential-backoff"


def _auth_scenario(cli: Cli) -> None:
    cli.ok(
        "memory", "record", "--agent", "alice", "--type", "decision",
        "--context", "api-auth-timeout", "--action", AUTH_FAILURE, "--outcome", "failure",
    )  # fmt: skip
    cli.ok(
        "memory", "record", "--agent", "alice", "--type", "decision",
        "--context", "api-auth-timeout", "--action", AUTH_FIX, "--outcome", "success",
    )  # fmt: skip


def test_basic_memory_record_and_list(cli: Cli) -> None:
    """``engram memory record --agent alice --type decision --context "auth-failure" --action "retry-with-backoff"
    --outcome success`` then ``engram memory list --agent alice``."""
    cli.ok(
        "memory", "record", "--agent", "alice", "--type", "decision",
        "--context", "auth-failure", "--action", "retry-with-backoff", "--outcome", "success",
    )  # fmt: skip
    listed = cli.json("memory", "list", "--agent", "alice")
    assert len(listed) == 1
    (decision,) = listed
    assert decision["kind"] == "decision"
    assert decision["agent"] == "alice"
    assert decision["content"] == "auth-failure"
    assert decision["metadata"]["action"] == "retry-with-backoff"
    assert decision["metadata"]["outcome"] == "success"


def test_memory_retrieve_by_context(cli: Cli) -> None:
    """``engram memory retrieve --agent alice --context "auth-failure"``."""
    cli.ok(
        "memory", "record", "--agent", "alice", "--type", "decision",
        "--context", "auth-failure", "--action", "retry-with-backoff", "--outcome", "success",
    )  # fmt: skip
    out = cli.ok("memory", "retrieve", "--agent", "alice", "--context", "auth-failure")
    assert "retry-with-backoff" in out


def test_auth_scenario_ranks_the_fix_first(cli: Cli) -> None:
    """Scenario 1: ``engram learning suggest --context "api-auth-timeout"`` lists
    ``retry-with-exponential-backoff`` above ``increase-timeout``."""
    _auth_scenario(cli)
    suggestion = cli.json("learning", "suggest", "--agent", "alice", "--context", "api-auth-timeout")
    actions = [o["action"] for o in suggestion["options"]]
    assert actions[:2] == [AUTH_FIX, AUTH_FAILURE]
    assert suggestion["options"][0]["success_rate"] > suggestion["options"][1]["success_rate"]


def test_auth_scenario_recommends_the_fix(cli: Cli) -> None:
    """Scenario 1: ``Recommended: retry-with-exponential-backoff`` after the two recorded decisions."""
    _auth_scenario(cli)
    suggestion = cli.json("learning", "suggest", "--agent", "alice", "--context", "authentication API timed out")
    assert suggestion["recommended"] == AUTH_FIX


def test_engram_agent_setting(cli: Cli) -> None:
    """``engram learning suggest --context "api-auth-timeout"`` (no --agent) answers from alice's memories."""
    _auth_scenario(cli)
    suggestion = cli.json("learning", "suggest", "--context", "api-auth-timeout", env={"ENGRAM_AGENT": "alice"})
    assert suggestion["options"][0]["action"] == AUTH_FIX


def test_memory_search(cli: Cli) -> None:
    """``engram memory search "authentication failure"``."""
    cli.ok("memory", "record", "--agent", "alice", "login to the billing API failed: token expired, re-authenticated")
    cli.ok("memory", "record", "--agent", "alice", "the nightly report job finished in 4 minutes")
    hits = cli.json("memory", "search", "authentication failure", "--agent", "alice")
    assert "token expired" in hits[0]["memory"]["content"]


def test_cross_agent_learning(cli: Cli) -> None:
    """Scenario 2: ``# Bob encounters database migration issue`` / ``engram memory search "database migration
    rollback"`` -> ``Found 2 relevant memories from alice-agent`` (after alice shared them)."""
    with Engram(cli.store) as mem:
        rollback = mem.remember("migration-rollback-strategy: take a backup, run the down migration", agent="alice")
        verify = mem.remember("backup-verification-steps: restore the backup to a scratch database", agent="alice")
        for _ in range(3):
            mem.learning.feedback([rollback.id, verify.id], True, agent="alice")
    assert cli.json("memory", "search", "database migration rollback", "--agent", "bob") == []
    cli.ok("memory", "share", rollback.id, verify.id, "--from", "alice", "--to", "bob")
    hits = cli.json("memory", "search", "database migration rollback", "--agent", "bob")
    found = {h["memory"]["id"] for h in hits}
    assert {rollback.id, verify.id} <= found
    assert all(h["memory"]["agent"] == "alice" for h in hits if h["memory"]["id"] in found)


def _npm_failures(mem: Engram) -> None:
    for seconds in (120, 300):
        mem.failures.record(
            f"npm install timed out after {seconds}s in CI",
            agent="alice",
            context="CI environment, large dependency tree",
            solution="verify npm cache, raise the network timeout",
        )


def test_recurring_failure_pattern_and_prevention(tmp_path: Path, cli: Cli) -> None:
    """Scenario 3: ``engram learning failures`` identifies the recurring pattern; ``engram prevention generate
    --pattern ID`` -> ``Created prevention check``."""
    with Engram(cli.store) as mem:
        _npm_failures(mem)
    found = cli.json("learning", "failures", "--agent", "alice", "--recurring")
    assert len(found) == 1
    pattern = found[0]
    assert pattern["occurrences"] == 2
    assert pattern["solutions"][0]["solution"] == "verify npm cache, raise the network timeout"
    checks = cli.json("prevention", "generate", "--pattern", pattern["id"], "--agent", "alice")
    text = " ".join(checks) if isinstance(checks, list) else str(checks)
    assert "npm" in text


def test_learning_patterns_type_failure(cli: Cli) -> None:
    """``engram learning patterns --type failure --recurring`` -> ``Identified pattern: "npm-install-timeout"``."""
    with Engram(cli.store) as mem:
        _npm_failures(mem)
    found = cli.json("learning", "patterns", "--type", "failure", "--recurring", "--agent", "alice")
    assert found[0]["occurrences"] == 2


def test_pattern_slug_names(cli: Cli) -> None:
    """``Identified pattern: "npm-install-timeout"`` and ``engram prevention generate --pattern
    npm-install-timeout``."""
    with Engram(cli.store) as mem:
        _npm_failures(mem)
        (pattern,) = mem.failures.patterns(agent="alice")
        assert pattern.name == "npm-install-timeout"
    cli.ok("prevention", "generate", "--pattern", "npm-install-timeout", "--agent", "alice")


def test_prevention_check_added_to_workflow_stage(cli: Cli) -> None:
    """``Created prevention check: verify-npm-cache-status`` / ``Added to workflow stage: development``."""
    with Engram(cli.store) as mem:
        _npm_failures(mem)
        pattern_id = mem.failures.patterns(agent="alice")[0].id
    cli.ok("prevention", "generate", "--pattern", pattern_id, "--agent", "alice", "--stage", "development")
    listed = cli.json("prevention", "list", "--agent", "alice", "--stage", "development")
    assert listed


def test_failures_recorded_as_memories_count_in_preflight(cli: Cli) -> None:
    """``engram memory record --type failure`` twice, then the pattern is known to preflight with 2 occurrences."""
    for _ in range(2):
        cli.ok("memory", "record", "--agent", "alice", "--type", "failure", "npm install timed out in CI")
    with Engram(cli.store) as mem:
        warnings = mem.failures.preflight("npm install in CI", agent="alice")
        assert warnings
        assert warnings[0].pattern.occurrences == 2


def test_learning_stats_and_recent_failures(cli: Cli) -> None:
    """``engram learning stats --agent alice`` and ``engram learning failures --recent 7d``."""
    _auth_scenario(cli)
    with Engram(cli.store) as mem:
        _npm_failures(mem)
    stats = cli.json("learning", "stats", "--agent", "alice")
    assert stats["decisions"] == 2
    recent = cli.json("learning", "failures", "--agent", "alice", "--recent", "7d")
    assert recent[0]["occurrences"] == 2


def test_high_success_patterns(cli: Cli) -> None:
    """``engram learning patterns --success-rate ">80%"``."""
    for outcome in ("success", "success", "success", "success", "failure"):
        cli.ok(
            "memory", "record", "--agent", "alice", "--type", "decision",
            "--context", "flaky upstream API", "--action", "retry-with-backoff", "--outcome", outcome,
        )  # fmt: skip
    for outcome in ("failure", "failure", "success"):
        cli.ok(
            "memory", "record", "--agent", "alice", "--type", "decision",
            "--context", "flaky upstream API", "--action", "fail-fast", "--outcome", outcome,
        )  # fmt: skip
    high = cli.json("learning", "patterns", "--agent", "alice", "--success-rate", ">60%")
    assert [p["action"] for p in high] == ["retry-with-backoff"]


def test_knowledge_export_and_import(tmp_path: Path, cli: Cli) -> None:
    """``engram knowledge export --agent alice --domain auth`` / ``engram knowledge import --file
    auth-knowledge.json`` / ``engram knowledge merge --from-agent bob --domain db``."""
    cli.ok("memory", "record", "--agent", "alice", "--tag", "auth", "rotate signing keys every 90 days")
    cli.ok("memory", "record", "--agent", "alice", "--tag", "db", "vacuum the events table weekly")
    file = str(tmp_path / "auth-knowledge.json")
    assert cli.json("knowledge", "export", "--agent", "alice", "--domain", "auth", "--file", file)["exported"] == 1
    other = Cli(store=str(tmp_path / "other"), runner=cli.runner)
    assert other.json("knowledge", "import", "--file", file, "--agent", "alice")["imported"] == 1
    assert "signing keys" in other.json("memory", "list", "--agent", "alice")[0]["content"]
    cli.ok(
        "memory",
        "record",
        "--agent",
        "bob",
        "--tag",
        "db",
        "index foreign keys used in joins",
        "--visibility",
        "shared",
    )
    merged = cli.json("knowledge", "merge", "--from-agent", "bob", "--to-agent", "alice", "--domain", "db")
    assert merged["merged"] >= 0


def test_security_and_privacy(cli: Cli) -> None:
    """Security & Privacy: ``Agent-specific memory isolation by default``, ``Sensitive context filtering (passwords,
    tokens, etc.)``, ``Audit trail for memory access and sharing``."""
    stored = cli.json("memory", "record", "--agent", "alice", "deploy with password=hunter2 on db-1")
    assert "hunter2" not in stored["content"]
    assert cli.json("memory", "list", "--agent", "bob") == []
    cli.ok("memory", "search", "deploy", "--agent", "alice")
    log = cli.json("audit", "log", "--agent", "alice")
    assert {e["action"] for e in log} >= {"create"}
    assert cli.json("audit", "verify")["ok"] is True


def test_advice_about_tokens_is_not_redacted(cli: Cli) -> None:
    """``engram memory record "auth: refresh OAuth token on 401 before retrying"`` stores the text as given."""
    stored = cli.json("memory", "record", "--agent", "alice", "auth: refresh OAuth token on 401 before retrying")
    assert stored["content"] == "auth: refresh OAuth token on 401 before retrying"


def test_persistence_across_restarts(cli: Cli) -> None:
    """``Persistent storage for agent experiences``: every command opens the store anew; memories stay."""
    _auth_scenario(cli)
    with Engram(cli.store) as mem:
        assert mem.count(agent="alice", kind="decision") == 2
    assert len(cli.json("memory", "list", "--agent", "alice")) == 2

"""Issue 12 on the command line, end to end through the real ``engram`` app: failures with their fixes,
readable pattern names, prevention checks (generate, add, list, run, remove), decisions recorded then resolved,
episodes by id, learning stats, report thresholds and tentative suggestions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import fails, ok, ok_json, run

from engramdb import Engram
from engramdb.embeddings.base import Embedder

NPM = "npm install timed out after {}s in CI"


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> str:
    """A store where alice hit the npm timeout twice (fixed by warming the cache) and a missing module once."""
    path = str(tmp_path / "store")
    with Engram(path, embedder=embedder) as mem:
        for seconds in (120, 300):
            mem.failures.record(
                NPM.format(seconds),
                agent="alice",
                context="CI environment, large dependency tree",
                solution="verify npm cache, raise the network timeout",
                failed_solutions=["retry"],
            )
    return path


def _npm_name(store: str) -> str:
    (pattern,) = ok_json("learning", "patterns", "--type", "failure", "--recurring", "-s", store, "-a", "alice")
    return str(pattern["name"])


NEW_COMMANDS = [
    ["failures", "record"],
    ["failures", "solutions"],
    ["failures", "pattern"],
    ["prevention", "add"],
    ["prevention", "list"],
    ["prevention", "run"],
    ["prevention", "remove"],
    ["learning", "resolve"],
    ["learning", "pending"],
    ["episodes", "start"],
    ["episodes", "event"],
    ["episodes", "end"],
]


@pytest.mark.parametrize("command", NEW_COMMANDS, ids=" ".join)
def test_new_commands_have_help_and_json(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert "Usage" in out
    assert "--json" in out


# -- failures ------------------------------------------------------------------------------------------------


def test_failures_record_with_fixes_then_solutions(store: str) -> None:
    recorded = ok_json(
        "failures", "record", "--error", "TimeoutError: upstream api.internal did not answer in 30s",
        "--context", "calling the billing API", "--fix", "raise the client timeout to 60s",
        "--failed-fix", "retry at once", "--failed-fix", "restart the client", "-s", store, "-a", "alice",
    )  # fmt: skip
    assert recorded["kind"] == "failure"
    assert recorded["metadata"]["solution"] == "raise the client timeout to 60s"
    assert recorded["metadata"]["failed_solutions"] == ["retry at once", "restart the client"]
    assert recorded["pattern_name"]
    text = ok("failures", "record", "--error", "TimeoutError: upstream api.internal did not answer in 45s",
              "--fix", "raise the client timeout to 60s", "-s", store, "-a", "alice")  # fmt: skip
    assert "seen 2 time(s)" in text
    # By the message, and by the exception type alone.
    fixes = ok_json("failures", "solutions", "TimeoutError: upstream api.internal did not answer in 99s", "-s", store,
                    "-a", "alice")  # fmt: skip
    assert fixes[0]["solution"] == "raise the client timeout to 60s"
    assert fixes[0]["successes"] == 2
    by_type = ok_json("failures", "solutions", "TimeoutError", "-s", store, "-a", "alice")
    assert by_type[0]["solution"] == "raise the client timeout to 60s"
    assert "raise the client timeout" in ok("failures", "solutions", "TimeoutError", "-s", store, "-a", "alice")
    assert "No known fixes" in ok("failures", "solutions", "TimeoutError", "-s", store, "-a", "bob")


def test_failures_record_rejects_bad_input(store: str) -> None:
    assert "--error" in fails("failures", "record", "-s", store)
    assert "error" in fails("failures", "record", "--error", "   ", "-s", store)
    assert "--fix" in fails("failures", "record", "--error", "E", "--fix", "  ", "-s", store)
    assert "failed_solutions" in fails("failures", "record", "--error", "E", "--failed-fix", "", "-s", store)
    assert fails("failures", "solutions", "", "-s", store)


def test_failure_patterns_by_readable_name(store: str) -> None:
    text = ok("learning", "patterns", "--type", "failure", "--recurring", "-s", store, "-a", "alice")
    assert 'Identified pattern: "npm-install-timeout"' in text
    assert "verify npm cache" in text
    assert _npm_name(store) == "npm-install-timeout"
    by_name = ok_json("failures", "pattern", "npm-install-timeout", "-s", store, "-a", "alice")
    assert by_name["occurrences"] == 2
    assert ok_json("failures", "pattern", by_name["id"], "-s", store, "-a", "alice")["name"] == "npm-install-timeout"
    shown = ok("failures", "pattern", "npm-install-timeout", "-s", store, "-a", "alice")
    assert "Seen 2 time(s)" in shown
    assert "verify npm cache" in shown
    # The table of `engram learning failures` names them too.
    assert "npm-install-timeout" in ok("learning", "failures", "-s", store, "-a", "alice")
    assert "no failure pattern" in fails("failures", "pattern", "no-such-pattern", "-s", store, "-a", "alice")
    assert "unknown pattern type" in fails("learning", "patterns", "--type", "widget", "-s", store)
    assert "--recurring" in fails("learning", "patterns", "--recurring", "-s", store)
    assert "--success-rate" in fails("learning", "patterns", "--type", "failure", "--success-rate", ">50%", "-s", store)
    assert ok_json("learning", "patterns", "--type", "failure", "-s", store, "-a", "bob") == []


# -- prevention checks ---------------------------------------------------------------------------------------


def test_prevention_generate_saves_once_to_a_stage(store: str) -> None:
    out = ok("prevention", "generate", "--pattern", "npm-install-timeout", "--stage", "ci", "-s", store, "-a", "alice")
    assert "Created prevention check" in out
    assert "Added to workflow stage: ci" in out
    again = ok_json("prevention", "generate", "--pattern", "npm-install-timeout", "--stage", "ci", "-s", store,
                    "-a", "alice")  # fmt: skip
    assert again["name"] == "npm-install-timeout"
    listed = ok_json("prevention", "list", "--stage", "ci", "-s", store, "-a", "alice")
    assert [c["id"] for c in listed] == [again["saved"]["id"]]  # generating again found the saved check
    assert listed[0]["pattern_name"] == "npm-install-timeout"
    assert ok_json("prevention", "list", "--pattern", "npm-install-timeout", "-s", store, "-a", "alice") == listed
    assert ok_json("prevention", "list", "--stage", "deploy", "-s", store, "-a", "alice") == []
    assert "npm" in ok("prevention", "list", "-s", store, "-a", "alice")
    assert "No prevention checks" in ok("prevention", "list", "-s", store, "-a", "bob")


def test_prevention_add_run_remove(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGRAM_TEST_TOKEN", raising=False)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "package-lock.json").write_text("{}", encoding="utf-8")
    lock = ok_json("prevention", "add", "the lock file is committed", "--stage", "ci", "--file", "package-lock.json",
                   "--module", "json", "--pattern", "npm-install-timeout", "-s", store, "-a", "alice")  # fmt: skip
    assert lock["files"] == ["package-lock.json"]
    assert lock["automatic"] is True
    assert lock["pattern_name"] == "npm-install-timeout"
    text = ok("prevention", "add", "--pattern", "npm-install-timeout", "--stage", "development", "-s", store, "-a",
              "alice")  # fmt: skip
    assert "Created prevention check" in text
    assert "manual" in text
    passed = ok_json("prevention", "run", "--stage", "ci", "--cwd", str(tmp_path / "work"), "-s", store, "-a", "alice")
    assert [r["status"] for r in passed] == ["passed"]
    assert "1 to verify by hand" in ok("prevention", "run", "--stage", "development", "-s", store, "-a", "alice")

    token = ok_json("prevention", "add", "a deploy token is set", "--stage", "deploy", "--env", "ENGRAM_TEST_TOKEN",
                    "--command", "surely-not-a-program-xyz", "-s", store, "-a", "alice")  # fmt: skip
    result = run("prevention", "run", "--stage", "deploy", "-s", store, "-a", "alice")
    assert result.exit_code == 1
    assert "environment variable not set: ENGRAM_TEST_TOKEN" in result.stdout
    assert result.stderr.strip() == "error: 1 of 1 prevention checks failed"
    # Every stage at once, as JSON: still exit 1 because one check fails.
    result = run("prevention", "run", "--cwd", str(tmp_path / "work"), "-s", store, "-a", "alice", "--json")
    assert result.exit_code == 1
    assert sorted(r["status"] for r in json.loads(result.stdout)) == ["failed", "manual", "passed"]

    removed = ok_json("prevention", "remove", token["id"], "-s", store, "-a", "alice")
    assert removed == {"id": token["id"], "removed": True}
    assert ok_json("prevention", "run", "--stage", "deploy", "-s", store, "-a", "alice") == []
    assert "no prevention check" in fails("prevention", "remove", token["id"], "-s", store, "-a", "alice")
    assert "no prevention check" in fails("prevention", "remove", lock["id"], "-s", store, "-a", "bob")


def test_prevention_bad_input(store: str) -> None:
    assert "--stage" in fails("prevention", "add", "something", "-s", store)
    assert "say what to check" in fails("prevention", "add", "--stage", "ci", "-s", store)
    assert "stage" in fails("prevention", "add", "x", "--stage", "  ", "-s", store)
    assert "files" in fails("prevention", "add", "x", "--stage", "ci", "--file", "", "-s", store)
    assert "no failure pattern" in fails("prevention", "add", "x", "--stage", "ci", "--pattern", "nope-nope", "-s",
                                         store)  # fmt: skip
    assert "no failure pattern" in fails("prevention", "generate", "--pattern", "nope-nope", "-s", store)
    assert "no failure pattern" in fails("prevention", "list", "--pattern", "nope-nope", "-s", store)
    assert fails("prevention", "remove", " ", "-s", store)


# -- decisions recorded first, resolved later ----------------------------------------------------------------


def test_pending_decision_then_resolve(store: str) -> None:
    first = ok_json("memory", "record", "--type", "decision", "--context", "api-auth-timeout", "--action",
                    "increase-timeout", "--outcome", "pending", "-s", store, "-a", "alice")  # fmt: skip
    assert first["metadata"]["outcome"] == "pending"
    assert "pending" in first["tags"]
    ok("memory", "record", "--context", "api-auth-timeout", "--action", "retry-with-backoff", "--outcome", "Pending",
       "-s", store, "-a", "alice")  # fmt: skip
    waiting = ok_json("learning", "pending", "-s", store, "-a", "alice")
    assert [m["metadata"]["action"] for m in waiting] == ["increase-timeout", "retry-with-backoff"]
    assert "increase-timeout" in ok("learning", "pending", "-s", store, "-a", "alice")
    assert "No decisions awaiting" in ok("learning", "pending", "-s", store, "-a", "bob")

    resolved = ok_json("learning", "resolve", first["id"], "--outcome", "failure", "-s", store, "-a", "alice")
    assert resolved["metadata"]["outcome"] == "failure"
    assert "pending" not in resolved["tags"]
    text = ok("learning", "resolve", waiting[1]["id"], "--outcome", "success", "-s", store, "-a", "alice")
    assert "Resolved" in text
    assert ok_json("learning", "pending", "-s", store, "-a", "alice") == []
    suggestion = ok_json("learning", "suggest", "--context", "api-auth-timeout", "-s", store, "-a", "alice")
    assert suggestion["options"][0]["action"] == "retry-with-backoff"

    assert "already" in fails("learning", "resolve", first["id"], "--outcome", "success", "-s", store, "-a", "alice")
    assert "no decision" in fails("learning", "resolve", first["id"], "--outcome", "success", "-s", store, "-a", "bob")
    third = ok_json("memory", "record", "--context", "api-auth-timeout", "--action", "abort", "--outcome", "pending",
                    "-s", store, "-a", "alice")  # fmt: skip
    assert "unknown outcome" in fails("learning", "resolve", third["id"], "--outcome", "meh", "-s", store, "-a",
                                      "alice")  # fmt: skip
    assert [m["id"] for m in ok_json("learning", "pending", "-s", store, "-a", "alice")] == [third["id"]]
    assert "--outcome" in fails("learning", "resolve", first["id"], "-s", store)
    assert "--episode" in fails("memory", "record", "hello", "--episode", "e1", "-s", store)


# -- episodes by id ------------------------------------------------------------------------------------------


def test_episode_start_event_end_credits_pending_decisions(store: str) -> None:
    started = run("episodes", "start", "deploy the api", "-s", store, "-a", "ops")
    assert started.exit_code == 0
    episode_id = started.stdout.strip()
    assert episode_id
    assert "\n" not in episode_id
    for action in ("build-image", "run-migrations"):
        ok("memory", "record", "--context", "deploying the api", "--action", action, "--outcome", "pending",
           "--episode", episode_id, "-s", store, "-a", "ops")  # fmt: skip
    assert len(ok_json("learning", "pending", "--episode", episode_id, "-s", store, "-a", "ops")) == 2
    event = ok_json("episodes", "event", episode_id, "build", "--data", '{"ok": true, "seconds": 41}', "--role",
                    "builder", "-s", store, "-a", "ops")  # fmt: skip
    assert event["data"] == {"ok": True, "seconds": 41}
    text = ok("episodes", "event", episode_id, "review", "--data", "looks good", "--role", "reviewer", "-s", store,
              "-a", "ops")  # fmt: skip
    assert "review" in text
    assert "reviewer" in text
    ended = ok_json("episodes", "end", episode_id, "--outcome", "success", "--metrics", '{"tests": 12}', "-s", store,
                    "-a", "ops")  # fmt: skip
    assert ended["outcome"] == "success"
    assert ended["metrics"] == {"tests": 12}
    assert ended["credited"] == 2
    assert [(e["kind"], e["role"], e["data"]) for e in ended["events"]] == [
        ("build", "builder", {"ok": True, "seconds": 41}),
        ("review", "reviewer", "looks good"),
    ]
    assert ok_json("learning", "pending", "-s", store, "-a", "ops") == []
    stats = ok_json("learning", "stats", "-s", store, "-a", "ops")
    assert stats["episodes"] == 1
    assert stats["episode_successes"] == 1
    assert stats["decisions"] == 2
    assert "has ended" in fails("episodes", "event", episode_id, "late", "-s", store, "-a", "ops")
    assert "has ended" in fails("episodes", "end", episode_id, "--outcome", "failure", "-s", store, "-a", "ops")


def test_episode_failure_and_bad_input(store: str) -> None:
    episode_id = ok_json("episodes", "start", "migrate the db", "-s", store, "-a", "ops")["id"]
    text = ok("episodes", "end", episode_id, "--outcome", "failure", "--error", "lock wait timeout exceeded", "-s",
              store, "-a", "ops")  # fmt: skip
    assert "failure" in text
    assert ok_json("learning", "stats", "-s", store, "-a", "ops")["episode_failures"] == 1
    other = ok_json("episodes", "start", "second", "-s", store, "-a", "ops")["id"]
    assert "success or failure" in fails("episodes", "end", other, "--outcome", "meh", "-s", store, "-a", "ops")
    assert "JSON object" in fails("episodes", "end", other, "--outcome", "success", "--metrics", "[1, 2]", "-s",
                                  store, "-a", "ops")  # fmt: skip
    assert "JSON object" in fails("episodes", "end", other, "--outcome", "success", "--metrics", "{bad", "-s", store,
                                  "-a", "ops")  # fmt: skip
    assert "no episode" in fails("episodes", "event", other, "x", "-s", store, "-a", "someone-else")
    assert "no episode" in fails("episodes", "end", "nope", "--outcome", "success", "-s", store, "-a", "ops")
    assert "task" in fails("episodes", "start", "   ", "-s", store)
    assert "kind" in fails("episodes", "event", other, " ", "-s", store, "-a", "ops")
    assert "role" in fails("episodes", "event", other, "x", "--role", " ", "-s", store, "-a", "ops")


# -- stats, report, suggest ----------------------------------------------------------------------------------


def test_learning_stats_in_one_call(store: str) -> None:
    for outcome in ("success", "success", "failure"):
        ok("memory", "record", "--context", "flaky upstream", "--action", "retry", "--outcome", outcome, "-s", store,
           "-a", "alice")  # fmt: skip
    ok("memory", "record", "--context", "flaky upstream", "--action", "wait", "--outcome", "pending", "-s", store,
       "-a", "alice")  # fmt: skip
    data = ok_json("learning", "stats", "--agent", "alice", "-s", store)
    assert data["decisions"] == 3
    assert data["pending"] == 1
    assert data["failure_patterns"] == 1
    assert data["recurring_failures"] == 1
    assert data["memories"]["failure"] == 2
    assert data["most_used"][0]["action"] == "retry"
    text = ok("learning", "stats", "--agent", "alice", "-s", store)
    assert "1 decision(s) awaiting an outcome" in text
    assert "1 failure pattern(s), 1 recurring" in text


def test_report_thresholds(store: str) -> None:
    for i, outcome in enumerate(("success", "failure", "failure", "failure", "success")):
        ok("memory", "record", "--context", f"deploy service {i}", "--action", "blue-green", "--outcome", outcome,
           "--duration", "600", "-s", store, "-a", "alice")  # fmt: skip
    report = ok_json("learning", "report", "--success-target", "0.8", "--slow-seconds", "120", "-s", store,
                     "-a", "alice")  # fmt: skip
    text = " ".join(report["recommendations"])
    assert "under the 80% target" in text
    assert "Approach 'blue-green' is slow: 600 s" in text
    relaxed = ok_json("learning", "report", "--success-target", "0.1", "--slow-seconds", "1000", "-s", store,
                      "-a", "alice")  # fmt: skip
    assert "nothing is slow" in " ".join(relaxed["recommendations"])
    markdown = ok("learning", "report", "--success-target", "0.8", "--slow-seconds", "120", "-s", store, "-a", "alice")
    assert "blue-green" in markdown
    assert fails("learning", "report", "--success-target", "2", "-s", store)
    assert fails("learning", "report", "--slow-seconds", "-1", "-s", store)


def test_suggest_says_confidence_and_tentative(store: str) -> None:
    for action, outcome in (("increase-timeout", "failure"), ("retry-with-backoff", "success")):
        ok("memory", "record", "--context", "api-auth-timeout", "--action", action, "--outcome", outcome, "-s", store,
           "-a", "alice")  # fmt: skip
    s = ok_json("learning", "suggest", "--context", "api-auth-timeout", "-s", store, "-a", "alice")
    assert s["recommended"] == "retry-with-backoff"
    assert s["tentative"] is True
    assert 0 < s["confidence"] < 1
    text = ok("learning", "suggest", "--context", "api-auth-timeout", "-s", store, "-a", "alice")
    assert "Recommended: retry-with-backoff (tentative" in text
    assert "confidence" in text

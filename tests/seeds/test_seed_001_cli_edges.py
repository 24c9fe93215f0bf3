"""Seed 001's CLI as its author types it, on the rough edges issue 25 found: which agent a command used, knowledge
import and merge, ``suggest --task ID``, piped tables, the context's alternatives, the report chart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from seed_cli import Cli

from engramdb import Engram

FIX = "retry-with-exponential-backoff"


def _record(cli: Cli, agent: str, context: str, action: str, outcome: str, *extra: str) -> None:
    cli.ok(
        "memory", "record", "--agent", agent, "--type", "decision",
        "--context", context, "--action", action, "--outcome", outcome, *extra,
    )  # fmt: skip


def test_a_command_without_agent_says_which_agent_it_used(cli: Cli) -> None:
    """``engram memory search "authentication failure"`` (no --agent) after alice recorded: not a bare "nothing"."""
    _record(cli, "alice", "api-auth-timeout", FIX, "success")
    out = cli.ok("learning", "suggest", "--context", "api-auth-timeout")
    assert "Agent 'default'" in out
    assert "ENGRAM_AGENT" in out
    assert FIX in cli.ok("learning", "suggest", "--context", "api-auth-timeout", env={"ENGRAM_AGENT": "alice"})


@pytest.mark.parametrize(
    "command",
    [
        ("memory", "patterns", "--type", "failure"),
        ("learning", "failures", "--recent", "7d"),
        ("learning", "patterns", "--type", "failure", "--recurring"),
        ("learning", "patterns", "--success-rate", ">80%"),
        ("learning", "stats"),
        ("learning", "pending"),
        ("failures", "solutions", "npm ERR! network timeout"),
        ("prevention", "list"),
    ],
)
def test_every_empty_answer_of_a_seed_command_without_agent_says_why(cli: Cli, command: tuple[str, ...]) -> None:
    """The seed's commands written without --agent (``engram memory patterns --type failure``, ``engram learning
    failures --recent 7d``, ...) after alice recorded: each says agent 'default' has nothing and how to name
    alice, not only "No failure patterns" (only list, search and suggest did)."""
    _record(cli, "alice", "api-auth-timeout", FIX, "success")
    for _ in range(2):
        cli.ok("failures", "record", "-e", "npm ERR! network timeout at: https://registry.npmjs.org", "-a", "alice")
    out = cli.ok(*command)
    assert "Agent 'default' has none in this store" in out, out
    assert "--agent NAME" in out
    assert "Agent 'default'" not in cli.ok(*command, env={"ENGRAM_AGENT": "alice"})


def test_knowledge_import_as_the_seed_writes_it(tmp_path: Path, cli: Cli) -> None:
    """``engram knowledge export --agent alice --domain auth`` then ``engram knowledge import --file
    auth-knowledge.json`` into another store: it works, and no message names a Python argument."""
    with Engram(cli.store) as mem:
        mem.remember("auth tokens expire after 15 minutes; refresh them early", agent="alice", tags=["auth"])
    file = tmp_path / "auth-knowledge.json"
    cli.ok("knowledge", "export", "--agent", "alice", "--domain", "auth", "--file", str(file))
    other = Cli(store=str(tmp_path / "other"), runner=cli.runner)
    out = other.ok("knowledge", "import", "--file", str(file))
    assert "Imported 1 memory" in out
    assert "keep_agents" not in out
    assert "agent=" not in out
    assert [m["agent"] for m in other.json("memory", "list", "--agent", "alice")] == ["alice"]
    # --agent still makes them one agent's.
    third = Cli(store=str(tmp_path / "third"), runner=cli.runner)
    third.ok("knowledge", "import", "--file", str(file), "--agent", "bob")
    assert len(third.json("memory", "list", "--agent", "bob")) == 1


def test_merge_explains_merged_zero(cli: Cli) -> None:
    """``engram knowledge merge --from-agent bob --domain db``: "Merged 0" comes with the reason."""
    with Engram(cli.store) as mem:
        mem.remember("db migrations: take a backup first, then migrate", agent="bob", tags=["db"])
    out = cli.ok("knowledge", "merge", "--from-agent", "bob", "--domain", "db")
    assert "Merged 0" in out
    assert "shared none with 'default'" in out
    assert "engram memory share --from bob --to default --domain db" in out
    cli.ok("memory", "share", "--from", "bob", "--to", "default", "--domain", "db")
    assert "Merged 1" in cli.ok("knowledge", "merge", "--from-agent", "bob", "--domain", "db")
    assert "was merged before" in cli.ok("knowledge", "merge", "--from-agent", "bob", "--domain", "db")
    assert "'carol' has no memories" in cli.ok("knowledge", "merge", "--from-agent", "carol")
    assert cli.json("knowledge", "merge", "--from-agent", "carol")["why"]


def test_learning_suggest_task_resolves_the_id(cli: Cli) -> None:
    """``engram learning suggest --task auth-123``: the task id names a recorded situation, not the words
    "auth-123"; a memory id prefix works too."""
    _record(cli, "alice", "api-auth-timeout", "increase-timeout", "failure", "--meta", "task=auth-123")
    _record(cli, "alice", "api-auth-timeout", FIX, "success")
    _record(cli, "alice", "api-auth-timeout", FIX, "success")
    out = cli.ok("learning", "suggest", "--agent", "alice", "--task", "auth-123")
    assert "task 'auth-123': memory" in out
    assert f"Recommended: {FIX}" in out
    assert cli.json("learning", "suggest", "--agent", "alice", "--task", "auth-123")["context"] == "api-auth-timeout"
    some_id = cli.json("memory", "list", "--agent", "alice")[0]["id"]
    by_prefix = cli.json("learning", "suggest", "--agent", "alice", "--task", some_id[:8])
    assert by_prefix["context"] == "api-auth-timeout"
    unknown = cli.ok("learning", "suggest", "--agent", "alice", "--task", "auth-999")
    assert "read as a description" in unknown


def test_piped_tables_are_not_cut_at_80_columns(tmp_path: Path) -> None:
    """``engram learning stats --agent alice | cat``: a real pipe, no COLUMNS: ``retry-with-exponential-backoff``
    whole, not ``retry-w…``."""
    store = str(tmp_path / "store")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    engram = [sys.executable, "-c", "from engramdb.interfaces.cli import main; main()"]
    for outcome in ("success", "success", "failure"):
        subprocess.run(
            [*engram, "--store", store, "memory", "record", "--agent", "alice", "--type", "decision", "--context",
             "api-auth-timeout", "--action", FIX, "--outcome", outcome],
            check=True, env=env, capture_output=True,
        )  # fmt: skip
    for command in (["learning", "stats"], ["memory", "list"], ["learning", "patterns"]):
        out = subprocess.run(
            [*engram, "--store", store, *command, "--agent", "alice"], check=True, env=env, capture_output=True
        ).stdout.decode()
        assert "…" not in out, (command, out)
        assert FIX in out, command


def test_context_shows_no_alternative_from_an_unrelated_task(mem: Engram) -> None:
    """``engram context --task "npm install for the deploy"``: the "Recommended approach" section lists what was
    tried for npm installs, not the fix of an unrelated deploy failure that shares the word "deploy"."""
    for _ in range(3):
        mem.learning.record("npm install times out in CI", "use npm ci with a warm cache", "success", agent="alice")
    mem.learning.record("npm install times out in CI", "raise the npm timeout", "failure", agent="alice")
    for _ in range(3):
        mem.learning.record(
            "the deploy of the web app failed on a missing env var", "add the env var to the deploy config", "success",
            agent="alice",
        )  # fmt: skip
    ctx = mem.context("npm install for the deploy", agent="alice")
    approach = next(s for s in ctx.sections if s.name == "approach")
    text = " ".join(i.text for i in approach.items)
    assert "use npm ci with a warm cache" in text
    assert "raise the npm timeout" in text
    assert "env var" not in text
    assert ctx.approach is not None
    assert all("env var" not in o.action for o in ctx.approach.alternatives)


def test_report_chart_is_readable_when_all_runs_fall_in_one_minute(tmp_path: Path, cli: Cli) -> None:
    """``engram learning report --chart``: six runs recorded by a script within a minute are six points in order, not
    one dot."""
    for outcome in ("failure", "failure", "success", "success", "success", "success"):
        _record(cli, "alice", "api-auth-timeout", FIX, outcome)
    report = cli.json("learning", "report", "--agent", "alice", "--format", "json")
    assert report["bucket"] == "run"
    assert [p["success_rate"] for p in report["timeline"]] == [0, 0, 1, 1, 1, 1]
    chart = tmp_path / "chart.png"
    cli.ok("learning", "report", "--agent", "alice", "--chart", str(chart), "--output", str(tmp_path / "r.md"))
    assert chart.read_bytes()[:4] == b"\x89PNG"
    assert json.loads(json.dumps(report))["decisions"] == 6

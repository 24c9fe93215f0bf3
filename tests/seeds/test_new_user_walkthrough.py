"""Seed examples tried again as a new user would (task Q): what came out wrong or awkward, fixed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from seed_cli import Cli

from engramdb import Engram
from engramdb.errors import NotFound, ValidationError
from engramdb.learning.analytics import choose_bucket

NPM = "npm ERR! network timeout at: https://registry.npmjs.org/{}"


def test_seed_000_report_with_few_outcomes_plots_them_when_they_happened(tmp_path: Path) -> None:
    """Seed 000's report after the first task: one outcome was charted per *month* (a dot mid-month, days away
    from the outcome), and the recommendation read "over 1 runs"."""
    with Engram(":memory:") as mem:
        mem.learning.record_execution("Add a REST endpoint for invoices", approach="incremental", outcome=True,
                                      agent="eco", category="backend")  # fmt: skip
        report = mem.learning.report(agent="eco", chart=tmp_path / "success.png")
    # One point: its interval is an error bar (a band over one point has no width); the chart is written.
    assert (tmp_path / "success.png").read_bytes()[:4] == b"\x89PNG"
    assert report.bucket == "minute"
    (point,) = report.timeline
    assert abs(point.start - datetime.now(UTC)) < timedelta(minutes=2)
    text = report.to_markdown()
    assert "over 1 run " in text
    assert "1 runs" not in text


def test_bucket_for_too_few_outcomes_is_the_finest_that_holds_the_span() -> None:
    t0 = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)
    assert choose_bucket(t0, t0, n=1) == "minute"
    assert choose_bucket(t0, t0 + timedelta(hours=3), n=5) == "day"
    assert choose_bucket(t0, t0 + timedelta(days=3), n=2) == "week"
    assert choose_bucket(t0, t0 + timedelta(days=60), n=3) == "month"
    assert choose_bucket(t0, t0 + timedelta(days=30), n=100) == "week"  # enough outcomes: unchanged


def test_seed_003_empty_source_is_an_error_not_silence() -> None:
    """``store_code_pattern(code=...)`` with an empty file: ``mem.code.remember("")`` returned [] silently."""
    with Engram(":memory:") as mem:
        for source in ("", "  \n\t"):
            with pytest.raises(ValidationError, match="source must not be empty"):
                mem.code.remember(source, agent="swarm")
        assert mem.count(agent="swarm") == 0


def test_seed_003_episode_event_under_another_agent_says_why() -> None:
    """``record_event(episode_id=...)`` takes only the id: the id names the episode, so its agent acts (issue 25);
    naming another agent is refused with the reason (the bare "no episode ... of agent 'default'" did not say)."""
    with Engram(":memory:") as mem:
        episode = mem.episodes.start("implement REST API", agent="swarm")
        with pytest.raises(NotFound, match="belongs to the agent that started it"):
            mem.episodes.event(episode, "code_generation", {"lines": 45}, role="worker_backend", agent="default")
        mem.episodes.event(episode, "code_generation", {"lines": 45}, role="worker_backend")
        assert mem.episodes.end(episode, "success").outcome == "success"


def test_seed_001_failure_commands_take_the_error_the_same_way(cli: Cli) -> None:
    """``failures record -e ERR`` then ``failures solutions -e ERR`` (the option the user just typed)."""
    for pkg in ("left-pad", "react"):
        cli.ok("failures", "record", "-e", NPM.format(pkg), "--fix", "npm config set fetch-retries 5", "-a", "alice")
    by_option = cli.json("failures", "solutions", "-e", NPM.format("lodash"), "-a", "alice")
    assert by_option == cli.json("failures", "solutions", NPM.format("lodash"), "-a", "alice")
    assert by_option[0]["solution"] == "npm config set fetch-retries 5"
    for args in ((), ("x", "-e", "y")):
        result = cli.run("failures", "solutions", *args)
        assert result.exit_code == 1
        assert "once: as ERROR or as --error" in result.stderr


def test_seed_001_prevention_generate_again_does_not_claim_to_create(cli: Cli) -> None:
    """``engram prevention generate --pattern npm-install-timeout`` run twice printed "Created prevention check"
    twice for one saved check."""
    for pkg in ("left-pad", "react"):
        cli.ok("failures", "record", "-e", NPM.format(pkg), "--fix", "npm config set fetch-retries 5", "-a", "alice")
    name = cli.json("learning", "failures", "-a", "alice")[0]["name"]
    assert "Created prevention check" in cli.ok("prevention", "generate", "--pattern", name, "-a", "alice")
    again = cli.ok("prevention", "generate", "--pattern", name, "-a", "alice")
    assert "Created" not in again
    assert "already saved" in again
    assert len(cli.json("prevention", "list", "-a", "alice")) == 1


def test_seed_001_suggest_prints_action_names_as_written(cli: Cli) -> None:
    """The reason was printed as rich markup: an action named ``retry[fast]`` showed as ``retry``."""
    cli.ok("memory", "record", "--agent", "alice", "--type", "decision", "--context", "api-auth-timeout",
           "--action", "retry[fast]", "--outcome", "success")  # fmt: skip
    out = cli.ok("learning", "suggest", "--agent", "alice", "--context", "api-auth-timeout")
    assert "'retry[fast]' succeeded" in out
    assert "1 weighted outcome)" in out

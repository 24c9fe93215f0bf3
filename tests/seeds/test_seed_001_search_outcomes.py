"""Seed 001 scenario 1 through ``engram memory search``: two decisions in one context are two hits (the failed
action and the one that worked); repeats of one decision are one hit that says how many it stands for."""

from __future__ import annotations

from seed_cli import Cli

FAILED = "increase-timeout"
WORKED = "retry-with-exponential-backoff"


def _record(cli: Cli, action: str, outcome: str) -> None:
    cli.ok(
        "memory", "record", "--agent", "alice", "--type", "decision",
        "--context", "api-auth-timeout", "--action", action, "--outcome", outcome,
    )  # fmt: skip


def test_search_shows_the_failed_and_the_working_action(cli: Cli) -> None:
    """``engram memory record ... --action "increase-timeout" --outcome failure``, then ``... --action
    "retry-with-exponential-backoff" --outcome success``, then ``engram memory search "api-auth-timeout"``."""
    _record(cli, FAILED, "failure")
    for _ in range(3):
        _record(cli, WORKED, "success")
    hits = cli.json("memory", "search", "api-auth-timeout", "--agent", "alice")
    outcomes = {h["memory"]["metadata"]["action"]: (h["memory"]["metadata"]["outcome"], h["stands_for"]) for h in hits}
    assert outcomes == {FAILED: ("failure", 1), WORKED: ("success", 3)}
    table = cli.ok("memory", "search", "api-auth-timeout", "--agent", "alice")
    assert f"{FAILED}: failure" in table
    assert f"{WORKED}: success; stands for 3 near-identical memories" in table

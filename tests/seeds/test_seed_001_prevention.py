"""Seed 001, scenarios 2 and 3 as written: ``apply-pattern migration-rollback-strategy --task db-migration-456``,
``learning patterns --type failure --recurring`` ("Occurs in", "Success rate after applying prevention") and
``prevention generate --pattern npm-install-timeout``: the seed's own names resolve, ids shorten to a prefix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from seed_cli import Cli

from engramdb import Engram
from engramdb.learning.pattern_names import nearest_by_words, prevention_effect

ROLLBACK = (
    "migration-rollback-strategy: Take a backup and verify it restores. Run the migration inside a transaction. "
    "Keep a tested down-migration. Roll back on the first error and restore the backup if the down-migration fails."
)


def _npm_failures(cli: Cli) -> None:
    for pkg, ctx in (("lodash", "CI environment, large dependency tree"), ("react", "CI environment, monorepo"),
                     ("express", "CI environment, large dependency tree")):  # fmt: skip
        cli.ok(
            "failures", "record", "--agent", "alice", "--error",
            f"npm ERR! network timeout at: https://registry.npmjs.org/{pkg}", "--context", ctx,
            "--fix", "verify the npm cache and raise fetch-timeout",
        )  # fmt: skip


def test_recurring_pattern_says_where_it_occurs(cli: Cli) -> None:
    """``→ Identified pattern: "npm-install-timeout" • Occurs in: CI environment, large dependency trees``."""
    _npm_failures(cli)
    out = cli.ok("learning", "patterns", "--type", "failure", "--recurring", "--agent", "alice")
    assert "Occurs in: CI environment, large dependency tree" in out
    pattern = cli.json("failures", "pattern", "npm-install-timeout", "--agent", "alice")
    assert pattern["occurs_in"][0] == "CI environment, large dependency tree"
    assert pattern["effect"] is None


def test_prevention_generate_with_the_seeds_pattern_name(cli: Cli) -> None:
    """``engram prevention generate --pattern npm-install-timeout`` -> "Created prevention check ... Added to workflow
    stage: development", though the stored pattern is named from its message; then the pattern reports its effect."""
    _npm_failures(cli)
    out = cli.ok("prevention", "generate", "--pattern", "npm-install-timeout", "--agent", "alice")
    assert "Created prevention check" in out
    assert "Added to workflow stage: development" in out
    assert "Occurs in: CI environment" in out
    again = cli.json("failures", "pattern", "npm-install-timeout", "--agent", "alice")
    assert again["effect"]["before"] == 3
    assert again["effect"]["after"] == 0
    assert again["effect"]["prevented"] is None  # minutes after the check: too early to tell
    assert "too early to tell" in cli.ok("learning", "patterns", "--type", "failure", "--agent", "alice")
    # An id prefix names the pattern too.
    assert cli.ok("prevention", "generate", "--pattern", again["id"][:6], "--agent", "alice")
    # A slug naming something else is refused, not matched loosely.
    bad = cli.run("prevention", "generate", "--pattern", "docker-build-oom", "--agent", "alice")
    assert bad.exit_code == 1


def test_success_rate_after_applying_prevention() -> None:
    """ "Success rate after applying prevention: 95%": 20 failures in the 10 days before the check, 1 in the 10 days
    after, is 95% of the expected recurrences prevented (seed metric 5: reduction in recurring failures)."""
    check = datetime(2026, 11, 1, tzinfo=UTC)
    before = [check - timedelta(days=10) + timedelta(hours=12 * i) for i in range(20)]
    effect = prevention_effect([*before, check + timedelta(days=3)], since=check, now=check + timedelta(days=10))
    assert (effect.before, effect.after, effect.expected_after) == (20, 1, 20.0)
    assert effect.prevented == 0.95
    early = prevention_effect(before, since=check, now=check + timedelta(hours=1))
    assert early.prevented is None


def test_apply_pattern_by_the_seeds_name_gives_steps(cli: Cli) -> None:
    """Bob: ``engram memory search "database migration rollback"`` finds alice's "migration-rollback-strategy (95%
    success rate)"; ``engram learning apply-pattern migration-rollback-strategy --task db-migration-456`` returns its
    steps and record, not its text echoed."""
    with Engram(cli.store) as mem:
        k = mem.remember(ROLLBACK, agent="alice", kind="knowledge", tags=["db"])
        for outcome in ["success"] * 19 + ["failure"]:
            mem.learning.feedback([k.id], outcome, agent="alice")
        mem.sharing.share(from_agent="alice", to_agent="bob", tag="db")
    assert "migration-rollback-strategy" in cli.ok("memory", "search", "database migration rollback", "--agent", "bob")
    plan = cli.json(
        "learning", "apply-pattern", "migration-rollback-strategy", "--task", "db-migration-456", "--agent", "bob"
    )
    assert plan["pattern_id"] == k.id
    assert plan["title"] == "migration-rollback-strategy (learned by alice)"
    assert plan["steps"][:4] == [
        "Take a backup and verify it restores",
        "Run the migration inside a transaction",
        "Keep a tested down-migration",
        "Roll back on the first error and restore the backup if the down-migration fails",
    ]
    assert "19 of 20" in plan["steps"][4]
    assert ROLLBACK not in " ".join(plan["steps"])
    by_prefix = cli.json("learning", "apply-pattern", k.id[:8], "--task", "db-migration-456", "--agent", "bob")
    assert by_prefix["pattern_id"] == k.id


def test_names_resolve_only_when_clear() -> None:
    names = ["npm-network-timeout npm ERR! network timeout", "docker build out of memory", "npm ERR! code E404"]
    assert nearest_by_words("npm-install-timeout", names) == 0
    assert nearest_by_words("pip-install-timeout", names) is None
    assert nearest_by_words("npm-error", ["npm ERR! a", "npm ERR! b"]) is None

"""``engram learning ...`` and the outcome form of ``engram memory record``, end to end on real stores."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import cli_helpers
import pytest
from cli_helpers import ok, ok_json

from engramdb import Engram
from engramdb.embeddings.base import Embedder

# This module's failures were never required to leave stdout empty: keep exactly its checks.
fails = functools.partial(cli_helpers.fails, empty_stdout=False)


@pytest.fixture
def learned(store: str, embedder: Embedder) -> str:
    """A store where alice has recorded outcomes in a few situations."""
    with Engram(store, embedder=embedder) as mem:
        for i in range(8):
            mem.learning.record("api-auth-timeout", "retry-with-backoff", i != 3, agent="alice", alternatives=["abort"])
            mem.learning.record("api-auth-timeout", "abort", i % 4 == 0, agent="alice")
        for i in range(12):
            mem.learning.record_execution(
                f"migrate the orders table, step {i}",
                approach="online",
                outcome=i >= 5,
                agent="alice",
                category="db",
                duration=2.0,
            )
        mem.learning.record("bob's own situation", "shrug", "success", agent="bob")
    return store


@pytest.mark.parametrize("command", ["stats", "patterns", "suggest", "choose", "feedback", "report"])
def test_every_learning_command_has_help(command: str) -> None:
    assert "Usage" in ok("learning", command, "--help")


def test_the_group_lists_its_commands() -> None:
    out = ok("learning")
    for command in ("stats", "patterns", "suggest", "report"):
        assert command in out


def test_contract_record_form_feeds_learning(store: str) -> None:
    args = ["memory", "record", "--store", store, "--agent", "alice", "--type", "decision",
            "--context", "auth-failure", "--action", "retry-with-backoff", "--outcome", "success"]  # fmt: skip
    for _ in range(4):
        assert "Remembered" in ok(*args)
    recorded = ok_json(*args)
    assert recorded["kind"] == "decision"
    assert recorded["metadata"]["action"] == "retry-with-backoff"
    assert recorded["metadata"]["outcome"] == "success"
    s = ok_json("learning", "suggest", "--store", store, "--agent", "alice", "--context", "auth-failure")
    assert s["recommended"] == "retry-with-backoff"
    assert s["options"][0]["attempts"] > 4
    assert 0 < s["confidence"] <= 1
    reward = ok_json("memory", "record", "--store", store, "--context", "c", "--action", "a", "--outcome", "-0.5")
    assert reward["metadata"]["success"] == pytest.approx(0.25)
    assert "unknown outcome" in fails("memory", "record", "--store", store, "--context", "c", "--action", "a",
                                      "--outcome", "meh")  # fmt: skip


def test_stats(learned: str) -> None:
    data = ok_json("learning", "stats", "--store", learned, "--agent", "alice")
    assert data["decisions"] == 28
    actions = {a["action"]: a for a in data["actions"]}
    assert actions["retry-with-backoff"]["attempts"] == 8
    assert actions["retry-with-backoff"]["successes"] == 7
    db = next(c for c in data["categories"] if c["category"] == "db")
    assert db["trend"]["direction"] == "improving"
    out = ok("learning", "stats", "--store", learned, "--agent", "alice")
    assert "retry-with-backoff" in out
    assert "improving" in out
    assert "No outcomes recorded" in ok("learning", "stats", "--store", learned, "--agent", "carol")


def test_patterns_filtered_by_success_rate(learned: str) -> None:
    good = ok_json("learning", "patterns", "--store", learned, "--agent", "alice", "--success-rate", ">70%")
    assert [(p["context"], p["action"]) for p in good] == [("api-auth-timeout", "retry-with-backoff")]
    assert good[0]["attempts"] == 8
    poor = ok_json("learning", "patterns", "--store", learned, "--agent", "alice", "--success-rate", "<50%")
    assert {p["action"] for p in poor} == {"abort"}
    out = ok("learning", "patterns", "--store", learned, "--agent", "alice", "--success-rate", ">70%")
    assert "retry-with-backoff" in out
    assert "bad success-rate filter" in fails("learning", "patterns", "--store", learned, "--success-rate", "lots")


def test_suggest_with_options_and_thin_evidence(learned: str) -> None:
    s = ok_json("learning", "suggest", "--store", learned, "--agent", "alice", "--context", "api auth timeout",
                "--option", "abort", "--option", "page-oncall")  # fmt: skip
    # abort mostly failed (about 30%); an untried option has the prior's 50%.
    assert [o["action"] for o in s["options"]] == ["page-oncall", "abort"]
    assert s["options"][0]["attempts"] == 0
    thin = ok_json("learning", "suggest", "--store", learned, "--agent", "carol", "--context", "api-auth-timeout")
    assert thin["recommended"] is None
    assert thin["options"] == []
    out = ok("learning", "suggest", "--store", learned, "--agent", "alice", "--context", "api-auth-timeout")
    assert "Recommended: retry-with-backoff" in out


def test_choose_is_reproducible(learned: str) -> None:
    args = ["learning", "choose", "--store", learned, "--agent", "alice", "--context", "api-auth-timeout",
            "--option", "retry-with-backoff", "--option", "abort", "--seed", "4"]  # fmt: skip
    first = ok_json(*args)
    assert first == ok_json(*args)
    assert first["chosen"] in ("retry-with-backoff", "abort")
    greedy = ok("learning", "choose", "--store", learned, "--agent", "alice", "--context", "api-auth-timeout",
                "--option", "abort", "--option", "retry-with-backoff", "--exploration", "0")  # fmt: skip
    assert greedy.strip() == "retry-with-backoff"
    fails("learning", "choose", "--store", learned, "--context", "x", "--option", "a", "--exploration", "3")


def test_feedback(store: str, embedder: Embedder) -> None:
    with Engram(store, embedder=embedder) as mem:
        tip = mem.remember("Refresh the token before retrying", agent="alice")
    updated = ok_json("learning", "feedback", tip.id, "--outcome", "success", "--store", store, "--agent", "alice")
    assert updated[0]["attempts"] == 1
    assert updated[0]["success_rate"] == pytest.approx(2 / 3)
    assert "success rate" in ok("learning", "feedback", tip.id, "--outcome", "0", "--store", store, "--agent",
                                "alice")  # fmt: skip
    assert "no memory" in fails("learning", "feedback", "missing", "--outcome", "success", "--store", store)


def test_report_markdown_json_and_chart(learned: str, tmp_path: Path) -> None:
    md = ok("learning", "report", "--store", learned, "--agent", "alice")
    assert md.startswith("# Learning report: alice")
    assert "## Categories" in md
    data = ok_json("learning", "report", "--store", learned, "--agent", "alice")
    assert data["decisions"] == 28
    out = tmp_path / "out" / "report.md"
    chart = tmp_path / "out" / "chart.png"
    said = ok("learning", "report", "--store", learned, "--agent", "alice", "--output", str(out), "--chart", str(chart))
    assert "Wrote" in said
    assert chart.read_bytes()[:4] == b"\x89PNG"
    assert f"]({chart})" in out.read_text()
    as_json = tmp_path / "r.json"
    ok("learning", "report", "--store", learned, "--agent", "alice", "--format", "json", "--output", str(as_json))
    assert json.loads(as_json.read_text())["agent"] == "alice"
    since = ok_json("learning", "report", "--store", learned, "--agent", "alice", "--since", "1h")
    assert since["decisions"] == 28
    future = ok_json("learning", "report", "--store", learned, "--agent", "alice", "--since", "2999-01-01")
    assert future["decisions"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["learning", "report", "--format", "pdf"], "unknown --format"),
        (["learning", "report", "--chart", "chart.svg"], ".png"),
        (["learning", "stats", "--since", "last tuesday"], "bad --since"),
        (["learning", "patterns", "--success-rate", "200%"], "bad success-rate filter"),
        (["learning", "suggest"], "--context"),
    ],
)
def test_user_errors_are_one_line(store: str, args: list[str], message: str) -> None:
    assert message in fails(*args, "--store", store)


def test_feedback_without_an_id_or_a_recall_says_what_to_pass(store: str) -> None:
    # Ids are optional (issue 25): feedback is then about the latest recall; with none, one line says what to pass.
    ok("memory", "record", "release notes: user-facing changes first", "--store", store)
    message = fails("learning", "feedback", "--outcome", "success", "--store", store)
    assert message == (
        "error: agent 'default' recalled no memory in the last 60 minutes for the feedback to be about: "
        "pass memory ids or the task it was about"
    )
    assert "[ID]..." in ok("learning", "feedback", "--help")

"""``engram learning failures | apply-pattern``, ``engram prevention generate``, ``engram memory patterns``."""

from __future__ import annotations

import functools
from pathlib import Path

import cli_helpers
import pytest
from cli_helpers import ok, ok_json

from engramdb import Engram
from engramdb.embeddings.base import Embedder

# This module's failures were never checked for a traceback separately: keep exactly its checks.
fails = functools.partial(cli_helpers.fails, no_traceback=False)

SOURCE = '''
def fetch_with_retry(url, retries=3):
    """Fetch a URL, retrying with exponential backoff on timeouts."""
    for attempt in range(retries):
        try:
            return get(url)
        except TimeoutError:
            sleep(2**attempt)
'''


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> str:
    """A store where alice hit one recurring failure (with fixes) and one single one, and kept some code."""
    path = str(tmp_path / "store")
    with Engram(path, embedder=embedder) as mem:
        for i in range(3):
            mem.failures.record(
                f"ConnectionError: cannot reach db-{i}.internal:{5432 + i} after {10 * i + 5}s",
                agent="alice",
                context="syncing the orders table",
                solution="restart the VPN",
                failed_solutions=["retry"],
            )
        mem.failures.record("KeyError: 'customer_id'", agent="alice", solution="validate the payload")
        mem.code.remember(SOURCE, agent="alice", filename="net.py")
    return path


@pytest.mark.parametrize(
    "command",
    [["learning", "failures"], ["learning", "apply-pattern"], ["prevention", "generate"], ["memory", "patterns"]],
    ids=" ".join,
)
def test_help(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert "--json" in out
    assert "--store" in out


def test_learning_failures(store: str) -> None:
    data = ok_json("learning", "failures", "--store", store, "--agent", "alice", "--recent", "7d")
    assert [p["occurrences"] for p in data] == [3, 1]
    conn = data[0]
    assert conn["signature"] == "ConnectionError: cannot reach <host> after <n>"
    assert conn["solutions"][0] == {"solution": "restart the VPN", "successes": 3.0, "attempts": 3.0,
                                    "success_rate": 0.8}  # fmt: skip
    assert conn["prevention"][0].startswith("Before connecting to the host")
    assert [p["occurrences"] for p in ok_json("learning", "failures", "-s", store, "-a", "alice", "--recurring")] == [3]
    assert ok_json("learning", "failures", "-s", store, "-a", "bob") == []
    text = ok("learning", "failures", "-s", store, "-a", "alice")
    assert conn["id"] in text
    assert "restart the VPN (3/3)" in text
    assert "No failure patterns" in ok("learning", "failures", "-s", store, "-a", "bob")
    assert "'soon'" in fails("learning", "failures", "-s", store, "--recent", "soon")


def test_prevention_generate(store: str) -> None:
    pattern_id = ok_json("learning", "failures", "-s", store, "-a", "alice")[0]["id"]
    data = ok_json("prevention", "generate", "--pattern", pattern_id, "-s", store, "-a", "alice")
    assert data["pattern"] == pattern_id
    assert any("first try: restart the VPN" in c for c in data["checks"])
    assert any(c.startswith("Avoid: retry") for c in data["checks"])
    text = ok("prevention", "generate", "--pattern", pattern_id[:6], "-s", store, "-a", "alice")
    assert "restart the VPN" in text
    assert "no failure pattern" in fails("prevention", "generate", "--pattern", "ffffffffffff", "-s", store)
    assert "--pattern" in fails("prevention", "generate", "-s", store)


def test_apply_pattern(store: str) -> None:
    pattern_id = ok_json("learning", "failures", "-s", store, "-a", "alice")[0]["id"]
    plan = ok_json("learning", "apply-pattern", pattern_id, "--task", "sync the invoices table", "-s", store, "-a",
                   "alice")  # fmt: skip
    assert plan["kind"] == "failure_pattern"
    assert plan["fixes"][0]["solution"] == "restart the VPN"
    text = ok("learning", "apply-pattern", pattern_id, "--task", "sync the invoices table", "-s", store, "-a", "alice")
    assert "Fixes, best first" in text
    patterns = ok_json("memory", "patterns", "--type", "code_pattern", "-s", store, "-a", "alice")
    code_id = next(p["id"] for p in patterns if p["name"] == "fetch_with_retry")
    plan = ok_json("learning", "apply-pattern", code_id, "--task", "download rates with retries", "-s", store, "-a",
                   "alice")  # fmt: skip
    assert plan["kind"] == "code_pattern"
    assert plan["code"].startswith("def fetch_with_retry")
    assert "no failure pattern or memory" in fails("learning", "apply-pattern", "nope", "--task", "x", "-s", store)
    assert "--task" in fails("learning", "apply-pattern", pattern_id, "-s", store)


def test_memory_patterns(store: str) -> None:
    failures = ok_json("memory", "patterns", "--type", "failure", "-s", store, "-a", "alice")
    assert [p["occurrences"] for p in failures] == [3, 1]
    assert ok_json("memory", "patterns", "-s", store, "-a", "alice") == failures  # failure is the default
    code = ok_json("memory", "patterns", "--type", "code", "-s", store, "-a", "alice")
    assert sorted(c["pattern_type"] for c in code) == ["error_handler", "function"]
    assert {c["name"] for c in code} == {"fetch_with_retry", "fetch_with_retry: try/except TimeoutError"}
    text = ok("memory", "patterns", "--type", "code_pattern", "-s", store, "-a", "alice")
    assert "fetch_with_retry" in text
    assert "unknown pattern type" in fails("memory", "patterns", "--type", "banana", "-s", store)

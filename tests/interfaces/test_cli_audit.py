"""``engram audit log | verify`` and ``engram memory cleanup``, end to end on real stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run

from engramdb import Engram
from engramdb.embeddings.base import Embedder


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> str:
    path = tmp_path / "store"
    with Engram(path, embedder=embedder) as mem:
        mem.remember("chat about the flaky login test", agent="alice", kind="conversation")
        mem.remember("later chat about the deploy window", agent="alice", kind="conversation")
        mem.remember("the API key is sk_live_4eC39HqLyjWDarjtT1zdp7dcXa", agent="alice")
        mem.search("deploy", agent="alice")
    return str(path)


def test_audit_log_and_json(store: str) -> None:
    result = run("--store", store, "audit", "log")
    assert result.exit_code == 0, result.output
    assert "create" in result.output
    assert "search" in result.output
    result = run("--store", store, "audit", "log", "--json", "--action", "create", "--agent", "alice")
    events = json.loads(result.output)
    assert [e["action"] for e in events] == ["create"] * 3
    assert events[0]["seq"] > events[-1]["seq"]  # newest first
    assert events[0]["detail"]["redacted"] == ["stripe_key"]
    assert "sk_live" not in result.output


def test_audit_verify_passes_then_fails_after_tampering(store: str) -> None:
    result = run("--store", store, "audit", "verify", "--json")
    assert result.exit_code == 0
    report = json.loads(result.output)
    assert report["ok"] is True
    head = f"{report['head_seq']}:{report['head_hash']}"
    ok = run("--store", store, "audit", "verify", "--expect", head)
    assert ok.exit_code == 0
    assert "intact" in ok.output
    with sqlite3.connect(Path(store) / "engram.db") as conn:
        conn.execute("DROP TRIGGER audit_append_only_update")
        conn.execute("UPDATE audit SET action = 'get' WHERE seq = 1")
    conn.close()
    bad = run("--store", store, "audit", "verify")
    assert bad.exit_code == 1
    assert "tampered" in bad.output
    bad_json = run("--store", store, "audit", "verify", "--json")
    assert bad_json.exit_code == 1
    assert json.loads(bad_json.output)["bad_seq"] == 1


def test_cleanup_dry_run_then_for_real(store: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[conversation]\nmax_count = 1\n")
    none = run("--store", store, "memory", "cleanup")
    assert none.exit_code == 0
    assert "No retention policy" in none.output
    dry = run("--store", store, "memory", "cleanup", "--dry-run", "--policy", str(policy))
    assert dry.exit_code == 0, dry.output
    assert "Would forget 1 memory" in dry.output
    assert "max_count" in dry.output
    real = run("--store", store, "memory", "cleanup", "--policy", str(policy), "--json")
    assert real.exit_code == 0
    report = json.loads(real.output)
    assert len(report["forgotten"]) == 1
    assert report["forgotten"][0]["kind"] == "conversation"
    again = run("--store", store, "memory", "cleanup", "--policy", str(policy))
    assert "Nothing to clean up" in again.output
    log = json.loads(run("--store", store, "audit", "log", "--json", "--action", "retention").output)
    assert [e["memory_id"] for e in log] == [report["forgotten"][0]["memory_id"]]


def test_cleanup_user_errors_exit_1(store: str, tmp_path: Path) -> None:
    missing = run("--store", store, "memory", "cleanup", "--policy", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 1
    bad = tmp_path / "bad.toml"
    bad.write_text("[gossip]\nmax_age_days = 1\n")
    result = run("--store", store, "memory", "cleanup", "--policy", str(bad))
    assert result.exit_code == 1
    assert "unknown kind" in result.output
    expect = run("--store", store, "audit", "verify", "--expect", "banana")
    assert expect.exit_code == 1


def test_cleanup_policy_that_is_missing_or_a_directory_is_named_as_such(store: str, tmp_path: Path) -> None:
    missing = run("--store", store, "memory", "cleanup", "--dry-run", "--policy", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 1
    assert missing.stderr.strip() == f"error: retention policy {tmp_path / 'nope.toml'} does not exist"
    folder = run("--store", store, "memory", "cleanup", "--dry-run", "--policy", str(tmp_path))
    assert folder.exit_code == 1
    assert folder.stderr.strip() == f"error: retention policy {tmp_path} is a directory, not a policy file"
    assert "Traceback" not in folder.output

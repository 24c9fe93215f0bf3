"""The ``engram`` command line, end to end: real stores on disk and the real embedding model.

Most tests drive the Typer app in-process with ``CliRunner``; a few run the
installed ``engram`` console script in fresh processes, as users do.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from cli_helpers import fails, ok, ok_json

from engramdb import Engram
from engramdb.embeddings.base import Embedder

ENGRAM = Path(sys.executable).parent / "engram"


@pytest.fixture
def seeded(store: str, embedder: Embedder) -> dict[str, str]:
    """A store with a few memories of alice (and one of bob); returns ids by name."""
    with Engram(store, embedder=embedder) as mem:
        ms = mem.remember_many(
            [
                {
                    "content": "Login to the billing API returned 401 after token rotation; "
                    "fix: refresh the OAuth token first",
                    "agent": "alice",
                    "kind": "failure",
                    "tags": ["auth", "api"],
                },
                {
                    "content": "Chose PostgreSQL over MongoDB for the orders service because we need transactions",
                    "agent": "alice",
                    "kind": "decision",
                    "tags": ["database"],
                },
                {
                    "content": "The user prefers short answers with a Python example",
                    "agent": "alice",
                    "kind": "preference",
                    "tags": ["style"],
                },
                {"content": "Bob keeps his own notes about Kubernetes", "agent": "bob", "kind": "knowledge"},
            ]
        )
    return {"auth": ms[0].id, "db": ms[1].id, "pref": ms[2].id, "bob": ms[3].id}


def snapshot(store: str, embedder: Embedder) -> list[dict[str, Any]]:
    """Every memory of every agent in the seeded store, for before/after comparisons."""
    with Engram(store, embedder=embedder) as mem:
        return [m.to_dict() for agent in ("alice", "bob") for m in mem.list(agent=agent)]


# -- help, version, structure -------------------------------------------------------------------------

COMMANDS = [
    ["memory", "record"],
    ["memory", "list"],
    ["memory", "search"],
    ["memory", "retrieve"],
    ["memory", "show"],
    ["memory", "update"],
    ["memory", "forget"],
    ["memory", "history"],
    ["demo"],
    ["reembed"],
]


def test_root_help_lists_the_groups() -> None:
    out = ok("--help")
    for word in ("memory", "demo", "--store"):
        assert word in out
    # Without a command, the help is printed: not an error.
    assert "memory" in ok()
    assert "record" in ok("memory")


def test_version() -> None:
    assert ok("--version").startswith("engram (engramdb) ")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_and_json(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert "--json" in out
    assert "Usage" in out


# -- record, list, show ---------------------------------------------------------------------------------


def test_record_then_list_and_show(store: str) -> None:
    recorded = ok_json(
        "memory",
        "record",
        "Retry with exponential backoff fixes HTTP 429 from the payments API",
        "--agent",
        "alice",
        "--type",
        "success",
        "--tag",
        "api",
        "--tag",
        "rate-limit",
        "--store",
        store,
    )
    assert (recorded["agent"], recorded["kind"]) == ("alice", "success")
    assert (recorded["tags"], recorded["visibility"]) == (["api", "rate-limit"], "private")

    listed = ok_json("memory", "list", "--agent", "alice", "--store", store)
    assert [m["id"] for m in listed] == [recorded["id"]]
    assert ok_json("memory", "list", "--agent", "bob", "--store", store) == []

    shown = ok_json("memory", "show", recorded["id"], "--store", store)
    assert shown["content"] == recorded["content"]

    table = ok("memory", "list", "--agent", "alice", "--store", store)
    assert recorded["id"] in table  # full ids, so they can be copied into `show`
    detail = ok("memory", "show", recorded["id"], "--store", store)
    assert "Retry with exponential backoff fixes HTTP 429 from the payments API" in detail


def test_record_prints_the_id_by_default(store: str) -> None:
    out = ok("memory", "record", "Staging is rebuilt every Sunday", "--store", store)
    listed = ok_json("memory", "list", "--store", store)  # agent "default", kind "knowledge"
    assert (listed[0]["kind"], listed[0]["agent"]) == ("knowledge", "default")
    assert listed[0]["id"] in out


def test_record_metadata_values_are_json_when_they_parse(store: str) -> None:
    m = ok_json(
        "memory",
        "record",
        "The build takes about four minutes",
        "--meta",
        "minutes=4",
        "--meta",
        "ok=true",
        "--meta",
        "source=ci log",
        "--meta",
        'extra={"runner": "linux", "cores": 2}',
        "--meta",
        'quoted="42"',
        "--meta",
        "empty=",
        "--meta",
        "odd=NaN",
        "--visibility",
        "public",
        "--confidence",
        "0.8",
        "--store",
        store,
    )
    assert m["metadata"] == {
        "minutes": 4,
        "ok": True,
        "source": "ci log",
        "extra": {"runner": "linux", "cores": 2},
        "quoted": "42",
        "empty": "",
        "odd": "NaN",
    }
    assert (m["visibility"], m["confidence"]) == ("public", 0.8)


def test_tables_print_user_text_literally(store: str) -> None:
    """Brackets in content, tags or agent names are text, not rich markup."""
    ok("memory", "record", "[bold]not bold[/bold]", "--tag", "[wip]", "--agent", "[bot]", "--store", store)
    table = ok("memory", "list", "--agent", "[bot]", "--store", store)
    assert "[bold]not bold[/bold]" in table
    assert "[wip]" in table


def test_record_reads_content_from_stdin(store: str) -> None:
    m = ok_json("memory", "record", "-", "--store", store, stdin="A note piped in\nover two lines\n")
    assert m["content"].startswith("A note piped in")


def test_root_store_option_and_engram_home(tmp_path: Path, store: str) -> None:
    ok("--store", store, "memory", "record", "kept in the root-selected store")
    assert len(ok_json("memory", "list", "--store", store)) == 1
    assert len(ok_json("--store", store, "memory", "list")) == 1
    # Without --store, $ENGRAM_HOME (set by the fixture) is the store: a read before any write names it.
    assert f"no engramdb store at {tmp_path / 'home'}" in fails("memory", "list")
    ok("memory", "record", "kept in ENGRAM_HOME")
    assert (tmp_path / "home").is_dir()
    assert [m["content"] for m in ok_json("memory", "list")] == ["kept in ENGRAM_HOME"]


# -- search, retrieve ------------------------------------------------------------------------------------


def test_search_finds_by_meaning_best_first(store: str, seeded: dict[str, str]) -> None:
    hits = ok_json("memory", "search", "authentication keeps failing", "--agent", "alice", "--store", store)
    assert hits[0]["memory"]["id"] == seeded["auth"]
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(h["memory"]["agent"] == "alice" for h in hits)

    table = ok("memory", "search", "authentication keeps failing", "--agent", "alice", "--store", store)
    # Best first, with its score: the first row (after the header and rule) is the auth failure.
    first_row = table.splitlines()[2].split()
    assert first_row[1] == seeded["auth"]
    assert float(first_row[0]) > 0


def test_retrieve_is_search_by_context(store: str, seeded: dict[str, str]) -> None:
    hits = ok_json("memory", "retrieve", "--agent", "alice", "--context", "which database and why", "--store", store)
    assert hits[0]["memory"]["id"] == seeded["db"]


def test_search_filters_by_kind_tag_and_limit(store: str, seeded: dict[str, str]) -> None:
    only = ok_json("memory", "search", "database", "--agent", "alice", "--type", "preference", "--store", store)
    assert [h["memory"]["id"] for h in only] == [seeded["pref"]]
    tagged = ok_json("memory", "search", "anything", "--agent", "alice", "--tag", "auth", "--store", store)
    assert [h["memory"]["id"] for h in tagged] == [seeded["auth"]]
    assert len(ok_json("memory", "search", "notes", "--agent", "alice", "--limit", "1", "--store", store)) == 1
    assert ok_json("memory", "search", "Kubernetes", "--agent", "carol", "--store", store) == []
    assert "Nothing found" in ok("memory", "search", "Kubernetes", "--agent", "carol", "--store", store)


def test_an_empty_answer_for_an_agent_without_memories_says_so(store: str, seeded: dict[str, str]) -> None:
    """Seed 001's commands run without --agent: an empty answer must say whose memories were looked at."""
    for command in (["memory", "search", "Kubernetes"], ["memory", "list"]):
        empty = " ".join(ok(*command, "--agent", "carol", "--store", store).split())
        assert "Agent 'carol' has none in this store" in empty
        assert "ENGRAM_AGENT" in empty
    # An agent with memories that match nothing gets no such hint, and JSON output stays a bare list.
    miss = ok("memory", "list", "--agent", "bob", "--type", "decision", "--store", store)
    assert "No memories" in miss
    assert "has none" not in miss
    assert ok_json("memory", "list", "--agent", "carol", "--store", store) == []


def test_list_filters(store: str, seeded: dict[str, str]) -> None:
    decisions = ok_json("memory", "list", "--agent", "alice", "--type", "decision", "--store", store)
    assert [m["id"] for m in decisions] == [seeded["db"]]
    styled = ok_json("memory", "list", "--agent", "alice", "--tag", "style", "--store", store)
    assert [m["id"] for m in styled] == [seeded["pref"]]
    assert len(ok_json("memory", "list", "--agent", "alice", "--limit", "2", "--store", store)) == 2


# -- update, history, forget -----------------------------------------------------------------------------


def test_update_merges_metadata_and_replaces_tags(store: str) -> None:
    m = ok_json(
        "memory", "record", "Deploys happen on Tuesdays", "--tag", "ops", "--meta", "team=infra", "--store", store
    )
    updated = ok_json(
        "memory",
        "update",
        m["id"],
        "--tag",
        "release",
        "--meta",
        "owner=carol",
        "--confidence",
        "0.9",
        "--store",
        store,
    )
    assert updated["tags"] == ["release"]
    assert updated["metadata"] == {"team": "infra", "owner": "carol"}
    assert updated["confidence"] == 0.9

    changed = ok_json("memory", "update", m["id"], "--content", "Deploys happen on Thursdays", "--store", store)
    assert changed["content"] == "Deploys happen on Thursdays"
    cleared = ok_json("memory", "update", m["id"], "--clear-tags", "--type", "decision", "--store", store)
    assert (cleared["tags"], cleared["kind"]) == ([], "decision")

    history = ok_json("memory", "history", m["id"], "--store", store)
    assert history[0]["action"] == "create"
    assert sum(c["action"] == "update" for c in history) >= 3
    assert "Thursdays" in ok("memory", "history", m["id"], "--store", store)


def test_forget_with_yes_and_with_json(store: str, seeded: dict[str, str]) -> None:
    assert seeded["db"] in ok("memory", "forget", seeded["db"], "--yes", "--store", store)
    assert ok_json("memory", "forget", seeded["pref"], "--store", store) == {"id": seeded["pref"], "forgotten": True}
    remaining = {m["id"] for m in ok_json("memory", "list", "--agent", "alice", "--store", store)}
    assert remaining == {seeded["auth"]}
    assert seeded["db"] in fails("memory", "show", seeded["db"], "--store", store)
    assert ok_json("memory", "history", seeded["db"], "--store", store)[-1]["action"] == "forget"


def test_forget_refuses_without_confirmation_when_not_interactive(
    store: str, seeded: dict[str, str], embedder: Embedder
) -> None:
    before = snapshot(store, embedder)
    message = fails("memory", "forget", seeded["db"], "--store", store, stdin="y\n")
    assert "--yes" in message
    assert snapshot(store, embedder) == before


def test_an_agent_cannot_touch_another_agents_memory(store: str, seeded: dict[str, str], embedder: Embedder) -> None:
    before = snapshot(store, embedder)
    fails("memory", "show", seeded["bob"], "--agent", "alice", "--store", store)
    fails("memory", "forget", seeded["bob"], "--agent", "alice", "--yes", "--store", store)
    fails("memory", "update", seeded["bob"], "--agent", "alice", "--content", "mine now", "--store", store)
    assert snapshot(store, embedder) == before


# -- user errors: exit 1, one line, nothing changed ---------------------------------------------------

MISSING = "0" * 32

BAD_INPUT = {
    "unknown kind": (["memory", "record", "some text", "--type", "foo"], "unknown kind 'foo'"),
    "unknown kind in search": (["memory", "search", "x", "--type", "foo"], "unknown kind 'foo'"),
    "empty content": (["memory", "record", "   "], "content must not be empty"),
    "empty query": (["memory", "search", " "], "query must not be empty"),
    "bad meta": (["memory", "record", "text", "--meta", "novalue"], "bad --meta 'novalue'"),
    "bad meta key": (["memory", "record", "text", "--meta", "=3"], "bad --meta '=3'"),
    "bad visibility": (["memory", "record", "text", "--visibility", "secret"], "unknown visibility"),
    "confidence out of range": (["memory", "record", "text", "--confidence", "2"], "--confidence"),
    "missing id: show": (["memory", "show", MISSING], MISSING),
    "missing id: update": (["memory", "update", MISSING, "--content", "x"], MISSING),
    "missing id: forget": (["memory", "forget", MISSING, "--yes"], MISSING),
    "missing id: history": (["memory", "history", MISSING], MISSING),
    "nothing to update": (["memory", "update", MISSING], "nothing to update"),
    "neither content nor outcome": (["memory", "record"], "nothing to record"),
    "content and outcome": (
        ["memory", "record", "text", "--context", "c", "--action", "a", "--outcome", "success"],
        "not both",
    ),
    "partial outcome": (["memory", "record", "--context", "c", "--action", "a"], "missing --outcome"),
    "outcome of another kind": (
        ["memory", "record", "--type", "failure", "--context", "c", "--action", "a", "--outcome", "success"],
        "decision",
    ),
    "outcome with tags": (
        ["memory", "record", "--context", "c", "--action", "a", "--outcome", "success", "--tag", "t"],
        "--tag",
    ),
    "unknown option": (["memory", "list", "--colour"], "no such option: --colour"),
    "unknown command": (["memory", "remember"], "no such command 'remember'"),
    "missing argument": (["memory", "show"], "missing argument"),
    "bad number": (["memory", "list", "--limit", "many"], "--limit"),
    "zero limit": (["memory", "list", "--limit", "0"], "--limit"),
}


@pytest.mark.parametrize(("args", "expected"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_exits_1_with_one_line_and_changes_nothing(
    store: str, seeded: dict[str, str], embedder: Embedder, args: list[str], expected: str
) -> None:
    before = snapshot(store, embedder)
    message = fails(*args, "--store", store)
    assert expected.lower() in message.lower()
    assert snapshot(store, embedder) == before


def test_usage_errors_point_to_help() -> None:
    message = fails("memory", "list", "--colour")
    assert "engram memory list --help" in message or "--help" in message


def test_store_that_is_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a store\n")
    for args in (
        ["memory", "record", "text", "--store", str(path)],
        ["memory", "list", "--store", str(path)],
        ["--store", str(path), "memory", "search", "text"],
    ):
        fails(*args)
    assert path.read_text() == "not a store\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_bad_kind_does_not_create_a_store(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fails("memory", "record", "text", "--type", "foo", "--store", str(fresh))
    assert not fresh.exists()


# -- outcome records (the learning API) ------------------------------------------------------------------


def test_record_an_outcome(store: str) -> None:
    args = [
        "memory",
        "record",
        "--agent",
        "alice",
        "--type",
        "decision",
        "--context",
        "auth-failure",
        "--action",
        "retry-with-backoff",
        "--outcome",
        "success",
        "--store",
        store,
    ]
    m = ok_json(*args)
    assert (m["agent"], m["kind"]) == ("alice", "decision")
    assert "retry-with-backoff" in json.dumps(m)


# -- switching embedding models ------------------------------------------------------------------------


class HashEmbedder:
    """A user-supplied embedder (hashed bag of words): the "other model" a store was built with."""

    model_id = "test-hashed-words-v1"
    dim = 64

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def test_reembed_after_switching_models(store: str) -> None:
    with Engram(store, embedder=HashEmbedder()) as mem:
        mem.remember_many([{"content": f"note {i} about release trains"} for i in range(3)])
    message = fails("memory", "list", "--store", store)
    assert "engram reembed" in message
    assert ok_json("reembed", "--store", store) == {"reembedded": 3}
    assert len(ok_json("memory", "search", "release", "--store", store)) == 3
    assert ok_json("reembed", "--store", store) == {"reembedded": 0}
    assert "up to date" in ok("reembed", "--store", store)


# -- the demo and real processes -------------------------------------------------------------------------


def test_demo_in_process() -> None:
    summary = ok_json("demo")
    assert len(summary["remembered"]) >= 8
    assert len(summary["searches"]) >= 2
    for search in summary["searches"]:
        scores = [h["score"] for h in search["hits"]]
        assert scores
        assert scores == sorted(scores, reverse=True)
    # Each question is answered by the memory it was written for, though they share few words.
    tops = [search["hits"][0]["memory"]["content"] for search in summary["searches"]]
    assert "401" in tops[0]
    assert "schema migration" in tops[1]
    assert "npm install" in tops[2]
    # The memory shown was recalled by the searches before it.
    assert summary["shown"]["access_count"] >= 1
    assert [c["action"] for c in summary["history"]][-1] == "update"


def _engram(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert ENGRAM.exists(), f"the engram console script is not installed at {ENGRAM}"
    result = subprocess.run(
        [str(ENGRAM), *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_console_script_demo() -> None:
    result = _engram("demo")
    assert "README" in result.stdout
    assert "Traceback" not in result.stderr
    summary = json.loads(_engram("demo", "--json").stdout)
    assert summary["searches"]


def test_console_script_record_then_search_in_fresh_processes(store: str) -> None:
    recorded = json.loads(
        _engram(
            "memory",
            "record",
            "The VPN drops every night at 2am; reconnect with vpn-up.sh",
            "--agent",
            "alice",
            "--type",
            "failure",
            "--tag",
            "network",
            "--store",
            store,
            "--json",
        ).stdout
    )
    _engram("--store", store, "memory", "record", "Unrelated: lunch is at noon", "--agent", "alice")
    hits = json.loads(
        _engram(
            "memory", "search", "network connection lost overnight", "--agent", "alice", "--store", store, "--json"
        ).stdout
    )
    assert hits[0]["memory"]["id"] == recorded["id"]

    bad = _engram("memory", "record", "text", "--type", "foo", "--store", store, check=False)
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: unknown kind 'foo'")


def _read_until(fd: int, needle: bytes, deadline: float) -> bytes:
    seen = b""
    while needle not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    return seen


@pytest.mark.parametrize(("answer", "forgotten"), [("y", True), ("n", False)])
def test_forget_asks_on_a_terminal(store: str, seeded: dict[str, str], answer: str, forgotten: bool) -> None:
    assert ENGRAM.exists()
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(ENGRAM), "memory", "forget", seeded["db"], "--store", store],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            close_fds=True,
        )
        os.close(terminal)
        prompt = _read_until(controller, b"[y/N]", time.monotonic() + 60)
        assert b"Forget " + seeded["db"].encode() in prompt
        os.write(controller, answer.encode() + b"\n")
        _read_until(controller, b"\x00", time.monotonic() + 30)  # drain until the child exits
        assert proc.wait(timeout=60) == (0 if forgotten else 1)
    finally:
        os.close(controller)
    ids = {m["id"] for m in ok_json("memory", "list", "--agent", "alice", "--store", store)}
    assert (seeded["db"] not in ids) is forgotten

"""``engram memory share|unshare|shares`` and ``engram knowledge export|import|merge``, end to end on real stores."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import cli_helpers
import pytest
from cli_helpers import ok, ok_json, run

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage.base import Filter

# This module's failures were never required to leave stdout empty: keep exactly its checks.
fails = functools.partial(cli_helpers.fails, empty_stdout=False)


@pytest.fixture
def seeded(store: str, embedder: Embedder) -> dict[str, str]:
    with Engram(store, embedder=embedder) as mem:
        ms = mem.remember_many(
            [
                {
                    "content": "Refresh the OAuth token before calling the billing API",
                    "agent": "alice",
                    "tags": ["auth"],
                },
                {"content": "Login returns 429 above ten requests per second", "agent": "alice", "tags": ["auth"]},
                {"content": "Alice's private notes on the reorg", "agent": "alice", "tags": ["personal"]},
                {"content": "Bob's runbook for the orders database", "agent": "bob", "tags": ["db"]},
            ]
        )
    return {"token": ms[0].id, "ratelimit": ms[1].id, "private": ms[2].id, "bob": ms[3].id}


def everything(store: str, embedder: Embedder) -> list[dict[str, Any]]:
    with Engram(store, embedder=embedder) as mem:
        return [
            {**m.to_dict(), "history": len(mem.store.memories.history(m.id))}
            for m in mem.store.memories.list(Filter(agent=None), limit=10_000)
        ]


def ids_of(store: str, agent: str) -> set[str]:
    return {m["id"] for m in ok_json("memory", "list", "--store", store, "--agent", agent)}


@pytest.mark.parametrize(
    "command",
    [
        ["memory", "share"],
        ["memory", "unshare"],
        ["memory", "shares"],
        ["knowledge", "export"],
        ["knowledge", "import"],
        ["knowledge", "merge"],
    ],
    ids=" ".join,
)
def test_every_command_has_help(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert "--json" in out
    assert "--store" in out


# -- sharing ------------------------------------------------------------------------------------------------


def test_share_by_id_and_unshare(store: str, seeded: dict[str, str]) -> None:
    out = ok("memory", "share", seeded["token"], "--from", "alice", "--to", "bob", "--store", store)
    assert "Shared 1 memory" in out
    assert ids_of(store, "bob") == {seeded["token"], seeded["bob"]}
    shown = ok_json("memory", "show", seeded["token"], "--agent", "bob", "--store", store)
    assert shown["shared_by"] == "alice"
    assert shown["shared_at"]
    assert ok_json("memory", "unshare", seeded["token"], "--from", "alice", "--store", store)["unshared"] == 1
    assert ids_of(store, "bob") == {seeded["bob"]}


def test_share_a_domain_with_everyone(store: str, seeded: dict[str, str]) -> None:
    result = ok_json("memory", "share", "--from", "alice", "--tag", "auth", "--store", store)
    assert result == {"shared": 2, "from_agent": "alice", "to_agent": "*"}
    assert ids_of(store, "carol") == {seeded["token"], seeded["ratelimit"]}
    hits = ok_json("memory", "search", "OAuth token billing", "--agent", "carol", "--store", store)
    assert hits[0]["memory"]["shared_by"] == "alice"
    listing = ok_json("memory", "shares", "--agent", "carol", "--store", store)
    assert {s["memory_id"] for s in listing["received"]} == {seeded["token"], seeded["ratelimit"]}
    assert listing["given"] == []
    ok("memory", "unshare", "--from", "alice", "--domain", "auth", "--store", store)
    assert ids_of(store, "carol") == set()


def test_share_a_failure_pattern(store: str, embedder: Embedder) -> None:
    with Engram(store, embedder=embedder) as mem:
        for port in (5432, 5433, 6543):
            mem.failures.record(
                f"ConnectionError: connection refused on db-{port}.internal:{port}",
                agent="alice",
                solution="start the database first",
            )
        mem.failures.record("KeyError: 'user_id'", agent="alice")
        pattern = next(p for p in mem.failures.patterns(agent="alice") if p.occurrences == 3)
    out = ok_json("memory", "share", "--from", "alice", "--to", "bob", "--pattern", pattern.id, "--store", store)
    assert out["shared"] == 3
    with Engram(store, embedder=embedder) as mem:
        patterns = mem.failures.patterns(agent="bob")
        assert [p.occurrences for p in patterns] == [3]
        assert mem.failures.solutions("ConnectionError: connection refused on db-9.internal:9999", agent="bob")
    assert fails("memory", "share", "--from", "alice", "--to", "bob", "--pattern", "nope", "--store", store)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "alice", "--to", "bob"], "say which memories"),
        (["--from", "alice", "--to", "bob", "--tag", "auth", "--pattern", "x"], "only one of"),
        (["--from", "alice", "--to", "alice", "--tag", "auth"], "cannot share with itself"),
        (["--from", "bob", "--to", "carol", "--id", "TOKEN"], "owned by agent 'bob'"),
        (["--to", "bob", "--tag", "auth"], "--from"),
    ],
)
def test_share_errors_are_one_line_and_change_nothing(
    store: str, seeded: dict[str, str], embedder: Embedder, args: list[str], message: str
) -> None:
    before = everything(store, embedder)
    args = [seeded["token"] if a == "TOKEN" else a for a in args]
    line = fails("memory", "share", *args, "--store", store)
    assert message in line
    assert everything(store, embedder) == before


# -- export / import ----------------------------------------------------------------------------------------


def test_export_import_round_trip_between_stores(
    store: str, seeded: dict[str, str], tmp_path: Path, embedder: Embedder
) -> None:
    path = tmp_path / "auth.jsonl"
    result = ok_json(
        "knowledge",
        "export",
        "--agent",
        "alice",
        "--domain",
        "auth",
        "--file",
        str(path),
        "--with-vectors",
        "--with-history",
        "--store",
        store,
    )
    assert result["exported"] == 2
    header = json.loads(path.read_text().splitlines()[0])
    assert header["format"] == "engramdb-knowledge"
    assert header["counts"]["memories"] == 2
    other = str(tmp_path / "other")
    assert ok_json("knowledge", "import", "--file", str(path), "--keep-agents", "--store", other)["imported"] == 2
    assert ids_of(other, "alice") == {seeded["token"], seeded["ratelimit"]}
    # The private, untagged memory did not travel.
    assert all(m["content"] != "Alice's private notes on the reorg" for m in everything(other, embedder))
    assert ok_json("knowledge", "import", "--file", str(path), "--keep-agents", "--store", other)["imported"] == 0


def test_export_to_stdout_and_import_from_stdin(store: str, seeded: dict[str, str], tmp_path: Path) -> None:
    data = run("knowledge", "export", "--agent", "alice", "--store", store).stdout_bytes
    assert data.startswith(b'{"format":"engramdb-knowledge"')
    other = str(tmp_path / "other")
    out = ok("knowledge", "import", "--file", "-", "--agent", "carol", "--store", other, stdin=data)
    assert "Imported 3 memories" in out
    assert len(ids_of(other, "carol")) == 3


def test_dry_run_writes_nothing(store: str, seeded: dict[str, str], tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "k.jsonl"
    ok("knowledge", "export", "--agent", "alice", "--file", str(path), "--store", store)
    other = str(tmp_path / "other")
    dry = ok_json("knowledge", "import", "--file", str(path), "--dry-run", "--keep-agents", "--store", other)
    assert dry["imported"] == 3
    assert everything(other, embedder) == []


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b[: b.rfind(b"\n", 0, len(b) - 1) + 1], "checksum mismatch"),
        (lambda b: b.replace(b"OAuth", b"0Auth"), "checksum mismatch"),
        (lambda b: b"", "empty file"),
        (lambda b: b"garbage\n", "bad header"),
        (lambda b: b.replace(b'"version":1', b'"version":7', 1), "unsupported knowledge format version 7"),
    ],
    ids=["cut-mid-line", "cut-at-line", "edited", "empty", "garbage", "future-version"],
)
def test_a_damaged_file_is_refused_with_one_line_and_nothing_changes(
    store: str, seeded: dict[str, str], tmp_path: Path, embedder: Embedder, mangle: Any, message: str
) -> None:
    path = tmp_path / "k.jsonl"
    ok("knowledge", "export", "--agent", "alice", "--file", str(path), "--with-vectors", "--store", store)
    path.write_bytes(mangle(path.read_bytes()))
    target = str(tmp_path / "target")
    ok("memory", "record", "already here", "--agent", "alice", "--store", target)
    before = everything(target, embedder)
    line = fails("knowledge", "import", "--file", str(path), "--store", target)
    assert message in line
    assert str(path) in line
    assert everything(target, embedder) == before


def test_import_refuses_to_take_over_another_agents_ids(
    store: str, seeded: dict[str, str], tmp_path: Path, embedder: Embedder
) -> None:
    path = tmp_path / "k.jsonl"
    ok("knowledge", "export", "--agent", "alice", "--file", str(path), "--store", store)
    before = everything(store, embedder)
    assert "another agent" in fails("knowledge", "import", "--file", str(path), "--agent", "mallory", "--store", store)
    assert everything(store, embedder) == before


def test_import_of_a_missing_file(store: str, tmp_path: Path) -> None:
    assert "no such file" in fails("knowledge", "import", "--file", str(tmp_path / "nope.jsonl"), "--store", store)


def test_json_export_needs_a_file(store: str, seeded: dict[str, str]) -> None:
    assert "--json" in fails("knowledge", "export", "--agent", "alice", "--json", "--store", store)


# -- merge ---------------------------------------------------------------------------------------------------


def test_merge_copies_with_provenance_and_is_idempotent(store: str, seeded: dict[str, str], embedder: Embedder) -> None:
    # Without consent nothing private moves.
    assert "Merged 0 memories" in ok(
        "knowledge", "merge", "--from-agent", "alice", "--to-agent", "bob", "--domain", "auth", "--store", store
    )
    ok("memory", "share", "--from", "alice", "--to", "bob", "--tag", "auth", "--store", store)
    result = ok_json(
        "knowledge", "merge", "--from-agent", "alice", "--to-agent", "bob", "--domain", "auth", "--store", store
    )
    assert result["merged"] == 2
    with Engram(store, embedder=embedder) as mem:
        own = [m for m in mem.list(agent="bob") if m.agent == "bob" and "origin" in m.metadata]
        assert {m.metadata["origin"]["id"] for m in own} == {seeded["token"], seeded["ratelimit"]}
    again = ok("knowledge", "merge", "--from-agent", "alice", "--to-agent", "bob", "--domain", "auth", "--store", store)
    assert "Merged 0 memories" in again
    assert "different agents" in fails(
        "knowledge", "merge", "--from-agent", "bob", "--to-agent", "bob", "--store", store
    )


def test_import_of_a_directory_says_so(store: str, tmp_path: Path) -> None:
    message = fails("knowledge", "import", "--file", str(tmp_path), "--store", store)
    assert "is a directory, not a knowledge file" in message


def test_shares_of_an_empty_agent_name_the_agent_option(store: str) -> None:
    message = fails("memory", "shares", "--agent", "", "--store", store)
    assert message == "error: agent must be a non-empty name without surrounding whitespace, not ''"

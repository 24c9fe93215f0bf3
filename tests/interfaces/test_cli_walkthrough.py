"""What a first-time user walking through the README's command line met, fixed (one test per finding)."""

from __future__ import annotations

from cli_helpers import ok

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.cli.app import GROUPS, TOP_LEVEL


def test_history_numbers_are_labelled_as_store_wide_sequence_numbers(store: str, embedder: Embedder) -> None:
    with Engram(store, embedder=embedder) as mem:
        first = mem.remember("The cache TTL is 300 seconds", agent="alice")
        mem.remember("Deploys happen on Tuesdays", agent="alice")
        mem.update(first.id, content="The cache TTL is 600 seconds")
        seqs = [c.seq for c in mem.history(first.id)]
    assert seqs[1] - seqs[0] > 1  # another memory's change came in between: a "#" column would look broken
    header = ok("memory", "history", first.id, "--store", store).splitlines()[0].split()
    assert header[:3] == ["seq", "when", "action"]


def test_every_command_but_the_servers_takes_json_as_the_help_says() -> None:
    assert "Every command but serve and mcp takes --json" in " ".join(ok("--help").split())
    commands = [[group.name, name] for group in GROUPS for name, _ in group.commands]
    commands += [[name] for name, _, _ in TOP_LEVEL]
    without = {" ".join(c) for c in commands if "--json" not in ok(*c, "--help")}
    assert without == {"serve", "mcp"}

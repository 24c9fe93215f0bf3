"""Seed 001: ``engram knowledge export`` / ``import``: what a store accepted, its own export brings back.

Even at the metadata size limit: an import adds its provenance (``metadata["provenance"]``), which must not push
the memory over the limit it was accepted under, and a store's export of imported memories (provenance included)
must import again, into another store and into itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from seed_cli import Cli

from engramdb import Engram
from engramdb import _validate as check
from engramdb._validate import MAX_METADATA_BYTES, PROVENANCE_BYTES
from engramdb.embeddings.base import Embedder
from engramdb.errors import ValidationError


def _size(metadata: dict[str, object]) -> int:
    return len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())


def _fill(size: int) -> dict[str, object]:
    """Metadata of exactly ``size`` bytes as compact JSON."""
    base = {"blob": ""}
    meta = {"blob": "x" * (size - _size(base))}
    assert _size(meta) == size
    return meta


@pytest.mark.parametrize("size", [MAX_METADATA_BYTES - 11, MAX_METADATA_BYTES])
def test_an_export_at_the_metadata_limit_imports_back(tmp_path: Path, embedder: Embedder, size: int) -> None:
    """The issue's case (1,048,565 bytes) and the limit itself: export, import, export again, import again."""
    with Engram(tmp_path / "a", embedder=embedder) as a:
        m = a.remember("the payments runbook, with its whole appendix", agent="alice", metadata=_fill(size))
        assert a.knowledge.export_file(tmp_path / "a.jsonl", agent="alice") == 1
    with Engram(tmp_path / "b", embedder=embedder) as b:
        assert b.knowledge.import_file(tmp_path / "a.jsonl", agent="alice") == 1
        got = b.get(m.id)
        assert got.metadata["blob"] == _fill(size)["blob"]
        assert got.metadata["provenance"]["source"] == "a.jsonl"
        # b's own export (its provenance included) comes back into a third store, and into b itself.
        assert b.knowledge.export_file(tmp_path / "b.jsonl", agent="alice") == 1
        b.knowledge.import_file(tmp_path / "b.jsonl", agent="alice")
        assert b.count(agent="alice") == 1
    with Engram(tmp_path / "c", embedder=embedder) as c:
        assert c.knowledge.import_file(tmp_path / "b.jsonl", agent="alice") == 1
        assert c.get(m.id).metadata["provenance"]["source"] == "b.jsonl"


def test_the_cli_round_trip_at_the_limit(tmp_path: Path, embedder: Embedder, cli: Cli) -> None:
    """``engram knowledge export --agent alice --file F`` then ``engram knowledge import --file F --agent alice``."""
    with Engram(cli.store, embedder=embedder) as mem:
        mem.remember("deploy checklist", agent="alice", metadata=_fill(MAX_METADATA_BYTES))
    file = str(tmp_path / "alice.jsonl")
    assert cli.json("knowledge", "export", "--agent", "alice", "--file", file)["exported"] == 1
    other = Cli(store=str(tmp_path / "other"), runner=cli.runner)
    assert other.json("knowledge", "import", "--file", file, "--agent", "alice")["imported"] == 1


def test_the_limit_still_holds_for_what_callers_write(mem: Engram) -> None:
    """The allowance is the library's own provenance only: a caller's metadata over the limit is refused."""
    with pytest.raises(ValidationError, match="too large"):
        mem.remember("too much", agent="alice", metadata=_fill(MAX_METADATA_BYTES + 1))
    # A file may hold the library's provenance beyond the limit, but only that, and only a bounded one.
    with pytest.raises(ValidationError, match="provenance in metadata is too large"):
        check.stored_metadata({"provenance": {"source": "x" * PROVENANCE_BYTES}, "k": 1})
    with pytest.raises(ValidationError, match="metadata is too large"):
        check.stored_metadata({"provenance": {"source": "f"}, **_fill(MAX_METADATA_BYTES + 1)})
    assert check.stored_metadata({"provenance": {"source": "f"}, **_fill(MAX_METADATA_BYTES)})["provenance"]


def test_a_merged_copy_at_the_limit_comes_back_from_its_export(tmp_path: Path, embedder: Embedder) -> None:
    """``engram knowledge merge --from-agent alice`` adds an ``origin`` stamp: bob's export still imports."""
    with Engram(tmp_path / "a", embedder=embedder) as a:
        m = a.remember("the payments runbook", agent="alice", metadata=_fill(MAX_METADATA_BYTES))
        a.sharing.share([m.id], from_agent="alice", to_agent="bob")
        assert a.knowledge.merge(from_agent="alice", to_agent="bob") == 1
        assert a.knowledge.export_file(tmp_path / "bob.jsonl", agent="bob") == 1
    with Engram(tmp_path / "b", embedder=embedder) as b:
        assert b.knowledge.import_file(tmp_path / "bob.jsonl", agent="bob") == 1
        (copy,) = b.list(agent="bob")
        assert copy.metadata["origin"]["id"] == m.id

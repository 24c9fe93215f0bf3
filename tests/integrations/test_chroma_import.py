"""Migration from a real Chroma persist directory, created in the test with the real chromadb package.

The Chroma store is written the way seeds 003 and 004 write theirs (``PersistentClient``, collections of
documents with metadata), but with explicit embeddings so nothing is downloaded; telemetry is off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from integration_extras import require
from typer.testing import CliRunner

chromadb = require("chromadb", "chroma")

from chromadb.config import Settings  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.errors import EngramError, ValidationError  # noqa: E402
from engramdb.integrations.chroma import BATCH, import_chroma  # noqa: E402
from engramdb.interfaces.cli import chroma_import  # noqa: E402

SECRET = "AKIA" + "QWERTYUIOPASDFGH"

PATTERNS: list[tuple[str, str, dict[str, Any]]] = [
    ("p-login", "Login to Facebook", {"success_rate": 1.0, "usage_count": 3, "task": "Login to Facebook"}),
    ("p-post", "Post a status update on the timeline", {"success_rate": 0.9, "usage_count": 0}),
    ("p-search", "Search for a friend by name", {"success_rate": 0.7, "steps": ["open", "type", "enter"]}),
]
SOLUTIONS: list[tuple[str, str | None, dict[str, Any] | None]] = [
    ("s-import", "ModuleNotFoundError: install the missing package with pip", {"language": "python"}),
    ("s-timeout", f"asyncio.TimeoutError: raise the timeout; the staging key is {SECRET}", None),
    ("s-vector-only", None, {"note": "an embedding without a document"}),
]


def vector(i: int, dim: int = 8) -> list[float]:
    return [float((i * 7 + j) % 5) / 5.0 + 0.1 for j in range(dim)]


def make_chroma(path: Path, *, extra: int = 0) -> None:
    """A Chroma persist directory with two collections (and ``extra`` more patterns for batching)."""
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    patterns = client.get_or_create_collection(
        "task_patterns", embedding_function=None, metadata={"description": "Successful task patterns"}
    )
    rows = PATTERNS + [(f"p-extra-{i}", f"Extra pattern number {i} about scrolling", {"i": i}) for i in range(extra)]
    patterns.add(
        ids=[r[0] for r in rows],
        documents=[r[1] for r in rows],
        metadatas=[r[2] for r in rows],
        embeddings=[vector(i) for i in range(len(rows))],
    )
    solutions = client.get_or_create_collection("error_solutions", embedding_function=None)
    solutions.add(
        ids=[r[0] for r in SOLUTIONS],
        documents=[r[1] for r in SOLUTIONS],
        metadatas=[r[2] for r in SOLUTIONS],
        embeddings=[vector(i, 8) for i in range(len(SOLUTIONS))],
    )


@pytest.fixture
def chroma_dir(tmp_path: Path) -> Path:
    path = tmp_path / "chroma"
    make_chroma(path)
    return path


def test_dry_run_reports_per_collection_and_writes_nothing(mem: Engram, chroma_dir: Path) -> None:
    report = import_chroma(mem, chroma_dir, agent="surfer", dry_run=True)
    assert report.dry_run
    by_name = {c.name: c for c in report.collections}
    assert set(by_name) == {"task_patterns", "error_solutions"}
    assert by_name["task_patterns"].records == 3
    assert by_name["task_patterns"].imported == 3
    assert by_name["error_solutions"].records == 3
    assert by_name["error_solutions"].imported == 2
    assert by_name["error_solutions"].without_document == 1
    assert by_name["task_patterns"].source_dimension == 8
    assert report.imported == 5
    assert "would be embedded with" in report.vectors_note
    assert mem.count(agent="surfer") == 0
    assert [e.action for e in mem.audit.log(agent="surfer")] == ["list", "list"]  # reads only: nothing written
    assert json.loads(json.dumps(report.to_dict()))["vectors"] == "re-embedded"


def test_import_brings_ids_documents_metadata_and_re_embeds(mem: Engram, chroma_dir: Path) -> None:
    seen: list[tuple[int, int]] = []
    report = import_chroma(mem, chroma_dir, agent="surfer", progress=lambda done, total: seen.append((done, total)))
    assert report.imported == 5
    assert seen[-1] == (5, 5)
    assert report.model == mem.embedder.model_id
    assert f"were embedded with {mem.embedder.model_id}" in report.vectors_note
    memories = {m.metadata["chroma_id"]: m for m in mem.list(agent="surfer")}
    assert set(memories) == {"p-login", "p-post", "p-search", "s-import", "s-timeout"}
    login = memories["p-login"]
    assert login.content == "Login to Facebook"
    # Seed 004's collection is known: its records become the patterns ``save_pattern`` writes.
    assert login.kind == "success"
    assert set(login.tags) == {"pattern", "task_patterns"}
    assert login.confidence == 1.0
    assert memories["s-import"].kind == "knowledge"  # an error collection's record without a fix stays plain
    assert login.metadata["chroma_collection"] == "task_patterns"
    assert login.metadata["usage_count"] == 3
    assert memories["p-search"].metadata["steps"] == ["open", "type", "enter"]
    assert memories["s-import"].metadata == {
        "language": "python",
        "chroma_id": "s-import",
        "chroma_collection": "error_solutions",
    }
    # Secrets are redacted on the way in (the one write pipeline), and every write is audited.
    assert SECRET not in memories["s-timeout"].content
    assert "[REDACTED:" in memories["s-timeout"].content
    assert mem.audit.verify()
    assert len([e for e in mem.audit.log(agent="surfer", limit=100) if e.action == "create"]) == 5
    # Re-embedded with engramdb's model: search by meaning works (Chroma's 8-dimensional vectors could not).
    hits = mem.search("sign in to FB", agent="surfer", tags=["task_patterns"], limit=1)
    assert hits[0].memory.metadata["chroma_id"] == "p-login"
    hits = mem.search("python says a module cannot be found", agent="surfer", limit=1)
    assert hits[0].memory.metadata["chroma_id"] == "s-import"


def test_running_it_again_imports_nothing_twice(mem: Engram, chroma_dir: Path) -> None:
    import_chroma(mem, chroma_dir, agent="surfer")
    again = import_chroma(mem, chroma_dir, agent="surfer")
    assert again.imported == 0
    assert {c.name: c.already_imported for c in again.collections} == {"task_patterns": 3, "error_solutions": 2}
    assert mem.count(agent="surfer") == 5
    # Another agent gets its own copy; the default agent is "default".
    other = import_chroma(mem, chroma_dir)
    assert other.agent == "default"
    assert other.imported == 5


def test_large_collections_are_imported_in_batches(mem: Engram, tmp_path: Path) -> None:
    make_chroma(tmp_path / "big", extra=BATCH + 20)
    seen: list[tuple[int, int]] = []
    report = import_chroma(mem, tmp_path / "big", agent="a", kind="success", progress=lambda d, t: seen.append((d, t)))
    total = 3 + BATCH + 20 + 2
    assert report.imported == total
    assert len(seen) >= 3
    assert seen[-1] == (total, total)
    assert mem.count(agent="a") == total
    assert mem.count(agent="a", kind="success") == total
    ids = {m.metadata["chroma_id"] for m in mem.list(agent="a", limit=1000)}
    assert len(ids) == total


def test_not_a_chroma_directory_is_one_clear_error(mem: Engram, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        import_chroma(mem, tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(ValidationError, match="no Chroma store at"):
        import_chroma(mem, tmp_path / ("w" * 300))  # a name the file system refuses: a raw OSError before
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValidationError, match=r"not a Chroma persist directory \(it has no chroma.sqlite3\)"):
        import_chroma(mem, empty)
    assert list(empty.iterdir()) == []  # Chroma was not allowed to create a store there
    file = tmp_path / "file.txt"
    file.write_text("hello")
    with pytest.raises(ValidationError, match="not a Chroma persist directory"):
        import_chroma(mem, file)
    with pytest.raises(ValidationError, match="unknown kind"):
        import_chroma(mem, tmp_path, kind="gossip")


def test_a_damaged_chroma_store_is_an_engram_error(mem: Engram, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(EngramError, match="Chroma"):
        import_chroma(mem, broken)


def test_cli_command(chroma_dir: Path, tmp_path: Path) -> None:
    # The command function as the CLI registers it (``engram import chroma PATH``), in a one-command app.
    app = typer.Typer()
    app.command("chroma")(chroma_import.chroma)
    store = str(tmp_path / "store")
    runner = CliRunner()
    dry = runner.invoke(app, [str(chroma_dir), "--dry-run", "--agent", "surfer", "--store", store, "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["imported"] == 5
    real = runner.invoke(app, [str(chroma_dir), "--agent", "surfer", "--store", store])
    assert real.exit_code == 0, real.output
    assert "Imported 5 of 6 records as agent 'surfer'" in real.stdout
    assert "task_patterns" in real.stdout
    assert "not reused" in real.stdout
    with Engram(store) as mem:
        assert mem.count(agent="surfer") == 5


def test_a_collection_with_an_embedding_function_is_read_without_loading_it(mem: Engram, tmp_path: Path) -> None:
    # Seed 004 creates its collection with an embedding function; reading it must neither load nor call one.
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction

    path = tmp_path / "with_ef"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    collection = client.get_or_create_collection("task_patterns", embedding_function=DefaultEmbeddingFunction())
    collection.add(ids=["a"], documents=["Login to Facebook"], embeddings=[vector(0, 384)], metadatas=[{"k": 1}])
    report = import_chroma(mem, path, agent="surfer")
    [only] = report.collections
    assert only.source_embedding == "default"
    assert only.source_dimension == 384
    assert "384-dimensional, made by Chroma's default embedding function" in report.vectors_note
    assert mem.list(agent="surfer")[0].metadata == {
        "k": 1,
        "task": "Login to Facebook",
        "actions": [],
        "chroma_id": "a",
        "chroma_collection": "task_patterns",
    }

"""Seeds 003 and 004 migrated from Chroma reach their features: ``recall_patterns``, ``failures.solutions``, code.

The Chroma stores are written the way the seeds write theirs (seed 004's ``ChromaStore.add_pattern`` into
``task_patterns``; seed 003's ``store_error_resolution`` into ``errors`` and ``store_code_pattern`` into
``code_patterns``), with explicit embeddings so nothing is downloaded. Then ``engram import chroma`` and the
seeds' own reads.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from integration_extras import require
from typer.testing import CliRunner

chromadb = require("chromadb", "chroma")
require("langchain_core", "langchain")

from chromadb.config import Settings  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.errors import ValidationError  # noqa: E402
from engramdb.integrations.chroma import import_chroma  # noqa: E402
from engramdb.integrations.langchain import memory_tools  # noqa: E402
from engramdb.interfaces.cli import app  # noqa: E402

AUTH_CODE = "def authenticate(token: str) -> User:\n    claims = jwt.decode(token, KEY, algorithms=['HS256'])\n" + (
    "    return User(claims['sub'])\n"
)


def _vector(i: int) -> list[float]:
    return [float((i * 7 + j) % 5) / 5.0 + 0.1 for j in range(8)]


def seed_stores(path: Path) -> None:
    """What seeds 004 and 003 leave in their Chroma persist directory."""
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    # Seed 004: add_pattern(task, actions, success_rate, metadata) -> documents=[task], metadatas=[pattern].
    # Chroma keeps only scalar metadata, so the actions list is stored as JSON text.
    patterns = client.get_or_create_collection("task_patterns", embedding_function=None)
    for i, (task, actions, rate, usage) in enumerate(
        [
            ("Login to Facebook", [{"tool": "goto", "args": {"url": "facebook.com"}}, {"tool": "type"}], 1.0, 3),
            ("Search for a friend by name", [{"tool": "click", "args": {"target": "search"}}], 0.8, 1),
            ("Post a photo to the timeline", [{"tool": "upload"}], 0.3, 5),
        ]
    ):
        meta = {
            "task": task,
            "actions": json.dumps(actions),
            "success_rate": rate,
            "timestamp": datetime(2026, 1, 2, tzinfo=UTC).isoformat(),
            "usage_count": usage,
            "context": "web automation",
        }
        patterns.add(ids=[str(uuid.uuid4())], documents=[task], metadatas=[meta], embeddings=[_vector(i)])
    # Seed 003: store_error_resolution(error_message, context, resolution, success).
    errors = client.get_or_create_collection("errors", embedding_function=None)
    errors.add(
        ids=["err-1", "err-2", "err-3"],
        documents=[
            "ModuleNotFoundError: No module named 'fastapi'",
            "asyncio.TimeoutError\nResolution: raise the client timeout and retry with backoff",
            "ConnectionRefusedError: [Errno 111] Connection refused",
        ],
        metadatas=[
            {"context": "Starting FastAPI server", "resolution": "pip install fastapi uvicorn", "success": True},
            {"context": "Calling the pricing API"},
            {"context": "Connecting to Redis", "resolution": "restart the laptop", "success": False},
        ],
        embeddings=[_vector(i) for i in range(3)],
    )
    # Seed 003: store_code_pattern(pattern_name, code, language, context, success_metrics).
    code = client.get_or_create_collection("code_patterns", embedding_function=None)
    code.add(
        ids=["jwt-auth"],
        documents=[AUTH_CODE],
        metadatas=[
            {
                "pattern_name": "JWT Authentication",
                "language": "python",
                "context": "REST API authentication",
                "success_metrics": json.dumps({"success_rate": 1.0}),
            }
        ],
        embeddings=[_vector(0)],
    )
    notes = client.get_or_create_collection("experiences", embedding_function=None)
    notes.add(ids=["x1"], documents=["Task 17 took three rounds of consensus"], embeddings=[_vector(1)])


@pytest.fixture
def chroma_dir(tmp_path: Path) -> Path:
    seed_stores(tmp_path / "memory")
    return tmp_path / "memory"


def test_seed_004_patterns_come_back_through_recall_patterns(mem: Engram, chroma_dir: Path) -> None:
    """Seed 004: ``recall_patterns`` after migrating ``task_patterns`` finds the pattern, its actions and rate."""
    report = import_chroma(mem, chroma_dir, agent="surfer", collections=["task_patterns"])
    assert [(c.name, c.shape, c.imported) for c in report.collections] == [("task_patterns", "patterns", 3)]
    tools = {t.name: t for t in memory_tools(mem, agent="surfer")}
    answer = tools["recall_patterns"].invoke({"task": "log into facebook", "max_results": 3, "min_success_rate": 0.5})
    assert "Task: Login to Facebook" in answer
    assert "Success rate: 100%" in answer
    assert "goto" in answer
    assert "Post a photo" not in answer  # success rate 0.3, below the asked 0.5
    stats = tools["get_pattern_stats"].invoke({})
    assert "Total patterns: 3" in stats


def test_seed_003_error_resolutions_come_back_through_failures_solutions(mem: Engram, chroma_dir: Path) -> None:
    """Seed 003: ``recall_error_solutions(error_message="Cannot import fastapi")`` -> "pip install fastapi uvicorn"."""
    report = import_chroma(mem, chroma_dir, agent="swarm", collections=["errors"])
    [errors] = report.collections
    assert (errors.shape, errors.imported, errors.plain) == ("failures", 3, 0)
    assert mem.count(agent="swarm", kind="failure") == 3
    [best, *_] = mem.failures.solutions("Cannot import fastapi", agent="swarm")
    assert best.solution == "pip install fastapi uvicorn"
    [timeout, *_] = mem.failures.solutions("asyncio.TimeoutError", agent="swarm")
    assert timeout.solution == "raise the client timeout and retry with backoff"
    # A resolution recorded with success=False is a fix that did not work, never offered as one that did.
    refused = mem.failures.solutions("ConnectionRefusedError: [Errno 111] Connection refused", agent="swarm")
    assert all(s.success_rate < 0.5 for s in refused if s.solution == "restart the laptop")
    # Run again: nothing comes twice.
    assert import_chroma(mem, chroma_dir, agent="swarm", collections=["errors"]).imported == 0


def test_seed_003_code_patterns_and_the_rest(mem: Engram, chroma_dir: Path) -> None:
    """Seed 003: ``recall_similar_patterns(description="implement user authentication", language="python")``."""
    report = import_chroma(mem, chroma_dir, agent="swarm")
    shapes = {c.name: c.shape for c in report.collections}
    assert shapes == {
        "code_patterns": "code_patterns",
        "errors": "failures",
        "experiences": "plain",
        "task_patterns": "patterns",
    }
    [hit, *_] = mem.code.suggest("implement user authentication", agent="swarm", language="python")
    assert hit.memory.kind == "code_pattern"
    assert hit.memory.metadata["name"] == "JWT Authentication"
    assert hit.memory.metadata["success_metrics"] == {"success_rate": 1.0}
    assert mem.count(agent="swarm", kind="knowledge") == 1


def test_an_explicit_kind_imports_every_collection_plain(mem: Engram, chroma_dir: Path) -> None:
    report = import_chroma(mem, chroma_dir, agent="a", kind="knowledge")
    assert {c.shape for c in report.collections} == {"plain"}
    assert mem.count(agent="a", kind="knowledge") == report.imported == 8


def test_an_unknown_collection_is_one_error_naming_the_ones_there(mem: Engram, chroma_dir: Path) -> None:
    with pytest.raises(ValidationError, match=r"no collection 'patterns'.*task_patterns"):
        import_chroma(mem, chroma_dir, collections=["patterns"])
    assert mem.count(agent="default") == 0


def test_cli_chooses_collections_and_shows_what_each_became(chroma_dir: Path, tmp_path: Path) -> None:
    """``engram import chroma ./memory --collection task_patterns --collection errors``."""
    store = str(tmp_path / "store")
    runner = CliRunner()
    args = ["--store", store, "import", "chroma", str(chroma_dir), "--agent", "swarm"]
    out = runner.invoke(app, [*args, "--collection", "task_patterns", "--collection", "errors", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert {c["name"]: c["shape"] for c in report["collections"]} == {"errors": "failures", "task_patterns": "patterns"}
    bad = runner.invoke(app, [*args, "--collection", "nope"])
    assert bad.exit_code == 1
    assert "no collection 'nope'" in bad.output


def test_shapes_are_known_by_name_else_by_metadata() -> None:
    """The shape rules are pure: a collection is known by its name, else by its metadata keys."""
    from engramdb.integrations._chroma_shapes import failure_record, shape_of

    assert shape_of("lot_memory", [{"task": "x", "actions": "[]", "success_rate": 1.0}]) == "patterns"
    assert shape_of("kb", [{"error_message": "E", "resolution": "R"}]) == "failures"
    assert shape_of("kb", [{"pattern_name": "Factory", "language": "python"}]) == "code_patterns"
    assert shape_of("kb", [{"note": 1}]) == "plain"
    rec = failure_record("Error: KeyError: 'id'\nFix: check the key first", {})
    assert rec is not None
    assert (rec.error, rec.solution) == ("KeyError: 'id'", "check the key first")

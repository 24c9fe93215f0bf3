"""Seed 004 migrated from Chroma keeps what ``update_pattern_usage`` counted: ``get_pattern_stats`` after
``engram import chroma`` reports the same total usage and most used pattern as the Chroma store did.

The store is written as seed 004's ``ChromaStore.add_pattern`` then ``update_pattern_usage`` leave it
(``usage_count`` and the averaged ``success_rate`` in each record's metadata), with explicit embeddings so
nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.errors import ValidationError

chromadb = pytest.importorskip("chromadb")
pytest.importorskip("langchain_core")

from engramdb.integrations.chroma import import_chroma  # noqa: E402
from engramdb.integrations.langchain import memory_tools  # noqa: E402

#: (task, success_rate, usage_count) as seed 004's store holds them after some use.
PATTERNS = [
    ("Login to Facebook", 0.79, 3),
    ("Post a photo to the timeline", 0.7, 12),
    ("Search for a friend by name", 1.0, 0),
]


@pytest.fixture
def chroma_dir(tmp_path: Path) -> Path:
    from chromadb.config import Settings

    path = tmp_path / "memory"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    patterns = client.get_or_create_collection("task_patterns", embedding_function=None)
    for i, (task, rate, usage) in enumerate(PATTERNS):
        meta = {"task": task, "actions": json.dumps([{"tool": "click"}]), "success_rate": rate, "usage_count": usage}
        patterns.add(ids=[f"p{i}"], documents=[task], metadatas=[meta], embeddings=[[0.1 * (i + 1)] * 8])
    return path


def test_usage_counts_survive_the_migration(mem: Engram, chroma_dir: Path) -> None:
    """``get_pattern_stats()`` -> ``total_usage`` 15 and ``most_used_pattern`` the photo post, as in Chroma."""
    import_chroma(mem, chroma_dir, agent="surfer")
    by_task = {m.content: m for m in mem.list(agent="surfer", kind="success")}
    photo = by_task["Post a photo to the timeline"]
    assert (photo.attempts, photo.successes) == (12, pytest.approx(8.4))
    assert photo.confidence == pytest.approx(0.7)  # the seed's success rate stays the pattern's rate
    assert by_task["Search for a friend by name"].attempts == 0
    tools = {t.name: t for t in memory_tools(mem, agent="surfer")}
    stats = tools["get_pattern_stats"].invoke({})
    assert "Total usage: 15" in stats
    assert photo.id in stats.split("Most used pattern:")[1]
    answer = tools["recall_patterns"].invoke({"task": "Login to Facebook", "max_results": 1})
    assert "Times used: 3" in answer


def test_remember_many_takes_outcome_counts_and_checks_them(mem: Engram) -> None:
    """The counters a migration brings are validated like every field: one clear error, nothing written."""
    (m,) = mem.remember_many([{"content": "deploy with canary", "agent": "a", "successes": 2, "attempts": 3}])
    assert (m.successes, m.attempts) == (2, 3)
    for bad in ({"successes": 4, "attempts": 3}, {"attempts": -1}, {"attempts": "many"}, {"successes": True}):
        with pytest.raises(ValidationError):
            mem.remember_many([{"content": "x", "agent": "b", **bad}])
    assert mem.count(agent="b") == 0

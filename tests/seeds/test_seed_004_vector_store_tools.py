"""Seed 004: "learning over time" with a vector store and agent tools: save_pattern, recall_patterns,
update_pattern_usage, get_pattern_stats, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.errors import ValidationError

ACTIONS = [{"tool": "browser_navigate", "args": {"url": "https://facebook.com"}}, {"tool": "click", "args": {}}]


def _add_pattern(mem: Engram, task: str, success_rate: float = 1.0) -> str:
    memory = mem.remember(
        task,
        agent="surfer",
        kind="success",
        metadata={"actions": ACTIONS, "success_rate": success_rate, "usage_count": 0},
    )
    return memory.id


def test_pattern_storage(mem: Engram) -> None:
    """``test_pattern_storage``: ``pattern_id = store.add_pattern(task="Navigate to facebook.com", actions=[...],
    success_rate=1.0)`` / ``assert pattern_id is not None``."""
    pattern_id = _add_pattern(mem, "Navigate to facebook.com")
    assert pattern_id
    assert mem.get(pattern_id).metadata["actions"] == ACTIONS


def test_pattern_search(mem: Engram) -> None:
    """``test_pattern_search``: add "Login to Facebook" and "Post on timeline"; ``search_patterns("Sign into FB")``
    -> ``results[0]`` is the login pattern."""
    _add_pattern(mem, "Login to Facebook")
    _add_pattern(mem, "Post on timeline", success_rate=0.9)
    results = mem.search("Sign into FB", agent="surfer", kind="success", limit=2)
    assert results
    assert results[0].memory.content == "Login to Facebook"


def test_min_success_rate_filter(mem: Engram) -> None:
    """``search_patterns(query, n_results, min_success_rate=0.5)``: "Filter by success rate"."""
    good = _add_pattern(mem, "Login to Facebook")
    bad = _add_pattern(mem, "Login to Facebook with the old form")
    mem.learning.feedback([bad, bad, bad], False, agent="surfer")
    mem.learning.feedback([good], True, agent="surfer")
    hits = mem.search("log into facebook", agent="surfer", kind="success")
    kept = [h for h in hits if (h.memory.success_rate or 0.0) >= 0.5]
    assert [h.memory.id for h in kept] == [good]


def test_pattern_update(mem: Engram) -> None:
    """``test_pattern_update``: ``store.update_pattern_usage(pattern_id, success=True)`` then
    ``stats["total_usage"] > 0``."""
    pattern_id = _add_pattern(mem, "Test task")
    mem.learning.feedback([pattern_id], True, agent="surfer")
    updated = mem.get(pattern_id)
    assert updated.attempts == 1
    assert updated.success_rate is not None
    assert updated.success_rate > 0.5


def test_get_pattern_stats(mem: Engram) -> None:
    """``get_pattern_stats()`` -> ``total_patterns``, ``avg_success_rate``, ``max_success_rate``, ``total_usage``,
    ``most_used_pattern``: one ``mem.learning.stats`` call (memory use is counted by feedback, then retrievals)."""
    empty = mem.learning.stats(agent="surfer")
    assert (empty.most_used_memories, empty.memory_uses, empty.memory_success_rate) == ([], 0.0, None)
    used = _add_pattern(mem, "Login to Facebook")
    once = _add_pattern(mem, "Post on timeline")
    searched = _add_pattern(mem, "Open the messenger")
    _add_pattern(mem, "Never used")
    mem.learning.feedback([used], True, agent="surfer")
    mem.learning.feedback([used], True, agent="surfer")
    mem.learning.feedback([once], False, agent="surfer")
    # A retrieval without feedback: ranked after every memory with feedback, before the unused ones.
    assert [h.memory.id for h in mem.search("Open the messenger", agent="surfer", limit=1)] == [searched]
    mem.remember("Login elsewhere", agent="other", kind="success")  # another agent's: not counted

    stats = mem.learning.stats(agent="surfer")
    assert stats.memories["success"] == 4  # total_patterns
    assert [m.id for m in stats.most_used_memories] == [used, once, searched]  # most_used_pattern first
    assert stats.most_used_memories[0].metadata["actions"] == ACTIONS  # the pattern itself, ready to replay
    assert stats.memories_used == 2
    assert stats.memory_uses == 3  # total_usage
    assert stats.memory_success_rate == pytest.approx((1 + 2) / (2 + 3))  # pooled avg_success_rate
    assert stats.best_memory_success_rate == pytest.approx((1 + 2) / (2 + 2))  # max_success_rate
    assert stats.memory_retrievals >= 1
    assert [m.id for m in mem.learning.stats(agent="surfer", top=1).most_used_memories] == [used]
    data = stats.to_dict()
    assert data["most_used_memories"][0]["id"] == used
    assert data["memory_uses"] == 3


def test_clear_all(mem: Engram) -> None:
    """``clear_all()``: "Clear all stored patterns (use with caution)"."""
    _add_pattern(mem, "Login to Facebook")
    _add_pattern(mem, "Post on timeline")
    with pytest.raises(ValidationError):
        mem.clear(agent="surfer", confirm="yes")  # the caution: confirm repeats the agent's name
    assert mem.count(agent="surfer") == 2
    assert mem.clear(agent="surfer", confirm="surfer") == 2
    assert mem.count(agent="surfer") == 0


def test_unrelated_text_is_not_a_hit(tmp_path: Path, embedder: Embedder) -> None:
    """``Semantic search irrelevant`` -> ``Tune embeddings, add filtering``: an unrelated query finds nothing."""
    with Engram(tmp_path / "store", embedder=embedder, min_score=0.3) as mem:
        _add_pattern(mem, "Login to Facebook")
        assert mem.search("quarterly tax rates for wine imports", agent="surfer", kind="success") == []
        assert [h.memory.content for h in mem.search("Sign into FB", agent="surfer", kind="success")] == [
            "Login to Facebook"
        ]


def test_persistence_after_restart(tmp_path: Path, embedder: Embedder) -> None:
    """``print('Patterns:', store.patterns_collection.count())`` / "# Restart and verify" /
    ``print('Patterns after restart:', ...)``: "Data persists across restarts"."""
    with Engram(tmp_path / "memory", embedder=embedder) as mem:
        _add_pattern(mem, "Test")
        before = mem.count(agent="surfer")
    with Engram(tmp_path / "memory", embedder=embedder) as mem:
        assert mem.count(agent="surfer") == before == 1
        assert mem.search("Test", agent="surfer")[0].memory.content == "Test"

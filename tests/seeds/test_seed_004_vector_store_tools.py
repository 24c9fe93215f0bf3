"""Seed 004: "learning over time" with a vector store and agent tools: save_pattern, recall_patterns,
update_pattern_usage, get_pattern_stats, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder

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


@pytest.mark.xfail(strict=True, reason="issue 12: get_pattern_stats (counts, success rates, most used) as one call")
def test_get_pattern_stats(mem: Engram) -> None:
    """``get_pattern_stats()`` -> ``total_patterns``, ``avg_success_rate``, ``max_success_rate``, ``total_usage``,
    ``most_used_pattern``."""
    used = _add_pattern(mem, "Login to Facebook")
    _add_pattern(mem, "Post on timeline")
    mem.learning.feedback([used, used], True, agent="surfer")
    stats = mem.learning.pattern_stats(agent="surfer")  # type: ignore[attr-defined]
    assert stats.total == 2
    assert stats.most_used == used


@pytest.mark.xfail(strict=True, reason="issue 12: bulk clear of an agent's memories with confirmation")
def test_clear_all(mem: Engram) -> None:
    """``clear_all()``: "Clear all stored patterns (use with caution)"."""
    _add_pattern(mem, "Login to Facebook")
    mem.retention.clear(agent="surfer", confirm=True)  # type: ignore[attr-defined]
    assert mem.count(agent="surfer") == 0


@pytest.mark.xfail(strict=True, reason="issue 12: a minimum similarity for search (unrelated text is no hit)")
def test_unrelated_text_is_not_a_hit(mem: Engram) -> None:
    """``Semantic search irrelevant`` -> ``Tune embeddings, add filtering``: an unrelated query finds nothing."""
    _add_pattern(mem, "Login to Facebook")
    assert mem.search("quarterly tax rates for wine imports", agent="surfer", kind="success") == []


def test_persistence_after_restart(tmp_path: Path, embedder: Embedder) -> None:
    """``print('Patterns:', store.patterns_collection.count())`` / "# Restart and verify" /
    ``print('Patterns after restart:', ...)``: "Data persists across restarts"."""
    with Engram(tmp_path / "memory", embedder=embedder) as mem:
        _add_pattern(mem, "Test")
        before = mem.count(agent="surfer")
    with Engram(tmp_path / "memory", embedder=embedder) as mem:
        assert mem.count(agent="surfer") == before == 1
        assert mem.search("Test", agent="surfer")[0].memory.content == "Test"

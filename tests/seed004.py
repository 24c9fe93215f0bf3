"""Seed 004's reuse rule, checked the same way for every model (its relevance is calibrated per model):
a saved pattern is reused above relevance 0.7, an unrelated task is refused. ``tests/`` is on ``sys.path``."""

from __future__ import annotations

from engramdb import Engram


def check_seed_004(mem: Engram) -> None:
    """``mem`` (empty) holds four saved tasks; rewordings pass 0.7, unrelated tasks stay under 0.5."""
    for task in ("Login to Facebook", "Post on timeline", "Search flights to Rome", "Export the sales report"):
        mem.remember(task, agent="surfer", kind="success")
    for rewording in ("Sign into FB", "Go to FB"):
        best = mem.search(rewording, agent="surfer", kind="success", limit=1)[0]
        assert best.memory.content == "Login to Facebook"
        assert best.relevance > 0.7
    for unrelated in ("order pizza", "bake a chocolate cake", "quarterly tax rates for wine imports"):
        # Well under the reuse threshold ("tax rates for wine imports" against "Export the sales report": 0.31).
        assert all(h.relevance < 0.5 for h in mem.search(unrelated, agent="surfer", kind="success"))
    # The same rule through min_score: reuse what passes 0.7, nothing for an unrelated task.
    assert [h.memory.content for h in mem.search("Sign into FB", agent="surfer", min_score=0.7)] == [
        "Login to Facebook"
    ]
    assert mem.search("order pizza", agent="surfer", min_score=0.7) == []

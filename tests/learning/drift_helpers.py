"""A change in the world followed through the public API and a real store (tests/learning/test_drift_*.py)."""

from __future__ import annotations

from pathlib import Path

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.learning import recommend as rc
from engramdb.models import Suggestion


def follow_a_change(path: Path, embedder: Embedder, cfg: rc.RecommendConfig) -> tuple[Suggestion, list[str]]:
    """Record blue-green winning 12 times, check it is suggested, then canary winning 8 times: the suggestion after
    the change and 20 seeded choices (a change option is one ``RecommendConfig`` away)."""
    ctx = "deploy the payments service to production"
    with Engram(path, embedder=embedder, recommend=cfg) as mem:
        for _ in range(12):
            mem.learning.record(ctx, "blue-green", "success", alternatives=["canary"], agent="ops")
            mem.learning.record(ctx, "canary", "failure", alternatives=["blue-green"], agent="ops")
        before = mem.learning.suggest(ctx, agent="ops", options=["blue-green", "canary"])
        assert before.recommended == "blue-green"
        for _ in range(8):
            mem.learning.record(ctx, "blue-green", "failure", alternatives=["canary"], agent="ops")
            mem.learning.record(ctx, "canary", "success", alternatives=["blue-green"], agent="ops")
        after = mem.learning.suggest(ctx, agent="ops", options=["blue-green", "canary"])
        picks = [mem.learning.choose(ctx, ["blue-green", "canary"], agent="ops", seed=k) for k in range(20)]
    return after, picks

"""The ``agent`` setting is the agent of every call that does not name one, in every area, not only the core."""

from __future__ import annotations

from pathlib import Path

from engramdb import Engram


def test_every_area_acts_for_the_agent_setting(tmp_path: Path) -> None:
    with Engram(tmp_path / "store", agent="swarm", vectors="sync") as mem:
        failure = mem.failures.record("TimeoutError: upstream took 30s", solution="raise the timeout to 60s")
        decision = mem.learning.record("sync the orders table", "bulk-copy", "success")
        episode = mem.episodes.start("migrate the billing database")
        mem.episodes.event(episode, "step", {"n": 1})
        mem.episodes.end(episode, "success")
        code = mem.code.remember("def retry(f):\n    for _ in range(3):\n        f()\n    return f\n")
        check = mem.failures.generate_check(mem.failures.patterns()[0].id)
        report = mem.knowledge.seed("git")

        assert {failure.agent, decision.agent} == {"swarm"}
        assert code
        assert {m.agent for m in code} == {"swarm"}
        assert mem.get(episode).agent == "swarm"
        assert check.agent == "swarm"
        assert report.agent == "swarm"
        assert report.added > 0
        assert mem.count(kind="knowledge") > 0
        # Reads without an agent see the setting's memories ...
        assert mem.failures.solutions("TimeoutError: upstream took 45s")[0].solution == "raise the timeout to 60s"
        assert mem.learning.stats().decisions >= 1
        assert [e.id for e in mem.episodes.list("billing database migration")] == [episode]
        assert mem.failures.checks()[0].id == check.id
        # ... and a call that names an agent still acts for it alone.
        assert mem.failures.solutions("TimeoutError: upstream took 45s", agent="default") == []
        assert mem.learning.stats(agent="default").decisions == 0
        assert mem.count(agent="default") == 0

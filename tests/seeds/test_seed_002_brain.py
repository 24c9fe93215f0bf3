"""Seed 002: the "Brain": short-term context, long-term SQLite memory (preferences, patterns, decisions, learning
events), semantic search, reinforcement learning from rewards and feedback, distillation, LLM routing."""

from __future__ import annotations

import random
from pathlib import Path

from engramdb import Engram
from engramdb.embeddings.base import Embedder


def test_short_term_memory(mem: Engram) -> None:
    """``remember_short_term(key, value)`` / ``recall_short_term(key)`` / ``add_to_context(role, content)``."""
    ctx = mem.session("assistant")
    ctx.set("active_task", {"id": "T-12", "step": 2})
    ctx.add("deploy the api to staging", role="user")
    ctx.add("running the deploy script", role="assistant")
    assert ctx.get("active_task") == {"id": "T-12", "step": 2}
    assert [m.role for m in ctx.messages] == ["user", "assistant"]
    assert "deploy the api to staging" in ctx.render()
    assert mem.session("assistant") is ctx


def test_store_pattern_and_find_similar(mem: Engram) -> None:
    """``store_pattern(pattern_type, context, solution, language)`` then ``find_similar_patterns(query)``."""
    mem.remember(
        "error_fix: pytest cannot import the package -> install it in editable mode: pip install -e .",
        agent="brain",
        kind="code_pattern",
        tags=["error_fix", "python"],
    )
    mem.remember("feature: paginate the REST API with cursor tokens", agent="brain", kind="code_pattern")
    hits = mem.search("tests fail with an import error of my own package", agent="brain", kind="code_pattern")
    assert "editable mode" in hits[0].memory.content


def test_store_pattern_twice_counts_success(mem: Engram) -> None:
    """``store_pattern``: "Check if similar pattern exists" -> ``success_count = success_count + 1``."""
    first = mem.remember("feature: cache the exchange rates for one hour", agent="brain", kind="code_pattern")
    again = mem.remember("feature: cache the exchange rates for one hour", agent="brain", kind="code_pattern")
    assert again.id == first.id
    assert mem.count(agent="brain", kind="code_pattern") == 1


def test_preferences_as_memories(mem: Engram) -> None:
    """``store_preference(key, value, category)`` / ``get_preference(key)``."""
    mem.remember("editor: neovim", agent="user", kind="preference", metadata={"key": "editor", "value": "neovim"})
    (pref,) = mem.list(agent="user", kind="preference")
    assert pref.metadata["value"] == "neovim"


def test_keyed_preference_supersedes(mem: Engram) -> None:
    """``ON CONFLICT(key) DO UPDATE SET value = excluded.value``: a new value of a key replaces the old one."""
    mem.remember("editor: vim", agent="user", kind="preference", key="editor")
    mem.remember("editor: neovim", agent="user", kind="preference", key="editor")
    (pref,) = mem.list(agent="user", kind="preference")
    assert pref.content == "editor: neovim"


def test_record_decision_then_outcome(mem: Engram) -> None:
    """``record_decision(agent_type, context, options, chosen, reasoning)`` then
    ``update_decision_outcome(decision_id, outcome, reward)``."""
    decision = mem.learning.record(
        "choose the test framework", "pytest", None, agent="brain", alternatives=["unittest"]
    )
    assert [m.id for m in mem.learning.pending(agent="brain")] == [decision.id]
    mem.learning.resolve(decision.id, 1.0, agent="brain")
    assert mem.learning.pending(agent="brain") == []
    assert mem.learning.suggest("choose the test framework", agent="brain").options[0].action == "pytest"


def test_learn_from_feedback(mem: Engram) -> None:
    """``learn_from_feedback(feedback, task_context)``: feedback becomes a reward in [-1, 1]."""
    hint = mem.remember("prefer small pull requests", agent="brain")
    mem.learning.feedback([hint.id], 0.8, agent="brain")  # a reward in [-1, 1] works today
    assert mem.get(hint.id).attempts == 1
    mem.learning.feedback([hint.id], "great, that worked perfectly", agent="brain")
    liked = mem.get(hint.id)
    assert liked.attempts == 2
    assert liked.successes > 0.5
    nope = mem.remember("squash every branch into one commit", agent="brain")
    mem.learning.feedback([nope.id], "no, that was wrong and broke the build", agent="brain")
    assert mem.get(nope.id).successes < 0.5


def test_reinforcement_learning_picks_the_rewarded_action(mem: Engram) -> None:
    """``ReinforcementLearner.select_action`` (explore/exploit) learns ``get_best_actions(state)`` from rewards."""
    rng = random.Random(7)
    success_rate = {"write-tests-first": 0.85, "code-then-test": 0.45, "no-tests": 0.15}
    options = list(success_rate)
    for _ in range(45):
        action = mem.learning.choose("code task of medium complexity", options, agent="rl")
        mem.learning.record("code task of medium complexity", action, rng.random() < success_rate[action], agent="rl")
    best = mem.learning.suggest("code task of medium complexity", agent="rl", options=options)
    assert best.options[0].action == "write-tests-first"


def test_decisions_in_an_episode_get_discounted_credit(mem: Engram) -> None:
    """``learn_from_episode``: ``target = reward + self.gamma * max_next_q`` works backwards through the history."""
    episode = mem.episodes.start("release", agent="rl")
    first = mem.learning.record("release: prepare", "freeze-branch", None, agent="rl", episode=episode)
    mem.episodes.event(episode, "decision", {"id": first.id}, agent="rl")
    last = mem.learning.record("release: publish", "tag-and-push", None, agent="rl", episode=episode)
    mem.episodes.end(episode, "success", agent="rl")
    assert mem.get(first.id, agent="rl").metadata.get("credit") is not None
    success = {r.id: r.success for r in mem.learning.outcomes(agent="rl")}
    assert 0.5 < success[first.id] < success[last.id] == 1.0  # the earlier decision, discounted


def test_context_for_a_task(mem: Engram) -> None:
    """``ReasoningContext(goal, constraints, relevant_memories, previous_attempts)``: the relevant memories for a
    goal, within a token budget."""
    mem.remember("the staging deploy needs VPN access", agent="brain")
    ctx = mem.context("deploy to staging", agent="brain", token_budget=200)
    assert "VPN" in ctx.render()


def test_knowledge_distillation(mem: Engram) -> None:
    """``distill_patterns(pattern_type)``: "if len(patterns) < 3: return []", else groups become general knowledge."""
    for service in ("billing", "search", "auth"):
        mem.remember(f"error_fix: {service} client timed out -> retry with backoff", agent="brain", kind="code_pattern")
    distilled = mem.knowledge.distill(agent="brain", kind="code_pattern", min_group=3)
    assert distilled


def test_llm_routing(mem: Engram) -> None:
    """``SmartRouter.route(task_type, complexity)``: "Embeddings = always local", "Complex reasoning = cloud"."""
    choice = mem.routing.decide("summarise this log", task_type="summarization", models=["local", "cloud"], agent="b")
    assert choice.model in {"local", "cloud"}
    assert str(choice) == choice.model


def test_long_term_memory_persists(tmp_path: Path, embedder: Embedder) -> None:
    """``Storage: SQLite (data/memory.db)`` / ``Retention: Permanent``."""
    with Engram(tmp_path / "data", embedder=embedder) as mem:
        mem.remember("project: engramdb, tech stack python + sqlite", agent="brain", kind="knowledge")
        mem.learning.record("pick a database", "sqlite", "success", agent="brain")
    with Engram(tmp_path / "data", embedder=embedder) as mem:
        assert mem.search("which tech stack", agent="brain")[0].memory.content.startswith("project: engramdb")
        assert mem.learning.suggest("pick a database", agent="brain").options[0].action == "sqlite"

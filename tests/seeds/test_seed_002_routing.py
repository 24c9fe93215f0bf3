"""Seed 002, "LLM Routing Strategy": ``SmartRouter.route(task_type, complexity, context_length, require_fast,
require_cheap) -> RoutingDecision(provider, model, reason, fallback_provider, fallback_model)`` and its table, run
as ``mem.routing.route`` / ``decide`` with the seed's own models, on a real store, through the API, CLI, REST, MCP."""

from __future__ import annotations

import pytest
from seed_cli import Cli

from engramdb import Engram, RouteChoice
from engramdb.errors import ValidationError

CLAUDE = "claude-sonnet-4-20250514"
#: The seed's providers' models, as one candidate list.
SEED_MODELS = [CLAUDE, "gpt-4o", "llama3.1:8b", "deepseek-coder:33b", "local-model", "nomic-embed-text"]


def decide(mem: Engram, task: str, **kw: object) -> RouteChoice:
    return mem.routing.decide(task, models=SEED_MODELS, agent="brain", **kw)  # type: ignore[arg-type]


def test_fast_and_cheap_is_always_local(mem: Engram) -> None:
    """``if require_fast and require_cheap: ... reason="Fast and cheap requirement - using local LLM"``."""
    c = decide(mem, "prove the lock order is safe", task_type="reasoning", complexity="complex", require_fast=True,
               require_cheap=True)  # fmt: skip
    assert c.stats().tier == "local"
    assert c.decided_by == "table"
    assert "fast and cheap" in c.reason


def test_complex_reasoning_goes_to_claude_with_gpt4o_as_fallback(mem: Engram) -> None:
    """``TaskType.REASONING and complexity == COMPLEX`` -> claude-sonnet-4, ``fallback_model="gpt-4o"``."""
    c = decide(mem, "plan the database migration with zero downtime", task_type="reasoning", complexity="complex")
    assert (c.model, c.fallback) == (CLAUDE, "gpt-4o")
    assert "best chain-of-thought" in c.reason
    # Simple reasoning falls through to "Default = local for cost efficiency", Claude as fallback.
    simple = decide(mem, "is 7 bigger than 5", task_type="reasoning", complexity="simple")
    assert simple.stats().tier == "local"
    assert simple.fallback == CLAUDE
    assert "default to local for cost efficiency" in simple.reason


def test_code_generation_unless_simple_goes_to_the_cloud_with_a_local_coder_fallback(mem: Engram) -> None:
    """``CODE_GEN and complexity != SIMPLE`` -> claude, ``fallback_model="deepseek-coder:33b"`` (ollama)."""
    models = [CLAUDE, "deepseek-coder:33b"]
    c = mem.routing.decide("write the retry decorator", task_type="code_generation", complexity="medium",
                           models=models)  # fmt: skip
    assert (c.model, c.fallback) == (CLAUDE, "deepseek-coder:33b")
    simple = mem.routing.decide("rename a variable", task_type="code_generation", complexity="simple", models=models)
    assert simple.model == "deepseek-coder:33b"


def test_long_context_needs_the_large_window(mem: Engram) -> None:
    """``if context_length > 32000`` -> claude, "Long context requires Claude's 200k window"."""
    c = decide(mem, "summarise the whole repository", task_type="summarization", context_length=120_000)
    assert c.model == CLAUDE
    assert "32,000 tokens" in c.reason
    short = decide(mem, "summarise this paragraph", task_type="summarization", context_length=900)
    assert short.stats().tier == "local"


def test_embeddings_and_classification_stay_local(mem: Engram) -> None:
    """``TaskType.EMBEDDING`` -> nomic-embed-text; ``CLASSIFICATION`` -> local, ``fallback_model="local-model"``."""
    emb = mem.routing.decide("embed the docs", task_type="embedding", models=["gpt-4o", "nomic-embed-text"])
    assert emb.model == "nomic-embed-text"
    cls = mem.routing.decide("label the ticket", task_type="classification",
                             models=["gpt-4o", "llama3.1:8b", "local-model"])  # fmt: skip
    assert cls.model == "llama3.1:8b"
    assert cls.fallback == "local-model"


def test_a_medium_model_does_not_override_the_table(mem: Engram) -> None:
    """Table: "Quick classification | Ollama (local) | Fast, low latency". A cheap cloud model on the list (whose
    prior is a shade higher) must not take the pick while the reason cites the table."""
    models = ["gpt-4o", "gpt-4o-mini", "llama3.1:8b"]
    for task_type in ("classification", "pattern_matching", "summarization", "chat"):
        c = mem.routing.decide("sort these tickets", task_type=task_type, models=models)
        assert c.model == "llama3.1:8b", task_type
        assert c.decided_by == "table"
        assert "the routing table decides" in c.reason


def test_early_picks_go_to_the_preferred_model(mem: Engram) -> None:
    """Twenty different classification tasks, each recorded as the seed's learner would: every pick is the table's
    local model (exploration does not send half of them elsewhere), while its outcomes are good."""
    models = ["gpt-4o", "gpt-4o-mini", "llama3.1:8b"]
    picks = []
    for i in range(20):
        task = f"classify support ticket {i} as bug, feature or question"
        model = mem.routing.route(task, task_type="classification", models=models, agent="brain")
        picks.append(model)
        mem.routing.record(task, model, "success", task_type="classification", agent="brain")
    assert picks.count("llama3.1:8b") >= 19
    assert picks[:5] == ["llama3.1:8b"] * 5


def test_outcomes_overrule_the_table_and_the_reason_says_so(mem: Engram) -> None:
    """The seed's learner "updates Q-values": when the local model keeps failing, the pick moves, and the reason
    names outcomes (not the table) as what decided."""
    models = ["gpt-4o", "llama3.1:8b"]
    for i in range(4):
        mem.routing.record(f"label ticket {i}", "llama3.1:8b", "failure", task_type="classification", agent="brain")
    c = mem.routing.decide("label ticket 9", task_type="classification", models=models, agent="brain", exploration=0)
    assert c.model == "gpt-4o"
    assert c.decided_by == "outcomes"
    assert "overruled by outcomes" in c.reason
    assert "the routing table decides" not in c.reason


def test_route_takes_every_seed_input_and_returns_a_name(mem: Engram) -> None:
    """``route(task_type, complexity, context_length=0, require_fast=False, require_cheap=False)``."""
    name = mem.routing.route(
        "review this pull request",
        task_type="code_generation",
        models=SEED_MODELS,
        agent="brain",
        complexity="complex",
        context_length=0,
        require_fast=False,
        require_cheap=False,
    )
    assert name == CLAUDE
    d = decide(mem, "x", task_type="chat").to_dict()
    assert {"fallback", "decided_by", "complexity", "context_length", "require_fast", "require_cheap"} <= set(d)
    for bad in ({"complexity": "hard"}, {"context_length": -1}, {"require_fast": "yes"}):
        with pytest.raises(ValidationError):
            decide(mem, "x", **bad)


def test_cli_passes_the_seed_inputs(cli: Cli) -> None:
    """``engram route --task ... --task-type reasoning --complexity complex`` (--context-length, --fast, --cheap)."""
    cli.ok("route-record", "--task", "draft a reply", "-m", "llama3.1:8b", "--outcome", "success", "-T", "chat")
    base = ["route", "--task", "design the cache", "-m", CLAUDE, "-m", "gpt-4o", "-m", "llama3.1:8b"]
    out = cli.json(*base, "--task-type", "reasoning", "--complexity", "complex")
    assert (out["model"], out["fallback"], out["decided_by"]) == (CLAUDE, "gpt-4o", "table")
    assert cli.json(*base, "--fast", "--cheap")["model"] == "llama3.1:8b"
    assert cli.json(*base, "--task-type", "chat", "--context-length", "50000")["model"] == CLAUDE
    text = cli.ok(*base, "--task-type", "reasoning", "--complexity", "complex")
    assert "fallback: gpt-4o" in text
    bad = cli.run(*base, "--complexity", "hard")
    assert bad.exit_code == 1
    assert "complexity must be one of simple, medium, complex" in bad.output

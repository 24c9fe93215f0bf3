"""Learned LLM routing on a real store: the table as prior, evidence overriding it, cost against success."""

from __future__ import annotations

from typing import Any

import pytest

from engramdb import Engram
from engramdb.errors import EngramError, ValidationError
from engramdb.models import ModelSpec
from engramdb.services.routing import RoutingService, guess_tier, normalise_task_type, table_prior

MODELS = ["gpt-4o", "llama3.1:8b"]


def routing(mem: Engram) -> RoutingService:
    return RoutingService(mem._services, learning=mem.learning)


def test_the_table_decides_without_evidence(mem: Engram) -> None:
    r = routing(mem)
    hard = r.decide("prove the scheduler never deadlocks", task_type="reasoning", models=MODELS, exploration=0)
    easy = r.decide("label this ticket as bug or feature", task_type="classification", models=MODELS, exploration=0)
    assert hard.model == "gpt-4o"
    assert easy.model == "llama3.1:8b"
    assert str(easy) == "llama3.1:8b"
    assert easy.stats().evidence == 0
    assert "the routing table decides" in easy.reason
    assert easy.decided_by == "table"
    assert hard.candidates[0].model == "gpt-4o"
    assert hard.to_dict()["candidates"][0]["tier"] == "strong"


def test_evidence_overrides_the_table(mem: Engram) -> None:
    r = routing(mem)
    for i in range(6):
        r.record(f"label ticket {i}", "llama3.1:8b", "failure", task_type="classification", cost=0.0, latency_ms=300)
        r.record(f"label ticket {i}", "gpt-4o", "success", task_type="classification", cost=0.01, latency_ms=900)
    choice = r.decide("label ticket 99", task_type="classification", models=MODELS, exploration=0)
    assert choice.model == "gpt-4o"
    local = choice.stats("llama3.1:8b")
    assert local.expected_success < 0.3
    assert local.evidence == pytest.approx(6, abs=0.5)
    assert choice.stats().expected_cost == pytest.approx(0.01)
    assert choice.stats().expected_latency_ms == 900


def test_cost_weight_trades_success_against_cost(mem: Engram) -> None:
    r = routing(mem)
    for i in range(10):
        r.record(f"summarise doc {i}", "gpt-4o", "success", task_type="summarization", cost=1.0)
        r.record(
            f"summarise doc {i}",
            "llama3.1:8b",
            "success" if i % 10 < 8 else "failure",
            task_type="summarization",
            cost=0.0,
        )
    cheap = r.decide("summarise doc 50", task_type="summarization", models=MODELS, cost_weight=0.5, exploration=0)
    quality = r.decide("summarise doc 50", task_type="summarization", models=MODELS, cost_weight=0.0, exploration=0)
    assert cheap.model == "llama3.1:8b"
    assert quality.model == "gpt-4o"


def test_task_types_are_kept_apart(mem: Engram) -> None:
    r = routing(mem)
    for i in range(5):
        r.record(f"write a parser {i}", "llama3.1:8b", "success", task_type="code", cost=0.0)
    other = r.decide("prove the theorem", task_type="reasoning", models=MODELS, exploration=0)
    assert other.stats("llama3.1:8b").evidence == 0
    same = r.decide("write a lexer", task_type="code_generation", models=MODELS, exploration=0)
    assert same.task_type == "code_generation"
    assert same.stats("llama3.1:8b").evidence > 4


def test_similar_tasks_shape_the_prior_without_a_task_type(mem: Engram) -> None:
    r = routing(mem)
    for _ in range(4):
        r.record("translate the release notes into German", "llama3.1:8b", "failure", cost=0.0)
    choice = r.decide("translate the release notes into German", models=MODELS, exploration=0)
    assert choice.stats("llama3.1:8b").prior_success < 0.3
    assert choice.model == "gpt-4o"


def test_same_data_same_pick_and_exploration_is_seeded(mem: Engram) -> None:
    r = routing(mem)
    picks = {r.decide("classify this", task_type="classification", models=MODELS, seed=3).model for _ in range(3)}
    assert len(picks) == 1


def test_model_specs_and_mappings(mem: Engram) -> None:
    r = routing(mem)
    specs = [ModelSpec(name="big", tier="strong", cost=2.0), ModelSpec(name="small", tier="local", cost=0.0)]
    c = r.decide("prove it", task_type="reasoning", models=specs, exploration=0)
    assert c.model == "big"
    assert c.stats("big").expected_cost == 2.0
    m = r.decide("prove it", task_type="reasoning", models={"big": {"tier": "strong"}, "small": {"tier": "local"}})
    assert {s.model for s in m.candidates} == {"big", "small"}


def test_record_writes_an_outcome_record_the_learning_engine_reads(mem: Engram) -> None:
    m = routing(mem).record(
        "summarise the incident", "gpt-4o-mini", True, task_type="Summarisation", latency_ms=1200, cost=0.002
    )
    assert m.kind == "decision"
    assert "llm-route" in m.tags
    assert "llm-task:summarization" in m.tags
    assert m.metadata["routing"] == {"task_type": "summarization", "latency_ms": 1200.0, "cost": 0.002}
    [rec] = mem.learning.outcomes()
    assert rec.action == "gpt-4o-mini"
    assert rec.success == 1.0
    assert rec.duration == 1.2
    assert rec.category == "summarization"


@pytest.mark.parametrize(
    ("call", "kwargs", "message"),
    [
        ("route", {"task": "", "models": MODELS}, "task must not be empty"),
        ("route", {"task": "t", "models": []}, "models must not be empty"),
        ("route", {"task": "t", "models": "gpt-4o"}, "models must be a non-empty list"),
        ("route", {"task": "t", "models": ["a", "a"]}, "distinct"),
        ("route", {"task": "t", "models": [3]}, "name or a ModelSpec"),
        ("route", {"task": "t", "models": {"a": {"price": 1}}}, "unknown detail"),
        ("route", {"task": "t", "models": {"a": {"tier": "huge"}}}, "unknown model tier"),
        ("route", {"task": "t", "models": MODELS, "cost_weight": -1}, "cost_weight"),
        ("route", {"task": "t", "models": MODELS, "exploration": 2}, "exploration"),
        ("route", {"task": "t", "models": MODELS, "task_type": ""}, "task_type"),
        ("record", {"task": "t", "model": "m", "outcome": "meh"}, "unknown outcome"),
        ("record", {"task": "t", "model": "", "outcome": "success"}, "model"),
        ("record", {"task": "t", "model": "m", "outcome": "success", "cost": -1}, "cost"),
        ("record", {"task": "t", "model": "m", "outcome": "success", "latency_ms": float("nan")}, "latency_ms"),
        ("record", {"task": "t", "model": "m", "outcome": "success", "agent": "*"}, "agent"),
    ],
)
def test_bad_input_is_one_engram_error_and_the_store_is_unchanged(
    backend_mem: Engram, call: str, kwargs: dict[str, Any], message: str
) -> None:
    r = routing(backend_mem)
    before = backend_mem.count(kind="decision")
    with pytest.raises(EngramError, match=message):
        getattr(r, call)(**kwargs)
    assert backend_mem.count(kind="decision") == before


def test_helpers() -> None:
    assert guess_tier("gpt-4o") == "strong"
    assert guess_tier("gpt-4o-mini") == "medium"
    assert guess_tier("claude-3-haiku") == "medium"
    assert guess_tier("qwen2.5:7b") == "local"
    assert guess_tier("claude-sonnet-4") == "strong"
    assert guess_tier("some-model") == "medium"
    assert normalise_task_type("Code Gen") == "code_generation"
    assert normalise_task_type(None) is None
    assert table_prior("reasoning", "strong") > table_prior("reasoning", "local")
    assert table_prior("anything", "strong") > table_prior("anything", "local")
    with pytest.raises(ValidationError):
        normalise_task_type(7)


def test_route_returns_the_model_name_as_the_contract_says(mem: Engram) -> None:
    """CONTRACT v2: ``mem.routing.route(task, ...) -> str``; ``decide`` gives the same pick with its reasons."""
    name = mem.routing.route("label ticket 7", task_type="classification", models=MODELS, exploration=0)
    assert type(name) is str
    assert name == mem.routing.decide("label ticket 7", task_type="classification", models=MODELS, exploration=0).model

"""Reasoning over memory with a scripted LLM: prompts carry the context, answers are checked, decisions recorded."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from engramdb import Engram
from engramdb.brain.llm import LLMError, LLMNotConfigured
from engramdb.errors import EngramError, NotFound, ValidationError
from engramdb.services.context import ContextBuilder
from engramdb.services.reason import Reasoner


class ScriptedLLM:
    """An LLM that answers from a script (dicts for structured answers) and keeps the prompts it got."""

    name = "scripted:test"

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.prompts: list[list[Mapping[str, str]]] = []
        self.schemas: list[Mapping[str, Any] | None] = []

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str | dict[str, Any]:
        self.prompts.append(list(messages))
        self.schemas.append(schema)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


def builder(mem: Engram) -> ContextBuilder:
    return ContextBuilder(
        mem._services, learning=mem.learning, failures=mem.failures, sessions=lambda agent, **scope: None
    )


def reasoner(mem: Engram, llm: Any, *, context: bool = True) -> Reasoner:
    return Reasoner(mem._services, llm=llm, context=builder(mem) if context else None)


PLAN = {
    "steps": ["Check the token expiry", "Refresh the token with backoff", "Retry the request"],
    "decision": "refresh the token, then retry with backoff",
    "rationale": "Past outcomes show retry-with-backoff succeeded for auth failures.",
}


def test_plan_uses_the_memory_context_and_records_a_pending_decision(mem: Engram) -> None:
    mem.learning.record("auth token expired on API call", "retry-with-backoff", "success", agent="alice")
    mem.learning.record("auth token expired on API call", "retry-with-backoff", "success", agent="alice")
    mem.remember("The user prefers small commits", agent="alice", kind="preference")
    llm = ScriptedLLM(PLAN)
    r = reasoner(mem, llm).reason("Fix the auth token expired failure on API calls", agent="alice")
    assert r.mode == "plan"
    assert r.steps == tuple(PLAN["steps"])
    assert r.decision == PLAN["decision"]
    assert r.model == "scripted:test"
    prompt = llm.prompts[0][-1]["content"]
    assert "## Memory context" in prompt
    assert "retry-with-backoff" in prompt
    assert "## Goal\nFix the auth token expired failure" in prompt
    assert r.decision_id is not None
    m = mem.get(r.decision_id)
    assert m.kind == "decision"
    assert m.agent == "alice"
    assert "pending" in m.tags
    assert m.metadata["action"] == PLAN["decision"]
    assert m.metadata["outcome"] == "pending"
    assert [p.id for p in mem.learning.pending(agent="alice")] == [r.decision_id]
    assert m.metadata["reasoning"]["steps"] == PLAN["steps"]
    # Pending: not yet evidence for the learning engine.
    assert all(o.action != PLAN["decision"] for o in mem.learning.outcomes(agent="alice"))
    assert r.to_dict()["decision_id"] == r.decision_id


def test_resolve_turns_the_decision_into_an_outcome_record(mem: Engram) -> None:
    r = reasoner(mem, ScriptedLLM(PLAN), context=False).reason("deploy the service", agent="bob")
    assert r.decision_id is not None
    reasoning = reasoner(mem, None, context=False)
    done = reasoning.resolve(r.decision_id, "success", agent="bob")
    assert done.metadata["outcome"] == "success"
    assert "pending" not in done.metadata
    assert f"action:{PLAN['decision']}" in done.tags
    assert "pending" not in done.tags
    [rec] = [o for o in mem.learning.outcomes(agent="bob") if o.id == r.decision_id]
    assert rec.action == PLAN["decision"]
    assert rec.success == 1.0
    with pytest.raises(ValidationError, match="already has an outcome"):
        reasoning.resolve(r.decision_id, "failure", agent="bob")
    with pytest.raises(NotFound):
        reasoning.resolve(r.decision_id, "failure", agent="mallory")


def test_a_decision_from_an_older_store_still_resolves(mem: Engram) -> None:
    """Reasoning once marked decisions with ``pending: True`` and no outcome; learning lists and resolves them."""
    old = mem.remember(
        "deploy the service",
        agent="bob",
        kind="decision",
        tags=["reasoning", "pending"],
        metadata={"action": "blue-green", "pending": True, "reasoning": {"mode": "plan"}},
    )
    assert [p.id for p in mem.learning.pending(agent="bob")] == [old.id]
    done = mem.learning.resolve(old.id, "success", agent="bob")
    assert done.metadata["outcome"] == "success"
    assert "pending" not in done.metadata
    assert "action:blue-green" in done.tags


def test_decide_picks_one_of_the_options(mem: Engram) -> None:
    answer = {"steps": ["A is cheaper", "B is riskier"], "decision": "postgres", "rationale": "fits"}
    llm = ScriptedLLM(answer)
    r = reasoner(mem, llm).reason("pick a database", mode="decide", options=["SQLite", "Postgres"])
    assert r.decision == "Postgres"  # matched to the option's spelling
    assert "## Options\n- SQLite\n- Postgres" in llm.prompts[0][-1]["content"]
    m = mem.get(r.decision_id or "")
    assert m.metadata["alternatives"] == ["SQLite"]


def test_decision_outside_the_options_is_an_llm_error_and_records_nothing(mem: Engram) -> None:
    llm = ScriptedLLM({"steps": ["x"], "decision": "MongoDB", "rationale": "web scale"})
    before = mem.count(kind="decision")
    with pytest.raises(LLMError, match="not one of the options"):
        reasoner(mem, llm).reason("pick a database", mode="decide", options=["SQLite", "Postgres"])
    assert mem.count(kind="decision") == before


def test_think_without_a_decision_records_nothing(mem: Engram) -> None:
    llm = ScriptedLLM({"steps": ["first", "second"], "decision": None, "rationale": "open question"})
    r = reasoner(mem, llm).reason("why is the build slow?", mode="think")
    assert r.decision is None
    assert r.decision_id is None
    assert r.steps == ("first", "second")
    assert mem.count(kind="decision") == 0


def test_without_an_llm_the_error_says_how_to_configure_one(mem: Engram) -> None:
    with pytest.raises(LLMNotConfigured, match=r"ENGRAM_LLM=openai:MODEL.*ENGRAM_LLM_KEY_ENV"):
        reasoner(mem, None).reason("plan the release")
    assert mem.count(kind="decision") == 0


def test_llm_failure_propagates_and_records_nothing(mem: Engram) -> None:
    llm = ScriptedLLM(LLMError("openai:x failed after 4 attempts: HTTP 500"))
    with pytest.raises(LLMError, match="HTTP 500"):
        reasoner(mem, llm).reason("plan the release")
    assert mem.count(kind="decision") == 0


def test_empty_answer_is_an_llm_error(mem: Engram) -> None:
    llm = ScriptedLLM({"steps": [], "decision": "  ", "rationale": ""})
    with pytest.raises(LLMError, match="neither steps nor a decision"):
        reasoner(mem, llm).reason("plan the release")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"goal": ""}, "goal must not be empty"),
        ({"goal": "g", "mode": "dream"}, "unknown reasoning mode"),
        ({"goal": "g", "mode": "decide", "options": ["only one"]}, "at least two options"),
        ({"goal": "g", "options": "a,b"}, "options must be a list"),
        ({"goal": "g", "options": ["a", ""]}, "non-empty string"),
        ({"goal": "g", "agent": ""}, "agent"),
        ({"goal": "g", "token_budget": 0}, "token_budget"),
    ],
)
def test_bad_input_is_one_engram_error_and_nothing_changes(mem: Engram, kwargs: dict[str, Any], message: str) -> None:
    llm = ScriptedLLM(PLAN)
    goal = kwargs.pop("goal")
    with pytest.raises(EngramError, match=message):
        reasoner(mem, llm).reason(goal, **kwargs)
    assert llm.prompts == []
    assert mem.count(kind="decision") == 0


def test_schema_sent_to_the_llm_requires_the_fields(mem: Engram) -> None:
    llm = ScriptedLLM(PLAN)
    reasoner(mem, llm, context=False).reason("plan", record=False)
    schema = llm.schemas[0]
    assert schema is not None
    assert schema["required"] == ["steps", "decision", "rationale"]
    assert json.dumps(schema)  # JSON-ready

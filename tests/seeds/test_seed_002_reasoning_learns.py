"""Seed 002: "Record agent decision for later learning" then ``update_decision_outcome(decision_id, outcome, reward)``.

A decision made by ``mem.reason`` is the seed's ``record_decision``; it must reach the learning engine the same way a
decision recorded with ``mem.learning.record(..., outcome=None)`` or ``engram memory record --outcome pending`` does:
listed by ``learning.pending()``, resolved by ``learning.resolve`` / ``engram learning resolve``, then counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seed_cli import Cli

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.errors import ValidationError
from engramdb.interfaces.cli._refs import MIN_PREFIX, full_id


class OneAnswerLLM:
    """An LLM that always decides the same option (the seed's ``chosen``)."""

    name = "scripted:seed-002"

    def __init__(self, decision: str) -> None:
        self.decision = decision

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str | dict[str, Any]:
        return {"steps": ["compare the options"], "decision": self.decision, "rationale": "fewer failures before"}


OPTIONS = ["retry-with-backoff", "fail-fast"]


def _reason(mem: Engram) -> str:
    r = mem.reason("auth-failure on the payments API", agent="alice", mode="decide", options=OPTIONS)
    assert r.decision == "retry-with-backoff"
    assert r.decision_id is not None
    return r.decision_id


def test_reasoned_decision_is_pending_and_resolves_through_learning(tmp_path: Path, embedder: Embedder) -> None:
    """``record_decision(agent_type, context, options, chosen, reasoning)`` then ``update_decision_outcome``."""
    with Engram(tmp_path / "store", embedder=embedder, llm=OneAnswerLLM("retry-with-backoff")) as mem:
        decision_id = _reason(mem)
        assert [m.id for m in mem.learning.pending(agent="alice")] == [decision_id]
        assert mem.learning.stats(agent="alice").pending == 1
        done = mem.learning.resolve(decision_id, "success", agent="alice")
        assert done.metadata["outcome"] == "success"
        assert "pending" not in done.tags
        assert "action:retry-with-backoff" in done.tags
        assert done.metadata["reasoning"]["mode"] == "decide"
        assert mem.learning.pending(agent="alice") == []
        s = mem.learning.suggest("auth-failure on the payments API", agent="alice", options=OPTIONS)
        best = s.options[0]
        assert (best.action, best.successes, best.attempts) == ("retry-with-backoff", 1, 1)
        with pytest.raises(ValidationError, match="already has an outcome"):
            mem.learning.resolve(decision_id, "failure", agent="alice")


def test_engram_learning_resolve_accepts_a_reasoned_decision(tmp_path: Path, embedder: Embedder, cli: Cli) -> None:
    """The seed's CLI flow: the decision from reasoning is resolved with ``engram learning resolve ID --outcome``."""
    with Engram(cli.store, embedder=embedder, llm=OneAnswerLLM("retry-with-backoff")) as mem:
        decision_id = _reason(mem)
    listed = cli.json("learning", "pending", "--agent", "alice")
    assert [m["id"] for m in listed] == [decision_id]
    resolved = cli.json("learning", "resolve", decision_id, "--outcome", "success", "--agent", "alice")
    assert resolved["metadata"]["outcome"] == "success"
    assert cli.json("learning", "pending", "--agent", "alice") == []


@pytest.mark.parametrize("later", [None, "pending", "Pending"])
def test_python_record_accepts_pending_as_the_cli_does(mem: Engram, cli: Cli, later: str | None) -> None:
    """Contract: ``outcome`` None or "pending" = the outcome comes later (the CLI's ``--outcome pending``)."""
    m = mem.learning.record("auth-failure", "retry-with-backoff", later, agent="alice")
    assert m.metadata["outcome"] == "pending"
    assert "pending" in m.tags
    assert [p.id for p in mem.learning.pending(agent="alice")] == [m.id]
    assert mem.learning.resolve(m.id, "failure", agent="alice").metadata["outcome"] == "failure"
    cli.ok(
        "memory", "record", "--agent", "alice", "--type", "decision",
        "--context", "auth-failure", "--action", "retry-with-backoff", "--outcome", "pending",
    )  # fmt: skip
    assert len(cli.json("learning", "pending", "--agent", "alice")) == 1


def test_resolve_with_pending_again_is_refused(mem: Engram) -> None:
    """Resolving needs an actual outcome; "pending" again is a one-line ValidationError and changes nothing."""
    m = mem.learning.record("auth-failure", "retry-with-backoff", "pending", agent="alice")
    with pytest.raises(ValidationError, match="needs the outcome"):
        mem.learning.resolve(m.id, "pending", agent="alice")
    assert mem.get(m.id).metadata["outcome"] == "pending"


def test_cli_takes_a_unique_id_prefix_as_git_does(tmp_path: Path, embedder: Embedder, cli: Cli) -> None:
    """``update_decision_outcome(decision_id, ...)`` typed by hand: the first digits of the id the CLI printed do
    for resolve, show, history and feedback; another agent's memory is not found by its prefix, and fewer than
    six digits are no prefix."""
    with Engram(cli.store, embedder=embedder, llm=OneAnswerLLM("retry-with-backoff")) as mem:
        decision_id = _reason(mem)
        mem.remember_many([{"content": f"note {i}", "agent": "alice"} for i in range(20)])
    short = decision_id[:8]
    resolved = cli.json("learning", "resolve", short, "--outcome", "success", "--agent", "alice")
    assert resolved["id"] == decision_id
    assert resolved["metadata"]["outcome"] == "success"
    assert cli.json("memory", "show", decision_id[:6], "--agent", "alice")["id"] == decision_id
    assert [c["action"] for c in cli.json("memory", "history", short, "--agent", "alice")] == ["create", "resolve"]
    (fed,) = cli.json("learning", "feedback", short, "--outcome", "success", "--agent", "alice")
    assert fed["id"] == decision_id
    assert cli.run("memory", "show", short, "--agent", "bob").exit_code == 1
    assert cli.run("memory", "show", decision_id[:5], "--agent", "alice").exit_code == 1


def test_cli_reasons_with_a_local_ollama_as_seed_002_does(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 002 reasons with Ollama's llama3.1:8b and no API key: ``ENGRAM_LLM=ollama:llama3.1:8b`` (what the
    error message suggested, and config refused: "use 'openai:<model>'"), no OPENAI_API_KEY; the decision then
    waits in ``engram learning pending``. OpenAI's own API still needs its key."""
    from llm_server import FakeServer, Reply

    server = FakeServer()
    try:
        answer = {"steps": ["compare the options"], "decision": "retry-with-backoff", "rationale": "fewer failures"}
        server.script = [Reply(json.dumps(answer))]
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        env = {"ENGRAM_LLM": "ollama:llama3.1:8b", "ENGRAM_LLM_BASE_URL": server.url}
        reasoned = cli.json(
            "reason", "--goal", "auth-failure on the payments API", "--mode", "decide",
            "--option", "retry-with-backoff", "--option", "fail-fast", "--agent", "alice", env=env,
        )  # fmt: skip
        assert reasoned["decision"] == "retry-with-backoff"
        assert server.requests[0]["model"] == "llama3.1:8b"
        assert not any(k.lower() == "authorization" for k in server.headers[0])
        (pending,) = cli.json("learning", "pending", "--agent", "alice", env=env)
        assert pending["id"] == reasoned["decision_id"]
    finally:
        server.stop()
    refused = cli.run("learning", "pending", "--agent", "alice", env={"ENGRAM_LLM": "openai:gpt-4o-mini"})
    assert refused.exit_code == 1
    assert "OPENAI_API_KEY" in refused.output


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_id_reference_is_completed_only_to_a_memory_it_starts(mem: Engram, data: st.DataObject) -> None:
    """Any text typed as an id: left as it is, or completed to the one visible memory whose id it begins (6+ hex
    digits, any case, spaces around); never another agent's; a bad one is left for the API to refuse in one line."""
    if mem.count(agent="alice") == 0:
        mem.remember_many([{"content": f"note {i}", "agent": "alice"} for i in range(30)])
        mem.remember("bob's note", agent="bob")
    mine = {m.id for m in mem.list(agent="alice", limit=100)}
    (bobs,) = [m.id for m in mem.list(agent="bob")]
    prefix = st.tuples(st.sampled_from([*sorted(mine), bobs]), st.integers(1, 33), st.booleans()).map(
        lambda t: f" {t[0][: t[1]].upper() if t[2] else t[0][: t[1]]} "
    )
    ref = data.draw(st.one_of(st.text(max_size=40), st.text(alphabet="0123456789abcdef", max_size=40), prefix))
    got = full_id(mem, ref, agent="alice")  # 31 random ids: no two share 6 digits (odds ~1e-5)
    key = ref.strip().lower()
    assert got == ref or (got in mine and got.startswith(key) and len(key) >= MIN_PREFIX)
    if MIN_PREFIX <= len(key) < 32 and sum(i.startswith(key) for i in mine) == 1:
        assert got in mine  # a unique prefix of one of alice's ids is always completed

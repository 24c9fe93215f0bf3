"""``mem.add`` with an LLM configured (ENGRAM_LLM), against a real OpenAI-protocol server on loopback.

The server answers with mem0-style decisions about the stored facts it was shown; the answer is
checked whole before anything is written, and any fault falls back to the deterministic rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from llm_server import FakeServer, Reply


@pytest.fixture
def llm_mem(
    tmp_path: Path, embedder: Embedder, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Engram]:
    """A store whose LLM is configured the way users do it: environment variables naming the server."""
    monkeypatch.setenv("ENGRAM_LLM", "openai:test-model")
    monkeypatch.setenv("ENGRAM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("ENGRAM_LLM_KEY_ENV", "TEST_LLM_KEY")
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    with Engram(tmp_path / "store", embedder=embedder) as m:
        yield m


def stored_facts(request: dict[str, Any]) -> dict[str, str]:
    """The stored facts the LLM was shown: text -> the number it may name."""
    prompt = request["messages"][-1]["content"]
    listed = json.loads(prompt.split("## Stored facts\n", 1)[1].split("\n\n## Conversation", 1)[0])
    return {f["text"]: f["id"] for f in listed}


def answer(facts: list[dict[str, Any]]) -> Reply:
    return Reply(json.dumps({"facts": facts}))


def seed(mem: Engram) -> None:
    mem.remember("The user lives in Paris.", agent="bot", key="home")
    mem.remember("The user has a cat named Tom.", agent="bot", key="pet:cat")
    mem.remember("The user likes jazz.", agent="bot", kind="preference")


def test_decisions_update_delete_add_and_keep_are_applied_and_audited(llm_mem: Engram, server: FakeServer) -> None:
    seed(llm_mem)

    def decide(request: dict[str, Any]) -> Reply:
        ids = stored_facts(request)
        return answer(
            [
                {"event": "UPDATE", "id": ids["The user lives in Paris."], "text": "The user lives in Berlin."},
                {"event": "DELETE", "id": ids["The user has a cat named Tom."]},
                {"event": "NONE", "id": ids["The user likes jazz."]},
                {"event": "ADD", "text": "The user has a dog named Rex.", "kind": "knowledge", "key": "pet:dog"},
            ]
        )

    server.answer = decide
    res = llm_mem.add(
        [
            {"role": "user", "content": "I moved to Berlin, sadly Tom the cat died, we adopted a dog, Rex."},
            {"role": "assistant", "content": "I'm sorry about Tom. Welcome, Rex!"},
        ],
        agent="bot",
    )
    assert res.extractor == "llm:openai:test-model"
    assert [(f.action, f.memory.content) for f in res.facts] == [
        ("update", "The user lives in Berlin."),
        ("delete", "The user has a cat named Tom."),
        ("none", "The user likes jazz."),
        ("add", "The user has a dog named Rex."),
    ]
    assert res.updated[0].previous == "The user lives in Paris."
    assert llm_mem.recall_key("home", agent="bot").content == "The user lives in Berlin."
    assert llm_mem.recall_key("pet:dog", agent="bot").metadata["by"] == "openai:test-model"
    assert all("cat" not in m.content for m in llm_mem.list(agent="bot", kind="knowledge"))
    assert len(res.turns) == 2
    # The request spoke the protocol, with the conversation and the structured-output schema.
    request = server.requests[-1]
    assert request["model"] == "test-model"
    assert "Tom the cat died" in request["messages"][-1]["content"]
    actions = [e.action for e in llm_mem.audit.log(agent="bot", limit=100)]
    assert {"update", "forget"} <= set(actions)
    assert llm_mem.audit.verify()


def test_an_added_keyed_fact_supersedes_the_stored_value(llm_mem: Engram, server: FakeServer) -> None:
    seed(llm_mem)
    server.script = [answer([{"event": "ADD", "text": "The user lives in Rome.", "key": "home"}])]
    res = llm_mem.add([{"role": "user", "content": "I live in Rome now."}], agent="bot")
    assert [(f.action, f.previous) for f in res.facts] == [("supersede", "The user lives in Paris.")]
    assert llm_mem.recall_key("home", agent="bot").content == "The user lives in Rome."


@pytest.mark.parametrize(
    "bad",
    [
        [{"event": "UPDATE", "id": "7", "text": "The user lives in Mars."}],  # no stored fact 7 was offered
        [{"event": "DELETE", "id": "0"}, {"event": "DELETE", "id": "0"}],  # one fact decided twice
        [{"event": "ADD", "text": ""}],  # an empty fact
        [{"event": "ADD", "text": "ok", "key": " spaced "}],  # a key remember would refuse
        [{"event": "MERGE", "id": "0"}],  # not an event
        [{"event": "ADD", "text": "The user lives in Oslo."}, {"event": "DELETE", "id": "x"}],  # half good
    ],
)
def test_a_bad_answer_writes_nothing_of_it_and_the_rules_stand_in(
    llm_mem: Engram, server: FakeServer, bad: list[dict[str, Any]]
) -> None:
    seed(llm_mem)
    server.script = [answer(bad)]
    before = {m.id: m.content for m in llm_mem.list(agent="bot", kind=["knowledge", "preference"])}
    res = llm_mem.add([{"role": "user", "content": "I'm allergic to shellfish."}], agent="bot")
    assert res.extractor == "rules"
    assert res.llm_error is not None
    assert "\n" not in res.llm_error
    assert [(f.action, f.key) for f in res.facts] == [("add", "allergy:shellfish")]
    after = {m.id: m.content for m in llm_mem.list(agent="bot", kind=["knowledge", "preference"])}
    assert {i: t for i, t in after.items() if i in before} == before  # nothing the LLM said was applied
    assert set(after) - set(before) == {res.facts[0].memory.id}
    assert len(res.turns) == 1


def test_an_unreachable_llm_never_blocks_add(tmp_path: Path, embedder: Embedder) -> None:
    from engramdb.brain.llm import OpenAICompatibleLLM

    down = FakeServer()
    down.stop()
    llm = OpenAICompatibleLLM("m", base_url=down.url, api_key="k", timeout=0.5, max_retries=0)
    with Engram(tmp_path / "s", embedder=embedder, llm=llm) as mem:
        res = mem.add([{"role": "user", "content": "I live in Paris."}], agent="bot")
        assert res.extractor == "rules"
        assert res.llm_error
        assert mem.recall_key("home", agent="bot").content == "The user lives in Paris."
    llm.close()


def test_the_llm_is_shown_only_this_users_facts_and_cannot_reach_another_users(
    llm_mem: Engram, server: FakeServer
) -> None:
    llm_mem.remember("The user lives in Oslo.", agent="bot", user="bob", key="home")
    llm_mem.remember("The user lives in Paris.", agent="bot", user="ann", key="home")
    server.script = [answer([{"event": "DELETE", "id": "1"}])]  # ann has one stored fact: 0 is the only number
    res = llm_mem.add([{"role": "user", "content": "Forget where Bob lives."}], agent="bot", user="ann")
    assert res.extractor == "rules"
    assert res.llm_error is not None
    shown = stored_facts(server.requests[-1])
    assert shown == {"The user lives in Paris.": "0"}
    assert llm_mem.recall_key("home", agent="bot", user="bob").content == "The user lives in Oslo."

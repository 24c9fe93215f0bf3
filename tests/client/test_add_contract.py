"""``add(messages)`` under the one API contract: embedded, PostgreSQL and the remote client answer alike."""

from __future__ import annotations

from typing import Any

import pytest

from engramdb import AddResult, ValidationError


def test_a_conversation_in_and_a_changed_fact_superseding(api: Any, agent: str) -> None:
    first = api.add(
        [
            {"role": "user", "content": "I live in Paris and I'm allergic to peanuts."},
            {"role": "assistant", "content": "Noted."},
        ],
        agent=agent,
        at="2026-03-01T09:00:00Z",
    )
    assert isinstance(first, AddResult)
    assert [t.metadata["role"] for t in first.turns] == ["user", "assistant"]
    assert {(f.action, f.key) for f in first.facts} == {("add", "home"), ("add", "allergy:peanuts")}
    second = api.add([{"role": "user", "content": "I moved to Berlin."}], agent=agent)
    assert [(f.action, f.key, f.previous) for f in second.facts] == [("supersede", "home", "The user lives in Paris.")]
    assert api.recall_key("home", agent=agent).content == "The user lives in Berlin."
    assert api.count(agent=agent, kind="conversation") == 3


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("hello", "messages must be a list"),
        ([{"role": "robot", "content": "x"}], "unknown role 'robot'"),
        ([{"role": "user", "content": 5}], "content must be a string"),
        ([{"content": "x"}], "message 0 has no role"),
    ],
)
def test_bad_messages_are_the_same_error_everywhere(api: Any, agent: str, bad: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        api.add(bad, agent=agent)
    assert api.count(agent=agent) == 0

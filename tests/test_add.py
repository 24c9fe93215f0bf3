"""``mem.add(messages)`` end to end on a real store with the real model: turns, facts, supersedes, bad input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import AddResult, Engram
from engramdb.errors import ValidationError


def test_turns_are_stored_as_conversation_memories_with_their_role(mem: Engram) -> None:
    res = mem.add(
        [
            {"role": "user", "content": "Hi! I'm Sam, I live in Paris and I work at Airbus."},
            {"role": "assistant", "content": "Nice to meet you, Sam!"},
        ],
        agent="bot",
        at="2026-03-01T09:00:00Z",
    )
    assert isinstance(res, AddResult)
    assert [t.kind for t in res.turns] == ["conversation", "conversation"]
    assert [t.content for t in res.turns] == [
        "user: Hi! I'm Sam, I live in Paris and I work at Airbus.",
        "assistant: Nice to meet you, Sam!",
    ]
    assert [t.metadata["role"] for t in res.turns] == ["user", "assistant"]
    assert res.turns[0].occurred_at.isoformat() == "2026-03-01T09:00:00+00:00"
    assert res.turns[1].metadata["follows"] == res.turns[0].id
    assert {(f.action, f.key) for f in res.facts} == {("add", "name"), ("add", "home"), ("add", "employer")}
    home = mem.recall_key("home", agent="bot")
    assert home.content == "The user lives in Paris."
    assert home.metadata["from"] == res.turns[0].id
    assert "fact" in home.tags
    counts = res.to_dict()
    assert (len(counts["turns"]), counts["added"], counts["superseded"], counts["extractor"]) == (2, 3, 0, "rules")


def test_a_changed_fact_supersedes_the_old_one_and_keeps_it_in_history(mem: Engram) -> None:
    mem.add([{"role": "user", "content": "I live in Paris and I prefer vim."}], agent="bot")
    res = mem.add(
        [{"role": "user", "content": "Big news: I moved to Berlin! Also I've switched to Emacs."}], agent="bot"
    )
    assert {(f.key, f.previous, f.memory.content) for f in res.superseded} == {
        ("home", "The user lives in Paris.", "The user lives in Berlin."),
        ("pref:editor", "The user prefers vim.", "The user now uses Emacs."),
    }
    home = mem.recall_key("home", agent="bot")
    assert home.content == "The user lives in Berlin."
    assert [c.action for c in mem.history(home.id)] == ["create", "supersede"]
    hits = mem.search("where does the user live", agent="bot", kind="knowledge")
    assert [h.memory.content for h in hits if "lives in" in h.memory.content] == ["The user lives in Berlin."]
    audit = [e.action for e in mem.audit.log(agent="bot", limit=100)]
    assert "supersede" in audit


def test_a_fact_said_again_is_left_alone(mem: Engram) -> None:
    mem.add([{"role": "user", "content": "I'm allergic to peanuts."}], agent="bot")
    res = mem.add([{"role": "user", "content": "As I said, I'm allergic to peanuts."}], agent="bot")
    assert [(f.action, f.key) for f in res.facts] == [("none", "allergy:peanuts")]
    memory = mem.recall_key("allergy:peanuts", agent="bot")
    assert [c.action for c in mem.history(memory.id)] == ["create"]


def test_a_change_within_one_call_supersedes_the_earlier_statement(mem: Engram) -> None:
    res = mem.add(
        [
            {"role": "user", "content": "I live in Paris."},
            {"role": "assistant", "content": "Lovely city."},
            {"role": "user", "content": "Well, I moved to Lyon last week actually."},
        ],
        agent="bot",
    )
    assert [(f.action, f.key, f.previous) for f in res.facts] == [
        ("add", "home", None),
        ("supersede", "home", "The user lives in Paris."),
    ]
    assert mem.recall_key("home", agent="bot").content == "The user lives in Lyon."


def test_only_user_turns_state_facts_and_named_speakers_keep_their_own_keys(mem: Engram) -> None:
    res = mem.add(
        [
            {"role": "assistant", "content": "I live in the cloud."},
            {"role": "user", "name": "Caroline", "content": "I live in Rome."},
            {"role": "user", "name": "Melanie", "content": "I live in Oslo."},
        ],
        agent="bot",
    )
    assert {(f.key, f.memory.content) for f in res.added} == {
        ("caroline:home", "Caroline lives in Rome."),
        ("melanie:home", "Melanie lives in Oslo."),
    }
    assert res.turns[1].content == "Caroline: I live in Rome."


def test_secrets_in_messages_are_redacted_before_storage(mem: Engram) -> None:
    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    res = mem.add([{"role": "user", "content": f"Remember that my OpenAI key is {key}."}], agent="bot")
    stored = [t.content for t in res.turns] + [f.memory.content for f in res.facts]
    assert stored
    assert all(key not in text for text in stored)


def test_plans_carry_the_day_worked_out_from_the_message_time(mem: Engram) -> None:
    res = mem.add(
        [{"role": "user", "content": "I have a dentist appointment next Tuesday.", "at": "2026-11-27T10:00:00Z"}],
        agent="bot",
    )
    (plan,) = res.added
    assert plan.key == "plan:dentist-appointment"
    assert plan.memory.metadata["date"] == "2026-12-01"


BAD: list[tuple[Any, str]] = [
    ("hello", "messages must be a list"),
    ({"role": "user", "content": "hi"}, "messages must be a list"),
    ([], "messages is empty"),
    (["hi"], "message 0 must be a mapping"),
    ([{"content": "hi"}], "message 0 has no role"),
    ([{"role": "user"}], "message 0 has no content"),
    ([{"role": "user", "content": 3}], "message 0: content must be a string"),
    ([{"role": "user", "content": ["a", "b"]}], "message 0: content must be a string"),
    ([{"role": "user", "content": "  "}], "message 0: content must not be empty"),
    ([{"role": "robot", "content": "hi"}], "message 0: unknown role 'robot'"),
    ([{"role": "user", "content": "ok"}, {"role": 1, "content": "hi"}], "message 1: unknown role 1"),
    ([{"role": "user", "content": "hi", "colour": "red"}], "unknown field"),
    ([{"role": "user", "content": "hi", "at": "yesterday"}], "message 0: at must be an ISO 8601"),
]


@pytest.mark.parametrize(("bad", "message"), BAD)
def test_bad_input_is_one_validation_error_and_nothing_is_written(mem: Engram, bad: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        mem.add(bad, agent="bot")
    assert "\n" not in str(err.value)
    assert mem.count(agent="bot") == 0


def test_bad_call_arguments_are_validation_errors(mem: Engram) -> None:
    msgs = [{"role": "user", "content": "I live in Paris."}]
    for kwargs, message in (
        ({"at": "soon"}, "at must be an ISO 8601"),
        ({"agent": ""}, "agent"),
        ({"user": 5}, "user must be a string"),
        ({"session": " s "}, "session must be a non-empty name"),
    ):
        with pytest.raises(ValidationError, match=message):
            mem.add(msgs, **{"agent": "bot", **kwargs})
    assert mem.count(agent="bot") == 0


_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "tool"]),
        "content": st.text(min_size=1, max_size=80).filter(lambda t: t.strip() and "\x00" not in t),
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_MESSAGE, min_size=1, max_size=4))
def test_any_valid_conversation_is_stored_turn_for_turn(mem: Engram, messages: list[dict[str, str]]) -> None:
    before = mem.count(agent="fuzz", kind="conversation")
    res = mem.add(messages, agent="fuzz")
    assert len(res.turns) == len(messages)
    assert mem.count(agent="fuzz", kind="conversation") == before + len(messages)
    assert all(f.memory.agent == "fuzz" for f in res.facts)


def test_facts_belong_to_the_user_and_turns_to_the_session(mem: Engram) -> None:
    ann = mem.add([{"role": "user", "content": "I live in Paris."}], agent="bot", user="ann", session="s1")
    bob = mem.add([{"role": "user", "content": "I live in Oslo."}], agent="bot", user="bob", session="s2")
    assert [(t.user, t.session) for t in ann.turns] == [("ann", "s1")]
    assert [(f.action, f.memory.user, f.memory.session) for f in ann.facts + bob.facts] == [
        ("add", "ann", None),
        ("add", "bob", None),
    ]
    assert mem.recall_key("home", agent="bot", user="ann").content == "The user lives in Paris."
    assert mem.recall_key("home", agent="bot", user="bob").content == "The user lives in Oslo."
    seen = {h.memory.content for h in mem.search("where does the user live", agent="bot", user="ann")}
    assert "The user lives in Oslo." not in seen
    assert "user: I live in Oslo." not in seen
    # A fact holds beyond the thread it was said in; the turns stay in theirs.
    later = mem.search("lives in", agent="bot", user="ann", session="s9")
    assert [h.memory.content for h in later] == []
    assert mem.recall_key("home", agent="bot", user="ann").metadata["session"] == "s1"


def test_a_changed_fact_answers_for_its_time(mem: Engram) -> None:
    mem.add([{"role": "user", "content": "I live in Paris."}], agent="bot", user="ann", at="2026-01-10T09:00:00Z")
    res = mem.add([{"role": "user", "content": "I moved to Berlin."}], agent="bot", user="ann", at="2026-06-01")
    assert [(f.action, f.previous) for f in res.facts] == [("supersede", "The user lives in Paris.")]
    assert mem.recall_key("home", agent="bot", user="ann").content == "The user lives in Berlin."
    march = mem.recall_key("home", agent="bot", user="ann", as_of="2026-03-01")
    assert march.content == "The user lives in Paris."


def test_a_value_told_late_about_an_earlier_time_goes_into_the_past(mem: Engram) -> None:
    mem.add([{"role": "user", "content": "I moved to Berlin."}], agent="bot", user="ann", at="2026-06-01")
    res = mem.add([{"role": "user", "content": "I live in Paris."}], agent="bot", user="ann", at="2026-01-01")
    assert [(f.action, f.previous) for f in res.facts] == [("add", None)]
    assert res.facts[0].memory.valid_until is not None
    assert mem.recall_key("home", agent="bot", user="ann").content == "The user lives in Berlin."
    assert mem.recall_key("home", agent="bot", user="ann", as_of="2026-03-01").content == "The user lives in Paris."

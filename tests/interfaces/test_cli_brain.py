"""The brain from the command line: keyed memories, feedback in words, context."""

from __future__ import annotations

from cli_helpers import fails, ok, ok_json


def test_a_keyed_memory_supersedes_the_previous_value(store: str):
    ok("memory", "record", "I live in London", "--key", "home", "--type", "preference", "-a", "al", "-s", store)
    ok("memory", "record", "I moved to Berlin", "--key", "home", "--type", "preference", "-a", "al", "-s", store)
    current = ok_json("memory", "key", "home", "-a", "al", "-s", store)
    assert current["content"] == "I moved to Berlin"
    history = ok_json("memory", "history", current["id"], "-s", store)
    assert [c["action"] for c in history][-1] == "supersede"
    hits = ok_json("memory", "search", "where does the user live", "-a", "al", "-s", store)
    assert [h["memory"]["content"] for h in hits] == ["I moved to Berlin"]


def test_key_errors_are_one_line_and_change_nothing(store: str):
    ok("memory", "record", "The store exists", "-a", "al", "-s", store)
    assert "--key" in fails("memory", "record", "--context", "c", "--action", "a", "--outcome", "success",
                            "--key", "x", "-s", store)  # fmt: skip
    assert "home" in fails("memory", "key", "home", "-a", "nobody", "-s", store)
    assert ok_json("memory", "list", "-a", "nobody", "-s", store) == []


def test_feedback_in_words_moves_the_success_rate(store: str):
    memory = ok_json("memory", "record", "Use the staging replica for reads", "-a", "al", "-s", store)
    [after] = ok_json("learning", "feedback", memory["id"], "--outcome", "great, exactly what I wanted",
                      "-a", "al", "-s", store)  # fmt: skip
    assert after["attempts"] == 1
    assert after["success_rate"] > 0.5


def test_context_from_the_command_line(store: str):
    ok("memory", "record", "Alice wants answers in British English", "--type", "preference", "-a", "al", "-s", store)
    out = ok("context", "--task", "write the release notes", "--agent", "al", "-s", store)
    assert "British English" in out

"""Seed 002's ``learn_from_feedback(feedback, task_context)``: "Determine reward from feedback" (-1..1), and
``if reward > 0.5`` keep a preference. Issue 25: words work as outcomes everywhere, and praise alone is a reward, not
a preference recalled for every later task."""

from __future__ import annotations

from engramdb import Engram


def test_learning_record_takes_feedback_in_words(mem: Engram) -> None:
    """``log_learning_event(event_type="user_feedback", outcome=feedback, reward=...)``: words become the reward."""
    good = mem.learning.record("write the release notes", "bullet list", "great, exactly what I wanted", agent="b")
    bad = mem.learning.record(
        "write the release notes", "long essay", "no, that was wrong and broke the build", agent="b"
    )
    assert good.metadata["feedback"] == "great, exactly what I wanted"
    assert good.metadata["reward"] > 0.5
    assert good.metadata["success"] > 0.75
    assert bad.metadata["reward"] < 0
    assert mem.learning.suggest("write the release notes", agent="b").options[0].action == "bullet list"


def test_praise_is_no_preference_and_context_stays_clean(mem: Engram) -> None:
    """Praise ("great, exactly what I wanted") updates the memory's record but is not kept as a preference, so
    ``context()`` of an unrelated task shows no "Preferences" line about it; a stated preference is kept with its
    task and recalled for a related one only."""
    notes = mem.remember("release notes: list user-facing changes first", agent="b")
    (after,) = mem.learning.feedback([notes.id], "great, exactly what I wanted", agent="b")
    assert after.successes > 0.75
    assert mem.count(agent="b", kind="preference") == 0
    mem.learning.feedback([notes.id], "great, I love short bullet points instead of paragraphs", agent="b")
    (pref,) = mem.list(agent="b", kind="preference")
    assert pref.content.startswith("release notes: list user-facing changes first: ")
    unrelated = mem.context("rotate the database credentials", agent="b").render()
    assert "bullet points" not in unrelated
    assert "exactly what I wanted" not in unrelated
    related = mem.context("write the release notes for 2.0", agent="b").render()
    assert "short bullet points" in related

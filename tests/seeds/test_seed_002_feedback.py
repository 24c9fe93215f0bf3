"""Seed 002's ``learn_from_feedback(feedback, task_context)``: "Determine reward from feedback" (-1..1), and
``if reward > 0.5`` keep a preference. Issue 25: words work as outcomes everywhere, and praise alone is a reward, not
a preference recalled for every later task."""

from __future__ import annotations

from datetime import timedelta

import pytest
from seed_cli import Cli

from engramdb import Engram
from engramdb._util import utcnow
from engramdb.errors import NotFound, ValidationError


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


def test_the_readme_example_of_a_stated_preference_is_kept(mem: Engram) -> None:
    """README: "great, I like short bullet points" is kept as a preference; the milder bare "I like ..." rates
    under seed 002's 0.5 without an LLM and is a reward only (the README said it was kept)."""
    notes = mem.remember("release notes: list user-facing changes first", agent="b")
    mem.learning.feedback([notes.id], "I like short bullet points", agent="b")
    assert mem.count(agent="b", kind="preference") == 0
    mem.learning.feedback([notes.id], "great, I like short bullet points", agent="b")
    (pref,) = mem.list(agent="b", kind="preference")
    assert pref.content.endswith("great, I like short bullet points")


def _release_store(mem: Engram) -> tuple[str, str]:
    notes = mem.remember("release notes: list user-facing changes first", agent="b").id
    other = mem.remember("rotate the database credentials every 90 days", agent="b").id
    return notes, other


def test_feedback_about_a_task_needs_no_ids(mem: Engram) -> None:
    """``learn_from_feedback(feedback, task_context)``: the words and the task, no memory ids."""
    notes, other = _release_store(mem)
    (after,) = mem.learning.feedback(
        outcome="great, exactly what I wanted", context="write the release notes", agent="b"
    )
    assert after.id == notes
    assert after.successes > 0.75
    assert mem.get(other).attempts == 0  # an unrelated memory gets nothing
    assert mem.count(agent="b", kind="preference") == 0  # praise is never a preference


def test_feedback_without_ids_is_about_the_latest_recall(mem: Engram) -> None:
    """Feedback right after a search refers to its best hit only: the other hits are not credited."""
    notes, other = _release_store(mem)
    hits = mem.search("how do I write release notes", agent="b")
    assert [h.memory.id for h in hits][:1] == [notes]
    assert other in {h.memory.id for h in hits}  # a search returns something: the weaker hit is not "used"
    (after,) = mem.learning.feedback(outcome="no, that was wrong", agent="b")
    assert after.id == notes
    assert after.attempts == 1
    assert after.success_rate is not None
    assert after.success_rate < 0.5
    assert mem.get(other).attempts == 0
    assert mem.count(agent="b", kind="preference") == 0


def test_feedback_without_ids_and_no_recent_recall_changes_nothing(
    mem: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes, _ = _release_store(mem)
    with pytest.raises(NotFound, match="recalled no memory in the last 60 minutes"):
        mem.learning.feedback(outcome="great", agent="b")
    mem.search("release notes", agent="b")
    later = utcnow() + timedelta(hours=2)
    # Two hours on, for this service (services read the time from their context's clock).
    monkeypatch.setattr(mem.learning, "_clock", lambda: later)
    with pytest.raises(NotFound, match="pass memory ids or the task"):
        mem.learning.feedback(outcome="great", agent="b")
    with pytest.raises(NotFound, match="no memory about 'paint the fence'"):
        mem.learning.feedback(outcome="great", agent="b", context="paint the fence")
    assert mem.get(notes).attempts == 0
    with pytest.raises(ValidationError, match="feedback needs an outcome"):
        mem.learning.feedback([notes], agent="b")


def test_cli_feedback_in_words_after_a_search(cli: Cli) -> None:
    """Two processes' worth of commands: ``engram memory search`` then ``engram learning feedback`` in words."""
    recorded = cli.json("memory", "record", "release notes: list user-facing changes first", "--agent", "b")
    cli.json("memory", "record", "rotate the database credentials every 90 days", "--agent", "b")
    cli.ok("memory", "search", "release notes", "--agent", "b")
    (updated,) = cli.json("learning", "feedback", "--outcome", "great, exactly what I wanted", "--agent", "b")
    assert updated["id"] == recorded["id"]
    assert updated["success_rate"] > 0.5
    by_task = cli.json(
        "learning", "feedback", "--outcome", "that was wrong", "--context", "write the release notes", "--agent", "b"
    )
    assert [m["id"] for m in by_task] == [recorded["id"]]
    assert cli.json("memory", "list", "--agent", "b", "--type", "preference") == []

"""Feedback in words (issue 8 item 6): ``mem.learning.feedback(ids, "great, exactly what I wanted")``."""

from __future__ import annotations

import pytest

from engramdb import Engram
from engramdb.errors import ValidationError
from engramdb.services.learning import LearningService


def test_positive_text_raises_success_and_keeps_a_preference(mem: Engram) -> None:
    hint = mem.remember("prefer small pull requests", agent="a")
    (before,) = mem.learning.feedback([hint.id], "partial", agent="a")
    (after,) = mem.learning.feedback([hint.id], "great, exactly what I wanted", agent="a")
    assert after.attempts == 2
    assert after.successes - before.successes > 0.75  # a reward above 0.5
    assert before.success_rate is not None
    assert after.success_rate is not None
    assert after.success_rate > before.success_rate
    assert mem.get(hint.id, agent="a").successes == after.successes
    # Praise alone is a reward, not a preference (issue 25: it showed up in every context()).
    assert mem.count(agent="a", kind="preference") == 0
    mem.learning.feedback([hint.id], "great, I like short bullet points instead of long paragraphs", agent="a")
    (pref,) = mem.list(agent="a", kind="preference")
    assert pref.content == "prefer small pull requests: great, I like short bullet points instead of long paragraphs"
    assert list(pref.tags) == ["feedback"]
    assert pref.metadata["feedback"] == "great, I like short bullet points instead of long paragraphs"
    assert pref.metadata["context"] == "prefer small pull requests"
    assert list(pref.metadata["memories"]) == [hint.id]
    assert 0.5 < pref.metadata["reward"] <= 1.0


def test_negative_text_lowers_success_and_keeps_nothing(mem: Engram) -> None:
    hint = mem.remember("squash every branch into one commit", agent="a")
    (before,) = mem.learning.feedback([hint.id], "partial", agent="a")
    (after,) = mem.learning.feedback([hint.id], "no, that was wrong and broke the build", agent="a")
    assert after.attempts == 2
    assert before.success_rate is not None
    assert after.success_rate is not None
    assert after.success_rate < before.success_rate
    assert after.successes - before.successes < 0.5  # a negative reward
    assert mem.count(agent="a", kind="preference") == 0


def test_outcome_words_are_not_text(mem: Engram) -> None:
    hint = mem.remember("run the linter before committing", agent="a")
    (after,) = mem.learning.feedback([hint.id], " Success ", agent="a")
    assert after.successes == 1.0
    assert mem.count(agent="a", kind="preference") == 0


@pytest.mark.parametrize("text", ["", "   ", "great \ud800 work", "nice\x00"])
def test_bad_text_changes_nothing(mem: Engram, text: str) -> None:
    hint = mem.remember("prefer small pull requests", agent="a")
    before = len(mem.history(hint.id, agent="a"))
    with pytest.raises(ValidationError):
        mem.learning.feedback([hint.id], text, agent="a")
    assert mem.get(hint.id, agent="a").attempts == 0
    assert len(mem.history(hint.id, agent="a")) == before
    assert mem.count(agent="a", kind="preference") == 0


def test_text_needs_a_rater(mem: Engram) -> None:
    hint = mem.remember("prefer small pull requests", agent="a")
    bare = LearningService(mem._services, failures=mem.failures)
    with pytest.raises(ValidationError, match="rater"):
        bare.feedback([hint.id], "great, exactly what I wanted", agent="a")
    assert mem.get(hint.id, agent="a").attempts == 0


def test_a_rater_outside_the_range_is_refused(mem: Engram) -> None:
    hint = mem.remember("prefer small pull requests", agent="a")
    wild = LearningService(mem._services, failures=mem.failures, rate_text=lambda _text: 3.0)
    with pytest.raises(ValidationError, match=r"\[-1, 1\]"):
        wild.feedback([hint.id], "great", agent="a")
    assert mem.get(hint.id, agent="a").attempts == 0

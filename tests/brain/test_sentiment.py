"""Feedback in words: the lexicon's rewards, the LLM's, and the fallback between them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from engramdb.brain.llm import LLMError
from engramdb.brain.sentiment import lexicon_reward, llm_reward, reward_from_text
from engramdb.errors import ValidationError


class OneAnswer:
    name = "scripted:rater"

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls = 0

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str | dict[str, Any]:
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "text",
    ["great job", "Perfect, exactly what I wanted", "it works now, thanks", "not bad at all", "LGTM, merged"],
)
def test_positive_feedback_gets_a_positive_reward(text: str) -> None:
    assert 0.0 < reward_from_text(text) <= 1.0


@pytest.mark.parametrize(
    "text",
    ["this is wrong", "that did not work", "the tests still fail", "it crashed again", "you hallucinated the API"],
)
def test_negative_feedback_gets_a_negative_reward(text: str) -> None:
    assert -1.0 <= reward_from_text(text) < 0.0


def test_neutral_feedback_is_near_zero() -> None:
    assert abs(reward_from_text("I will look at it tomorrow")) < 0.05


def test_negation_flips_the_domain_words() -> None:
    assert lexicon_reward("it works") > 0 > lexicon_reward("it doesn't work")


def test_llm_rating_is_used_when_configured() -> None:
    llm = OneAnswer({"reward": -0.4})
    assert reward_from_text("hmm, close but no", llm=llm) == -0.4
    assert llm.calls == 1


@pytest.mark.parametrize("answer", [{"reward": 3}, {"reward": "good"}, {"reward": True}, LLMError("HTTP 500")])
def test_unusable_llm_rating_falls_back_to_the_lexicon(answer: Any) -> None:
    llm = OneAnswer(answer)
    assert reward_from_text("great job", llm=llm) == lexicon_reward("great job")
    with pytest.raises(LLMError):
        reward_from_text("great job", llm=llm, fallback=False)


def test_llm_reward_checks_the_range() -> None:
    with pytest.raises(LLMError, match="outside"):
        llm_reward("ok", OneAnswer({"reward": -1.5}))


@pytest.mark.parametrize("bad", ["", "   ", None, 3, "x" * 10_001, "a\x00b"])
def test_bad_text_is_a_validation_error(bad: Any) -> None:
    with pytest.raises(ValidationError, match="feedback text"):
        reward_from_text(bad)

"""Feedback in words: a reward in [-1, 1] from text such as "great, exactly what I wanted".

Without an LLM the reward is VADER's compound score (Hutto and Gilbert, "VADER: A
Parsimonious Rule-based Model for Sentiment Analysis of Social Media Text", ICWSM
2014; the ``vaderSentiment`` package, which ships its lexicon): a valence lexicon
plus rules for negation ("not bad", "didn't work"), intensifiers ("really"),
contrast ("but"), punctuation and capitals. Its lexicon comes from social media, so
words with a clear valence in feedback to an agent but none in VADER's list ("works",
"fixed", "crashed", "buggy", "hallucinated", "lgtm", ...) are added by
:data:`DOMAIN_LEXICON` (only where VADER has no entry). ``bench/feedback.py``
measures the agreement with a labelled set of agent feedback.

With an LLM (:func:`reward_from_text` with ``llm=``) the LLM rates the text; an
unusable answer falls back to the lexicon (or raises, with ``fallback=False``).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from engramdb.brain.llm import LLM, LLMError
from engramdb.errors import ValidationError

__all__ = [
    "DOMAIN_LEXICON",
    "MAX_FEEDBACK_CHARS",
    "NEUTRAL_BAND",
    "lexicon_reward",
    "llm_reward",
    "preference_text",
    "reward_from_text",
]

log = logging.getLogger(__name__)

#: Longest feedback text accepted.
MAX_FEEDBACK_CHARS: Final = 10_000
#: Rewards within (-band, band) count as neutral (VADER's own convention is 0.05).
NEUTRAL_BAND: Final = 0.05

#: Valences (VADER's scale, -4..4) of words common in feedback on an agent's work that VADER's lexicon lacks.
DOMAIN_LEXICON: Final[Mapping[str, float]] = {
    # it works
    "work": 0.8,
    "works": 1.5,
    "worked": 1.5,
    "working": 1.2,
    "fixed": 1.6,
    "fixes": 1.2,
    "passes": 1.3,
    "passed": 1.3,
    "passing": 1.1,
    "correct": 1.8,
    "correctly": 1.6,
    "accurate": 1.8,
    "exactly": 0.8,
    "lgtm": 2.2,
    "nailed": 2.2,
    "shipped": 1.0,
    "merged": 1.0,
    "faster": 1.0,
    "cleaner": 1.4,
    "thorough": 1.5,
    "concise": 1.0,
    # it does not
    "crashed": -2.0,
    "crashes": -2.0,
    "crashing": -2.0,
    "breaks": -1.8,
    "bug": -1.5,
    "bugs": -1.5,
    "buggy": -2.0,
    "incorrect": -2.0,
    "inaccurate": -1.8,
    "timeout": -1.5,
    "unusable": -2.5,
    "flaky": -1.6,
    "revert": -1.2,
    "reverted": -1.4,
    "hallucinated": -2.2,
    "hallucinating": -2.2,
    "hallucination": -2.0,
    "regression": -1.8,
    "sloppy": -1.8,
    "nope": -1.0,
    "slow": -1.0,
    "slower": -1.2,
    "typo": -0.8,
    "typos": -0.8,
    "redo": -1.0,
    "bloated": -1.4,
    "overcomplicated": -1.6,
    "outdated": -1.2,
    "deprecated": -1.0,
    "insecure": -2.0,
    "leak": -1.5,
    "leaks": -1.5,
    "traceback": -1.0,
    "exception": -1.0,
}

_lock = threading.Lock()
_analyzer: Any = None


def _vader() -> Any:
    """The shared VADER analyzer with the domain words added (loaded once; its lexicon is ~7,500 words)."""
    global _analyzer  # noqa: PLW0603 (a lazily loaded, process-wide analyzer)
    with _lock:
        if _analyzer is None:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # type: ignore[import-untyped]

            analyzer = SentimentIntensityAnalyzer()
            for word, valence in DOMAIN_LEXICON.items():
                analyzer.lexicon.setdefault(word, valence)
            _analyzer = analyzer
        return _analyzer


def _text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("feedback text must be a non-empty string")
    if len(text) > MAX_FEEDBACK_CHARS:
        raise ValidationError(f"feedback text is too long ({len(text)} characters; the limit is {MAX_FEEDBACK_CHARS})")
    if "\x00" in text:
        raise ValidationError("feedback text must not contain NUL characters")
    return text.strip()


def lexicon_reward(text: str) -> float:
    """VADER's compound score of ``text`` (with :data:`DOMAIN_LEXICON`), in [-1, 1]. No LLM, deterministic."""
    score = float(_vader().polarity_scores(_text(text))["compound"])
    return max(-1.0, min(1.0, score))


_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"reward": {"type": "number"}},
    "required": ["reward"],
}


def llm_reward(text: str, llm: LLM) -> float:
    """The LLM's rating of ``text`` from -1 (very negative) to 1 (very positive). Raises LLMError on a bad answer."""
    text = _text(text)
    answer = llm.complete(
        [
            {
                "role": "system",
                "content": "You rate feedback that a user gave an AI agent about its work. Reply with "
                '{"reward": R}, R from -1 (very negative: wrong, broken, unwanted) through 0 (neutral or '
                "mixed) to 1 (very positive: correct, exactly what was wanted).",
            },
            {"role": "user", "content": text},
        ],
        schema=_SCHEMA,
        max_tokens=20,
    )
    reward = answer.get("reward") if isinstance(answer, dict) else None
    if not isinstance(reward, int | float) or isinstance(reward, bool) or not math.isfinite(reward):
        raise LLMError(f"the LLM's rating is not a number: {reward!r}")
    if not -1.0 <= reward <= 1.0:
        raise LLMError(f"the LLM's rating {reward!r} is outside [-1, 1]")
    return float(reward)


def reward_from_text(text: str, *, llm: LLM | None = None, fallback: bool = True) -> float:
    """A reward in [-1, 1] from feedback in words: the LLM's rating when ``llm`` is given, else the lexicon's.

    An unusable LLM answer (unreachable, timed out, malformed) falls back to the
    lexicon unless ``fallback=False``, when the LLMError propagates. Empty, non-string
    or oversized text raises ValidationError.
    """
    text = _text(text)
    if llm is None:
        return lexicon_reward(text)
    try:
        return llm_reward(text, llm)
    except LLMError as exc:
        if not fallback:
            raise
        log.warning("LLM feedback rating failed (%s); using the lexicon", exc)
        return lexicon_reward(text)


#: Words that carry no preference of their own in feedback ("great, exactly what I wanted, thanks!").
_FILLER: Final = frozenset(
    " ".join(
        [
            "a an the i me my we you your it its it's this that these those is are was were be been am do does did",
            "so very really just quite too also and or but of to in on for with at by as what which who how all",
            "thanks thank thx please ok okay yes yeah yep wow exactly precisely totally absolutely wanted want",
            "needed needs expected looks look looked job work works worked done one thing stuff again here there now",
        ]
    ).split(" ")
)
_WORDS: Final = re.compile(r"[A-Za-z][A-Za-z'-]*")
#: Content words (not sentiment, not filler) a feedback text needs to state a preference.
_PREFERENCE_WORDS: Final = 2


def preference_text(text: str, *, context: str | None = None) -> str | None:
    """The preference positive feedback states, or None when it is only praise.

    "great, exactly what I wanted" says how the work went (a reward), not what the user
    prefers: saved as a preference it would be recalled for every later task. "Great, I
    like short bullet points instead of long paragraphs" names something (two or more
    words that are neither sentiment words of the lexicon nor filler): that is kept, with
    the task it was about (``context``) in front, so it is recalled for similar tasks.
    """
    body = _text(text)
    lexicon = _vader().lexicon
    content = [w for w in _WORDS.findall(body.lower()) if w not in _FILLER and w not in lexicon]
    if len(content) < _PREFERENCE_WORDS:
        return None
    return f"{context.strip()}: {body}" if context and context.strip() else body

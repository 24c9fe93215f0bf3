"""A question that asks for an amount is answered by a memory that states one. Pure.

"How many rare items do I have?" is answered by "my 57 rare records", "25 rare coins", "12 rare figurines", not by
"I'm thinking of starting a collection of rare items", which shares more of its words; "how many hours have I spent
playing games?" by "it took me 25 hours to complete", "how long have I been in my current role?" by "3 years and 9
months in the company". :func:`asked_amount` finds what a question counts (the words after "how many", or a unit of
time after "how long"); :func:`states_amount` whether a memory gives a number of it; such a memory gains
:data:`AMOUNT_WEIGHT` of fused relevance (:func:`weigh_amounts`). A question about the time between two events
("how many months have passed since", "how many days ago") asks for a difference of dates, not an amount a memory
states, and is left alone.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Final

from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.text import STOPWORDS

__all__ = ["AMOUNT_WEIGHT", "asked_amount", "states_amount", "weigh_amounts"]

#: What a candidate stating an amount of what the question counts gains, against fused relevance in [0, 1]: the
#: smallest weight with the whole gain of those measured (bench/RESULTS.md, issue 21 ninth round).
AMOUNT_WEIGHT: Final = 0.2

#: Units of a duration: what "how long" asks for.
_DURATION: Final = ("years", "months", "weeks", "days", "hours", "minutes")
_HOW_MANY = re.compile(
    r"\b(?:how\s+many|the\s+(?:total\s+)?number\s+of)\s+(?:different\s+)?((?:[a-z'-]+\s*){1,4})", re.I
)
_HOW_LONG = re.compile(r"\bhow\s+long\b", re.IGNORECASE)
#: The time between two events: a difference of dates, not an amount a memory states.
_BETWEEN = re.compile(r"\b(?:ago|passed|since|between|until|elapsed)\b", re.IGNORECASE)
#: "How many days before the trip": a difference of dates too, when what is counted is a unit of time.
_AROUND = re.compile(r"\b(?:before|after)\b", re.IGNORECASE)
#: A word that ends the counted phrase ("how many rare items *do* I have"): a verb or function word.
_ENDS = STOPWORDS | {"have", "has", "had", "did", "do", "does", "are", "is", "were", "was", "will", "can", "in", "on"}
_NUMBER: Final = (
    r"(?:\d+(?:[.,]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|dozens?"
    r"|hundreds?|a\s+couple\s+of|several)"
)
_WORD = re.compile(r"\w+")
_MAX_CHARS = 4000  # as the time phrases: a pasted document is scanned only up to here


def asked_amount(question: str) -> frozenset[str]:
    """The lowercase words of what ``question`` asks the amount of ("how many rare items": rare, items; "how long":
    the units of a duration); empty when it asks for no amount, or for the time between events."""
    text = question[:_MAX_CHARS]
    if _BETWEEN.search(text) is not None:
        return frozenset()
    words: set[str] = set()
    for match in _HOW_MANY.finditer(text):
        for word in match.group(1).lower().split():
            if word in _ENDS:
                break
            words.add(word)
    if words and words <= {*_DURATION, *(u[:-1] for u in _DURATION)} and _AROUND.search(text) is not None:
        words.clear()
    if _HOW_LONG.search(text) is not None:
        words.update(_DURATION)
    return frozenset(words)


def _amount_pattern(words: frozenset[str]) -> re.Pattern[str]:
    # "hours" and "hour", "items" and "item": a number of either. Up to two words between ("57 rare records").
    stems = sorted({w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words}, key=len, reverse=True)
    alts = "|".join(re.escape(s) + r"(?:s|es)?" for s in stems)
    return re.compile(rf"(?<![\w$.]){_NUMBER}(?:[\s-]+[\w'-]+){{0,2}}?[\s-]+(?:{alts})\b")


def _stated(low: str, stems: Sequence[str], pattern: re.Pattern[str]) -> bool:
    """Whether ``low`` (lowercased text) gives a number of a word (``stems``, its ``pattern``): the substring test
    first, the pattern only where it can match."""
    return any(s in low for s in stems) and pattern.search(low) is not None


def states_amount(text: str, words: frozenset[str]) -> bool:
    """Whether ``text`` gives a number of one of ``words`` ("57 rare records", "3 years and 9 months")."""
    if not words:
        return False
    return _stated(text[:_MAX_CHARS].lower(), [w.rstrip("s") for w in words], _amount_pattern(words))


def weigh_amounts(
    fused: Sequence[Fused],
    texts: Mapping[str, str],
    words: frozenset[str],
    *,
    weight: float,
    topic: frozenset[str] = frozenset(),
) -> list[Fused]:
    """Candidates whose text (``texts``, by id) states an amount of ``words`` gain ``weight``; the rest keep theirs.

    ``topic``: the question's other words (not its form, not what it counts). A candidate must hold one of them, if
    any: "I go to the gym 4 times a week" is no answer to "how many weeks did I spend reading The Nightingale?"
    (issue 21 ninth round: that turn rose into the top five sessions without this).
    """
    if not words or weight == 0.0:
        return list(fused)
    pattern = _amount_pattern(words)
    stems = [w.rstrip("s") for w in words]

    def states(text: str) -> bool:
        low = text[:_MAX_CHARS].lower()
        return _stated(low, stems, pattern) and (not topic or not topic.isdisjoint(_WORD.findall(low)))

    out = [dataclasses.replace(f, relevance=f.relevance + weight) if states(texts.get(f.id, "")) else f for f in fused]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out

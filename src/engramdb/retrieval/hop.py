"""A second hop: the names the best matching turns mention pull the other conversations that mention them. Pure.

"Which book did I finish a week ago?" is answered by a turn naming "The Nightingale"; the conversation where
the book was *started* shares no word with the question, only the title with that turn. So the proper names
and quoted titles of the search's first candidates (not the question's own words, not a speaker's name, not a
word opening a sentence) become a keyword query of their own, and in every other conversation the best
candidate holding them gains a share of the first candidates' relevance (:func:`weigh_by_hop`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Final

from engramdb.retrieval.evidence import stem
from engramdb.retrieval.ranking import Fused
from engramdb.retrieval.text import STOPWORDS

__all__ = ["HOP_WEIGHT", "asks_over_time", "hop_names", "weigh_by_hop"]

#: What a candidate holding every name of the first candidates gains, as a share of their relevance (0: off).
HOP_WEIGHT: Final = 0.0

_QUOTED: Final = re.compile(r"[\"“]([^\"“”]{2,80})[\"”]")
_WORD: Final = re.compile(r"[\w'’-]+", re.UNICODE)
_SENTENCE_END: Final = frozenset(".!?:;\n")
# A question about an order or a span of events ("how long since", "which first", "before I started"): its
# answer often sits in a second conversation about the same thing.
_OVER_TIME: Final = re.compile(r"\b(?:how long|since|first|before|after|ago|when|last|order)\b", re.IGNORECASE)


def asks_over_time(question: str) -> bool:
    """Whether ``question`` asks about an order or a span of events (the questions a second hop is for)."""
    return _OVER_TIME.search(question) is not None


def hop_names(texts: Sequence[str], question: str, *, skip: Collection[str] = (), most: int = 6) -> list[str]:
    """The lowercase name words of ``texts`` that ``question`` does not hold, first seen first, at most ``most``.

    A name word is written with a capital and does not open a sentence, or stands inside quotes; stopwords,
    words of two letters or fewer, the question's own words (by stem) and ``skip`` (speakers' names) are left out.
    """
    own = {stem(w) for w in _WORD.findall(question.lower())}
    banned = {s.lower() for s in skip}
    out: dict[str, None] = {}

    def add(word: str) -> None:
        w = word.lower().strip("'’-")
        if len(w) > 2 and w.isalpha() and w not in STOPWORDS and w not in banned and stem(w) not in own:
            out.setdefault(w, None)

    for text in texts:
        for m in _QUOTED.finditer(text):
            for w in _WORD.findall(m.group(1)):
                add(w)
        for m in _WORD.finditer(text):
            word = m.group(0)
            if not word[:1].isupper():
                continue
            before = text[: m.start()].rstrip(" \t\"“'(")
            if before and before[-1] not in _SENTENCE_END:
                add(word)
    return list(out)[:most]


def weigh_by_hop(
    fused: Sequence[Fused],
    held: Mapping[str, float],
    sessions: Mapping[str, str | None],
    *,
    sources: Collection[str],
    weight: float = HOP_WEIGHT,
) -> list[Fused]:
    """Candidates re-scored by the second hop, best first (ties by id).

    ``held``: each candidate's share of the hop names (0-1); ``sources``: the candidates the names came from.
    In each conversation other than the sources', the candidate holding the largest share (then the most
    relevant) gets ``(relevance + weight * top * share) / (1 + weight)``, ``top`` being the sources' best
    relevance; every other candidate ``relevance / (1 + weight)``. Relevance stays within [0, 1]; with
    ``weight`` 0 or no candidate holding a name, the order is unchanged.
    """
    if not 0.0 <= weight <= 10.0:
        raise ValueError("weight must be within [0, 10]")
    if weight == 0.0 or not any(v > 0 for v in held.values()):
        return list(fused)
    top = max((f.relevance for f in fused if f.id in sources), default=0.0)
    skip = {sessions.get(i) or f"\0{i}" for i in sources}
    best: dict[str, tuple[float, float, str]] = {}
    for f in fused:
        share = held.get(f.id, 0.0)
        key = sessions.get(f.id) or f"\0{f.id}"
        if share <= 0.0 or key in skip or f.id in sources:
            continue
        if key not in best or (share, f.relevance) > best[key][:2]:
            best[key] = (share, f.relevance, f.id)
    gain = {i: share for share, _, i in best.values()}
    out = [replace(f, relevance=(f.relevance + weight * top * gain.get(f.id, 0.0)) / (1.0 + weight)) for f in fused]
    out.sort(key=lambda f: (-f.relevance, f.id))
    return out

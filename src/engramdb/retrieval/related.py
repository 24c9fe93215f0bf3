"""Related words: a question's category word against the instances a memory names. Pure, data shipped.

"What is the total number of siblings I have?" is answered by a turn about "my 3 sisters", "how many
doctors did I visit?" by one about "my primary care physician": the memory names an instance or a synonym
of the question's word, so the keyword channel cannot find it and coverage does not count it, and in a long
turn the embedding of the whole is too diluted for the vector channel to rank it. This module gives each
content word of a question its nearest words by the bundled model itself (each vocabulary word embedded on
its own, neighbours at cosine >= 0.72, at most four: ``data/related.txt``, made once by
``scripts/gen_related.py``), so nothing is computed or downloaded at run time. A word of the question
written with a capital (a name: "Caroline") is not expanded: a name's nearest words are other names.

The search uses each word's two nearest two ways (:class:`engramdb.retrieval.hybrid.HybridSearcher`): a
second keyword query for them adds up to ten candidates, and coverage counts a related word as half the
question's word (:func:`engramdb.retrieval.evidence.pool_coverage`). For every question: measured against
only the questions that gather facts across conversations, where the misses were read, it helps LoCoMo too
(bench/RESULTS.md, issue 21 fifth round).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Final

from engramdb.retrieval.evidence import stem

__all__ = ["RELATED_CREDIT", "RELATED_GATED", "RELATED_MOST", "flat", "related_terms", "related_words"]

#: What a candidate holding a related word of a question's word gains, as a share of that word's weight in
#: coverage (0: related words are not used).
RELATED_CREDIT: Final = 0.5
#: Related words only for questions that gather facts across conversations (True), or for every question.
RELATED_GATED: Final = False
#: Related words used per word of the question, nearest first (the table lists up to four; 2, 3 and 4 measured alike).
RELATED_MOST: Final = 2

_WORD = re.compile(r"\w+", re.UNICODE)


@cache
def _table() -> dict[str, tuple[str, ...]]:
    text = resources.files("engramdb.retrieval").joinpath("data/related.txt").read_text(encoding="utf-8")
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            word, *related = line.split()
            out[word] = tuple(related)
    return out


def related_words(word: str) -> tuple[str, ...]:
    """``word``'s nearest words by the bundled model, nearest first (none for a word it does not list)."""
    return _table().get(word.lower(), ())


def related_terms(
    question: str, terms: Sequence[str], *, skip: Collection[str] = (), most: int = RELATED_MOST
) -> dict[str, tuple[str, ...]]:
    """Each of ``terms`` (the question's content words) that has related words, mapped to its ``most`` nearest.

    Left out: a term of ``skip`` (the words by which a question gathers: "many", "total"), a term written only
    with a capital in ``question`` (a name), and a related word that is one of ``terms`` or an inflection of
    one (coverage matches those already: one stem is a prefix of the other).
    """
    named = {w.lower() for w in _WORD.findall(question) if w[:1].isupper()}
    plain = {w for w in _WORD.findall(question) if not w[:1].isupper()}
    own = [stem(t) for t in terms]
    out: dict[str, tuple[str, ...]] = {}
    for term in terms:
        if term in skip or (term in named and term not in plain):
            continue
        related = tuple(r for r in related_words(term) if not any(_inflected(stem(r), s) for s in own))[:most]
        if related:
            out[term] = related
    return out


def _inflected(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def flat(related: Mapping[str, Sequence[str]]) -> list[str]:
    """The distinct related words of a :func:`related_terms` map, in order."""
    return list(dict.fromkeys(r for words in related.values() for r in words))

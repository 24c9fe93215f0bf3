"""Absolute evidence that a memory is what a query means, and its calibrated relevance. Pure functions.

Two pieces of evidence, each meaningful on its own scale (unlike per-query min-max ranks):

- **cosine**: the raw similarity of the query's and the memory's embeddings;
- **coverage**: how much of the query's *rare* vocabulary the memory contains, in [0, 1]. Each query word
  weighs by how rare it is in English, taken from the rank of the word in the bundled WordPiece vocabulary
  (BERT's vocabulary lists whole words roughly from the most to the least frequent; a word it does not
  list at all is rarer still). The weight does not depend on the store, so neither does coverage: the same
  query and memory get the same evidence in a store of ten memories or of a million.

:func:`relevance` maps both to a probability-like number in [0, 1], increasing in each: a logistic curve
fitted on labelled pairs of the recall dev set (``bench/recall.py --calibrate``; paraphrases and a
question's right memory against its decoys and unrelated memories). See the README for what its levels mean.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final

# The calibration is the embedder's (each model's cosines need their own curve); the bundled model's is the default.
from engramdb.embeddings.profile import CALIBRATION, Calibration

__all__ = [
    "CALIBRATION",
    "Calibration",
    "PoolTerms",
    "coverage",
    "pool_coverage",
    "pool_terms",
    "relevance",
    "stem",
    "term_weight",
]

_WORD = re.compile(r"\w+", re.UNICODE)
#: Suffixes stripped before comparing words ("failing" and "fails" meet at "fail"), longest first.
_SUFFIXES: Final = ("ations", "ation", "ings", "ing", "ies", "ers", "est", "ed", "er", "es", "ly", "s")
#: Compared prefix length after suffix stripping: "authentication" and "authenticate" meet at "authen".
_PREFIX: Final = 6
#: Vocabulary ranks below this are sub-word pieces, characters and reserved tokens, not words.
_FIRST_WORD_RANK: Final = 1996


def stem(word: str) -> str:
    """A light, language-agnostic stem for matching a query word to a memory's words."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    return w[:_PREFIX]


@cache
def _ranks() -> dict[str, int]:
    text = resources.files("engramdb.embeddings").joinpath("data/vocab.txt").read_text(encoding="utf-8")
    ranks: dict[str, int] = {}
    for i, token in enumerate(text.splitlines()):
        if i >= _FIRST_WORD_RANK and token.isalnum():
            ranks.setdefault(token, i)
    return ranks


def term_weight(word: str) -> float:
    """How much a query word says, by its rarity: log of its vocabulary rank (in thousands), at least 0.5.

    "the" ~0.7, "failure" ~1.6, "authentication" ~3.3; a word outside the vocabulary ("oauth", "pgbouncer")
    ~4.1, the rarest.
    """
    ranks = _ranks()
    rank = ranks.get(word.lower())
    if rank is None:
        rank = 2 * len(ranks) + _FIRST_WORD_RANK
    return max(0.5, math.log(rank / 1000.0))


def coverage(terms: Sequence[str], text: str, *, weights: Sequence[float] | None = None) -> float:
    """The rarity-weighted share of ``terms`` (a query's content words) found among ``text``'s words."""
    if not terms:
        return 0.0
    w = [term_weight(t) for t in terms] if weights is None else list(weights)
    stems = [stem(t) for t in terms]
    present = _Finder(stems).present(text)
    total = sum(w)
    found = sum(wi for s, wi in zip(stems, w, strict=True) if s in present)
    return found / total if total > 0 else 0.0


class _Finder:
    """Which of some stems a text's words begin with (a stem of 3 letters or fewer must be the whole word but
    for a suffix :func:`stem` strips: "cats" is "cat", "catalog" is not). Most of a search's ~100
    candidates hold none of the stems even as a substring and are passed over at C speed; the others take
    one look at each place a stem they hold occurs."""

    def __init__(self, stems: Iterable[str]) -> None:
        self.wanted = frozenset(s for s in stems if s)

    def present(self, text: str) -> set[str]:
        low = text.lower()
        return {s for s in self.wanted if s in low and _at_word_start(s, low)}


def _at_word_start(s: str, low: str) -> bool:
    """Whether a word of ``low`` begins with ``s``; one of :data:`_SHORT_STEM` letters or fewer must be ``s``
    followed by nothing or by one of :data:`_SUFFIXES`. Found with ``str.find``, not a pattern compiled per stem:
    compiling is pure Python, and each new question brings new stems (a fresh process's first searches paid a
    compile for nearly every word of theirs)."""
    short = len(s) <= _SHORT_STEM
    at = low.find(s)
    while at >= 0:
        # \w is what str.isalnum() admits and the underscore.
        if at == 0 or not (low[at - 1].isalnum() or low[at - 1] == "_"):
            if not short:
                return True
            end = at + len(s)
            rest = _WORD_RUN.match(low, end)
            if rest is None or rest.end() == end or low[end : rest.end()] in _SUFFIX_SET:
                return True
        at = low.find(s, at + 1)
    return False


_SHORT_STEM: Final = 3
_SUFFIX_SET: Final = frozenset(_SUFFIXES)
_WORD_RUN: Final = re.compile(r"\w*")


@dataclass(frozen=True, slots=True)
class PoolTerms:
    """Which of a query's stems each candidate holds, and each stem's BM25 IDF among the candidates."""

    stems: tuple[str, ...]
    idf: tuple[float, ...]
    present: dict[str, set[str]]


def pool_terms(terms: Sequence[str], texts: Mapping[str, str]) -> PoolTerms:
    """The query's distinct stems, their IDF over ``texts`` and each text's stems (:func:`pool_coverage`'s parts)."""
    stems = tuple(dict.fromkeys(map(stem, terms)))
    finder = _Finder(stems)
    present = {i: finder.present(text) for i, text in texts.items()}
    n = len(texts)
    sets = list(present.values())
    idf = tuple(math.log((n - df + 0.5) / (df + 0.5) + 1.0) for df in (sum(s in p for p in sets) for s in stems))
    return PoolTerms(stems, idf, present)


def pool_coverage(
    terms: Sequence[str],
    texts: Mapping[str, str],
    *,
    related: Mapping[str, Sequence[str]] | None = None,
    credit: float = 0.0,
    scale: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each text's share of ``terms``, every term weighted by its BM25 IDF *among these texts*.

    For ranking one search's candidates: a word most candidates share (a speaker's name in a conversation,
    the product in a product team's notes) tells them apart less than one few of them have. The weights
    depend on the candidates, so these numbers order one search; :func:`coverage` is the absolute one.

    ``related`` (a term -> its related words, :mod:`engramdb.retrieval.related`): a text without a term but
    with one of its related words gets ``credit`` x that term's weight ("sisters" for "siblings").

    ``scale`` (a term -> a factor in [0, 1]): that term's weight times the factor, in the share and in the whole
    (a question's form words, :func:`engramdb.retrieval.text.form_words`, count less than its topic's).
    """
    if not terms or not texts:
        return dict.fromkeys(texts, 0.0)
    pool = pool_terms(terms, texts)
    factors = {stem(t): f for t, f in (scale or {}).items()}
    weighted = [(s, w * factors.get(s, 1.0)) for s, w in zip(pool.stems, pool.idf, strict=True)]
    total = sum(w for _, w in weighted)
    if total <= 0:
        return dict.fromkeys(texts, 0.0)
    out = {i: sum(w for s, w in weighted if s in p) / total for i, p in pool.present.items()}
    if not related or credit <= 0:
        return out
    alternatives = {stem(t): tuple(dict.fromkeys(map(stem, words))) for t, words in related.items()}
    finder = _Finder(a for words in alternatives.values() for a in words)
    for i, text in texts.items():
        held = finder.present(text)
        if held:
            gain = sum(
                w for s, w in weighted if s not in pool.present[i] and any(a in held for a in alternatives.get(s, ()))
            )
            out[i] += credit * gain / total
    return out


def relevance(cosine: float, cover: float, *, calibration: Calibration = CALIBRATION) -> float:
    """Calibrated relevance in [0, 1] from a cosine in [-1, 1] and a coverage in [0, 1]; monotone in both."""
    c = min(1.0, max(-1.0, cosine)) if math.isfinite(cosine) else 0.0
    k = min(1.0, max(0.0, cover)) if math.isfinite(cover) else 0.0
    z = calibration.bias + calibration.cosine_weight * c + calibration.coverage_weight * k
    return 1.0 / (1.0 + math.exp(-z))

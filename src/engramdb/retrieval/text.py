"""Turning a natural-language query into keyword terms.

A question like "What did Caroline do after the support group?" must match
memories that share *any* of its content words, so keyword search ORs the terms;
stopwords are dropped because under OR they would match nearly every memory and
only add noise and latency.

A question's form words ("how many different", "in total", "how long": :func:`form_words`) are searched like the
others, but count less as evidence that a memory is the one meant (:data:`FORM_WEIGHT`).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["FORM_WEIGHT", "STOPWORDS", "form_words", "query_terms"]

_WORD = re.compile(r"\w+", re.UNICODE)

# A conventional English stopword list (function words only; no domain words).
STOPWORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves s t d ll m re ve
    y o
    """.split()  # noqa: SIM905 - a word list reads best as words
)

#: Upper bound on terms per query: a pasted paragraph should not become a 500-way OR.
MAX_TERMS: Final = 48


def query_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """Distinct lowercase content words of ``text``, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS or word in seen:
            continue
        seen[word] = None
        if len(seen) >= max_terms:
            break
    return list(seen)


#: What a word of a question's form (:func:`form_words`) counts for in evidence fusion's coverage, against 1 for
#: a word of its topic (bench/RESULTS.md, issue 21 seventh round: 0.5 measured best of 0, 0.25, 0.5 and 1).
FORM_WEIGHT: Final = 0.5

# How a question asks for a count, a sum or a measure ("how many different", "the total number of", "in total",
# "so far", "how long", "how often"). Not "every", "each" or "all the": those quantify the topic ("on every
# keystroke").
_FORM: Final = re.compile(
    r"\bhow (?:many|much|long|often|old|far|soon)(?: different)?\b|\b(?:the )?total(?: number)?\b|\bso far\b"
    r"|\baltogether\b|\bcombined\b",
    re.IGNORECASE,
)


def form_words(text: str) -> frozenset[str]:
    """The lowercase words by which ``text`` asks for a count, a sum or a measure ("how many different", "in
    total", "how long"): its form, not its topic. A memory holding "long" or "total" is no more likely the one
    meant by "how long have I been in my current role?" or "how many games in total?"."""
    return frozenset(w.lower() for m in _FORM.finditer(text) for w in m.group(0).split())

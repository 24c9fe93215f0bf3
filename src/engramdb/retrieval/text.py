"""Turning a natural-language query into keyword terms.

A question like "What did Caroline do after the support group?" must match
memories that share *any* of its content words, so keyword search ORs the terms;
stopwords are dropped because under OR they would match nearly every memory and
only add noise and latency.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["STOPWORDS", "query_terms"]

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

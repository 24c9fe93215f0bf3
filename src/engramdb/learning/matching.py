"""How much a recorded decision speaks to the decision asked about, beyond the words. Pure: values in, values out.

Text similarity alone mixes situations that are described alike: on bench/learning_drift.py's streams most wrong
settled recommendations were an action borrowed from another situation whose descriptions share words (an
authentication failure told to ``retry-with-backoff`` because rate limiting, where that action is best, is also
about "requests" to a service). A decision is recorded with the alternatives it was chosen among, and a question
may come with its options: two decisions made among different choices are likely different decisions.
:func:`option_agreement` turns that into a multiplier of an outcome's relevance (``RecommendConfig.option_exponent``),
relative to the best-matching record nearby (:func:`relative_agreements`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

__all__ = ["contrast_factors", "option_agreement", "relative_agreements"]


def option_agreement(
    action: str, alternatives: Iterable[str], options: Collection[str] | None, *, exponent: float
) -> float:
    """The Jaccard overlap of a record's choice set (its action and alternatives) with the asked ``options``, raised
    to ``exponent``: 1 for the same choice set, smaller the less they share, 0 for none in common.

    Neutral (1) when either side is unknown: a record made without alternatives, or a question without options,
    says nothing about which decision it was. In (0, 1] otherwise whenever the record's action is among the options.
    """
    if options is None or not options:
        return 1.0
    mine = {action, *alternatives}
    if len(mine) < 2:
        return 1.0
    asked = set(options)
    union = len(mine | asked)
    return float((len(mine & asked) / union) ** exponent)


def relative_agreements(
    choices: Sequence[tuple[str, Iterable[str]]], options: Collection[str] | None, *, exponent: float
) -> list[float]:
    """:func:`option_agreement` of each ``(action, alternatives)``, divided by the best among those that carry a
    choice set: only a difference between records counts. Where every record was chosen from the same menu, even
    one wider than the question's options (agents that pass one generic list), all keep their full relevance."""
    raw = [option_agreement(action, alts, options, exponent=exponent) for action, alts in choices]
    informative = [a for (action, alts), a in zip(choices, raw, strict=True) if len({action, *alts}) >= 2]
    top = max(informative, default=0.0)
    if top <= 0.0:  # no record shares a choice with the question: nothing tells them apart
        return [1.0] * len(raw)
    return [min(1.0, a / top) for a in raw]


def contrast_factors(cosines: Sequence[float], *, sharpness: float, top: int = 5) -> list[float]:
    """A soft contrast of each neighbour's cosine with the question's best matches: ``exp(sharpness * (cosine -
    m))`` capped at 1, where ``m`` is the mean of the ``top`` highest cosines. The closest records keep their
    relevance and one that matches much worse than the question's best matches fades smoothly (unlike a hard
    margin below ``m``, which cut a situation's own rewordings: bench/RESULTS.md, issue 25, item 11)."""
    if not sharpness >= 0.0 or not math.isfinite(sharpness) or top < 1:
        raise ValueError("sharpness must be a non-negative number and top at least 1")
    if not cosines:
        return []
    best = sorted(cosines, reverse=True)[:top]
    m = min(best[0], sum(best) / len(best))  # min: the float mean of equal values can exceed them
    return [min(1.0, math.exp(sharpness * (c - m))) for c in cosines]

"""A cheap gate in front of the secret detectors: which patterns may match a text at all. Pure.

Most text holds no secret, and running some forty patterns over every string was most of
the cost of a write. Each detector names literals of which every match of its pattern
contains at least one; a substring test per literal is far cheaper than a regex scan, and a
pattern whose literals are all absent cannot match, so skipping it changes no result.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["literal_gate"]

#: Strings up to this length have their answer remembered: metadata keys and small values repeat.
_SHORT: Final = 40
_REMEMBERED: Final = 1024


def literal_gate(needs: Sequence[tuple[re.Pattern[str], tuple[str, ...]]]) -> Callable[[str], Sequence[int]]:
    """For patterns and their needed literals (empty: always run), a function giving, for a text, the
    indexes (in order) of the patterns that may match it.

    A literal of a case-insensitive pattern must be given in lower case and is looked for in the
    lower-cased text, on ASCII text only: Unicode case folding (``ſ`` matches ``s``) is not
    ``str.lower``'s, so on other text those patterns always run.
    """
    table: dict[tuple[str, bool], list[int]] = {}
    for index, (pattern, literals) in enumerate(needs):
        folds = bool(pattern.flags & re.IGNORECASE)
        for literal in literals:
            table.setdefault((literal, folds), []).append(index)
    gates = tuple((literal, folds, tuple(indexes)) for (literal, folds), indexes in table.items())
    always = frozenset(index for index, (_, literals) in enumerate(needs) if not literals)

    def gated(text: str) -> list[int]:
        folded = text.lower() if text.isascii() else None
        active = set(always)
        for literal, folds, indexes in gates:
            where = text if not folds else folded
            if where is None or literal in where:
                active.update(indexes)
        return sorted(active)

    @functools.lru_cache(maxsize=_REMEMBERED)
    def gated_short(text: str) -> tuple[int, ...]:
        return tuple(gated(text))

    def gate(text: str) -> Sequence[int]:
        return gated_short(text) if len(text) <= _SHORT else gated(text)

    return gate

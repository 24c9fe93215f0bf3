"""How wide each option's Thompson draw is. Pure: values in, values out.

The ``exploration`` setting narrows every draw (0.25 by default: bench/RESULTS.md, issue 12's seventh session), which
loses little while the options' records are long. Right after the world changes it is what keeps a learner on a
stale favourite: the change rule cuts the older records, the new best option fails once by bad luck (it succeeds
85% of the time, not always), and a narrow draw from one failure rarely beats the favourite's mediocre but longer new
record again (bench/RESULTS.md, issue 25, item 11, third round: trajectories after a change). An option whose record
is *thin* (a few weighted outcomes, after a cut or because it was never tried) draws wider, up to plain Thompson
sampling with no outcomes at all; a well-evidenced option keeps the narrow draw. An option
(``RecommendConfig.thin_evidence``), off by default: the thin options are mostly the bad ones, tried again as their
records fade, and that cost more success than the faster finds recovered.

After a detected change only (:func:`fresh_attempts`, :func:`optimistic_floors`), options with little evidence
*since the change* can instead be valued at least at an upper confidence bound (mean plus a number of posterior
standard deviations), for a bounded number of outcomes after the change: a new best that failed its first try is
tried again, in the neighbourhood that changed only (``RecommendConfig.optimism``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["draw_widths", "fresh_attempts", "optimistic_floors"]


def draw_widths(attempts: Sequence[float], *, exploration: float, thin: float | None) -> list[float]:
    """The draw width of each option with ``attempts`` weighted outcomes: ``exploration`` from ``thin`` outcomes up,
    rising linearly to 1 at none (``thin`` None: ``exploration`` for all). Always within [exploration, 1]."""
    if not 0.0 <= exploration <= 1.0 or not math.isfinite(exploration):
        raise ValueError("exploration must be within [0, 1]")
    if thin is None:
        return [exploration] * len(attempts)
    if not thin > 0.0 or not math.isfinite(thin):
        raise ValueError("thin must be a positive number (or None)")
    out = []
    for n in attempts:
        short = min(1.0, max(0.0, 1.0 - n / thin)) if math.isfinite(n) else 0.0
        out.append(exploration + (1.0 - exploration) * short)
    return out


def fresh_attempts(kept: Sequence[float], cut: Sequence[float], *, keep: float) -> list[float]:
    """Each option's weighted outcomes since a change, from its attempts without the change rule (``kept``) and with
    it (``cut``): the rule multiplies what it cuts by ``keep``, so the cut mass is ``(kept - cut) / (1 - keep)`` and
    what is left of it inside ``cut`` is ``keep`` times that. Never negative, never more than ``cut``."""
    if len(kept) != len(cut):
        raise ValueError("kept and cut must have the same length")
    if not 0.0 <= keep < 1.0:
        raise ValueError("keep must be within [0, 1)")
    out = []
    for k, c in zip(kept, cut, strict=True):
        removed = max(0.0, k - c) / (1.0 - keep)
        out.append(min(c, max(0.0, c - keep * removed)))
    return out


def optimistic_floors(
    means: Sequence[float], sds: Sequence[float], fresh: Sequence[float], *, bonus: float, thin: float
) -> list[float]:
    """The value each option is raised to: ``mean + bonus * sd`` (capped at 1) for an option with fewer than ``thin``
    weighted outcomes since the change, minus infinity (no floor) for the others."""
    if not (bonus >= 0.0 and math.isfinite(bonus)) or not (thin > 0.0 and math.isfinite(thin)):
        raise ValueError("bonus must be non-negative and thin positive")
    if not len(means) == len(sds) == len(fresh):
        raise ValueError("means, sds and fresh must have the same length")
    return [min(1.0, m + bonus * sd) if f < thin else -math.inf for m, sd, f in zip(means, sds, fresh, strict=True)]

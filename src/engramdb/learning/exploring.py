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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["draw_widths"]


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

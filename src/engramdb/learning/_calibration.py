"""The calibration tables of :mod:`engramdb.learning.recommend` (split from it to keep it small; it re-exports them).

Fitted on simulated streams by ``python bench/learning.py --calibrate`` (bench/RESULTS.md, issue 12's seventh session).
"""

from __future__ import annotations

__all__ = ["CALIBRATION", "CALIBRATION_POOLED"]

#: Calibration of the confidence: (evidence band, knots). A band applies when the top option's weighted
#: outcomes are at least its lower bound; its knots map the raw confidence (the top option's lead: the posterior
#: probability that it beats the best other option, on its record or in the recent view, whichever is smaller;
#: Monte Carlo) to how often a top option with that raw value was the right action, fitted by
#: ``python bench/learning.py --calibrate --seeds 12`` on the *dev* streams only (seeds 100-111, 1,600 steps each;
#: 13,824 questions on held-out descriptions asked every 50 steps, right after the world changed included; isotonic
#: fit on equal-count bins, Beta(1, 1)-smoothed, made monotone) and scored there on the *test* streams (seeds 0-11).
#: Raw values beyond the knots take the nearest knot's value.
CALIBRATION: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = (
    (
        0.0,
        (
            (0.0, 0.0),
            (0.493, 0.286),
            (0.504, 0.308),
            (0.538, 0.366),
            (0.585, 0.444),
            (0.641, 0.5),
        ),
    ),
    (
        0.5,
        (
            (0.0, 0.0),
            (0.512, 0.494),
            (0.56, 0.5),
            (0.596, 0.511),
            (0.616, 0.583),
            (0.639, 0.585),
            (0.689, 0.75),
        ),
    ),
    (
        1.0,
        (
            (0.0, 0.0),
            (0.465, 0.385),
            (0.525, 0.417),
            (0.574, 0.591),
            (0.641, 0.74),
            (0.715, 0.787),
        ),
    ),
    (
        3.0,
        (
            (0.0, 0.0),
            (0.407, 0.485),
            (0.501, 0.62),
            (0.544, 0.762),
            (0.579, 0.832),
            (0.611, 0.893),
            (0.644, 0.943),
            (0.67, 0.967),
            (0.696, 0.98),
            (0.726, 0.996),
            (0.772, 0.998),
        ),
    ),
    (
        10.0,
        (
            (0.0, 0.0),
            (0.433, 0.583),
            (0.536, 0.837),
            (0.589, 0.949),
            (0.626, 0.964),
            (0.655, 0.984),
            (0.681, 0.984),
            (0.706, 0.995),
            (0.73, 0.995),
            (0.754, 0.995),
            (0.788, 0.998),
        ),
    ),
)


#: Calibration of a confidence from the wider neighbourhood (``RecommendConfig.pool_floor``), in the format of
#: :data:`CALIBRATION`: fitted by ``python bench/learning.py --calibrate`` on the dev streams' questions that the
#: wider neighbourhood answered (the close one holding under ``min_evidence``: mostly the first 50 steps of a
#: stream, where a wide neighbourhood mixes situations), one band, the same isotonic fit. Since the close view's
#: exponent (0.4) counts rewordings for more, the wider one answers rarely and is rarely sure (155 dev questions
#: with enough pooled evidence, 5 of them at a calibrated 0.5 or more), so the table rises only to two in three.
CALIBRATION_POOLED: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = (
    (0.0, ((0.0, 0.0), (0.394, 0.136), (0.502, 0.207), (0.553, 0.318), (0.601, 0.667))),
)

"""The calibration tables of :mod:`engramdb.learning.recommend` (split from it to keep it small; it re-exports them).

Fitted on simulated streams by ``python bench/learning.py --calibrate`` (bench/RESULTS.md, issue 12's seventh session).
"""

from __future__ import annotations

__all__ = ["CALIBRATION", "CALIBRATION_LEARNED", "CALIBRATION_LEARNED_POOLED", "CALIBRATION_POOLED"]

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


#: The tables of the horizon learned per question in :func:`~engramdb.learning.recommend.suggest`
#: (``RecommendConfig(learned_horizons=(25, 10, 60), calibration=CALIBRATION_LEARNED,
#: pooled_calibration=CALIBRATION_LEARNED_POOLED)``): with it a top option's lead is stated lower than at the fixed
#: horizon, so the fixed horizon's tables undersell it. The same fit as above on the learned rule's answers:
#: ``python bench/learning.py --calibrate --seeds 4 --config learned_horizons=25:10:60`` (dev seeds 100-103 only,
#: 4,608 questions; ``choose`` keeps the fixed horizon, see ``RecommendConfig.learned_in_choose``; bench/RESULTS.md,
#: issue 25, item 11, sixth round).
CALIBRATION_LEARNED: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = (
    (0.0, ((0.0, 0.0), (0.495, 0.196), (0.509, 0.256), (0.527, 0.513), (0.55, 0.513), (0.583, 0.692), (0.629, 0.714))),
    (0.5, ((0.0, 0.0), (0.516, 0.405), (0.579, 0.419), (0.611, 0.661), (0.645, 0.755))),
    (
        1.0,
        (
            (0.0, 0.0),
            (0.479, 0.429),
            (0.533, 0.662),
            (0.579, 0.686),
            (0.637, 0.842),
            (0.688, 0.914),
            (0.71, 0.914),
            (0.744, 0.932),
        ),
    ),
    (3.0, ((0.0, 0.0), (0.433, 0.469), (0.535, 0.772), (0.588, 0.92), (0.636, 0.932), (0.724, 0.988), (0.801, 0.994))),
    (
        10.0,
        (
            (0.0, 0.0),
            (0.473, 0.662),
            (0.584, 0.876),
            (0.63, 0.952),
            (0.675, 0.967),
            (0.71, 0.99),
            (0.731, 0.995),
            (0.75, 0.995),
            (0.772, 0.995),
            (0.8, 0.995),
        ),
    ),
)
CALIBRATION_LEARNED_POOLED: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = (
    (0.0, ((0.0, 0.0), (0.499, 0.238), (0.544, 0.308), (0.575, 0.667))),
)

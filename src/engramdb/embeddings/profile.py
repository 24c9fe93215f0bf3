"""What a search assumes of one embedder's cosines: the fusion constants and the relevance calibration.

Evidence fusion adds coverage to a raw cosine, the sure-model rule reads the vector channel's lead, and the
relevance curve maps a cosine to a probability; each constant was fitted on one model's cosines. Another model
spreads its cosines differently (all-mpnet-base-v2 puts a paraphrase and an unrelated text further apart than
MiniLM), so with MiniLM's constants it searched worse than its own vector channel alone (bench/RESULTS.md,
"Issue 21, models, second round"). So each embedder provides its own :class:`FusionProfile` (its ``profile``
attribute); an embedder without one (``openai:``, ``sentence-transformers:``, a user's own) gets
:data:`DEFAULT_PROFILE`, the bundled model's. Pure values, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from engramdb.errors import ValidationError

__all__ = ["CALIBRATION", "DEFAULT_PROFILE", "Calibration", "FusionProfile", "profile_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """``relevance = sigmoid(bias + cosine_weight * cosine + coverage_weight * coverage)``; both weights >= 0
    (:func:`engramdb.retrieval.evidence.relevance`)."""

    bias: float
    cosine_weight: float
    coverage_weight: float

    def __post_init__(self) -> None:
        if self.cosine_weight < 0 or self.coverage_weight < 0:
            raise ValueError("calibration weights must be >= 0 (relevance grows with its evidence)")


#: The bundled model's: fitted by ``python bench/recall.py --calibrate`` on the dev split (bench/RESULTS.md, issue 21).
CALIBRATION: Final = Calibration(bias=-2.92, cosine_weight=9.18, coverage_weight=1.78)


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionProfile:
    """One embedder's fusion constants (see :class:`~engramdb.retrieval.ranking.RankingWeights`, whose fields of
    the same names they fill) and its relevance calibration."""

    #: What a candidate holding all of the query's words gains, in this model's cosine units.
    coverage: float
    #: The sure-model rule: the vector top-1's lead over its runner-up that makes the model "sure" (0: never), the
    #: coverage below which no candidate's words count as strong, and the share of coverage left then.
    sure_lead: float
    sure_weak: float
    sure_coverage: float
    calibration: Calibration
    #: The sure-model rule's three values when the vector channel's best candidate is a note (any kind but a
    #: conversation turn); None: the turns' values. On conversations a sure model is no evidence (mpnet's first turn
    #: is right for 17% of the LoCoMo questions where the rule would fire, against 83% of the recall set's notes).
    note_sure_lead: float | None = None
    note_sure_weak: float | None = None
    note_sure_coverage: float | None = None
    #: A sure model on a paraphrase: the vector channel's first is a note, holds none of the query's words and leads
    #: its runner-up by ``bare_lead`` or more (0: never); coverage then counts ``bare_coverage`` x.
    bare_lead: float = 0.0
    bare_coverage: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.coverage <= 10.0:
            raise ValidationError(f"coverage must be within [0, 10], not {self.coverage!r}")
        for lead, weak, share in (
            (self.sure_lead, self.sure_weak, self.sure_coverage),
            (self.note_sure_lead or 0.0, self.note_sure_weak or 0.0, self.note_sure_coverage or 0.0),
            (self.bare_lead, 0.0, self.bare_coverage),
        ):
            if not (0.0 <= lead <= 2.0 and 0.0 <= weak <= 1.0 and 0.0 <= share <= 1.0):
                raise ValidationError("sure_lead must be within [0, 2], sure_weak and sure_coverage within [0, 1]")


#: all-MiniLM-L6-v2's (the bundled model): fitted on the recall dev split and LoCoMo dev (bench/RESULTS.md, issue 21,
#: first and third rounds; the paraphrase rule: "Issue 21, models, third round").
DEFAULT_PROFILE: Final = FusionProfile(
    coverage=0.6,
    sure_lead=0.05,
    sure_weak=0.3,
    sure_coverage=0.5,
    calibration=CALIBRATION,
    bare_lead=0.02,
    bare_coverage=0.0,
)


def profile_of(embedder: object) -> FusionProfile:
    """``embedder``'s own profile (its ``profile`` attribute), else :data:`DEFAULT_PROFILE`."""
    found = getattr(embedder, "profile", None)
    return found if isinstance(found, FusionProfile) else DEFAULT_PROFILE

"""The Beta prior of an action's success (in its own module: stats and change both need it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Prior"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prior:
    """The Beta prior every action starts from; Beta(1, 1) is uniform (no opinion)."""

    alpha: float = 1.0
    beta: float = 1.0

    def __post_init__(self) -> None:
        if not (self.alpha > 0 and self.beta > 0 and math.isfinite(self.alpha) and math.isfinite(self.beta)):
            raise ValueError("prior alpha and beta must be positive and finite")

"""What marks a task pattern (seed 004's ``save_pattern``): shared by the LangChain tools and the Chroma import."""

from __future__ import annotations

from typing import Final

__all__ = ["PATTERN_KIND", "PATTERN_TAG"]

#: The kind and tag of a memory saved by ``save_pattern`` (or imported from a Chroma patterns collection).
PATTERN_KIND: Final = "success"
PATTERN_TAG: Final = "pattern"

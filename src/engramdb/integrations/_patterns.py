"""What marks a task pattern (seed 004's ``save_pattern``): shared by the LangChain tools and the Chroma import.

And whether a task is a pattern's own, and how its similarity is shown. Pure.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Final

from engramdb.models import Memory

__all__ = ["PATTERN_KIND", "PATTERN_TAG", "same_task", "similarity_text", "task_of"]

#: The kind and tag of a memory saved by ``save_pattern`` (or imported from a Chroma patterns collection).
PATTERN_KIND: Final = "success"
PATTERN_TAG: Final = "pattern"
_WORD = re.compile(r"\w+")


def task_of(pattern: Memory) -> str:
    """The task a pattern was saved for: ``metadata["task"]``, else its text (a pattern written by hand)."""
    task = pattern.metadata.get("task")
    return task if isinstance(task, str) and task.strip() else pattern.content


def same_task(query: str, task: str) -> bool:
    """Whether ``query`` is ``task`` but for case, punctuation and spacing."""
    return _words(query) == _words(task)


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def similarity_text(value: float, *, same: bool) -> str:
    """A relevance as the "Similarity" line shows it: 100% only for the same task.

    The calibrated relevance of a close rewording is 0.99+ ("log into facebook" against "Login to Facebook"
    0.9989), which a rounded percentage shows as 100%, a claim of identity; a rewording is shown truncated
    (never rounded up) and at most 99%, so 69.9% is never read as passing seed 004's 70% either.
    """
    if same:
        return f"{value:.0%}"
    return f"{min(99, math.floor(value * 100))}%"

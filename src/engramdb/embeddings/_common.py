"""Helpers shared by the embedders: input checks, normalisation, error messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

from engramdb.errors import ValidationError

__all__ = ["check_texts", "normalise", "one_line"]


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or :class:`ValidationError` for a bare string or a non-string item."""
    # A bare str is a Sequence[str] too; embedding it character by character is never meant.
    if isinstance(texts, str):
        raise ValidationError("embed() takes a sequence of texts, not a single string: wrap it in a list")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ValidationError(f"embed(): item {i} is a {type(text).__name__}, not a string")
    return items


def normalise(vectors: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit L2 norm, as float32 (an all-zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    result: npt.NDArray[np.float32] = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return result


def one_line(exc: BaseException, *, limit: int = 300) -> str:
    """An exception's message on one line, shortened: for error messages that quote a driver."""
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text or type(exc).__name__

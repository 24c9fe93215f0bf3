"""The embedder protocol: text in, unit-norm float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. Implementations are thread-safe and never download at run time."""

    #: Identifies the model *and* its preprocessing; stored with every vector.
    model_id: str
    #: Vector dimension.
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed a batch: shape (len(texts), dim), each row L2-normalised."""

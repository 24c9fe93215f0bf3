"""numpy for the storage modules that hold arrays: the lazily imported module and the array types they annotate with.

Every storage module takes numpy from here: one ``np`` (the stand-in of :mod:`engramdb._lazy` at run time, so
opening a store still imports no numpy) and one name per array type. The types exist for type checkers only; every
user imports them under ``TYPE_CHECKING`` and annotates with ``from __future__ import annotations``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    F32: TypeAlias = npt.NDArray[np.float32]
    I64: TypeAlias = npt.NDArray[np.int64]
    I32: TypeAlias = npt.NDArray[np.int32]
    Bool: TypeAlias = npt.NDArray[np.bool_]
else:
    from engramdb._lazy import numpy as np

__all__ = ["F32", "I32", "I64", "Bool", "np", "npt"]

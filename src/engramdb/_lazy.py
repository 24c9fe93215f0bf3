"""numpy, imported at its first use rather than when the modules that use it are imported.

Importing numpy is a large share of an ``engram memory list`` that never touches a vector. The
modules on every store's way (storage, embeddings, the write pipeline) therefore bind ``np`` to :data:`numpy`, a
stand-in that imports the real module at its first attribute lookup and then holds its names, so later lookups
cost what any module attribute costs. Type checkers see the real numpy: a user writes

    if TYPE_CHECKING:
        import numpy as np
    else:
        from engramdb._lazy import numpy as np

The storage modules take ``np`` and their array types from :mod:`engramdb.storage._arrays`, the one of them
that does.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["numpy"]


class _Deferred(ModuleType):
    """A module imported by name when one of its attributes is first read."""

    def __getattr__(self, name: str) -> Any:
        # Only names not copied yet land here: the first lookup, and the module's own lazy attributes.
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, name)


#: numpy, imported on first use (thread-safe: the import system serialises the import itself).
numpy = _Deferred("numpy")

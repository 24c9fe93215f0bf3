"""The learning part of the :class:`~engramdb.Engram` facade (mixed into it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.embeddings.base import Embedder
    from engramdb.storage.base import Store

__all__ = ["LearningAPI"]


class LearningAPI:
    """Outcome learning methods of :class:`~engramdb.Engram`; relies on its store and embedder."""

    store: Store
    embedder: Embedder
    settings: Settings

"""What every service is handed: one frozen context (store, embedder, settings, write pipeline, reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.embeddings.base import Embedder
    from engramdb.pipeline import WritePipeline
    from engramdb.recall import Recall
    from engramdb.storage.base import Store

__all__ = ["Service", "ServiceContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceContext:
    """The collaborators every service shares, made once by the facade (``Engram``)."""

    store: Store
    embedder: Embedder
    settings: Settings
    pipeline: WritePipeline
    recall: Recall


class Service:
    """A service over a :class:`ServiceContext`; its own collaborators (other services) come as keywords."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self._store = ctx.store
        self._embedder = ctx.embedder
        self._settings = ctx.settings
        self._pipeline = ctx.pipeline
        self._recall = ctx.recall

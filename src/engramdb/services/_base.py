"""What every service is handed: one frozen context (store, embedder, settings, write pipeline, reads, clock, audit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from engramdb._util import utcnow

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.embeddings.base import Embedder
    from engramdb.models.audit import AuditRecord
    from engramdb.pipeline import WritePipeline
    from engramdb.recall import Recall
    from engramdb.storage.base import Store

__all__ = ["Service", "ServiceContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceContext:
    """The collaborators every service shares, made once by the facade (``Engram``).

    ``clock`` is the one source of "now" for the services (a test or a replay passes a fixed one);
    ``audit`` appends audit entries inside the caller's transaction (the pipeline's, so the
    ``audit`` setting applies the same way everywhere).
    """

    store: Store
    embedder: Embedder
    settings: Settings
    pipeline: WritePipeline
    recall: Recall
    clock: Callable[[], datetime] = field(default=utcnow)
    audit: Callable[[Sequence[AuditRecord]], None]


class Service:
    """A service over a :class:`ServiceContext`; its own collaborators (other services) come as keywords."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self._store = ctx.store
        self._embedder = ctx.embedder
        self._settings = ctx.settings
        self._pipeline = ctx.pipeline
        self._recall = ctx.recall
        self._clock = ctx.clock
        self._audit = ctx.audit

"""What the facade's mixins rely on, declared once.

:class:`~engramdb.Engram` is assembled from mixins (``LearningAPI``, ``FailuresAPI``,
``PrivacyAPI``, ``SharingAPI``) that each use the facade's store, embedder and
settings, and some of its core methods. :class:`FacadeHost` is their common base:
it declares those attributes and methods for mypy (the facade provides them), and
holds the one piece of plumbing they all need, reading a filter's memories page by
page.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engramdb.config import Settings
    from engramdb.embeddings.base import Embedder
    from engramdb.models import Hit, Memory
    from engramdb.storage.base import Filter, Store

__all__ = ["FacadeHost"]


class FacadeHost:
    """Base of the :class:`~engramdb.Engram` mixins: what they may use of the facade."""

    store: Store
    embedder: Embedder
    settings: Settings

    if TYPE_CHECKING:
        # The facade's core methods (engram.py implements them); declared here so mixins can call them.
        def remember(
            self,
            content: str,
            *,
            agent: str = "default",
            kind: str = "knowledge",
            tags: Iterable[str] = (),
            metadata: Mapping[str, Any] | None = None,
            visibility: str = "private",
            confidence: float | None = None,
            force: bool = False,
        ) -> Memory: ...

        def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> list[Memory]: ...

        def search(
            self,
            query: str,
            *,
            agent: str = "default",
            kind: str | Sequence[str] | None = None,
            tags: Iterable[str] | None = None,
            limit: int = 10,
        ) -> list[Hit]: ...

    def _pages(self, flt: Filter, *, size: int) -> Iterator[list[Memory]]:
        """Every memory matching ``flt`` (newest first), ``size`` at a time; the last page is the short one.

        Reading stops with the first short page, so callers may also stop early (an
        analytics window that ends) without reading the rest.
        """
        offset = 0
        while True:
            page = self.store.list(flt, limit=size, offset=offset)
            yield page
            if len(page) < size:
                return
            offset += size

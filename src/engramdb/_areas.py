"""The facade's areas (``mem.learning``, ``mem.failures``, ...), each built when first read.

Building every service at open imported every area's modules, their rules and regular expressions and numpy,
which ``engram memory list`` paid for nothing. :class:`Areas`, the base of
:class:`~engramdb.Engram`, makes each service from the instance's one ServiceContext at its first use (with the
services it needs), so a process pays only for the areas it calls; the services and their collaborators are
those the facade made at open before (``docs/architecture.md``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

if TYPE_CHECKING:
    from engramdb.brain.llm import LLM
    from engramdb.learning.recommend import RecommendConfig
    from engramdb.services._base import ServiceContext
    from engramdb.services.audit import AuditService
    from engramdb.services.code import CodeService
    from engramdb.services.context import ContextBuilder
    from engramdb.services.conversations import Conversations
    from engramdb.services.episodes import EpisodeService
    from engramdb.services.failures import FailureService
    from engramdb.services.keys import ApiKeys
    from engramdb.services.knowledge import KnowledgeService
    from engramdb.services.learning import LearningService
    from engramdb.services.reason import Reasoner
    from engramdb.services.retention import RetentionService
    from engramdb.services.routing import RoutingService
    from engramdb.services.sharing import SharingService
    from engramdb.shortterm import SessionRegistry

__all__ = ["Areas", "built_once"]

T = TypeVar("T")


class built_once(Generic[T]):  # noqa: N801 (used as a decorator, like property)
    """A method read as an attribute: called at the first read, once per instance, then kept in the instance.

    Unlike ``functools.cached_property`` (which has no lock since Python 3.12) two threads reading it first
    build it once, under the instance's ``_build_lock``: a service holds state (caches, the learning
    engine's random generator) that every caller must share. Later reads find the value in the instance's
    ``__dict__`` and never reach this descriptor.
    """

    def __init__(self, build: Callable[[Any], T]) -> None:
        self._build = build
        self._name = build.__name__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type) -> T: ...
    def __get__(self, instance: object | None, owner: type) -> T | Self:
        if instance is None:
            return self
        with instance._build_lock:  # type: ignore[attr-defined]
            built = instance.__dict__.get(self._name, _MISSING)
            if built is _MISSING:
                built = instance.__dict__[self._name] = self._build(instance)
        return built  # type: ignore[no-any-return]


_MISSING = object()


class Areas:
    """The areas of :class:`~engramdb.Engram`, built on first use from what the facade made at open."""

    # Set by Engram when it opens the store, before any area is read.
    _build_lock: threading.RLock
    _services: ServiceContext
    _sessions: SessionRegistry
    _recommend: RecommendConfig | None
    llm: LLM | None
    location: str

    @built_once
    def audit(self) -> AuditService:
        """``mem.audit``: the hash-chained audit trail (log, verify)."""
        from engramdb.services.audit import AuditService

        return AuditService(self._services)

    @built_once
    def keys(self) -> ApiKeys:
        """``mem.keys``: the API keys of the servers (create, list, revoke)."""
        from engramdb.services.keys import ApiKeys

        return ApiKeys(self._services)

    @built_once
    def retention(self) -> RetentionService:
        """``mem.retention``: the retention policy, applied on demand or on schedule."""
        from engramdb.services.retention import RetentionService

        return RetentionService(self._services, location=self.location)

    @built_once
    def sharing(self) -> SharingService:
        """``mem.sharing``: memories shared with other agents, with consent."""
        from engramdb.services.sharing import SharingService

        return SharingService(self._services)

    @built_once
    def failures(self) -> FailureService:
        """``mem.failures``: failures, their patterns and the fixes that worked."""
        from engramdb.services.failures import FailureService

        return FailureService(self._services)

    @built_once
    def knowledge(self) -> KnowledgeService:
        """``mem.knowledge``: knowledge files (export, import, merge), packs and distillation."""
        from engramdb.services.distill import Distiller
        from engramdb.services.knowledge import KnowledgeService

        distiller = Distiller(self._services, llm=self.llm)
        return KnowledgeService(self._services, distiller=distiller, failures=self.failures)

    @built_once
    def learning(self) -> LearningService:
        """``mem.learning``: learning from outcomes (record, suggest, choose, feedback)."""
        from engramdb.brain.sentiment import reward_from_text
        from engramdb.services.learning import LearningService

        return LearningService(
            self._services,
            failures=self.failures,
            recommend=self._recommend,
            rate_text=lambda text: reward_from_text(text, llm=self.llm),
        )

    @built_once
    def episodes(self) -> EpisodeService:
        """``mem.episodes``: episodes, their events and their analysis."""
        from engramdb.services.episodes import EpisodeService

        return EpisodeService(self._services, failures=self.failures)

    @built_once
    def code(self) -> CodeService:
        """``mem.code``: reusable code patterns (remember, suggest)."""
        from engramdb.services.code import CodeService

        return CodeService(self._services)

    @built_once
    def routing(self) -> RoutingService:
        """``mem.routing``: which model a task goes to, from rules and outcomes."""
        from engramdb.services.routing import RoutingService

        return RoutingService(self._services, learning=self.learning)

    @built_once
    def _context(self) -> ContextBuilder:
        from engramdb.services.context import ContextBuilder

        return ContextBuilder(
            self._services, learning=self.learning, failures=self.failures, sessions=self._sessions.find
        )

    @built_once
    def _reasoner(self) -> Reasoner:
        from engramdb.services.reason import Reasoner

        return Reasoner(self._services, llm=self.llm, context=self._context)

    @built_once
    def _conversations(self) -> Conversations:
        from engramdb.services.conversations import Conversations

        return Conversations(self._services, llm=self.llm)

"""``AsyncEngram``: the library's API with every method awaitable, embedded or through a server.

``AsyncEngram(location)`` opens what :class:`~engramdb.Engram` would: for a store (a folder,
``:memory:``, ``postgresql://``) the work runs on worker threads (:func:`asyncio.to_thread`),
never on the event loop; for a server (``http://...``, or ``$ENGRAM_URL``) the remote client's
calls are sent with native async httpx. The arguments are the facade's, method for method:
each awaitable is typed from the sync method it mirrors, so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from engramdb.client._transport import AsyncTransport, Call, is_url
from engramdb.client.remote import RemoteEngram, client_timeout
from engramdb.engram import Engram
from engramdb.models import Memory
from engramdb.services.audit import AuditService
from engramdb.services.code import CodeService
from engramdb.services.episodes import EpisodeService
from engramdb.services.failures import FailureService
from engramdb.services.keys import ApiKeys
from engramdb.services.knowledge import KnowledgeService
from engramdb.services.learning import LearningService
from engramdb.services.retention import RetentionService
from engramdb.services.routing import RoutingService
from engramdb.services.sharing import SharingService

__all__ = ["AsyncEngram"]

P = ParamSpec("P")
R = TypeVar("R")


class _Runner:
    """Runs one method of the sync API by its path (``("learning", "suggest")``) without blocking the loop."""

    def __init__(self, target: Any, http: AsyncTransport | None) -> None:
        self.target = target
        self.http = http

    async def run(self, path: tuple[str, ...], args: Any, kwargs: Any) -> Any:
        method: Any = self.target
        for name in path:
            method = getattr(method, name)
        if self.http is None:
            return await asyncio.to_thread(method, *args, **kwargs)
        planned = method(*args, **kwargs)  # the remote client built with _plan returns its Call
        return await self.http(planned) if isinstance(planned, Call) else planned


def _plan(call: Call[Any]) -> Any:
    return call


def _remote_runner(url: str, *, api_key: str | None = None, timeout: float | None = None) -> _Runner:
    # The sync client built with _plan only plans each call; the async transport sends it.
    return _Runner(RemoteEngram(url, send=_plan), AsyncTransport(url, api_key=api_key, timeout=timeout))


def _awaitable(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Awaitable[R]]:
    """An async method with ``method``'s signature that runs it through the owner's runner."""
    name = method.__name__

    async def run(self: _Async, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast("R", await self._runner.run((*self._path, name), args, kwargs))

    run.__name__ = run.__qualname__ = name
    run.__doc__ = method.__doc__
    return run


class _Async:
    _path: tuple[str, ...] = ()

    def __init__(self, runner: _Runner, *path: str) -> None:
        self._runner = runner
        self._path = path


class AsyncLearning(_Async):
    """``amem.learning``: :class:`~engramdb.services.learning.LearningService`, awaitable."""

    record = _awaitable(LearningService.record)
    suggest = _awaitable(LearningService.suggest)
    choose = _awaitable(LearningService.choose)
    feedback = _awaitable(LearningService.feedback)
    resolve = _awaitable(LearningService.resolve)
    pending = _awaitable(LearningService.pending)
    outcomes = _awaitable(LearningService.outcomes)
    stats = _awaitable(LearningService.stats)
    report = _awaitable(LearningService.report)
    trends = _awaitable(LearningService.trends)
    approaches = _awaitable(LearningService.approaches)
    record_execution = _awaitable(LearningService.record_execution)
    executions = _awaitable(LearningService.executions)


class AsyncFailures(_Async):
    """``amem.failures``, awaitable."""

    record = _awaitable(FailureService.record)
    solutions = _awaitable(FailureService.solutions)
    patterns = _awaitable(FailureService.patterns)
    pattern = _awaitable(FailureService.pattern)
    preflight = _awaitable(FailureService.preflight)
    prevention = _awaitable(FailureService.prevention)
    plan = _awaitable(FailureService.plan)
    checks = _awaitable(FailureService.checks)
    add_check = _awaitable(FailureService.add_check)
    generate_check = _awaitable(FailureService.generate_check)
    remove_check = _awaitable(FailureService.remove_check)
    run_checks = _awaitable(FailureService.run_checks)


class AsyncEpisodes(_Async):
    """``amem.episodes``, awaitable (``begin``'s context manager is sync-only: use start/event/end)."""

    start = _awaitable(EpisodeService.start)
    event = _awaitable(EpisodeService.event)
    end = _awaitable(EpisodeService.end)
    list = _awaitable(EpisodeService.list)
    analyze = _awaitable(EpisodeService.analyze)


class AsyncCode(_Async):
    """``amem.code``, awaitable."""

    remember = _awaitable(CodeService.remember)
    suggest = _awaitable(CodeService.suggest)


class AsyncSharing(_Async):
    """``amem.sharing``, awaitable."""

    share = _awaitable(SharingService.share)
    unshare = _awaitable(SharingService.unshare)
    list = _awaitable(SharingService.list)


class AsyncKnowledge(_Async):
    """``amem.knowledge``, awaitable."""

    export_file = _awaitable(KnowledgeService.export_file)
    import_file = _awaitable(KnowledgeService.import_file)
    distill = _awaitable(KnowledgeService.distill)
    merge = _awaitable(KnowledgeService.merge)
    seed = _awaitable(KnowledgeService.seed)


class AsyncAudit(_Async):
    """``amem.audit``, awaitable."""

    log = _awaitable(AuditService.log)
    verification = _awaitable(AuditService.verification)
    verify = _awaitable(AuditService.verify)


class AsyncRetention(_Async):
    """``amem.retention``, awaitable."""

    cleanup = _awaitable(RetentionService.cleanup)


class AsyncRouting(_Async):
    """``amem.routing``, awaitable."""

    route = _awaitable(RoutingService.route)
    decide = _awaitable(RoutingService.decide)
    record = _awaitable(RoutingService.record)


class AsyncKeys(_Async):
    """``amem.keys``, awaitable."""

    create = _awaitable(ApiKeys.create)
    list = _awaitable(ApiKeys.list)
    revoke = _awaitable(ApiKeys.revoke)


class AsyncEngram(_Async):
    """:class:`~engramdb.Engram`'s API with every method awaitable (``await amem.search(...)``).

    ``AsyncEngram()`` / ``AsyncEngram("dir")`` / ``AsyncEngram("postgresql://...")`` open a store in
    this process and run each call on a worker thread; ``AsyncEngram("http://host:8765",
    api_key=KEY)`` (or ``$ENGRAM_URL`` and ``$ENGRAM_API_KEY``) talks to ``engram serve`` with
    native async HTTP. Options are :class:`~engramdb.Engram`'s. Use ``async with`` or
    ``await amem.close()``; :attr:`sync` is the underlying sync object (embedded only).
    """

    remember = _awaitable(Engram.remember)
    remember_many = _awaitable(Engram.remember_many)
    add = _awaitable(Engram.add)
    search = _awaitable(Engram.search)
    get = _awaitable(Engram.get)
    forget = _awaitable(Engram.forget)
    history = _awaitable(Engram.history)
    list = _awaitable(Engram.list)
    count = _awaitable(Engram.count)
    recall_key = _awaitable(Engram.recall_key)
    clear = _awaitable(Engram.clear)
    context = _awaitable(Engram.context)
    reason = _awaitable(Engram.reason)
    doctor = _awaitable(Engram.doctor)
    flush = _awaitable(Engram.flush)

    async def update(self, memory_id: str, *, agent: str | None = None, **changes: Any) -> Memory:
        """Change fields of a memory (as :meth:`engramdb.Engram.update`)."""
        return cast("Memory", await self._runner.run(("update",), (memory_id,), {"agent": agent, **changes}))

    def __init__(
        self, location: str | os.PathLike[str] | None = None, *, api_key: str | None = None, **options: Any
    ) -> None:
        url = location if location is not None else os.environ.get("ENGRAM_URL") or None
        if is_url(url):
            assert isinstance(url, str)
            runner = _remote_runner(url, api_key=api_key, timeout=client_timeout(url, options))
            self._setup(runner, url.rstrip("/"), None, owns=True)
        else:
            sync = Engram(location, api_key=api_key, **options)
            self._setup(_Runner(sync, None), sync.location, sync, owns=True)

    @classmethod
    def of(cls, mem: Engram) -> AsyncEngram:
        """The async API over ``mem``, an open :class:`~engramdb.Engram` (embedded or remote) that stays its
        owner's: closing the AsyncEngram closes only its own connections, never ``mem``."""
        self = cls.__new__(cls)
        if isinstance(mem, RemoteEngram):
            runner = _remote_runner(mem.location, api_key=mem.api_key, timeout=mem.timeout)
            self._setup(runner, mem.location, None, owns=True)
        else:
            self._setup(_Runner(mem, None), mem.location, mem, owns=False)
        return self

    def _setup(self, runner: _Runner, location: str, sync: Engram | None, *, owns: bool) -> None:
        _Async.__init__(self, runner)
        self.location = location
        #: The sync store this instance runs on worker threads (None for a remote one).
        self.sync = sync
        self._owns = owns
        self.learning = AsyncLearning(runner, "learning")
        self.failures = AsyncFailures(runner, "failures")
        self.episodes = AsyncEpisodes(runner, "episodes")
        self.code = AsyncCode(runner, "code")
        self.sharing = AsyncSharing(runner, "sharing")
        self.knowledge = AsyncKnowledge(runner, "knowledge")
        self.audit = AsyncAudit(runner, "audit")
        self.retention = AsyncRetention(runner, "retention")
        self.routing = AsyncRouting(runner, "routing")
        self.keys = AsyncKeys(runner, "keys")

    def __repr__(self) -> str:
        return f"AsyncEngram({self.location!r})"

    async def close(self) -> None:
        """Close the store (its queued vectors written first, off the loop) or the server connections."""
        if self._runner.http is not None:
            await self._runner.http.close()
        elif self.sync is not None and self._owns:
            await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncEngram:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

"""Adaptive execution: choose an approach, time the run, record the outcome, recover from known failures.

As a decorator (the chosen approach is the first argument when there are options)::

    def recover(error, solutions):
        for s in solutions:                       # best first
            if s.solution == "reconnect":
                return Recovery(solution="reconnect", result=fetch_again())
        return None                               # not recovered: the error propagates

    @mem.learning.adaptive("fetch the daily report", options=["api", "scrape"], recover=recover)
    def fetch(approach):
        ...

    report = fetch()

As a context manager (the block runs once; a recovered error is suppressed)::

    with mem.learning.adaptive("resize images", options=["pillow", "vips"], agent="bob") as run:
        resize(paths, backend=run.approach)

Each run asks ``mem.learning.choose`` for the approach, records the outcome with
``mem.learning.record`` (success; failure; "partial" when the run failed but the
hook recovered it) with its duration, and on an exception records the failure with
``mem.failures.record``, looks up known fixes with ``mem.failures.solutions`` and
calls the recovery hook with them. When the hook returns a
:class:`~engramdb.models.Recovery` naming the fix that worked, that fix is recorded
as the solution, so the next occurrence gets it first.

The store calls are synchronous; a decorated ``async def`` awaits the function (and
an async hook) but briefly blocks the loop for the bookkeeping.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

from engramdb.errors import ValidationError
from engramdb.learning.signatures import error_text
from engramdb.models import Memory, Recovery, SolutionStats

__all__ = ["Adaptive", "AdaptiveRun", "FailureMemory", "Learner", "RecoveryHook"]

F = TypeVar("F", bound=Callable[..., Any])


#: ``hook(error, solutions) -> Recovery | None`` (or an awaitable of it for async functions).
RecoveryHook = Callable[[BaseException, list[SolutionStats]], "Recovery | Awaitable[Recovery | None] | None"]


class Learner(Protocol):
    """What a run needs of outcome learning (:class:`~engramdb.services.learning.LearningService`)."""

    def choose(self, context: str, options: Sequence[str], *, agent: str = ..., user: str | None = ...) -> str: ...

    def record(
        self,
        context: str,
        action: str,
        outcome: str | bool | float,
        *,
        agent: str = ...,
        alternatives: Iterable[str] = ...,
        duration: float | None = ...,
        metadata: Mapping[str, Any] | None = ...,
        category: str | None = ...,
        user: str | None = ...,
    ) -> Memory: ...


class FailureMemory(Protocol):
    """What a run needs of failure learning (:class:`~engramdb.services.failures.FailureService`)."""

    def solutions(self, error: BaseException | str, *, agent: str = ..., limit: int = ...) -> list[SolutionStats]: ...

    def record(
        self,
        error: BaseException | str,
        *,
        agent: str = ...,
        context: str = ...,
        solution: str | None = ...,
        failed_solutions: Iterable[str] = ...,
    ) -> Memory: ...


@dataclass(slots=True, kw_only=True)
class AdaptiveRun:
    """One run of an adaptive task: what was chosen and how it went."""

    task: str
    #: The approach chosen (None when the task has no options).
    approach: str | None
    #: "success", "failure", or "partial" (failed, then recovered); None while running.
    outcome: str | None = None
    result: Any = None
    duration: float | None = None
    error: BaseException | None = None
    #: Known fixes found for the error, best first.
    solutions: list[SolutionStats] = field(default_factory=list)
    recovery: Recovery | None = None
    #: The memories written: the outcome record and (after an error) the failure.
    decision: Memory | None = None
    failure: Memory | None = None
    started: float = 0.0


class Adaptive:
    """An adaptive task (made by ``mem.learning.adaptive``): a decorator and a context manager."""

    def __init__(
        self,
        learning: Learner,
        failures: FailureMemory,
        task: str,
        *,
        options: Sequence[str] | None,
        agent: str,
        recover: RecoveryHook | None = None,
        category: str | None = None,
        solutions_limit: int = 5,
        clock: Callable[[], float] = time.perf_counter,
        user: str | None = None,
    ) -> None:
        self.learning = learning
        self.failures = failures
        self.task = task
        self.options = list(options) if options is not None else None
        self.agent = agent
        #: The user whose outcomes choose the approach and who the outcome is recorded for (None: the agent's).
        self.user = user
        self.recover = recover
        self.category = category
        self.solutions_limit = solutions_limit
        self._clock = clock
        self._local = threading.local()
        #: The most recent run (for inspection after a decorated call).
        self.last_run: AdaptiveRun | None = None

    def __repr__(self) -> str:
        return f"Adaptive({self.task!r}, options={self.options!r}, agent={self.agent!r})"

    # -- one run ---------------------------------------------------------------------------------------------
    def start(self) -> AdaptiveRun:
        """Choose the approach and start the clock."""
        approach = None
        if self.options:
            approach = self.learning.choose(self.task, self.options, agent=self.agent, user=self.user)
        run = AdaptiveRun(task=self.task, approach=approach, started=self._clock())
        self.last_run = run
        return run

    def succeed(self, run: AdaptiveRun, result: Any) -> Any:
        """Record a successful run; returns ``result``."""
        run.duration = self._clock() - run.started
        run.outcome, run.result = "success", result
        run.decision = self._record(run)
        return result

    def _failed(self, run: AdaptiveRun, error: BaseException) -> list[SolutionStats]:
        run.duration = self._clock() - run.started
        run.error = error
        run.solutions = self.failures.solutions(error, agent=self.agent, limit=self.solutions_limit)
        return run.solutions

    def _settle(self, run: AdaptiveRun, error: BaseException, recovery: object) -> bool:
        """Record the failure (with the fix, if the hook recovered) and the outcome; True if recovered."""
        if recovery is not None and not isinstance(recovery, Recovery):
            raise ValidationError(
                f"a recovery hook must return Recovery or None, not {type(recovery).__name__}"
            ) from error
        run.recovery = recovery
        recovered = recovery is not None and recovery.recovered
        context = self.task + (f" (approach: {run.approach})" if run.approach else "")
        run.failure = self.failures.record(
            error,
            agent=self.agent,
            context=context,
            solution=recovery.solution if recovery is not None else None,
            failed_solutions=[s for s in (recovery.failed if recovery is not None else ()) if s],
        )
        run.outcome = "partial" if recovered else "failure"
        if recovered and recovery is not None:
            run.result = recovery.result
        run.decision = self._record(run)
        return recovered

    def _record(self, run: AdaptiveRun) -> Memory:
        action = run.approach or "default"
        alternatives = [o for o in self.options or () if o != action]
        meta: dict[str, Any] = {"adaptive": True}
        if run.error is not None:
            meta["error"] = error_text(run.error)
        if run.recovery is not None and run.recovery.recovered:
            meta["recovered_with"] = run.recovery.solution
        return self.learning.record(
            self.task,
            action,
            run.outcome or "failure",
            agent=self.agent,
            alternatives=alternatives,
            duration=run.duration,
            metadata=meta,
            category=self.category,
            user=self.user,
        )

    def _call_hook(self, run: AdaptiveRun, error: BaseException) -> object:
        if self.recover is None:
            return None
        try:
            return self.recover(error, list(run.solutions))
        except Exception as hook_error:  # noqa: BLE001 - a broken hook must not hide the task's own error
            error.add_note(f"engramdb: the recovery hook failed: {hook_error!r}")
            return None

    async def _acall_hook(self, run: AdaptiveRun, error: BaseException) -> object:
        outcome = self._call_hook(run, error)
        if inspect.isawaitable(outcome):
            try:
                return await outcome
            except Exception as hook_error:  # noqa: BLE001 - as above
                error.add_note(f"engramdb: the recovery hook failed: {hook_error!r}")
                return None
        return outcome

    def _args(self, run: AdaptiveRun, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (run.approach, *args) if self.options else args

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` once as this task (the approach first when there are options); returns its result."""
        run = self.start()
        try:
            result = fn(*self._args(run, args), **kwargs)
        except Exception as error:
            self._failed(run, error)
            if self._settle(run, error, self._call_hook(run, error)):
                return run.result
            raise
        return self.succeed(run, result)

    async def arun(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """:meth:`run` for a coroutine function."""
        run = self.start()
        try:
            result = await fn(*self._args(run, args), **kwargs)
        except Exception as error:
            self._failed(run, error)
            if self._settle(run, error, await self._acall_hook(run, error)):
                return run.result
            raise
        return self.succeed(run, result)

    # -- decorator -------------------------------------------------------------------------------------------
    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: every call is one adaptive run."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await self.arun(fn, *args, **kwargs)

            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return self.run(fn, *args, **kwargs)

        return cast(F, wrapper)

    # -- context manager -------------------------------------------------------------------------------------
    def __enter__(self) -> AdaptiveRun:
        run = self.start()
        stack: list[AdaptiveRun] = getattr(self._local, "runs", [])
        stack.append(run)
        self._local.runs = stack
        return run

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        run: AdaptiveRun = self._local.runs.pop()
        if exc is None:
            self.succeed(run, run.result)
            return False
        if not isinstance(exc, Exception):
            return False  # KeyboardInterrupt and friends are not the task failing
        self._failed(run, exc)
        return self._settle(run, exc, self._call_hook(run, exc))

"""Short-term memory: a session context window per (agent, user, session), kept in process (or shared).

Holds the recent messages of a conversation and the agent's working variables,
trimmed to a token budget (oldest messages leave first). Nothing here is
persisted until :meth:`SessionContext.promote` moves an item into long-term memory.

Where the window lives is a :class:`SessionWindow`: :class:`InProcessWindow` (the
default) keeps it in this process; ``engramdb.sessions_redis.RedisWindow`` keeps it in
Redis, so several processes (and machines) see one agent's window.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from engramdb import _validate as check
from engramdb._util import utcnow
from engramdb.errors import ValidationError
from engramdb.models import Memory

__all__ = ["InProcessWindow", "Message", "SessionContext", "SessionRegistry", "SessionWindow", "WindowState"]

TokenCounter = Callable[[str], int]
Promoter = Callable[..., Memory]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message in a session window."""

    role: str
    content: str
    at: datetime
    tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowState:
    """A consistent snapshot of a session window."""

    #: Oldest first.
    messages: tuple[Message, ...] = ()
    variables: Mapping[str, Any] = field(default_factory=dict)
    #: Tokens each variable counts for (as ``name: json``).
    variable_tokens: Mapping[str, int] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Tokens held: messages plus variables."""
        return sum(m.tokens for m in self.messages) + sum(self.variable_tokens.values())


@runtime_checkable
class SessionWindow(Protocol):
    """Where a session window lives. Each write is atomic, trimming included.

    Trimming: after a write, while the window holds more than one message and more
    than ``budget`` tokens (messages plus variables), the oldest message leaves.
    """

    def snapshot(self) -> WindowState:
        """The window as it is now."""

    def add(self, message: Message, *, budget: int) -> None:
        """Append a message, then trim."""

    def set(self, name: str, value: Any, *, tokens: int, budget: int) -> None:
        """Set a variable (JSON-serialisable ``value`` counting ``tokens``), then trim."""

    def unset(self, name: str) -> None:
        """Remove a variable if present."""

    def remove(self, message: Message) -> bool:
        """Remove one message equal to ``message``; False if none is left (trimmed or taken meanwhile)."""

    def clear(self) -> None:
        """Empty the window."""


class InProcessWindow:
    """A session window in this process's memory (the default :class:`SessionWindow`). Thread-safe."""

    def __init__(self) -> None:
        self._messages: deque[Message] = deque()
        self._variables: dict[str, Any] = {}
        self._var_tokens: dict[str, int] = {}
        self._lock = threading.RLock()

    def snapshot(self) -> WindowState:
        """See :meth:`SessionWindow.snapshot`."""
        with self._lock:
            return WindowState(
                messages=tuple(self._messages), variables=dict(self._variables), variable_tokens=dict(self._var_tokens)
            )

    def add(self, message: Message, *, budget: int) -> None:
        """See :meth:`SessionWindow.add`."""
        with self._lock:
            self._messages.append(message)
            self._trim(budget)

    def set(self, name: str, value: Any, *, tokens: int, budget: int) -> None:
        """See :meth:`SessionWindow.set`."""
        with self._lock:
            self._variables[name] = value
            self._var_tokens[name] = tokens
            self._trim(budget)

    def unset(self, name: str) -> None:
        """See :meth:`SessionWindow.unset`."""
        with self._lock:
            self._variables.pop(name, None)
            self._var_tokens.pop(name, None)

    def remove(self, message: Message) -> bool:
        """See :meth:`SessionWindow.remove`."""
        with self._lock:
            try:
                self._messages.remove(message)
            except ValueError:
                return False
            return True

    def clear(self) -> None:
        """See :meth:`SessionWindow.clear`."""
        with self._lock:
            self._messages.clear()
            self._variables.clear()
            self._var_tokens.clear()

    def _trim(self, budget: int) -> None:
        # Keep at least the newest message: an over-long single message is still context.
        held = sum(m.tokens for m in self._messages) + sum(self._var_tokens.values())
        while len(self._messages) > 1 and held > budget:
            held -= self._messages.popleft().tokens


class SessionContext:
    """The working context of one agent: recent messages and variables within a token budget.

    Thread-safe. ``tokens`` counts messages plus variables (rendered as JSON); when
    the total exceeds the budget the oldest messages are dropped, never variables,
    and the newest message always stays even if it alone exceeds the budget.
    ``window`` is where the window lives (default: in this process, see :class:`SessionWindow`).
    """

    def __init__(
        self,
        agent: str,
        *,
        token_budget: int,
        count_tokens: TokenCounter,
        promoter: Promoter,
        window: SessionWindow | None = None,
        user: str | None = None,
        session: str | None = None,
    ) -> None:
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise ValidationError(f"token_budget must be a positive integer, not {check.shown(token_budget)}")
        self.agent = agent
        #: The person and the conversation thread this window belongs to (promoted items keep them).
        self.user = user
        self.session = session
        self.token_budget = token_budget
        self._count = count_tokens
        self._promote = promoter
        self._window: SessionWindow = window if window is not None else InProcessWindow()
        self._lock = threading.RLock()

    # -- messages ---------------------------------------------------------------------------
    def add(self, content: str, *, role: str = "user", now: datetime | None = None) -> Message:
        """Append a message; older messages are trimmed to stay within the budget."""
        content = check.content(content, what="message")
        role = check.name(role, what="role")
        msg = Message(role=role, content=content, at=now or utcnow(), tokens=self._count(content))
        self._window.add(msg, budget=self.token_budget)
        return msg

    @property
    def messages(self) -> list[Message]:
        """The messages in the window, oldest first."""
        return list(self._window.snapshot().messages)

    # -- variables --------------------------------------------------------------------------
    def set(self, name: str, value: Any) -> None:
        """Set a working variable (must be JSON-serialisable)."""
        name = check.name(name, what="variable name")
        try:
            rendered = json.dumps(value, sort_keys=True, default=None)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"variable {name!r} is not JSON-serialisable: {exc}") from exc
        self._window.set(name, value, tokens=self._count(f"{name}: {rendered}"), budget=self.token_budget)

    def get(self, name: str, default: Any = None) -> Any:
        """A working variable, or ``default``."""
        return self._window.snapshot().variables.get(name, default)

    def unset(self, name: str) -> None:
        """Remove a working variable if present."""
        self._window.unset(name)

    @property
    def variables(self) -> dict[str, Any]:
        """A copy of the working variables."""
        return dict(self._window.snapshot().variables)

    # -- window -----------------------------------------------------------------------------
    @property
    def tokens(self) -> int:
        """Tokens currently held (messages plus variables)."""
        return self._window.snapshot().tokens

    def render(self) -> str:
        """The window as text for a prompt: variables first, then messages."""
        state = self._window.snapshot()
        lines = [f"{k}: {json.dumps(v, sort_keys=True)}" for k, v in state.variables.items()]
        lines += [f"{m.role}: {m.content}" for m in state.messages]
        return "\n".join(lines)

    def clear(self) -> None:
        """Forget the whole window (messages and variables)."""
        self._window.clear()

    def promote(
        self,
        item: int | str,
        *,
        kind: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Move an item into long-term memory and out of the window.

        ``item`` is a message index (negative counts from the newest) or a variable name.
        Messages become ``conversation`` memories and variables ``knowledge`` unless ``kind`` says otherwise.
        """
        with self._lock:
            meta = dict(metadata or {})
            state = self._window.snapshot()
            if isinstance(item, int):
                try:
                    msg = state.messages[item]
                except IndexError:
                    raise ValidationError(f"no message at index {item} (window holds {len(state.messages)})") from None
                meta.setdefault("role", msg.role)
                meta.setdefault("said_at", msg.at.isoformat())
                memory = self._promote(
                    f"{msg.role}: {msg.content}",
                    agent=self.agent,
                    kind=kind or "conversation",
                    tags=tags,
                    metadata=meta,
                    user=self.user,
                    session=self.session,
                    at=msg.at,
                )
                self._window.remove(msg)
                return memory
            if item not in state.variables:
                raise ValidationError(f"no variable named {item!r} in the session")
            value = state.variables[item]
            meta.setdefault("variable", item)
            memory = self._promote(
                f"{item}: {json.dumps(value, sort_keys=True)}",
                agent=self.agent,
                kind=kind or "knowledge",
                tags=tags,
                metadata=meta,
                user=self.user,
                session=self.session,
            )
            self.unset(item)
            return memory


#: Where a window lives for (agent, user, session): None keeps it in this process.
WindowFactory = Callable[[str, "str | None", "str | None"], "SessionWindow | None"]
#: (agent, user, session): one conversation thread's window.
ThreadKey = tuple[str, str | None, str | None]


class SessionRegistry:
    """The short-term windows of one store: one :class:`SessionContext` per (agent, user, session).

    ``shared`` makes the window of a thread (e.g. in Redis, which other processes see); without it
    windows live in this process. The same context object is returned for the same thread.
    """

    def __init__(self, *, count_tokens: TokenCounter, promoter: Promoter, shared: WindowFactory | None) -> None:
        self._count = count_tokens
        self._promote = promoter
        self._shared = shared
        self._contexts: dict[ThreadKey, SessionContext] = {}
        self._lock = threading.Lock()

    @property
    def is_shared(self) -> bool:
        """Whether windows live outside this process (another process may have written them)."""
        return self._shared is not None

    def get(self, agent: str, *, user: str | None, session: str | None, token_budget: int) -> SessionContext:
        """The context of the thread (created on first use)."""
        thread = (agent, user, session)
        with self._lock:
            ctx = self._contexts.get(thread)
            if ctx is None:
                window = self._shared(agent, user, session) if self._shared is not None else None
                ctx = SessionContext(
                    agent,
                    token_budget=token_budget,
                    count_tokens=self._count,
                    promoter=self._promote,
                    window=window,
                    user=user,
                    session=session,
                )
                self._contexts[thread] = ctx
            return ctx

    def find(self, agent: str, *, user: str | None = None, session: str | None = None) -> SessionContext | None:
        """The thread's context if one was opened in this process (or, with shared windows, always)."""
        if self._shared is not None:
            return self.get(agent, user=user, session=session, token_budget=2000)
        with self._lock:
            return self._contexts.get((agent, user, session))

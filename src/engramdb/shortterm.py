"""Short-term memory: a per-agent session context window, kept in process.

Holds the recent messages of a conversation and the agent's working variables,
trimmed to a token budget (oldest messages leave first). Nothing here is
persisted until :meth:`SessionContext.promote` moves an item into long-term memory.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engramdb._util import utcnow
from engramdb.errors import ValidationError
from engramdb.models import Memory

__all__ = ["Message", "SessionContext"]

TokenCounter = Callable[[str], int]
Promoter = Callable[..., Memory]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message in a session window."""

    role: str
    content: str
    at: datetime
    tokens: int


class SessionContext:
    """The working context of one agent: recent messages and variables within a token budget.

    Thread-safe. ``tokens`` counts messages plus variables (rendered as JSON); when
    the total exceeds the budget the oldest messages are dropped, never variables,
    and the newest message always stays even if it alone exceeds the budget.
    """

    def __init__(
        self,
        agent: str,
        *,
        token_budget: int,
        count_tokens: TokenCounter,
        promoter: Promoter,
    ) -> None:
        if token_budget < 1:
            raise ValidationError("token_budget must be at least 1")
        self.agent = agent
        self.token_budget = token_budget
        self._count = count_tokens
        self._promote = promoter
        self._messages: deque[Message] = deque()
        self._variables: dict[str, Any] = {}
        self._var_tokens: dict[str, int] = {}
        self._lock = threading.RLock()

    # -- messages ---------------------------------------------------------------------------
    def add(self, content: str, *, role: str = "user", now: datetime | None = None) -> Message:
        """Append a message; older messages are trimmed to stay within the budget."""
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("message content must be a non-empty string")
        if not isinstance(role, str) or not role.strip():
            raise ValidationError("role must be a non-empty string")
        msg = Message(role=role, content=content, at=now or utcnow(), tokens=self._count(content))
        with self._lock:
            self._messages.append(msg)
            self._trim()
        return msg

    @property
    def messages(self) -> list[Message]:
        """The messages in the window, oldest first."""
        with self._lock:
            return list(self._messages)

    # -- variables --------------------------------------------------------------------------
    def set(self, name: str, value: Any) -> None:
        """Set a working variable (must be JSON-serialisable)."""
        if not isinstance(name, str) or not name:
            raise ValidationError("variable name must be a non-empty string")
        try:
            rendered = json.dumps(value, sort_keys=True, default=None)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"variable {name!r} is not JSON-serialisable: {exc}") from exc
        with self._lock:
            self._variables[name] = value
            self._var_tokens[name] = self._count(f"{name}: {rendered}")
            self._trim()

    def get(self, name: str, default: Any = None) -> Any:
        """A working variable, or ``default``."""
        with self._lock:
            return self._variables.get(name, default)

    def unset(self, name: str) -> None:
        """Remove a working variable if present."""
        with self._lock:
            self._variables.pop(name, None)
            self._var_tokens.pop(name, None)

    @property
    def variables(self) -> dict[str, Any]:
        """A copy of the working variables."""
        with self._lock:
            return dict(self._variables)

    # -- window -----------------------------------------------------------------------------
    @property
    def tokens(self) -> int:
        """Tokens currently held (messages plus variables)."""
        with self._lock:
            return sum(m.tokens for m in self._messages) + sum(self._var_tokens.values())

    def render(self) -> str:
        """The window as text for a prompt: variables first, then messages."""
        with self._lock:
            lines = [f"{k}: {json.dumps(v, sort_keys=True)}" for k, v in self._variables.items()]
            lines += [f"{m.role}: {m.content}" for m in self._messages]
        return "\n".join(lines)

    def clear(self) -> None:
        """Forget the whole window (messages and variables)."""
        with self._lock:
            self._messages.clear()
            self._variables.clear()
            self._var_tokens.clear()

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
            if isinstance(item, int):
                try:
                    msg = self._messages[item]
                except IndexError:
                    raise ValidationError(f"no message at index {item} (window holds {len(self._messages)})") from None
                meta.setdefault("role", msg.role)
                meta.setdefault("said_at", msg.at.isoformat())
                memory = self._promote(
                    f"{msg.role}: {msg.content}",
                    agent=self.agent,
                    kind=kind or "conversation",
                    tags=tags,
                    metadata=meta,
                )
                self._messages.remove(msg)
                return memory
            if item not in self._variables:
                raise ValidationError(f"no variable named {item!r} in the session")
            value = self._variables[item]
            meta.setdefault("variable", item)
            memory = self._promote(
                f"{item}: {json.dumps(value, sort_keys=True)}",
                agent=self.agent,
                kind=kind or "knowledge",
                tags=tags,
                metadata=meta,
            )
            self.unset(item)
            return memory

    def _trim(self) -> None:
        # Keep at least the newest message: an over-long single message is still context.
        while len(self._messages) > 1 and self.tokens > self.token_budget:
            self._messages.popleft()

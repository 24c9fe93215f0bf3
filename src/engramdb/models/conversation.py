"""Values of conversations in (``mem.add(messages)``): a chat message, what happened to each fact, the result."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Final, Literal

from engramdb.models._encode import Encoded
from engramdb.models.memory import Memory

__all__ = ["CHAT_ROLES", "AddResult", "ChatMessage", "ChatRole", "FactAction", "FactChange"]

ChatRole = Literal["user", "assistant", "system", "developer", "tool", "function"]
#: The roles of OpenAI-style chat messages that ``add`` accepts.
CHAT_ROLES: Final[frozenset[str]] = frozenset({"user", "assistant", "system", "developer", "tool", "function"})
#: What ``add`` did with a fact: a new memory (or an earlier value of a key, told after the current one), a memory
#: changed in place (an LLM's update, or a note merged
#: into a near-duplicate), a keyed fact whose earlier value it replaced, a memory removed (an LLM's delete),
#: or nothing (the fact was already known as stated).
FactAction = Literal["add", "update", "supersede", "delete", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One validated message of a conversation handed to ``add``."""

    role: ChatRole
    content: str
    #: Who said it, when the message names the speaker (OpenAI's ``name`` field).
    name: str | None = None
    #: When it was said, when the message gives it (``at``); else the call's ``at``.
    at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, as ``add`` accepts it."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.at is not None:
            out["at"] = self.at.isoformat()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class FactChange(Encoded):
    """What ``add`` did with one durable fact."""

    action: FactAction
    #: The memory as it is now (for ``delete``: as it was before it was removed).
    memory: Memory
    #: The fact's key (``home``, ``pref:editor``), when it has one.
    key: str | None = None
    #: The text it replaced (``supersede``, ``update``) or removed (``delete``).
    previous: str | None = None

    _keys: ClassVar[tuple[str, ...]] = ("action", "key", "previous", "memory")


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    """What ``mem.add(messages)`` stored: the turns, and what it did with each fact it found."""

    #: Every message, stored as a ``conversation`` memory, in order.
    turns: tuple[Memory, ...]
    #: Each fact found, in order, with what was done with it.
    facts: tuple[FactChange, ...] = ()
    #: Who read the facts: ``"rules"`` (the deterministic extractor) or ``"llm:<provider:model>"``.
    extractor: str = "rules"
    #: Why the configured LLM was not used (its error), when the rules stood in for it.
    llm_error: str | None = None

    def _of(self, action: FactAction) -> tuple[FactChange, ...]:
        return tuple(f for f in self.facts if f.action == action)

    @property
    def added(self) -> tuple[FactChange, ...]:
        """Facts stored as new memories."""
        return self._of("add")

    @property
    def updated(self) -> tuple[FactChange, ...]:
        """Memories changed in place."""
        return self._of("update")

    @property
    def superseded(self) -> tuple[FactChange, ...]:
        """Keyed facts whose earlier value was replaced (the earlier value is in ``previous`` and the history)."""
        return self._of("supersede")

    @property
    def deleted(self) -> tuple[FactChange, ...]:
        """Memories removed (only an LLM decides this)."""
        return self._of("delete")

    @property
    def unchanged(self) -> tuple[FactChange, ...]:
        """Facts already known as stated."""
        return self._of("none")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: how many facts were added, updated, superseded, deleted and unchanged, then the
        turns and each fact with its action."""
        names: dict[str, FactAction] = {
            "added": "add", "updated": "update", "superseded": "supersede", "deleted": "delete", "unchanged": "none"
        }  # fmt: skip
        return {
            **{name: len(self._of(action)) for name, action in names.items()},
            "extractor": self.extractor,
            "llm_error": self.llm_error,
            "turns": [m.to_dict() for m in self.turns],
            "facts": [f.to_dict() for f in self.facts],
        }

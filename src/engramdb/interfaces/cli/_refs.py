"""Names the seeds' commands use for things: a memory by id or a unique id prefix, a task by its id, an agent.

Seed 001 writes ``engram learning suggest --task auth-123`` and ``apply-pattern
migration-rollback-strategy``: references, not descriptions. These helpers turn them into the
memory (or the situation's text) they name, using only the public API.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from rich.markup import escape

from engramdb.errors import NotFound, ValidationError
from engramdb.validate import MAX_LIMIT

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.models import Memory

__all__ = ["MIN_PREFIX", "agent_hint", "find_memory", "full_id", "task_text"]

#: Shortest id prefix accepted (git's default abbreviation is 7; ids here are 32 hex digits).
MIN_PREFIX: Final = 6
_HEX: Final = re.compile(r"[0-9a-f]+")
#: Hex digits of a whole memory id.
_ID_DIGITS: Final = 32
#: Metadata keys under which a task id is kept (``--meta task=auth-123``).
_TASK_KEYS: Final = ("task", "task_id", "ticket")


def full_id(mem: Engram, ref: str, *, agent: str | None) -> str:
    """``ref`` completed to the memory id it is a unique prefix of (at least :data:`MIN_PREFIX` hex digits), among
    the memories ``agent`` can see; anything else as given, for the API to accept or refuse.

    Ids are long: the CLI prints them whole, and a user types the first few, as with git. An ambiguous
    prefix is a ValidationError naming how many memories share it.
    """
    key = ref.strip().lower()
    if len(key) >= _ID_DIGITS or len(key) < MIN_PREFIX or not _HEX.fullmatch(key):
        return ref
    found = [m.id for m in mem.list(agent=agent, limit=MAX_LIMIT) if m.id.startswith(key)]
    if len(found) > 1:
        raise ValidationError(f"id prefix {ref!r} is ambiguous: {len(found)} memories start with it; give more of it")
    return found[0] if found else ref


def find_memory(mem: Engram, ref: str, *, agent: str) -> Memory | None:
    """The memory visible to ``agent`` whose id is ``ref`` or starts with it (a unique prefix); None if none.

    An ambiguous prefix is a ValidationError naming how many memories share it.
    """
    memory_id = full_id(mem, ref, agent=agent)
    try:
        return mem.get(memory_id.strip().lower(), agent=agent)
    except (NotFound, ValidationError):
        return None


def task_text(mem: Engram, ref: str, *, agent: str) -> tuple[str, str | None]:
    """The situation ``ref`` names, and a note saying how it was read.

    ``ref`` may be a memory id (or unique prefix), a task id kept in a memory's metadata
    (``task``, ``task_id``, ``ticket``) or a tag; anything else (and any text with spaces) is
    the description itself.
    """
    text = ref.strip()
    if not text or any(c.isspace() for c in text):
        return ref, None
    found = find_memory(mem, text, agent=agent)
    if found is not None:
        return found.content, f"task {text!r}: memory {found.id} ({found.kind})"
    for m in mem.list(agent=agent, limit=MAX_LIMIT):
        if any(str(m.metadata.get(k, "")) == text for k in _TASK_KEYS) or text in m.tags:
            return m.content, f"task {text!r}: memory {m.id} ({m.kind})"
    return ref, f"{text!r} names no memory, task id or tag of this agent: read as a description"


def agent_hint(mem: Engram, agent: str, *, empty: bool) -> str | None:
    """Why an answer is ``empty`` when the agent itself has nothing: every command acts as ``--agent`` (default
    'default'), and seed 001 writes most of its commands without one. None when there is nothing to explain."""
    if not empty or mem.count(agent=agent) > 0:
        return None
    return (
        f"[dim]Agent {escape(repr(agent))} has none in this store; memories belong to the agent that recorded "
        "them: pass --agent NAME or set ENGRAM_AGENT.[/dim]"
    )

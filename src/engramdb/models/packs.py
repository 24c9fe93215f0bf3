"""Values of knowledge packs: the curated best practices and common errors shipped with engramdb.

A pack (``python``, ``git``, ``http``, ``sql``, ``docker``, ``ci``) is loaded with
:func:`engramdb.services.packs.load_pack` and written to a store with
:func:`engramdb.services.packs.seed_pack` (``engram knowledge seed --pack NAME``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from engramdb.models._encode import Encoded

__all__ = ["Pack", "PackError", "PackPractice", "PackReport"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PackPractice(Encoded):
    """A best practice: stored as a ``knowledge`` memory."""

    #: Stable within its pack (``virtualenv-per-project``): how a newer version finds it again.
    id: str
    title: str
    text: str
    tags: tuple[str, ...] = ()

    def content(self) -> str:
        """The text stored for it."""
        return f"{self.title}: {self.text}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PackError:
    """A common error and its fix: stored as a ``failure`` memory (``mem.failures.record``)."""

    id: str
    #: The error message as it is usually seen.
    error: str
    #: The fix that works.
    fix: str
    #: When it happens.
    context: str = ""
    #: Fixes people try that do not work (or do harm).
    failed: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: The fix holds whatever module or package the message names ("No module named X"): it is the
    #: answer for such an error when no fix for that very name is known.
    generic: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``generic`` only when set, so older entries keep their content hash)."""
        out: dict[str, Any] = {
            "id": self.id,
            "error": self.error,
            "fix": self.fix,
            "context": self.context,
            "failed": list(self.failed),
            "tags": list(self.tags),
        }
        if self.generic:
            out["generic"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Pack(Encoded):
    """A versioned knowledge pack."""

    name: str
    #: Grows by one whenever the pack's content changes; seeding a newer version updates a store.
    version: int
    title: str
    description: str
    practices: tuple[PackPractice, ...] = ()
    errors: tuple[PackError, ...] = ()

    @property
    def source(self) -> str:
        """The provenance stored in each memory's metadata: ``engramdb-pack:python@1``."""
        return f"engramdb-pack:{self.name}@{self.version}"

    @property
    def tag(self) -> str:
        """The tag every memory of the pack carries: ``pack:python``."""
        return f"pack:{self.name}"

    _keys: ClassVar[tuple[str, ...]] = ("name", "version", "title", "description", "source", "practices", "errors")


@dataclass(frozen=True, slots=True, kw_only=True)
class PackReport(Encoded):
    """What seeding a pack into a store did."""

    pack: str
    version: int
    agent: str
    #: The version the store held before (None: the pack was not there).
    previous_version: int | None
    added: int
    updated: int
    removed: int
    unchanged: int

    @property
    def changed(self) -> bool:
        """Whether anything was written."""
        return bool(self.added or self.updated or self.removed)

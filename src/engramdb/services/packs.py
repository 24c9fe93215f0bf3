"""Knowledge packs: curated best practices and common errors with their fixes, shipped with engramdb.

Packs (``python``, ``git``, ``http``, ``sql``, ``docker``, ``ci``, ``patterns``) are TOML files in
:mod:`engramdb.packs`. :func:`load_pack` reads and validates one; :func:`seed_pack`
writes it into a store for an agent (``engram knowledge seed --pack NAME``):

- each best practice becomes a ``knowledge`` memory, written with ``remember_many``;
- each common error becomes a ``failure`` memory with its fix, written with
  ``mem.failures.record``, so ``mem.failures.solutions(...)`` and ``preflight`` find it;

both through the public write path, so redaction, near-duplicate merging and the audit
trail apply as for any write. Every memory carries its provenance: the tag ``pack:NAME``
(and the pack's name as a domain tag, so ``engram knowledge export --domain NAME`` takes
it), and the metadata ``source`` (``engramdb-pack:python@1``), ``pack``, ``pack_version``,
``pack_entry`` (``python/module-not-found``) and ``pack_hash`` (of the entry's content).

Seeding is idempotent: a pack already seeded at this version (or a newer one) adds
nothing. Seeding a newer version brings the store up to date: entries whose content
changed are updated (a best practice in place; an error is recorded again, since its
signature may have changed), unchanged entries get the new version in their metadata,
entries the new version dropped are forgotten, and new entries are added.

File format (one file per pack, ``version`` grows by one on any change of content)::

    name = "python"            # the file's name without .toml
    version = 1
    title = "Python"
    description = "..."

    [[practice]]
    id = "virtualenv-per-project"   # stable: how a newer version finds the entry again
    title = "One virtual environment per project"
    text = "..."
    tags = ["packaging"]            # optional

    [[error]]
    id = "module-not-found"
    error = "ModuleNotFoundError: No module named 'requests'"   # as usually seen
    fix = "..."                     # the fix that works
    context = "..."                 # optional: when it happens
    failed = ["..."]                # optional: fixes that do not work
    tags = ["packaging"]            # optional
    generic = true                  # optional: the fix holds whatever module or package the error names
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Protocol

from engramdb._validate import MAX_LIMIT
from engramdb.errors import ValidationError
from engramdb.learning.signatures import GENERIC_FIX_KEY
from engramdb.models.packs import Pack, PackError, PackPractice, PackReport

if TYPE_CHECKING:
    from engramdb.models import Kind, Memory, Visibility
    from engramdb.pipeline import WritePipeline
    from engramdb.recall import Recall
    from engramdb.services.failures import FailureService

__all__ = [
    "PACK_KINDS",
    "PackTarget",
    "ServiceTarget",
    "available_packs",
    "load_pack",
    "parse_pack",
    "seed_pack",
]

#: The kinds of memory a pack writes.
PACK_KINDS: Final[tuple[Kind, ...]] = ("knowledge", "failure")
_NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


# -- loading -------------------------------------------------------------------------------------------------


def available_packs() -> list[str]:
    """The names of the packs shipped with engramdb, sorted."""
    folder = resources.files("engramdb.packs")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


@cache
def load_pack(name: str) -> Pack:
    """The shipped pack ``name`` (``python``, ``git``, ``http``, ``sql``, ``docker``, ``ci``), validated.

    Raises ValidationError for an unknown name (the message lists the known ones).
    """
    if not isinstance(name, str) or not _NAME.match(name.strip().lower()):
        raise ValidationError(f"bad pack name {name!r}")
    clean = name.strip().lower()
    known = available_packs()
    if clean not in known:
        raise ValidationError(f"unknown pack {name!r} (available: {', '.join(known)})")
    text = resources.files("engramdb.packs").joinpath(f"{clean}.toml").read_text(encoding="utf-8")
    pack = parse_pack(text, where=f"pack {clean}")
    if pack.name != clean:
        raise ValidationError(f"pack {clean}: its name field says {pack.name!r}")
    return pack


def _text(entry: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValidationError(f"{where}: {key} must be non-empty text")
    return " ".join(value.split())


def _texts(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError(f"{where}: {key} must be a list of non-empty texts")
    return tuple(" ".join(v.split()) for v in value)


def _flag(entry: Mapping[str, Any], key: str, where: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise ValidationError(f"{where}: {key} must be true or false")
    return value


def _id(entry: Mapping[str, Any], where: str, seen: set[str]) -> str:
    value = entry.get("id")
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValidationError(f"{where}: id must be a lower-case slug, not {value!r}")
    if value in seen:
        raise ValidationError(f"{where}: id {value!r} is used twice")
    seen.add(value)
    return value


def _entries(data: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ValidationError(f"{where}: [[{key}]] must be tables")
    return value


def parse_pack(text: str, *, where: str = "pack") -> Pack:
    """A pack from the text of its TOML file (format: see the module docstring), validated."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"{where}: not valid TOML: {exc}") from exc
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError(f"{where}: name must be a lower-case slug")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValidationError(f"{where}: version must be a whole number >= 1")
    unknown = set(data) - {"name", "version", "title", "description", "practice", "error"}
    if unknown:
        raise ValidationError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    seen: set[str] = set()
    practices = []
    for i, entry in enumerate(_entries(data, "practice", where)):
        at = f"{where}: practice {i + 1}"
        practices.append(
            PackPractice(
                id=_id(entry, at, seen),
                title=_text(entry, "title", at),
                text=_text(entry, "text", at),
                tags=_texts(entry, "tags", at),
            )
        )
    errors = []
    for i, entry in enumerate(_entries(data, "error", where)):
        at = f"{where}: error {i + 1}"
        errors.append(
            PackError(
                id=_id(entry, at, seen),
                error=_text(entry, "error", at),
                fix=_text(entry, "fix", at),
                context=_text(entry, "context", at, required=False),
                failed=_texts(entry, "failed", at),
                tags=_texts(entry, "tags", at),
                generic=_flag(entry, "generic", at),
            )
        )
    return Pack(
        name=name,
        version=version,
        title=_text(data, "title", where),
        description=_text(data, "description", where),
        practices=tuple(practices),
        errors=tuple(errors),
    )


# -- where a pack is written ---------------------------------------------------------------------------------


class _FailureRecorder(Protocol):
    def record(
        self,
        error: BaseException | str,
        *,
        agent: str = ...,
        context: str = ...,
        solution: str | None = ...,
        failed_solutions: Iterable[str] = ...,
        tags: Iterable[str] = ...,
        metadata: Mapping[str, Any] | None = ...,
        visibility: Visibility = ...,
    ) -> Memory: ...


class PackTarget(Protocol):
    """What seeding writes through: the public write path. :class:`~engramdb.Engram` is one;
    :class:`ServiceTarget` makes one of a write pipeline, a recall and a failure service."""

    @property
    def failures(self) -> _FailureRecorder: ...

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> builtins.list[Memory]: ...

    def list(
        self,
        *,
        agent: str = ...,
        kind: Kind | Sequence[Kind] | None = ...,
        tags: Iterable[str] | None = ...,
        limit: int = ...,
        offset: int = ...,
    ) -> builtins.list[Memory]: ...

    def update(self, memory_id: str, *, agent: str | None = ..., **changes: Any) -> Memory: ...

    def forget(self, memory_id: str, *, agent: str | None = ...) -> None: ...


@dataclass(frozen=True, slots=True)
class ServiceTarget:
    """A :class:`PackTarget` made of the services' collaborators (for ``KnowledgeService.seed``)."""

    pipeline: WritePipeline
    recall: Recall
    failure_service: FailureService

    @property
    def failures(self) -> _FailureRecorder:
        """Where failures are recorded."""
        return self.failure_service

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> builtins.list[Memory]:
        """Write memories (redacted, deduplicated, audited)."""
        return self.pipeline.remember_many(items, force=force)

    def list(
        self,
        *,
        agent: str = "default",
        kind: Kind | Sequence[Kind] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Memory]:
        """An agent's memories, newest first."""
        return self.recall.list(agent=agent, kind=kind, tags=tags, limit=limit, offset=offset)

    def update(self, memory_id: str, *, agent: str | None = None, **changes: Any) -> Memory:
        """Change fields of an agent's memory."""
        current = self.recall.owned(memory_id, agent)
        return self.pipeline.update(memory_id, changes, actor=agent or current.agent, current=current)

    def forget(self, memory_id: str, *, agent: str | None = None) -> None:
        """Remove an agent's memory."""
        current = self.recall.owned(memory_id, agent)
        self.pipeline.forget(memory_id, actor=agent or current.agent, current=current)


# -- seeding -------------------------------------------------------------------------------------------------


def _entry_hash(entry: PackPractice | PackError) -> str:
    return hashlib.sha256(json.dumps(entry.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def _metadata(pack: Pack, entry: PackPractice | PackError) -> dict[str, Any]:
    return {
        "source": pack.source,
        "pack": pack.name,
        "pack_version": pack.version,
        "pack_entry": f"{pack.name}/{entry.id}",
        "pack_hash": _entry_hash(entry),
        "title": entry.title if isinstance(entry, PackPractice) else entry.id,
        **({GENERIC_FIX_KEY: True} if isinstance(entry, PackError) and entry.generic else {}),
    }


def _tags(pack: Pack, entry: PackPractice | PackError) -> list[str]:
    role = "best-practice" if isinstance(entry, PackPractice) else "common-error"
    return list(dict.fromkeys([pack.tag, pack.name, role, *entry.tags]))


def _installed(target: PackTarget, pack: Pack, agent: str) -> dict[str, Memory]:
    """The agent's own memories of ``pack`` by entry (``python/module-not-found``)."""
    found: dict[str, Memory] = {}
    offset = 0
    while True:
        page = target.list(agent=agent, kind=PACK_KINDS, tags=[pack.tag], limit=MAX_LIMIT, offset=offset)
        for memory in page:
            entry = memory.metadata.get("pack_entry")
            if memory.agent == agent and isinstance(entry, str) and memory.metadata.get("pack") == pack.name:
                found.setdefault(entry, memory)
        if len(page) < MAX_LIMIT:
            return found
        offset += MAX_LIMIT


def _version(memory: Memory) -> int:
    value = memory.metadata.get("pack_version")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _record_error(target: PackTarget, pack: Pack, entry: PackError, agent: str, visibility: Visibility) -> None:
    target.failures.record(
        entry.error,
        agent=agent,
        context=entry.context,
        solution=entry.fix,
        failed_solutions=entry.failed,
        tags=_tags(pack, entry),
        metadata=_metadata(pack, entry),
        visibility=visibility,
    )


def seed_pack(
    target: PackTarget, name: str | Pack, *, agent: str = "default", visibility: Visibility = "private"
) -> PackReport:
    """Write the knowledge pack ``name`` (or a :class:`Pack`) into ``target`` as ``agent``'s memories.

    ``target`` is an :class:`~engramdb.Engram` (or a :class:`ServiceTarget`). Idempotent:
    a second run at the same version writes nothing; a newer version updates what changed,
    adds what is new and forgets what it dropped (see the module docstring). Returns what
    was done.
    """
    pack = name if isinstance(name, Pack) else load_pack(name)
    installed = _installed(target, pack, agent)
    previous = max((_version(m) for m in installed.values()), default=None)
    added = updated = removed = unchanged = 0
    entries: list[PackPractice | PackError] = [*pack.practices, *pack.errors]
    if previous is not None and previous > pack.version:  # an older pack never undoes a newer one
        return PackReport(
            pack=pack.name,
            version=pack.version,
            agent=agent,
            previous_version=previous,
            added=0,
            updated=0,
            removed=0,
            unchanged=len(entries),
        )
    new_practices: list[dict[str, Any]] = []
    wanted: set[str] = set()
    for entry in entries:
        key = f"{pack.name}/{entry.id}"
        wanted.add(key)
        current = installed.get(key)
        meta = _metadata(pack, entry)
        if current is not None and _version(current) >= pack.version:
            unchanged += 1
            continue
        if current is not None and current.metadata.get("pack_hash") == meta["pack_hash"]:
            # Same content, newer version: only the provenance changes (counted as unchanged).
            target.update(current.id, agent=agent, metadata={**current.metadata, **meta})
            unchanged += 1
            continue
        if isinstance(entry, PackPractice):
            item = {"content": entry.content(), "agent": agent, "kind": "knowledge", "tags": _tags(pack, entry)}
            if current is not None and current.kind == "knowledge":
                target.update(current.id, agent=agent, content=item["content"], tags=item["tags"], metadata=meta)
                updated += 1
            else:
                if current is not None:
                    target.forget(current.id, agent=agent)
                new_practices.append({**item, "metadata": meta, "visibility": visibility})
                added += current is None
                updated += current is not None
            continue
        if current is not None:
            target.forget(current.id, agent=agent)
        _record_error(target, pack, entry, agent, visibility)
        added += current is None
        updated += current is not None
    if new_practices:
        target.remember_many(new_practices)
    for key, memory in installed.items():
        if key not in wanted and _version(memory) < pack.version:
            target.forget(memory.id, agent=agent)
            removed += 1
    return PackReport(
        pack=pack.name,
        version=pack.version,
        agent=agent,
        previous_version=previous,
        added=added,
        updated=updated,
        removed=removed,
        unchanged=unchanged,
    )

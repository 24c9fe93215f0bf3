"""Planning knowledge imports and merges: what to add, what to merge into what (pure).

The facade gathers what the store knows (existing memories with the same ids, the
nearest duplicate of each incoming memory), calls :func:`plan_import` or
:func:`plan_merge`, and writes the resulting :class:`Plan` in one transaction.
Nothing here touches a store, a clock or a model: duplicates are found through a
callback, time is passed in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector: TypeAlias = npt.NDArray[np.float32]
else:
    from engramdb._lazy import numpy as np

from engramdb.errors import ValidationError
from engramdb.knowledge import provenance as rules
from engramdb.knowledge.dedupe import Duplicate
from engramdb.models import NO_MERGE_KINDS, AuditRecord, Change, Memory, RedactionPolicy
from engramdb.privacy.scrub import redact_changes, redact_memory

__all__ = [
    "FindDuplicate",
    "Incoming",
    "Patch",
    "Plan",
    "applied",
    "audit_record",
    "plan_import",
    "plan_merge",
    "redacted",
    "refreshed",
]

#: Finds the stored memory an incoming one nearly duplicates (same agent, kind, visibility), or None.
FindDuplicate: TypeAlias = "Callable[[Memory, Vector], Duplicate | None]"

# Fields a newer copy of the same memory brings along; the counters are joined separately.
_STATE = ("content", "kind", "tags", "metadata", "confidence", "visibility", "redacted")


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """A memory arriving from a file or another agent: as it will be stored, with its vector.

    ``source`` is the memory as its origin knew it (its agent and id are the provenance).
    """

    memory: Memory
    vector: Vector
    source: Memory


@dataclass(frozen=True, slots=True, kw_only=True)
class Patch:
    """Field changes to an existing memory (and its new vector when the content changes)."""

    memory_id: str
    changes: Mapping[str, Any]
    vector: Vector | None = None
    action: str = "merge"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The writes an import or merge makes: memories to add, patches to existing ones, imported history."""

    add: list[Incoming] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)
    history: list[Change] = field(default_factory=list)
    #: (existing memory id, incoming memory, action) for each incoming memory merged into (or refreshing) one.
    folded: list[tuple[str, Incoming, str]] = field(default_factory=list)
    #: Incoming memories already present (same id, nothing newer) or already merged earlier.
    unchanged: int = 0

    @property
    def merged(self) -> int:
        """How many incoming memories were merged into existing ones (or refreshed them)."""
        return len(self.folded)

    @property
    def written(self) -> int:
        """How many incoming memories were added or merged."""
        return len(self.add) + self.merged


def refreshed(existing: Memory, incoming: Memory) -> dict[str, Any]:
    """Changes that bring ``existing`` up to ``incoming``, another copy of the *same* memory (same id).

    The newer copy (by ``updated_at``) wins for content and state. Counters are
    joined, not summed: both copies counted the same events up to where they parted.
    """
    changes: dict[str, Any] = {}
    if incoming.updated_at > existing.updated_at:
        changes = {name: getattr(incoming, name) for name in _STATE}
        changes["metadata"] = dict(incoming.metadata)
    changes["access_count"] = max(existing.access_count, incoming.access_count)
    changes["successes"] = max(existing.successes, incoming.successes)
    changes["attempts"] = max(existing.attempts, incoming.attempts)
    changes["successes"] = min(changes["successes"], changes["attempts"])
    accessed = [t for t in (existing.last_accessed, incoming.last_accessed) if t is not None]
    if accessed:
        changes["last_accessed"] = max(accessed)
    return {k: v for k, v in changes.items() if _differs(getattr(existing, k), v)}


def _differs(old: Any, new: Any) -> bool:
    if isinstance(old, tuple | list) and isinstance(new, tuple | list):
        return tuple(old) != tuple(new)
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return dict(old) != dict(new)
    return bool(old != new)


def applied(memory: Memory, changes: Mapping[str, Any]) -> Memory:
    """``memory`` with field ``changes`` applied (as the store would apply them)."""
    values: dict[str, Any] = {k: (tuple(v) if k in ("tags", "redacted") else v) for k, v in changes.items()}
    return dataclasses.replace(memory, **values)


class _Merger:
    """Accumulates merges so several incoming memories can merge into one target, in order."""

    def __init__(self, plan: Plan, at: datetime) -> None:
        self.plan = plan
        self.at = at
        self.state: dict[str, Memory] = {}
        self.changes: dict[str, dict[str, Any]] = {}
        self.vectors: dict[str, Vector] = {}
        self.actions: dict[str, str] = {}

    def current(self, memory: Memory) -> Memory:
        return self.state.get(memory.id, memory)

    def apply(self, target: Memory, changes: Mapping[str, Any], *, action: str, vector: Vector | None = None) -> None:
        if not changes:
            return
        self.state[target.id] = applied(self.current(target), changes)
        self.changes.setdefault(target.id, {}).update(changes)
        self.actions.setdefault(target.id, action)
        if vector is not None:
            self.vectors[target.id] = vector

    def finish(self) -> None:
        for memory_id, changes in self.changes.items():
            self.plan.patches.append(
                Patch(
                    memory_id=memory_id,
                    changes=changes,
                    vector=self.vectors.get(memory_id),
                    action=self.actions[memory_id],
                )
            )


def plan_import(
    incoming: Sequence[Incoming],
    *,
    existing: Mapping[str, Memory],
    find_duplicate: FindDuplicate | None,
    history: Mapping[str, Sequence[Change]],
    actor: str,
    at: datetime,
) -> Plan:
    """Decide, for each incoming memory of a knowledge file, whether it is added, refreshes, or merges.

    - same id already stored: it must belong to the same agent (else ValidationError:
      the file would take over another agent's memory); it refreshes that memory;
    - a near-duplicate (``find_duplicate``, never for event kinds) of a memory stored
      before this import: statistics merge into it, provenance kept (a second import
      of the same file finds the provenance and changes nothing);
    - otherwise it is added: id, timestamps and statistics as given (the caller
      neutralises what it does not trust), its ``history`` from the file (if any)
      followed by an ``import`` entry.

    Duplicates are looked for only among memories stored before the import, never
    inside the file: a file holds distinct memories, and a round trip keeps them so.
    """
    plan = Plan()
    merger = _Merger(plan, at)
    unchanged = 0
    for item in incoming:
        m = item.memory
        old = existing.get(m.id)
        if old is not None:
            if old.agent != m.agent:
                raise ValidationError(
                    f"memory id {m.id!r} already exists in this store for another agent: importing it "
                    f"as agent {m.agent!r} would take it over"
                )
            current = merger.current(old)
            changes = refreshed(current, m)
            if changes:
                vector = item.vector if "content" in changes else None
                merger.apply(old, changes, action="import", vector=vector)
                plan.folded.append((old.id, item, "import"))
            else:
                unchanged += 1
            continue
        dup = find_duplicate(m, item.vector) if find_duplicate is not None and m.kind not in NO_MERGE_KINDS else None
        if dup is not None:
            current = merger.current(dup.memory)
            if (item.source.agent, item.source.id) in rules.origins(current):
                unchanged += 1  # merged by an earlier import
                continue
            changes = rules.combined(current, item.source, similarity=dup.similarity, at=at)
            merger.apply(dup.memory, changes, action="merge")
            plan.folded.append((dup.memory.id, item, "merge"))
            continue
        plan.add.append(item)
        # The file's history (if trusted and present), then the import itself: never the file's word alone.
        entries = list(history.get(m.id, ()))
        entries.append(Change(seq=0, memory_id=m.id, action="import", at=at, actor=actor, before=None, after=None))
        plan.history.extend(entries)
    merger.finish()
    return dataclasses.replace(plan, unchanged=unchanged)


def plan_merge(
    incoming: Iterable[Incoming],
    *,
    known_origins: set[tuple[str, str]],
    find_duplicate: FindDuplicate,
    at: datetime,
) -> Plan:
    """Decide, for each memory another agent gives, whether it merges into a near-duplicate or is copied.

    ``incoming`` memories are already copies for the receiving agent (new ids, provenance
    in metadata, see :func:`~engramdb.knowledge.provenance.copied`); ``source`` is the original.
    Originals named in ``known_origins`` (provenance found on the receiver's memories)
    were merged or copied before and are skipped, so merging twice changes nothing.
    Event kinds (decisions, failures, episodes, conversations) are always copied:
    each is one piece of evidence.
    """
    plan = Plan()
    merger = _Merger(plan, at)
    unchanged = 0
    seen = set(known_origins)
    for item in incoming:
        origin = (item.source.agent, item.source.id)
        # A copy of a copy points at the first original: that one counts as well.
        first = rules.origins(item.source)
        if origin in seen or first & seen:
            unchanged += 1
            continue
        seen |= first | {origin}
        dup = find_duplicate(item.memory, item.vector) if item.memory.kind not in NO_MERGE_KINDS else None
        if dup is not None:
            current = merger.current(dup.memory)
            merger.apply(
                dup.memory, rules.combined(current, item.source, similarity=dup.similarity, at=at), action="merge"
            )
            plan.folded.append((dup.memory.id, item, "merge"))
        else:
            plan.add.append(item)
    merger.finish()
    return dataclasses.replace(plan, unchanged=unchanged)


def audit_record(action: str, memory_id: str, item: Incoming, at: datetime, detail: Mapping[str, Any]) -> AuditRecord:
    """The audit entry of one imported or merged memory: where it came from, never its content."""
    info = {
        **detail,
        "kind": item.memory.kind,
        "redacted": list(item.memory.redacted),
        "origin_agent": item.source.agent,
        "origin_id": item.source.id,
    }
    return AuditRecord(action=action, agent=item.memory.agent, memory_id=memory_id, at=at, detail=info)


def redacted(
    plan: Plan, *, policy: RedactionPolicy, embed: Callable[[Sequence[str]], Vector], stored: Callable[[str], Memory]
) -> Plan:
    """``plan`` with every added memory and every patch redacted (vectors of changed text computed again).

    The write pipeline applies this to every plan it writes, so no import or merge depends on its caller
    having redacted; ``stored`` reads a patched memory (only when a patch holds something to redact).
    """
    if not policy.enabled:
        return plan
    add = [dataclasses.replace(i, memory=redact_memory(i.memory, policy=policy)) for i in plan.add]
    stale = [k for k, (new, old) in enumerate(zip(add, plan.add, strict=True)) if new.memory is not old.memory]
    if stale:
        vectors = embed([add[k].memory.content for k in stale])
        for row, k in enumerate(stale):
            add[k] = dataclasses.replace(add[k], vector=vectors[row])
    patches = []
    for patch in plan.patches:
        probe = redact_changes(patch.changes, policy=policy)
        probe.pop("redacted", None)
        if probe == dict(patch.changes):
            patches.append(patch)
            continue
        changes = redact_changes(patch.changes, already=stored(patch.memory_id).redacted, policy=policy)
        vector = patch.vector
        if "content" in changes and changes["content"] != patch.changes["content"]:
            vector = embed([changes["content"]])[0]
        patches.append(dataclasses.replace(patch, changes=changes, vector=vector))
    return dataclasses.replace(plan, add=add, patches=patches)

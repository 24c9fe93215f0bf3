"""Keyed facts over time: the current value of a key, and the values it had before.

A keyed memory (``remember(..., key="home")``) is the current value of that key for its agent and
user. A later value of the same key supersedes it: the holder (its id stays, so ``recall_key`` and
links keep working) takes the new value, and the old value is kept as its own memory whose
``valid_until`` says when it stopped being true (from its ``occurred_at`` until then). Current reads
leave such superseded values out (:class:`~engramdb.storage.base.Filter`); a read ``as_of`` a moment
sees what was true then. A value told later but about an earlier time (``at=`` before the holder's)
goes into the past between the values around it, and the current value stays.

The keyed lookups and writes run in one transaction that first locks each (agent, user, key), so
writers of one key in other threads or processes queue and each finds the holder the last one wrote.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from engramdb._keys import key_lock, key_of, key_tag
from engramdb._util import new_id
from engramdb.models import AuditRecord, Memory
from engramdb.storage.base import Filter, Store


class Writer(Protocol):
    """What the keyed writes need of the write pipeline (:class:`~engramdb.pipeline.WritePipeline`)."""

    @property
    def model_id(self) -> str: ...

    def write(self, memories: list[Memory], *, force: bool = False, now: datetime) -> list[Memory]: ...

    def update(
        self,
        memory_id: str,
        changes: Mapping[str, Any],
        *,
        actor: str,
        action: str = "update",
        current: Memory | None = None,
    ) -> Memory: ...

    def redact(self, memory: Memory) -> Memory: ...

    def audit(self, records: Sequence[AuditRecord]) -> None: ...


__all__ = ["KeyedWrites", "Writer", "key_filter", "past_value", "version_at"]

#: (agent, user, key): one key's slot. Users keep their own facts under the same key.
Slot = tuple[str, str | None, str]


def past_value(holder: Memory, *, until: datetime, now: datetime) -> Memory:
    """The superseded value of ``holder`` as a memory of its own, true from its ``occurred_at`` until ``until``.

    It keeps the holder's key (so ``recall_key(..., as_of=...)`` finds it), scope and outcome evidence;
    shares are the holder's, so a shared value's past copy is private (public stays public).
    """
    return dataclasses.replace(
        holder,
        id=new_id(),
        metadata={**holder.metadata, "superseded_by": holder.id},
        # Stored now (its history and audit entries say so); when it was true is occurred_at..valid_until.
        created_at=now,
        updated_at=now,
        last_accessed=None,
        access_count=0,
        visibility="public" if holder.visibility == "public" else "private",
        shared_by=None,
        shared_at=None,
        valid_until=until,
    )


def version_at(versions: Sequence[Memory], moment: datetime) -> Memory | None:
    """The value true at ``moment`` among a key's versions: happened by then and not yet superseded."""
    for m in sorted(versions, key=lambda v: v.occurred_at, reverse=True):
        if m.occurred_at <= moment and (m.valid_until is None or m.valid_until > moment):
            return m
    return None


def key_filter(agent: str, user: str | None, key: str, *, every_version: bool = False) -> Filter:
    """The filter of one key's slot: its current value, or (``every_version``) every value it had."""
    return Filter(agent=agent, tags=(key_tag(key),), include_shared=False, users=(user,), superseded=every_version)


class KeyedWrites:
    """The keyed part of the write pipeline (see the module docstring)."""

    def __init__(self, store: Store, pipeline: Writer) -> None:
        self._store = store
        self._pipeline = pipeline

    def holder(self, agent: str, key: str, user: str | None = None) -> Memory | None:
        """The current memory of ``agent``'s (and ``user``'s) ``key`` (its own, never a shared one), or None."""
        found = [m for m in self._store.memories.list(key_filter(agent, user, key), limit=2) if key_of(m) == key]
        return found[0] if found else None

    def versions(self, agent: str, key: str, user: str | None = None) -> list[Memory]:
        """Every value of the key's slot (current and superseded), oldest event first."""
        flt = key_filter(agent, user, key, every_version=True)
        found = [m for m in self._store.memories.list(flt, limit=10_000) if key_of(m) == key]
        return sorted(found, key=lambda m: m.occurred_at)

    def write(self, memories: list[Memory], *, force: bool, now: datetime) -> list[Memory]:
        """Write keyed ``memories`` (each slot locked first, in one order everywhere); the memory each became."""
        slots = sorted({_slot(m) for m in memories}, key=lambda s: (s[0], s[1] or "", s[1] is not None, s[2]))
        for agent, user, key in slots:  # in one order everywhere: no two writers wait on each other
            self._store.meta.get(key_lock(agent, key, user))
        holders: dict[Slot, str] = {}
        fresh: list[int] = []
        later: list[int] = []
        for pos, memory in enumerate(memories):
            slot = _slot(memory)
            if slot not in holders:
                stored = self.holder(slot[0], slot[2], slot[1])
                if stored is None:
                    holders[slot] = memory.id
                    fresh.append(pos)
                    continue
                holders[slot] = stored.id
            later.append(pos)
        out: dict[int, Memory] = {}
        written = self._pipeline.write([memories[p] for p in fresh], force=force, now=now) if fresh else []
        out.update(zip(fresh, written, strict=True))
        for pos in later:
            out[pos] = self._supersede(holders[_slot(memories[pos])], memories[pos], now=now)
        return [out[p] for p in range(len(memories))]

    def _supersede(self, holder_id: str, memory: Memory, *, now: datetime) -> Memory:
        """``memory`` becomes the key's value from its ``occurred_at`` on; the holder's value moves to the past."""
        pipeline = self._pipeline
        holder = self._store.memories.get(holder_id)
        if holder is None:  # forgotten inside this batch: the new value starts the key again
            return pipeline.write([memory], force=True, now=now)[0]
        memory = pipeline.redact(memory)
        if memory.occurred_at < holder.occurred_at:
            if memory.occurred_at != memory.created_at:
                return self._into_past(memory, now=now)
            # No event time was given: the write is the event, and the last writer's value is current
            # (racing writers took their clocks before they queued for the key's lock).
            memory = dataclasses.replace(memory, occurred_at=holder.occurred_at)
        changes = {
            "content": memory.content,
            "kind": memory.kind,
            "tags": memory.tags,
            "metadata": memory.metadata,
            "visibility": memory.visibility,
            "confidence": memory.confidence,
            "session": memory.session,
        }
        if memory.content != holder.content:
            # A changed value: the old one stays findable for questions about the time it was true.
            pipeline.write([past_value(holder, until=memory.occurred_at, now=now)], force=True, now=now)
            changes["occurred_at"] = memory.occurred_at
        return pipeline.update(holder_id, changes, actor=memory.agent, action="supersede", current=holder)

    def _into_past(self, memory: Memory, *, now: datetime) -> Memory:
        """A value about an earlier time than the current one: kept between the values around its time."""
        key = key_of(memory) or ""
        versions = self.versions(memory.agent, key, memory.user)
        after = [v for v in versions if v.occurred_at > memory.occurred_at]
        before = [v for v in versions if v.occurred_at <= memory.occurred_at]
        until = after[0].occurred_at if after else None
        stored = self._pipeline.write([dataclasses.replace(memory, valid_until=until)], force=True, now=now)[0]
        previous = before[-1] if before else None
        if previous is not None and (previous.valid_until is None or previous.valid_until > memory.occurred_at):
            # The value before it was true only until this one.
            self._store.memories.update(
                previous.id,
                {"valid_until": memory.occurred_at},
                vector=None,
                model_id=self._pipeline.model_id,
                actor=memory.agent,
                at=now,
                action="supersede",
            )
            self._pipeline.audit(
                [
                    AuditRecord(
                        action="supersede",
                        agent=memory.agent,
                        memory_id=previous.id,
                        at=now,
                        detail={"fields": ["valid_until"], "redacted": []},
                    )
                ]
            )
        return stored


def _slot(memory: Memory) -> Slot:
    return (memory.agent, memory.user, key_of(memory) or "")

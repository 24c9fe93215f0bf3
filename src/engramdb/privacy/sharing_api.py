"""The sharing and knowledge export/import/merge part of the :class:`~engramdb.Engram` facade (mixed into it).

The rules live in pure modules next to this one: :mod:`~engramdb.privacy.sharing`
(what a share selects, how provenance and statistics combine),
:mod:`~engramdb.privacy.knowledge` (the file format and its validation) and
:mod:`~engramdb.privacy.transfer` (what an import or merge adds and merges). This
mixin fetches from the store, calls those, and writes through the same hooks as
:meth:`~engramdb.Engram.remember` (redaction, near-duplicate detection, audit),
each operation in one transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import numpy as np

from engramdb import _validate as check
from engramdb._host import FacadeHost
from engramdb._util import new_id, utcnow
from engramdb.errors import NotFound, ValidationError
from engramdb.models import Change, Memory, Share
from engramdb.privacy import knowledge, transfer
from engramdb.privacy import sharing as rules
from engramdb.privacy.audit import AuditRecord
from engramdb.privacy.dedupe import Duplicate, find_duplicate
from engramdb.privacy.transfer import Vector
from engramdb.storage.base import Filter

__all__ = ["SharingAPI", "Target"]

#: Where a knowledge file goes or comes from: a path, or an open binary stream (``-`` on the CLI).
Target = str | os.PathLike[str] | IO[bytes]

_PAGE: Final = 1000
#: Memory ids listed in one export's audit entry (the count is always exact).
_AUDIT_IDS: Final = 100


class SharingAPI(FacadeHost):
    """Mixin of :class:`~engramdb.Engram`: consent-based sharing, and knowledge export, import and merge."""

    if TYPE_CHECKING:
        # The write path's hooks, provided by PrivacyAPI.
        def _redact_memory(self, memory: Memory) -> Memory: ...

        def _stored_candidates(self, memory: Memory, vector: Vector) -> list[tuple[Memory, float]]: ...

        def _audit_records(self, records: Sequence[AuditRecord]) -> None: ...

    # -- sharing ----------------------------------------------------------------------------------------
    def share(
        self,
        memory_ids: str | Iterable[str] | None = None,
        *,
        from_agent: str,
        to_agent: str = "*",
        tag: str | None = None,
        pattern: str | None = None,
    ) -> int:
        """Share some of ``from_agent``'s own memories with ``to_agent`` (``"*"``: every agent).

        Choose exactly one of: ``memory_ids`` (each must be ``from_agent``'s own, else
        :class:`~engramdb.errors.NotFound` and nothing is shared), ``tag`` (every memory of
        ``from_agent`` carrying it, as of now), or ``pattern`` (the ``failure`` memories of
        ``from_agent`` in that failure pattern, an id from :meth:`failure_patterns`).
        Nothing is copied: recipients read the originals, with ``shared_by`` and
        ``shared_at`` set, until :meth:`unshare`. Returns how many memories are now
        shared with ``to_agent``.
        """
        owner, recipient, ids = self._selected(
            memory_ids, from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern
        )
        now = utcnow()
        with self.store.atomic():
            if ids:
                self.store.share(ids, from_agent=owner, to_agent=recipient, at=now)
            self._audit_records([_record("share", owner, i, now, to_agent=recipient) for i in ids])
        return len(ids)

    def unshare(
        self,
        memory_ids: str | Iterable[str] | None = None,
        *,
        from_agent: str,
        to_agent: str = "*",
        tag: str | None = None,
        pattern: str | None = None,
    ) -> int:
        """Revoke shares made by :meth:`share` (same selectors); ``to_agent="*"`` revokes every recipient.

        Revoking one agent leaves a share with everyone (``"*"``) in place, and a memory
        whose visibility is ``public`` stays readable by all until its visibility changes.
        Copies made earlier by :meth:`merge_knowledge` are the receiver's own and stay.
        Returns how many memories lost a share.
        """
        owner, recipient, ids = self._selected(
            memory_ids, from_agent=from_agent, to_agent=to_agent, tag=tag, pattern=pattern
        )
        now = utcnow()
        with self.store.atomic():
            revoked = self.store.unshare(ids, from_agent=owner, to_agent=recipient, at=now) if ids else 0
            self._audit_records([_record("unshare", owner, i, now, to_agent=recipient) for i in ids])
        return revoked

    def shares(self, *, from_agent: str | None = None, to_agent: str | None = None) -> list[Share]:
        """Shares in force, oldest first: those ``from_agent`` made, and/or those reaching ``to_agent``.

        Shares reaching an agent include shares with everyone (``to_agent == "*"``)
        made by other agents. With neither argument: every share in the store.
        """
        owner = check.agent_name(from_agent, what="from_agent") if from_agent is not None else None
        if to_agent is None:
            return self.store.list_shares(from_agent=owner)
        if to_agent == rules.ALL_AGENTS:
            return self.store.list_shares(from_agent=owner, to_agent=rules.ALL_AGENTS)
        reader = check.agent_name(to_agent, what="to_agent")
        everyone = self.store.list_shares(from_agent=owner, to_agent=rules.ALL_AGENTS)
        found = self.store.list_shares(from_agent=owner, to_agent=reader) + [
            s for s in everyone if s.from_agent != reader
        ]
        return sorted(found, key=lambda s: (s.shared_at, s.memory_id, s.to_agent))

    def _selected(
        self,
        memory_ids: str | Iterable[str] | None,
        *,
        from_agent: str,
        to_agent: str,
        tag: str | None,
        pattern: str | None,
    ) -> tuple[str, str, list[str]]:
        """Validate a share request; return (owner, recipient, ids of the owner's memories it selects)."""
        owner = check.agent_name(from_agent, what="from_agent")
        recipient = rules.recipient(to_agent, from_agent=owner)
        chosen = rules.selection(memory_ids, tag=tag, pattern=pattern)
        if chosen.memory_ids is not None:
            found = self.store.get_many(chosen.memory_ids, Filter(agent=owner, include_shared=False))
            missing = [i for i in chosen.memory_ids if i not in found]
            if missing:
                # The same answer whether the id does not exist or belongs to someone else.
                raise NotFound(f"no memory {missing[0]!r} owned by agent {owner!r}; nothing was shared or unshared")
            return owner, recipient, list(chosen.memory_ids)
        if chosen.tag is not None:
            flt = Filter(agent=owner, include_shared=False, tags=(chosen.tag,))
            return owner, recipient, [m.id for m in self._all(flt)]
        assert chosen.pattern is not None  # selection() guarantees exactly one selector
        return owner, recipient, self._pattern_ids(chosen.pattern, owner)

    def _pattern_ids(self, pattern: str, owner: str) -> list[str]:
        """The owner's own ``failure`` memories in failure pattern ``pattern``.

        The pattern is found as :meth:`failure_patterns` shows it to the owner (its
        id, or a unique prefix of at least 4 characters); only the occurrences the
        owner recorded are selected, never ones others shared with it.
        """
        from engramdb.learning import failures

        visible = self._all(Filter(agent=owner, kinds=("failure",)))
        groups = failures.group_occurrences(failures.occurrence_from_memory(m) for m in visible)
        group = failures.find_pattern(groups, pattern, agent=owner, not_found_note="; nothing was shared or unshared")
        owned = {m.id for m in visible if m.agent == owner}
        return [o.id for o in group if o.id in owned]

    def _all(self, flt: Filter) -> list[Memory]:
        """Every memory matching ``flt``, oldest first."""
        out = [m for page in self._pages(flt, size=_PAGE) for m in page]
        out.reverse()
        return out

    # -- export -----------------------------------------------------------------------------------------
    def export_knowledge(
        self,
        path: Target,
        *,
        agent: str,
        tag: str | None = None,
        with_vectors: bool = False,
        with_history: bool = False,
    ) -> int:
        """Write ``agent``'s own memories (those carrying ``tag``, if given) to a knowledge file; return how many.

        Only the agent's own memories are exported, never those others shared with it.
        The file (see :mod:`engramdb.privacy.knowledge`) keeps ids, timestamps, statistics,
        tags, metadata and visibility; ``with_vectors`` adds the vectors, ``with_history``
        each memory's change history. A file path is written atomically: a failed export
        leaves no partial file behind.
        """
        owner = check.agent_name(agent)
        clean_tag = _tag(tag) if tag is not None else None
        memories = self._all(Filter(agent=owner, include_shared=False, tags=(clean_tag,) if clean_tag else None))
        vectors = self._stored_vectors([m.id for m in memories]) if with_vectors else {}

        def records() -> Iterator[dict[str, Any]]:
            for m in memories:
                yield knowledge.encode_memory(m, vectors.get(m.id))
            if with_history:
                for m in memories:
                    for change in self.store.history(m.id):
                        yield knowledge.encode_change(change)

        now = utcnow()
        with _opened_for_writing(path) as out:
            knowledge.write_bundle(
                out,
                records(),
                model=self.embedder.model_id,
                dim=self.embedder.dim if vectors else None,
                exported_at=now,
                agent=owner,
                tag=clean_tag,
            )
        ids = [m.id for m in memories]
        self._audit_records(
            [
                _record(
                    "export",
                    owner,
                    None,
                    now,
                    file=_name(path),
                    tag=clean_tag,
                    count=len(ids),
                    ids=ids[:_AUDIT_IDS],
                    vectors=bool(vectors),
                    history=with_history,
                )
            ]
        )
        return len(memories)

    def _stored_vectors(self, memory_ids: list[str]) -> dict[str, Vector]:
        """Stored vectors of the current model, fetched in pages (ids without one are left out)."""
        found: dict[str, Vector] = {}
        for start in range(0, len(memory_ids), _PAGE):
            found.update(self.store.get_vectors(memory_ids[start : start + _PAGE], model_id=self.embedder.model_id))
        return found

    # -- import -----------------------------------------------------------------------------------------
    def import_knowledge(self, path: Target, *, agent: str | None = None, dry_run: bool = False) -> int:
        """Import a knowledge file; return how many of its memories were added or merged.

        The whole file is validated first (format, version, checksum, counts, every value)
        and checked against the store (an id that belongs to another agent's memory is
        refused); any problem raises ValidationError with one line naming it, and nothing
        is written. Then everything is written in one transaction, through the same
        pipeline as :meth:`remember`: secrets are redacted, and a memory that nearly
        duplicates one stored before the import merges into it (statistics combined,
        provenance kept; importing the same file again changes nothing). Ids, timestamps
        and statistics are kept; ``agent`` makes every imported memory that agent's.
        Vectors in the file are used when they come from this store's model, otherwise
        the memories are embedded. ``dry_run`` validates and counts without writing.
        """
        owner = check.agent_name(agent) if agent is not None else None
        source = _name(path)
        with _opened_for_reading(path) as stream:
            bundle = knowledge.read_bundle(stream, source=source)
        now = utcnow()
        existing = self._existing([e.memory.id for e in bundle.entries])
        for entry in bundle.entries:
            # Checked again by the plan; caught here before anything is embedded.
            old = existing.get(entry.memory.id)
            if old is not None and old.agent != (owner or entry.memory.agent):
                raise ValidationError(
                    f"{source}: memory id {entry.memory.id!r} already exists in this store for another agent; "
                    "nothing was imported"
                )
        incoming = self._incoming(bundle, owner=owner)
        history: dict[str, list[Change]] = {}
        for change in bundle.changes:
            history.setdefault(change.memory_id, []).append(change)
        actor = owner or "import"
        try:
            plan = transfer.plan_import(
                incoming,
                existing=existing,
                find_duplicate=self._duplicate_finder() if self.settings.dedupe else None,
                history=history,
                actor=actor,
                at=now,
            )
        except ValidationError as exc:
            raise ValidationError(f"{source}: {exc}; nothing was imported") from None
        if not dry_run:
            self._write_plan(plan, actor=actor, at=now, added_action="import", detail={"file": source})
        return plan.written

    def _incoming(self, bundle: knowledge.Bundle, *, owner: str | None) -> list[transfer.Incoming]:
        """The file's memories as they will be stored (owner, redaction), each with a vector of this model."""
        header = bundle.header
        usable = header.model == self.embedder.model_id and header.dim == self.embedder.dim
        stored = []
        for entry in bundle.entries:
            memory = entry.memory
            if owner is not None and owner != memory.agent:
                memory = _replace(memory, agent=owner)
            stored.append(self._redact_memory(memory))
        vectors: list[Vector | None] = [
            e.vector if usable and m.content == e.memory.content else None
            for e, m in zip(bundle.entries, stored, strict=True)
        ]
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            made = self.embedder.embed([stored[i].content for i in missing])
            for row, i in enumerate(missing):
                vectors[i] = made[row]
        out = []
        for entry, memory, vector in zip(bundle.entries, stored, vectors, strict=True):
            assert vector is not None  # every gap was embedded above
            # Provenance names the memory as its origin knew it: its own agent (and id).
            origin = _replace(memory, agent=entry.memory.agent)
            out.append(transfer.Incoming(memory=memory, vector=vector, source=origin))
        return out

    def _existing(self, memory_ids: list[str]) -> dict[str, Memory]:
        """Stored memories with these ids, whoever owns them (an import must not take one over)."""
        found: dict[str, Memory] = {}
        for start in range(0, len(memory_ids), _PAGE):
            found.update(self.store.get_many(memory_ids[start : start + _PAGE]))
        return found

    def _duplicate_finder(self) -> transfer.FindDuplicate:
        """The write path's near-duplicate rule, against the memories stored so far."""
        threshold = self.settings.dedupe_threshold

        def find(memory: Memory, vector: Vector) -> Duplicate | None:
            return find_duplicate(
                memory.content,
                agent=memory.agent,
                kind=memory.kind,
                visibility=memory.visibility,
                candidates=self._stored_candidates(memory, vector),
                threshold=threshold,
            )

        return find

    def _write_plan(
        self, plan: transfer.Plan, *, actor: str, at: datetime, added_action: str, detail: dict[str, Any]
    ) -> None:
        """Every write of an import or merge, and its audit entries, in one transaction."""
        audit: list[AuditRecord] = []
        with self.store.atomic():
            by_agent: dict[str, list[transfer.Incoming]] = {}
            for item in plan.add:
                by_agent.setdefault(item.memory.agent, []).append(item)
            for agent, items in by_agent.items():
                vectors = np.stack([i.vector for i in items]).astype(np.float32)
                self.store.add([i.memory for i in items], vectors, model_id=self.embedder.model_id, actor=agent)
            self.store.import_history(plan.history)
            for patch in plan.patches:
                vector = None if patch.vector is None else np.asarray([patch.vector], dtype=np.float32)
                self.store.update(
                    patch.memory_id,
                    patch.changes,
                    vector=vector,
                    model_id=self.embedder.model_id,
                    actor=actor,
                    at=at,
                    action=patch.action,
                )
            for item in plan.add:
                audit.append(_transfer_record(added_action, item.memory.id, item, at, detail))
            for target, item, action in plan.folded:
                audit.append(_transfer_record(action, target, item, at, detail))
            self._audit_records(audit)

    # -- merge ------------------------------------------------------------------------------------------
    def merge_knowledge(self, *, from_agent: str, to_agent: str, tag: str | None = None) -> int:
        """Copy what ``from_agent`` can give (under ``tag``, if given) into ``to_agent``'s own memories.

        Only memories ``to_agent`` may already read are given: ``from_agent``'s own
        that it shared with ``to_agent`` (or made public), and those shared with it that
        ``to_agent`` may read too; never a private memory that was not shared, never
        ``to_agent``'s own. A given memory that nearly duplicates one of ``to_agent``'s
        merges into it (successes, attempts and access counts summed, confidence the
        higher); others are copied as new private memories with their statistics.
        Either way ``metadata`` keeps the provenance (origin agent and id), and merging
        the same memories again changes nothing. Returns how many were copied or merged.
        """
        giver = check.agent_name(from_agent, what="from_agent")
        taker = check.agent_name(to_agent, what="to_agent")
        if giver == taker:
            raise ValidationError("from_agent and to_agent must be different agents")
        clean_tag = _tag(tag) if tag is not None else None
        offered = [
            m for m in self._all(Filter(agent=giver, tags=(clean_tag,) if clean_tag else None)) if m.agent != taker
        ]
        # Consent: only what the giver (or a third agent) has shared with the taker, or made public.
        readable = set(self._visible([m.id for m in offered], taker))
        given = [m for m in offered if m.id in readable]
        known: set[tuple[str, str]] = set()
        for m in self._all(Filter(agent=taker, include_shared=False)):
            known |= rules.origins(m)
        now = utcnow()
        vectors = self._stored_vectors([m.id for m in given])
        missing = [m for m in given if m.id not in vectors]
        if missing:
            made = self.embedder.embed([m.content for m in missing])
            vectors.update({m.id: made[row] for row, m in enumerate(missing)})
        incoming = [
            transfer.Incoming(
                memory=self._redact_memory(rules.copied(m, to_agent=taker, new_id=new_id(), at=now)),
                vector=vectors[m.id],
                source=m,
            )
            for m in given
        ]
        plan = transfer.plan_merge(incoming, known_origins=known, find_duplicate=self._duplicate_finder(), at=now)
        self._write_plan(plan, actor=taker, at=now, added_action="merge", detail={"from_agent": giver})
        return plan.written

    def _visible(self, memory_ids: list[str], agent: str) -> list[str]:
        """Which of ``memory_ids`` ``agent`` may read."""
        out: list[str] = []
        for start in range(0, len(memory_ids), _PAGE):
            out += self.store.get_many(memory_ids[start : start + _PAGE], Filter(agent=agent)).keys()
        return out


def _record(action: str, agent: str, memory_id: str | None, at: datetime, **detail: Any) -> AuditRecord:
    return AuditRecord(action=action, agent=agent, memory_id=memory_id, at=at, detail=detail)


def _transfer_record(
    action: str, memory_id: str, item: transfer.Incoming, at: datetime, detail: dict[str, Any]
) -> AuditRecord:
    """The audit entry of one imported or merged memory: where it came from, never its content."""
    info = {
        **detail,
        "kind": item.memory.kind,
        "redacted": list(item.memory.redacted),
        "origin_agent": item.source.agent,
        "origin_id": item.source.id,
    }
    return AuditRecord(action=action, agent=item.memory.agent, memory_id=memory_id, at=at, detail=info)


def _replace(memory: Memory, **changes: Any) -> Memory:
    return dataclasses.replace(memory, **changes)


def _tag(tag: object) -> str:
    tags = check.tags([tag])
    if len(tags) != 1:
        raise ValidationError(f"tag must be a non-empty string, not {tag!r}")
    return tags[0]


def _name(target: Target) -> str:
    if isinstance(target, str | os.PathLike):
        return os.fspath(target)
    return str(getattr(target, "name", "<stream>"))


@contextlib.contextmanager
def _opened_for_reading(target: Target) -> Iterator[IO[bytes]]:
    """A binary stream to read from: the given one, or the named file opened (and closed afterwards)."""
    if not isinstance(target, str | os.PathLike):
        yield target
        return
    with open(target, "rb") as stream:
        yield stream


@contextlib.contextmanager
def _opened_for_writing(target: Target) -> Iterator[IO[bytes]]:
    """A binary stream to write to; for a path, a temporary file renamed into place on success."""
    if not isinstance(target, str | os.PathLike):
        yield target
        target.flush()
        return
    final = Path(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

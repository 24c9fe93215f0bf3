"""The privacy part of the :class:`~engramdb.Engram` facade (mixed into it): redaction, deduplication,
retention and the audit trail.

The rules live in pure modules next to this one: :mod:`~engramdb.privacy.redact`,
:mod:`~engramdb.privacy.dedupe`, :mod:`~engramdb.privacy.retention` and
:mod:`~engramdb.privacy.audit`. This mixin gives the facade's write and read paths
their hooks (``_redact_memory``, ``_redact_changes``, ``_plan_dedupe``, ``_audit``)
and adds the public methods ``audit_log``, ``verify_audit``, ``check_audit``,
``retention_policy`` and ``cleanup``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb._host import FacadeHost
from engramdb._util import parse_ts, utcnow
from engramdb.errors import CorruptStoreError, NotFound, ValidationError
from engramdb.models import NO_MERGE_KINDS, AuditEvent, Memory
from engramdb.privacy import audit as chain
from engramdb.privacy.dedupe import batch_neighbours, find_duplicate, merge_changes
from engramdb.privacy.redact import RedactionPolicy, redact_text, redact_value
from engramdb.privacy.retention import Expiry, RetentionPolicy, evaluate, load_policy
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["DedupePlan", "PrivacyAPI", "write_record"]

#: Actor recorded for deletions made by the retention policy.
RETENTION_ACTOR: Final = "retention"
#: Meta key: when the retention policy last ran on a schedule (ISO 8601).
_RETENTION_META: Final = "retention_last_run"
#: Candidates per new memory checked for near-duplicates.
_DEDUPE_CANDIDATES: Final = 5
#: Memory ids listed in one read's audit entry (the count is always exact).
_AUDIT_IDS: Final = 100
_PAGE: Final = 1000


@dataclass(slots=True)
class DedupePlan:
    """What a batch write does: memories to add (with their vector rows) and merges into stored ones."""

    new: list[Memory] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    #: (stored memory id, incoming memory, similarity), in input order.
    merges: list[tuple[str, Memory, float]] = field(default_factory=list)
    #: For each input item, the id of the memory it ended up in.
    targets: list[str] = field(default_factory=list)


def write_record(
    action: str, memory: Memory, *, at: datetime, memory_id: str | None = None, similarity: float | None = None
) -> chain.AuditRecord:
    """The audit entry of a write: kind and redacted kinds, never content."""
    detail: dict[str, Any] = {"kind": memory.kind, "redacted": list(memory.redacted)}
    if similarity is not None:
        detail["similarity"] = round(similarity, 4)
    return chain.AuditRecord(action=action, agent=memory.agent, memory_id=memory_id or memory.id, at=at, detail=detail)


def _parse_anchor(text: str) -> tuple[int, str]:
    seq, sep, digest = text.strip().partition(":")
    if not sep or not seq.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValidationError(f"expected head must look like SEQ:HASH (64 hex digits), not {text!r}")
    return int(seq), digest


class PrivacyAPI(FacadeHost):
    """Redaction, deduplication, retention and audit of :class:`~engramdb.Engram`."""

    # -- redaction --------------------------------------------------------------------------------------
    @property
    def redaction_policy(self) -> RedactionPolicy:
        """What this store redacts before storage (settings ``redact_secrets``, ``redact_pii``, ``pii_region``)."""
        return RedactionPolicy(
            secrets=self.settings.redact_secrets,
            pii=self.settings.redact_pii,
            phone_region=self.settings.pii_region,
        )

    def _redact_memory(self, memory: Memory) -> Memory:
        """``memory`` with secrets replaced in its content, tags and metadata (keys and values, at any depth)."""
        policy = self.redaction_policy
        if not policy.enabled:
            return memory
        content = redact_text(memory.content, policy=policy)
        tags = [redact_text(t, policy=policy) for t in memory.tags]
        metadata, meta_kinds = redact_value(dict(memory.metadata), policy=policy)
        kinds = set(content.kinds) | set(meta_kinds) | {k for t in tags for k in t.kinds}
        if not kinds:
            return memory
        return dataclasses.replace(
            memory,
            content=content.text,
            tags=tuple(dict.fromkeys(t.text for t in tags)),
            metadata=metadata,
            redacted=tuple(sorted(kinds | set(memory.redacted))),
        )

    def _redact_changes(self, changes: Mapping[str, Any], current: Memory) -> dict[str, Any]:
        """Validated update ``changes`` with secrets replaced; adds ``redacted`` when anything was."""
        policy = self.redaction_policy
        out = dict(changes)
        if not policy.enabled:
            return out
        kinds: set[str] = set()
        if "content" in out:
            result = redact_text(out["content"], policy=policy)
            out["content"], kinds = result.text, kinds | set(result.kinds)
        if "tags" in out:
            redacted_tags = [redact_text(t, policy=policy) for t in out["tags"]]
            out["tags"] = tuple(dict.fromkeys(t.text for t in redacted_tags))
            kinds |= {k for t in redacted_tags for k in t.kinds}
        if "metadata" in out:
            out["metadata"], meta_kinds = redact_value(out["metadata"], policy=policy)
            kinds |= set(meta_kinds)
        if kinds - set(current.redacted):
            out["redacted"] = tuple(sorted(kinds | set(current.redacted)))
        return out

    # -- deduplication ----------------------------------------------------------------------------------
    def _plan_dedupe(self, memories: Sequence[Memory], vectors: npt.NDArray[np.float32], *, force: bool) -> DedupePlan:
        """Decide, for each new (redacted, embedded) memory, whether it is added or merged into another.

        A near-duplicate is looked for among the stored memories of the same agent
        and kind, and among the earlier items of the same batch.
        """
        plan = DedupePlan()
        enabled = self.settings.dedupe and not force
        threshold = self.settings.dedupe_threshold
        batch: dict[str, int] = {}  # position in plan.new of each new memory, by id
        neighbours = batch_neighbours(memories, vectors, threshold=threshold) if enabled else []
        for row, memory in enumerate(memories):
            duplicate = None
            if enabled and memory.kind not in NO_MERGE_KINDS:
                # Earlier rows of the batch that stayed new (the others were folded into a memory already).
                earlier = [
                    (plan.new[batch[memories[j].id]], similarity)
                    for j, similarity in neighbours[row]
                    if memories[j].id in batch
                ]
                duplicate = find_duplicate(
                    memory.content,
                    agent=memory.agent,
                    kind=memory.kind,
                    visibility=memory.visibility,
                    candidates=[*earlier, *self._stored_candidates(memory, vectors[row])],
                    threshold=threshold,
                )
            if duplicate is None:
                batch[memory.id] = len(plan.new)
                plan.new.append(memory)
                plan.rows.append(row)
                plan.targets.append(memory.id)
                continue
            target = duplicate.memory.id
            plan.targets.append(target)
            if target in batch:
                # A duplicate inside the batch: fold it into the pending new memory before it is stored.
                pending = plan.new[batch[target]]
                changes = merge_changes(pending, memory, similarity=duplicate.similarity, at=memory.created_at)
                plan.new[batch[target]] = dataclasses.replace(pending, **changes)
            else:
                plan.merges.append((target, memory, duplicate.similarity))
        return plan

    def _stored_candidates(self, memory: Memory, vector: npt.NDArray[np.float32]) -> list[tuple[Memory, float]]:
        flt = Filter(agent=memory.agent, kinds=(memory.kind,), include_shared=False)
        found = self.store.vector_candidates(vector, flt, limit=_DEDUPE_CANDIDATES)
        if not found:
            return []
        stored = self.store.get_many([c.id for c in found], flt)
        return [(stored[c.id], c.score) for c in found if c.id in stored]

    def _apply_merges(self, plan: DedupePlan, *, model_id: str) -> dict[str, Memory]:
        """Fold the planned merges into the stored memories (inside the caller's transaction)."""
        merged: dict[str, Memory] = {}
        for target, incoming, similarity in plan.merges:
            current = merged.get(target) or self.store.get(target)
            if current is None:  # forgotten since the plan was made: store it as new after all
                raise NotFound(f"memory {target!r} disappeared while merging into it; retry the write")
            changes = merge_changes(current, incoming, similarity=similarity, at=incoming.created_at)
            merged[target] = self.store.update(
                target, changes, vector=None, model_id=model_id, actor=incoming.agent, at=incoming.created_at,
                action="merge",
            )  # fmt: skip
        return merged

    # -- audit trail ------------------------------------------------------------------------------------
    def _audit(
        self,
        action: str,
        *,
        agent: str | None,
        memory_id: str | None = None,
        detail: Mapping[str, Any] | None = None,
        at: datetime | None = None,
    ) -> None:
        """Append one audit entry (no-op when the ``audit`` setting is off). Never put content in ``detail``."""
        self._audit_records(
            [chain.AuditRecord(action=action, agent=agent, memory_id=memory_id, at=at or utcnow(), detail=detail or {})]
        )

    def _audit_records(self, records: Sequence[chain.AuditRecord]) -> None:
        if self.settings.audit and records:
            self.store.append_audit(records)

    def _audit_read(self, action: str, *, agent: str | None, ids: Sequence[str], **detail: Any) -> None:
        """One entry per read call (not per result): the ids read, capped, and their count."""
        if not self.settings.audit:
            return
        info: dict[str, Any] = {k: v for k, v in detail.items() if v is not None}
        info["count"] = len(ids)
        info["ids"] = list(ids[:_AUDIT_IDS])
        self._audit(action, agent=agent, memory_id=ids[0] if len(ids) == 1 else None, detail=info)

    def audit_log(
        self,
        *,
        agent: str | None = None,
        limit: int = 100,
        memory_id: str | None = None,
        action: str | None = None,
    ) -> list[AuditEvent]:
        """Audit entries, newest first: who did what (``action``) to which memory, and when.

        ``agent``, ``memory_id`` and ``action`` narrow the entries to those.
        """
        if agent is not None:
            agent = check.agent_name(agent)
        return self.store.audit_events(
            agent=agent, memory_id=memory_id, action=action, limit=check.limit(limit), newest_first=True
        )

    def check_audit(self, *, expect: str | None = None) -> chain.Verification:
        """Verify the whole audit chain; says where it broke, and the head to keep elsewhere.

        ``expect`` is a head kept outside the store from an earlier check, as
        ``"SEQ:HASH"``: that entry must still be there, unchanged. Only such an outside
        anchor catches someone who rewrote the whole file, or cut entries off the end
        and fixed the stored head to match.
        """
        anchor = _parse_anchor(expect) if expect is not None else None
        try:
            head = self.store.audit_head()
            return chain.verify(self._all_audit_events(), head=head, anchor=anchor)
        except CorruptStoreError as exc:
            return chain.Verification(ok=False, checked=0, reason=str(exc))

    def verify_audit(self) -> bool:
        """False if any audit entry was edited, removed, reordered or inserted (see :meth:`check_audit`)."""
        return self.check_audit().ok

    def _all_audit_events(self) -> Iterator[AuditEvent]:
        after = 0
        while True:
            page = self.store.audit_events(after_seq=after, limit=_PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].seq

    # -- retention --------------------------------------------------------------------------------------
    def retention_policy(self) -> RetentionPolicy:
        """The policy in force: the ``retention_file`` setting, else ``<home>/retention.toml`` (empty if absent).

        For a store in a folder, ``<folder>/retention.toml`` is looked for before the home one.
        """
        if self.settings.retention_file is not None:
            return load_policy(self.settings.retention_file)
        location = getattr(self, "location", None)
        if isinstance(location, str) and location != ":memory:" and "://" not in location:
            local = Path(location) / "retention.toml"
            if local.is_file():
                return load_policy(local)
        return load_policy(self.settings.home / "retention.toml")

    def cleanup(
        self,
        *,
        dry_run: bool = False,
        agent: str | None = None,
        policy: RetentionPolicy | None = None,
        now: datetime | None = None,
    ) -> list[Expiry]:
        """Apply the retention policy: forget every memory it expires, for good; returns what went (or would).

        ``dry_run`` only reports. ``agent`` limits it to that agent's own memories.
        Deletion is the thorough forget: content, keyword index, vector, shares and
        history contents (a tombstone stays), and each is recorded in the audit trail.
        """
        policy = self.retention_policy() if policy is None else policy
        if agent is not None:
            agent = check.agent_name(agent)
        now = utcnow() if now is None else now
        if policy.empty:
            return []
        expired = evaluate(self._owned_memories(agent), policy, now=now)
        if dry_run:
            return expired
        gone: list[Expiry] = []
        for expiry in expired:
            try:
                self.store.delete(expiry.memory_id, actor=RETENTION_ACTOR, at=now)
            except NotFound:
                continue  # forgotten meanwhile (another process): nothing left to remove
            gone.append(expiry)
            self._audit(
                "retention",
                agent=expiry.agent,
                memory_id=expiry.memory_id,
                detail={"kind": expiry.kind, "reason": expiry.reason},
                at=now,
            )
        return gone

    def _owned_memories(self, agent: str | None) -> Iterator[Memory]:
        """Every memory (of ``agent`` only, if given), page by page."""
        for page in self._pages(Filter(agent=agent, include_shared=False), size=_PAGE):
            yield from (m for m in page if agent is None or m.agent == agent)

    def _scheduled_cleanup(self) -> None:
        """Run :meth:`cleanup` when a store opens, at most once per ``retention_interval_hours`` (0: never)."""
        hours = self.settings.retention_interval_hours
        if hours <= 0:
            return
        now = utcnow()
        last = self.store.get_meta(_RETENTION_META)
        try:
            when = parse_ts(last)
        except ValueError:
            when = None
        if when is not None and now - when < timedelta(hours=hours):
            return
        self.cleanup(now=now)
        self.store.set_meta(_RETENTION_META, now.isoformat())

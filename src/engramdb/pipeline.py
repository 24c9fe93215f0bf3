"""The write pipeline: the one path every write takes (remember, batches, update, forget, import, merge).

In order: validate, redact (secrets, and personal data if enabled, in content, tags and metadata), look for
near-duplicates (unless forced, never for event kinds), embed, then write the rows, vectors, history and audit
entries in one ``store.atomic()`` transaction.

With background vectors (setting ``vectors = "background"``, a :class:`~engramdb.vectorqueue.VectorQueue` given), a
memory that is not checked for near-duplicates is written without its vector and queued after the commit; the worker
adds the vector later. A memory that is checked (dedupe on, not forced, a mergeable kind, no key), and every memory
of its agent, kind and visibility in the same batch (its possible in-batch twins), is still embedded before the
write: merging needs the vector, and a merge decided later could not return the merged memory to the caller. Writes
inside a caller's open transaction embed too (the queue must only see committed rows), except a keyed write's own
transaction (the key's lock): its vectors are queued once it commits. The rules are pure modules
(:mod:`~engramdb._validate`, :mod:`~engramdb.privacy.redact`, :mod:`~engramdb.knowledge.dedupe`,
:mod:`~engramdb.knowledge.transfer`); this class applies them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np

    from engramdb.storage.base import Vectors as Vector
else:
    from engramdb._lazy import numpy as np

from engramdb import _validate as check
from engramdb._keys import KEY_TAG_PREFIX, key_of, key_tag
from engramdb._util import new_id, utcnow
from engramdb.config import Settings
from engramdb.embeddings.base import Embedder
from engramdb.errors import NotFound, ValidationError
from engramdb.facts import KeyedWrites
from engramdb.knowledge.dedupe import DedupePlan, merge_changes, plan_batch
from engramdb.models import NO_MERGE_KINDS, AuditRecord, Kind, Memory, RedactionPolicy, Visibility
from engramdb.privacy.scrub import redact_changes, redact_memory
from engramdb.retrieval.context import link_turns
from engramdb.retrieval.timeref import TOLD_KEY, with_told_time
from engramdb.storage.base import Filter, Store
from engramdb.transfers import TransferWrites
from engramdb.vectorqueue import VectorQueue

__all__ = ["KEY_TAG_PREFIX", "UPDATABLE", "WritePipeline", "key_of", "key_tag", "write_record"]


#: Fields a caller may change with ``update``.
UPDATABLE: Final = frozenset({"content", "tags", "metadata", "kind", "confidence", "visibility"})
#: Candidates per new memory checked for near-duplicates.
_DEDUPE_CANDIDATES: Final = 5
#: Fields of a new memory given as a mapping (``remember_many``).
_ITEM_FIELDS: Final = frozenset(
    {"content", "agent", "kind", "tags", "metadata", "visibility", "confidence", "key", "user", "session", "at"}
    | {"successes", "attempts"}  # outcome counters a migration brings along (a Chroma pattern's usage_count)
)


#: The check of each field ``update`` accepts (the public ones, and the outcome counters learning keeps).
_CHECKS: Final[dict[str, Callable[[Any], Any]]] = {
    "content": check.content,
    "tags": check.tags,
    "metadata": check.metadata,
    "kind": check.kind,
    "confidence": check.confidence,
    "visibility": check.visibility,
    "successes": lambda v: check.non_negative(v, what="successes"),
    "attempts": lambda v: check.non_negative(v, what="attempts"),
    # Internal: a keyed fact's new value moves into its thread and time (engramdb.facts), never a caller's update.
    "session": lambda v: check.scope(v, what="session"),
    "occurred_at": lambda v: check.event_time(v, what="occurred_at"),
}


def _group(memory: Memory) -> tuple[str, str]:
    """The near-duplicate checks that may find ``memory`` (its agent's of its kind): the vector queue's group."""
    return (memory.agent, memory.kind)


def _dedupe_filter(memory: Memory) -> Filter:
    """The stored memories a new ``memory`` may be a near-duplicate of: its agent's own of its kind."""
    # A memory of no user and no thread looks among all of the agent's (a cheaper search); whether a
    # candidate's scope matches is find_duplicate's test, so nothing is ever merged across users.
    scoped = memory.user is not None or memory.session is not None
    users, sessions = ((memory.user,), (memory.session,)) if scoped else (None, None)
    return Filter(agent=memory.agent, kinds=(memory.kind,), include_shared=False, users=users, sessions=sessions)


def _checked(memory: Memory) -> bool:
    """Whether a write (with dedupe on) looks for ``memory``'s near-duplicates: not an event, not a keyed fact."""
    return memory.kind not in NO_MERGE_KINDS and key_of(memory) is None


def _told_anew(current: Memory, clean: dict[str, Any]) -> dict[str, Any]:
    """``clean`` (an update's changes to ``current``) with the told time of the new words: derived from the text, it
    goes stale when the text changes; metadata given in the update that sets the key keeps the caller's value."""
    content = clean.get("content", current.content)
    given = "metadata" in clean and TOLD_KEY in clean["metadata"]
    base = clean.get("metadata", current.metadata)
    if not given:
        base = {k: v for k, v in base.items() if k != TOLD_KEY}
    metadata = with_told_time(base, content, said=current.occurred_at)
    if metadata == current.metadata:
        return {k: v for k, v in clean.items() if k != "metadata"}
    return {**clean, "metadata": metadata}


def write_record(
    action: str, memory: Memory, *, at: datetime, memory_id: str | None = None, similarity: float | None = None
) -> AuditRecord:
    """The audit entry of a write: kind and redacted kinds, never content."""
    detail: dict[str, Any] = {"kind": memory.kind, "redacted": list(memory.redacted)}
    if similarity is not None:
        detail["similarity"] = round(similarity, 4)
    return AuditRecord(action=action, agent=memory.agent, memory_id=memory_id or memory.id, at=at, detail=detail)


class WritePipeline:
    """Validates, redacts, dedupes, embeds and writes memories, each write and its audit in one transaction."""

    def __init__(
        self, store: Store, embedder: Embedder, settings: Settings, *, vectors: VectorQueue | None = None
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._settings = settings
        self._vectors = vectors
        self._local = threading.local()  # .keyed: this thread is inside a keyed write's transaction
        # Seconds the last bulk write took (without its wait for searches): what the next one may give way for.
        self._bulk_seconds = 0.0
        self._keyed = KeyedWrites(store, self)
        #: Imports and merges: planned (redacted, embedded, deduplicated) and written here, never by the caller.
        self.transfers = TransferWrites(
            store,
            settings,
            policy=lambda: self.redaction,
            embed=self.embed,
            candidates=self._stored_candidates,
            stored=self._stored,
            audit=self.audit,
            model_id=lambda: self._embedder.model_id,
        )

    @property
    def settings(self) -> Settings:
        """The settings of the store this pipeline writes to."""
        return self._settings

    @property
    def redaction(self) -> RedactionPolicy:
        """What is redacted before storage (settings ``redact_secrets``, ``redact_pii``, ``pii_region``)."""
        s = self._settings
        return RedactionPolicy(secrets=s.redact_secrets, pii=s.redact_pii, phone_region=s.pii_region)

    # -- new memories -------------------------------------------------------------------------------------
    def new_memory(self, item: Mapping[str, Any], *, now: datetime) -> Memory:
        """A validated (not yet redacted) new memory from ``item``'s fields; ValidationError if any is bad."""
        if not isinstance(item, Mapping):
            raise ValidationError(f"each item must be a mapping, not {type(item).__name__}")
        unknown = [str(k) for k in item if k not in _ITEM_FIELDS]
        if unknown:
            raise ValidationError(f"unknown field(s) {', '.join(sorted(check.shown(k) for k in unknown))}")
        conf = item.get("confidence")
        agent = item.get("agent")
        tags = check.tags(item.get("tags"))
        metadata = check.metadata(item.get("metadata"))
        if item.get("key") is not None:
            key = check.key(item["key"])
            tags = tuple(dict.fromkeys((*tags, key_tag(key))))
            if len(tags) > check.MAX_TAGS:
                raise ValidationError(f"tags has too many entries with the key's tag (the limit is {check.MAX_TAGS})")
            metadata = check.metadata({**metadata, "key": key})
        at = check.event_time(item.get("at"))
        occurred = now if at is None else at
        content = check.content(item.get("content"))
        # "yesterday" said on the 15th: the event of the 14th, found once here rather than at every search.
        metadata = with_told_time(metadata, content, said=occurred)
        successes = check.non_negative(item.get("successes", 0.0), what="successes")
        attempts = check.non_negative(item.get("attempts", 0.0), what="attempts")
        if successes > attempts:
            raise ValidationError(f"successes ({successes:g}) exceed attempts ({attempts:g})")
        return Memory(
            id=new_id(),
            user=check.scope(item.get("user"), what="user"),
            session=check.scope(item.get("session"), what="session"),
            occurred_at=occurred,
            agent=check.agent_or_default(agent, self._settings),
            kind=check.kind(item.get("kind", "knowledge")),
            content=content,
            tags=tags,
            metadata=metadata,
            created_at=now,
            updated_at=now,
            confidence=0.5 if conf is None else check.confidence(conf),
            visibility=check.visibility(item.get("visibility", "private")),
            successes=successes,
            attempts=attempts,
        )

    def remember(
        self,
        content: str,
        *,
        agent: str | None = None,
        kind: Kind = "knowledge",
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        visibility: Visibility = "private",
        confidence: float | None = None,
        force: bool = False,
        key: str | None = None,
        user: str | None = None,
        session: str | None = None,
        at: datetime | str | None = None,
    ) -> Memory:
        """Store one memory; returns it as stored (or the memory it merged into, or the keyed one it superseded)."""
        now = utcnow()
        item = {
            "user": user,
            "session": session,
            "at": at,
            "content": content,
            "agent": agent,
            "kind": kind,
            "tags": tags,
            "metadata": metadata,
            "visibility": visibility,
            "confidence": confidence,
            "key": key,
        }
        force = check.flag(force, what="force")
        return self._keyed_write([self.new_memory(item, now=now)], force=force, now=now)[0]

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> list[Memory]:
        """Store many memories in one transaction; one bad item rejects all (the error names its position).

        Items with a ``key`` supersede the stored memory of that agent and key (or an
        earlier item of the batch with the same key), see :meth:`_keyed_write`.
        """
        force = check.flag(force, what="force")
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise ValidationError(f"items must be a list of mappings, not {type(items).__name__}")
        began = time.monotonic()
        now = utcnow()
        memories: list[Memory] = []
        for i, item in enumerate(items):
            try:
                memories.append(self.new_memory(item, now=now))
            except ValidationError as exc:
                raise ValidationError(f"item {i}: {exc}") from exc
        if len(memories) < 2:
            return self._keyed_write(link_turns(memories), force=force, now=now)
        # A bulk write gives way to searches at work for a share of its previous one's time (PostgreSQL). The
        # memories were made when the call came, as without a wait.
        waited = self._store.give_way(self._bulk_seconds)
        try:
            return self._keyed_write(link_turns(memories), force=force, now=now)
        finally:
            self._bulk_seconds = time.monotonic() - began - waited

    def keyed(self, agent: str, key: str, user: str | None = None) -> Memory | None:
        """The current memory of ``agent``'s (and ``user``'s) ``key`` (its own, never a shared one), or None."""
        return self._keyed.holder(agent, key, user)

    def _keyed_write(self, memories: list[Memory], *, force: bool, now: datetime) -> list[Memory]:
        """:meth:`write`, except that a keyed memory whose key is taken supersedes the holder
        (:mod:`engramdb.facts`: the old value stays, with the time it stopped being true)."""
        keyed = [pos for pos, m in enumerate(memories) if key_of(m) is not None]
        if not keyed:
            return self.write(memories, force=force, now=now)
        # The others are written first, outside the lock: checking them for near-duplicates searches,
        # which cannot run inside a transaction.
        plain = [pos for pos, m in enumerate(memories) if key_of(m) is None]
        out = dict(zip(plain, self.write([memories[p] for p in plain], force=force, now=now), strict=True))
        with self._store.atomic():
            self._local.keyed = True
            try:
                written = self._keyed.write([memories[p] for p in keyed], force=force, now=now)
            finally:
                self._local.keyed = False
        out.update(zip(keyed, written, strict=True))
        return [out[p] for p in range(len(memories))]

    @property
    def model_id(self) -> str:
        """The embedding model of the vectors this pipeline writes."""
        return self._embedder.model_id

    def write(
        self,
        memories: list[Memory],
        *,
        force: bool = False,
        now: datetime,
        audit_action: str = "create",
        extra_audit: Sequence[AuditRecord] = (),
    ) -> list[Memory]:
        """Redact, dedupe (unless ``force``; never for NO_MERGE_KINDS), embed and store validated new memories.

        Rows, vectors, merges, history and audit entries (``extra_audit`` too) are written
        in one transaction. Returns, for each input, the memory as stored (the merged one
        for a near-duplicate).
        """
        if not memories:
            if extra_audit:
                with self._store.atomic():
                    self.audit(extra_audit)
            return []
        # Redaction comes before anything is embedded, indexed or written.
        memories = [self.redact(m) for m in memories]
        later = self._deferred(memories, force=force)
        now_rows = [row for row in range(len(memories)) if row not in later]
        if self._vectors is not None and now_rows and self._settings.dedupe and not force:
            # The duplicate check reads stored vectors (and waits for the queue there): wait before embedding,
            # so this embed does not compete with the worker's. Only for the memories it could find: those of the
            # checked rows' agents and kinds (not the conversation turns queued before, which no check reads).
            self._vectors.settle(rebuild=False, groups={_group(m) for m in memories if _checked(m)})
        vectors = self._vectors_now(memories, now_rows)
        plan = self._plan_dedupe(memories, vectors, force=force)
        model_id = self._embedder.model_id
        with self._store.atomic():
            # One add for the whole batch, in input order (insertion order is list order): rows left to the
            # background worker are marked rather than written in separate runs (each run cost a statement
            # per table, 50 adds for a mixed batch of 50 on PostgreSQL).
            if plan.new:
                self._store.memories.add(
                    plan.new,
                    vectors[plan.rows],
                    model_id=model_id,
                    actor=None,
                    unvectored=frozenset(pos for pos, row in enumerate(plan.rows) if row in later),
                )
            merged = self._apply_merges(plan, model_id=model_id)
            self.audit(
                [
                    *(write_record(audit_action, m, at=now) for m in plan.new),
                    *(write_record("merge", m, at=now, memory_id=t, similarity=s) for t, m, s in plan.merges),
                    *extra_audit,
                ]
            )
        if self._vectors is not None and later:
            queued = [m for m, row in zip(plan.new, plan.rows, strict=True) if row in later]
            self._vectors.put([(m.id, m.content) for m in queued], groups=[_group(m) for m in queued])
        final = {m.id: m for m in plan.new} | merged
        return [final[target] for target in plan.targets]

    def _background(self) -> bool:
        """Whether vectors may be left to the background worker now: not inside a caller's transaction
        (a later write in it may need them to find near-duplicates), except the keyed write's own, whose
        held vectors are queued once it commits."""
        if self._vectors is None:
            return False
        return not self._vectors.in_transaction() or getattr(self._local, "keyed", False)

    def _deferred(self, memories: Sequence[Memory], *, force: bool) -> set[int]:
        """Rows of a batch whose vector the worker computes: none in sync mode; else every row except the
        rows checked for near-duplicates and the rows of the same agent, kind and visibility (their twins)."""
        if not self._background():
            return set()
        enabled = self._settings.dedupe and not force
        checked = {(m.agent, m.kind, m.visibility) for m in memories if enabled and _checked(m)}
        return {row for row, m in enumerate(memories) if (m.agent, m.kind, m.visibility) not in checked}

    def _vectors_now(self, memories: Sequence[Memory], rows: Sequence[int]) -> Vector:
        """Vectors of ``rows`` embedded now, in a matrix of every row (zeros for deferred rows, which no
        near-duplicate check reads: their agent/kind/visibility group has no checked row)."""
        if len(rows) == len(memories):
            return self.embed([m.content for m in memories])
        if not rows:
            return np.zeros((len(memories), 1), dtype=np.float32)
        made = self.embed([memories[r].content for r in rows])
        out = np.zeros((len(memories), made.shape[1]), dtype=np.float32)
        out[np.asarray(rows)] = made
        return out

    # -- changes ------------------------------------------------------------------------------------------
    def update(
        self,
        memory_id: str,
        changes: Mapping[str, Any],
        *,
        actor: str,
        action: str = "update",
        current: Memory | None = None,
    ) -> Memory:
        """Validate and redact field ``changes``, re-embed if the content changed; store + audit in one transaction.

        Changes equal to the stored values are dropped; with none left, nothing is
        written and the memory is returned unchanged. ``current`` (the stored memory,
        if the caller has it) saves a read.
        """
        unknown = set(changes) - set(_CHECKS)
        if unknown:
            raise ValidationError(
                f"cannot update {', '.join(sorted(unknown))} (updatable: {', '.join(sorted(UPDATABLE))})"
            )
        if not changes:
            raise ValidationError("nothing to update")
        clean = {name: _CHECKS[name](value) for name, value in changes.items()}
        if current is None:
            current = self._stored(memory_id)
        key = key_of(current)
        if key is not None:
            # A keyed memory stays keyed: its tag and metadata entry survive any change.
            if "tags" in clean:
                clean["tags"] = tuple(dict.fromkeys((*clean["tags"], key_tag(key))))
                if len(clean["tags"]) > check.MAX_TAGS:
                    raise ValidationError(
                        f"tags has too many entries with the key's tag (the limit is {check.MAX_TAGS})"
                    )
            if "metadata" in clean:
                clean["metadata"] = {**clean["metadata"], "key": key}
        clean = redact_changes(clean, already=current.redacted, policy=self.redaction)
        clean = {k: v for k, v in clean.items() if getattr(current, k) != v}
        if "content" in clean or "metadata" in clean:
            clean = _told_anew(current, clean)
        if not clean:
            return current
        # In background mode a changed text loses its old vector in the update (the store drops it) and is queued.
        later = "content" in clean and self._background()
        vector = self.embed([clean["content"]]) if "content" in clean and not later else None
        at = utcnow()
        with self._store.atomic():
            updated = self._store.memories.update(
                memory_id, clean, vector=vector, model_id=self._embedder.model_id, actor=actor, at=at, action=action
            )
            detail = {"fields": sorted(set(clean) - {"redacted"}), "redacted": list(clean.get("redacted", ()))}
            self.audit([AuditRecord(action=action, agent=actor, memory_id=memory_id, at=at, detail=detail)])
        if self._vectors is not None and "kind" in clean:
            self._vectors.ungroup()  # its vector may be queued under its old kind: every check waits for it
        if later and self._vectors is not None:
            self._vectors.put([(updated.id, updated.content)], groups=[_group(updated)])
        return updated

    def forget(
        self,
        memory_id: str,
        *,
        actor: str,
        action: str = "forget",
        detail: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        current: Memory | None = None,
    ) -> None:
        """Remove a memory for good (content, index, vector; history keeps a tombstone) and audit it, atomically.

        NotFound if it does not exist. ``action`` and ``detail`` name the audit entry
        (retention records ``"retention"`` with its reason); by default ``{"kind": ...}``.
        """
        if current is None:
            current = self._stored(memory_id)
        at = utcnow() if at is None else at
        info = dict(detail) if detail is not None else {"kind": current.kind}
        with self._store.atomic():
            self._store.memories.delete(memory_id, actor=actor, at=at)
            self.audit([AuditRecord(action=action, agent=current.agent, memory_id=memory_id, at=at, detail=info)])

    def forget_all(self, flt: Filter, *, actor: str, reason: str) -> int:
        """Forget every memory matching ``flt`` (each with its ``forget`` audit entry), one transaction per page.

        Returns how many. A failure part-way leaves the pages before it forgotten and the rest intact.
        """
        done = 0
        while True:
            page = self._store.memories.list(flt, limit=check.PAGE_SIZE, offset=0)
            if not page:
                return done
            at = utcnow()
            with self._store.atomic():
                for memory in page:
                    self._store.memories.delete(memory.id, actor=actor, at=at)
                self.audit(
                    [
                        AuditRecord(
                            action="forget",
                            agent=memory.agent,
                            memory_id=memory.id,
                            at=at,
                            detail={"kind": memory.kind, "reason": reason},
                        )
                        for memory in page
                    ]
                )
            done += len(page)

    def adjust(
        self,
        memory_ids: Sequence[str],
        flt: Filter,
        *,
        changes: Callable[[Memory], Mapping[str, Any]],
        actor: str,
        at: datetime,
        action: str,
        detail: Mapping[str, Any],
    ) -> list[Memory]:
        """Fields no caller may set (counters) moved by ``changes`` of each memory as stored, each change audited.

        Read, change and write in one transaction, so no concurrent writer's change is lost (threads here,
        other processes through the store's write lock); the content is unchanged, so nothing is embedded.
        """
        model_id = self._embedder.model_id
        with self._store.atomic():
            current = self._store.memories.get_many(list(memory_ids), flt)
            out = [
                self._store.memories.update(
                    i, changes(current[i]), vector=None, model_id=model_id, actor=actor, at=at, action=action
                )
                for i in memory_ids
            ]
            self.audit(
                [AuditRecord(action=action, agent=actor, memory_id=i, at=at, detail=dict(detail)) for i in memory_ids]
            )
        return out

    # -- building blocks ----------------------------------------------------------------------------------
    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction for a service's several pipeline calls (and share rows): all or nothing."""
        return self._store.atomic()

    def audit(self, records: Sequence[AuditRecord]) -> None:
        """Append audit entries (inside the caller's transaction, if any); a no-op when auditing is off."""
        if self._settings.audit and records:
            self._store.audit.append(records)

    def embed(self, texts: Sequence[str]) -> Vector:
        """Unit-norm vectors of ``texts`` from this store's model."""
        return self._embedder.embed(list(texts))

    def redact(self, memory: Memory) -> Memory:
        """``memory`` with secrets replaced in its content, tags and metadata (the same object if none)."""
        return redact_memory(memory, policy=self.redaction)

    def _stored_candidates(self, memory: Memory, vector: Vector) -> list[tuple[Memory, float]]:
        """The stored memories of the same agent and kind nearest to ``vector`` (dedupe lookup), with cosines."""
        return self._stored_candidates_many([memory], vector.reshape(1, -1))[0]

    def _stored_candidates_many(self, memories: Sequence[Memory], vectors: Vector) -> list[list[tuple[Memory, float]]]:
        """:meth:`_stored_candidates` of each memory: one vector statement and one fetch for them all."""
        if not memories:
            return []
        found = self._store.search.vector_candidates_many(
            [(vector, _dedupe_filter(m)) for m, vector in zip(memories, vectors, strict=True)],
            limit=_DEDUPE_CANDIDATES,
            near=self._settings.dedupe_threshold,
        )
        ids = list(dict.fromkeys(c.id for cands in found for c in cands))
        # Each candidate passed its memory's filter in the search; find_duplicate tests agent, kind and scope again.
        stored = self._store.memories.get_many(ids, None) if ids else {}
        return [[(stored[c.id], c.score) for c in cands if c.id in stored] for cands in found]

    def _stored(self, memory_id: str) -> Memory:
        memory = self._store.memories.get(check.memory_id(memory_id))
        if memory is None:
            raise NotFound(f"no memory with id {memory_id!r}")
        return memory

    def _plan_dedupe(self, memories: Sequence[Memory], vectors: Vector, *, force: bool) -> DedupePlan:
        """:func:`~engramdb.knowledge.dedupe.plan_batch` over the stored candidates of the rows it checks."""
        enabled = self._settings.dedupe and not force
        checked = [r for r, m in enumerate(memories) if enabled and _checked(m)]
        # The stored candidates do not depend on the batch's own decisions: looked up first, all at once.
        stored = dict(zip(checked, self._stored_candidates_many([memories[r] for r in checked], vectors[checked]),
                          strict=True))  # fmt: skip
        return plan_batch(memories, vectors, stored=stored, threshold=self._settings.dedupe_threshold)

    def _apply_merges(self, plan: DedupePlan, *, model_id: str) -> dict[str, Memory]:
        """Fold the planned merges into the stored memories (inside the caller's transaction)."""
        merged: dict[str, Memory] = {}
        for target, incoming, similarity in plan.merges:
            current = merged.get(target) or self._store.memories.get(target)
            if current is None:
                raise NotFound(f"memory {target!r} disappeared while merging into it; retry the write")
            changes = merge_changes(current, incoming, similarity=similarity, at=incoming.created_at)
            merged[target] = self._store.memories.update(
                target, changes, vector=None, model_id=model_id, actor=incoming.agent, at=incoming.created_at,
                action="merge",
            )  # fmt: skip
        return merged

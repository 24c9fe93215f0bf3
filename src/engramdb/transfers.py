"""Knowledge arriving whole (``mem.knowledge.import_file`` and ``merge``): planned and written by the pipeline.

The knowledge service says what arrives (each memory as it will be stored, before redaction; the vector its
origin gave, if it trusts one; the memory as its origin knew it). Here, inside the write path, each is redacted,
embedded when it has no vector or redaction changed its text, checked for near-duplicates by the write path's
own rule, planned (:func:`~engramdb.knowledge.transfer.plan_import` / ``plan_merge``), and written with its
history and audit entries in one transaction. :meth:`TransferWrites.apply` redacts what a plan adds once more,
so a plan built anywhere else is never trusted either. Held by :class:`~engramdb.pipeline.WritePipeline` as
``pipeline.transfers``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.knowledge import transfer
from engramdb.knowledge.dedupe import Duplicate, find_duplicate
from engramdb.models import AuditRecord, Memory, RedactionPolicy
from engramdb.privacy.scrub import redact_memory

if TYPE_CHECKING:
    import numpy as np

    from engramdb.config import Settings
    from engramdb.models import Change
    from engramdb.storage.base import Store
    from engramdb.storage.base import Vectors as Vector
else:
    from engramdb._lazy import numpy as np

__all__ = ["Arrival", "TransferWrites"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """One memory arriving: ``memory`` as it will be stored (not yet redacted), ``vector`` of that text when the
    caller has one it trusts (else None: embedded here), ``source`` the memory as its origin knew it."""

    memory: Memory
    vector: Vector | None
    source: Memory


class TransferWrites:
    """Plans and writes imports and merges for one pipeline (its store, settings, embedder and dedupe lookup)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        policy: Callable[[], RedactionPolicy],
        embed: Callable[[Sequence[str]], Vector],
        candidates: Callable[[Memory, Vector], list[tuple[Memory, float]]],
        stored: Callable[[str], Memory],
        audit: Callable[[Sequence[AuditRecord]], None],
        model_id: Callable[[], str],
    ) -> None:
        self._store = store
        self._settings = settings
        self._policy = policy
        self._embed = embed
        self._candidates = candidates
        self._stored = stored
        self._audit = audit
        self._model_id = model_id

    # -- plans ----------------------------------------------------------------------------------------------
    def plan_import(
        self,
        arrivals: Sequence[Arrival],
        *,
        existing: Mapping[str, Memory],
        history: Mapping[str, Sequence[Change]],
        actor: str,
        at: datetime,
    ) -> transfer.Plan:
        """What importing ``arrivals`` writes (see :func:`~engramdb.knowledge.transfer.plan_import`)."""
        find = self._find_duplicate if self._settings.dedupe else None
        incoming = self._incoming(arrivals)
        return transfer.plan_import(
            incoming, existing=existing, find_duplicate=find, history=history, actor=actor, at=at
        )

    def plan_merge(
        self, arrivals: Sequence[Arrival], *, known_origins: set[tuple[str, str]], at: datetime
    ) -> transfer.Plan:
        """What merging ``arrivals`` writes (see :func:`~engramdb.knowledge.transfer.plan_merge`)."""
        incoming = self._incoming(arrivals)
        return transfer.plan_merge(incoming, known_origins=known_origins, find_duplicate=self._find_duplicate, at=at)

    def _incoming(self, arrivals: Sequence[Arrival]) -> list[transfer.Incoming]:
        policy = self._policy()
        stored = [redact_memory(a.memory, policy=policy) for a in arrivals]
        vectors: list[Vector | None] = [
            a.vector if a.vector is not None and m.content == a.memory.content else None
            for a, m in zip(arrivals, stored, strict=True)
        ]
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            made = self._embed([stored[i].content for i in missing])
            for row, i in enumerate(missing):
                vectors[i] = made[row]
        out = []
        for a, m, v in zip(arrivals, stored, vectors, strict=True):
            assert v is not None  # every gap was embedded above
            out.append(transfer.Incoming(memory=m, vector=v, source=a.source))
        return out

    def _find_duplicate(self, memory: Memory, vector: Vector) -> Duplicate | None:
        """The write path's near-duplicate rule, against the memories stored so far."""
        return find_duplicate(
            memory.content,
            agent=memory.agent,
            kind=memory.kind,
            visibility=memory.visibility,
            candidates=self._candidates(memory, vector),
            threshold=self._settings.dedupe_threshold,
            user=memory.user,
            session=memory.session,
        )

    # -- writing --------------------------------------------------------------------------------------------
    def apply(
        self, plan: transfer.Plan, *, actor: str, at: datetime, added_action: str, detail: Mapping[str, Any]
    ) -> None:
        """Every write of an import or merge plan (adds, history, patches) and its audit entries, in one transaction.

        The plan is not trusted to be redacted: what redaction still changes is redacted here, and embedded anew.
        """
        plan = transfer.redacted(plan, policy=self._policy(), embed=self._embed, stored=self._stored)
        model_id = self._model_id()
        with self._store.atomic():
            by_agent: dict[str, list[transfer.Incoming]] = {}
            for item in plan.add:
                by_agent.setdefault(item.memory.agent, []).append(item)
            for agent, items in by_agent.items():
                vectors = np.stack([i.vector for i in items]).astype(np.float32)
                self._store.memories.add([i.memory for i in items], vectors, model_id=model_id, actor=agent)
            self._store.memories.import_history(plan.history)
            for patch in plan.patches:
                vector = None if patch.vector is None else np.asarray([patch.vector], dtype=np.float32)
                self._store.memories.update(
                    patch.memory_id,
                    patch.changes,
                    vector=vector,
                    model_id=model_id,
                    actor=actor,
                    at=at,
                    action=patch.action,
                )
            records = [transfer.audit_record(added_action, i.memory.id, i, at, detail) for i in plan.add]
            records += [transfer.audit_record(action, target, i, at, detail) for target, i, action in plan.folded]
            self._audit(records)

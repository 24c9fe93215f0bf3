"""The :class:`Engram` facade: one object that wires storage, embeddings and retrieval."""

from __future__ import annotations

import builtins
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from engramdb import _validate as check
from engramdb._util import new_id, utcnow
from engramdb.config import Settings, load_settings
from engramdb.embeddings import count_tokens, make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.errors import ModelMismatchError, NotFound, ValidationError
from engramdb.learning.api import LearningAPI
from engramdb.learning.failures_api import FailuresAPI
from engramdb.models import Change, Hit, Memory
from engramdb.privacy.api import PrivacyAPI, write_record
from engramdb.privacy.sharing_api import SharingAPI
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import RankingWeights
from engramdb.shortterm import SessionContext
from engramdb.storage import open_store
from engramdb.storage.base import Filter, Store

__all__ = ["Engram"]

Progress = Callable[[int, int], None]

_UPDATABLE = frozenset({"content", "tags", "metadata", "kind", "confidence", "visibility"})


class Engram(LearningAPI, FailuresAPI, PrivacyAPI, SharingAPI):
    """A memory store for agents: remember, search, update, forget, and learn from outcomes.

    ``Engram()`` opens the embedded store at ``$ENGRAM_HOME`` (else ``~/.engram``);
    ``Engram("dir")`` one at that folder; ``Engram(":memory:")`` an ephemeral one.
    One instance is safe to share across threads; use it as a context manager
    or call :meth:`close`.
    """

    def __init__(
        self,
        location: str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        weights: RankingWeights | None = None,
        progress: Progress | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings.replace(**overrides) if settings is not None else load_settings(**overrides)
        self.location = os.fspath(location) if location is not None else str(self.settings.home)
        self.embedder: Embedder = embedder if embedder is not None else make_embedder(self.settings)
        self.store: Store = open_store(self.location, settings=self.settings)
        try:
            self._check_model(progress)
            self._scheduled_cleanup()
        except BaseException:
            self.store.close()
            raise
        self._searcher = HybridSearcher(self.store, self.embedder, weights=weights)
        self._sessions: dict[str, SessionContext] = {}
        self._lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Close the store. The instance must not be used afterwards."""
        self._searcher.close()
        self.store.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Engram({self.location!r}, model={self.embedder.model_id!r})"

    # -- embedding model --------------------------------------------------------------------
    def _check_model(self, progress: Progress | None) -> None:
        stored = self.store.get_meta("model_id")
        current = self.embedder.model_id
        if stored is None:
            self.store.set_meta("model_id", current)
            return
        if stored == current and self.store.count_vectors_not_from(current) == 0:
            return
        if self.settings.on_model_mismatch == "reembed":
            self.reembed(progress=progress)
            return
        pending = self.store.count_vectors_not_from(current)
        raise ModelMismatchError(
            f"the store at {self.location} holds vectors from model {stored!r} but this engram embeds with "
            f"{current!r}: open it with on_model_mismatch='reembed' (CLI: engram reembed) to re-embed "
            f"{pending} memories, or use the original model"
        )

    def reembed(self, *, progress: Progress | None = None) -> int:
        """Re-embed every memory whose vector is missing or from another model; returns how many.

        Resumable: an interrupted run leaves finished batches in place and the next run
        continues with the rest. Shows a progress bar on an interactive terminal unless
        ``progress`` is given.
        """
        current = self.embedder.model_id
        total = self.store.count_vectors_not_from(current)
        report = progress if progress is not None else _terminal_progress(total)
        done = 0
        for batch in self.store.iter_missing_vectors(current, batch=self.settings.embed_batch_size * 4):
            ids = [i for i, _ in batch]
            vectors = self.embedder.embed([text for _, text in batch])
            self.store.set_vectors(ids, vectors, model_id=current)
            done += len(ids)
            report(done, total)
        self.store.set_meta("model_id", current)
        return done

    # -- writes -----------------------------------------------------------------------------
    def remember(
        self,
        content: str,
        *,
        agent: str = "default",
        kind: str = "knowledge",
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        visibility: str = "private",
        confidence: float | None = None,
        force: bool = False,
    ) -> Memory:
        """Store one memory and return it as stored (secrets replaced by placeholders, see ``redacted``).

        A near-duplicate of a memory of the same agent and kind is merged into that
        one, which is returned; ``force=True`` adds it as a new memory regardless.
        """
        now = utcnow()
        item = {
            "content": content,
            "agent": agent,
            "kind": kind,
            "tags": tags if isinstance(tags, str) else list(tags),
            "metadata": metadata,
            "visibility": visibility,
            "confidence": confidence,
        }
        return self._store_new([self._new_memory(item, now=now)], force=force, now=now)[0]

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> list[Memory]:
        """Store many memories in one batch: embedded together, written in one transaction.

        Every item is validated before anything is embedded or written; one bad item
        rejects the whole batch and the error names its position. Then, in order:
        secrets (and, if enabled, personal data) in content, tags and metadata are
        replaced by typed placeholders; near-duplicates of stored memories (or of
        earlier items) of the same agent and kind are merged into them unless
        ``force``; the rest are embedded and stored; every write is audited. Returns,
        for each item, the memory as stored (the merged one for a duplicate).
        """
        now = utcnow()
        memories: list[Memory] = []
        for i, item in enumerate(items):
            try:
                memories.append(self._new_memory(item, now=now))
            except ValidationError as exc:
                raise ValidationError(f"item {i}: {exc}") from exc
        return self._store_new(memories, force=force, now=now)

    def _store_new(self, memories: builtins.list[Memory], *, force: bool, now: datetime) -> builtins.list[Memory]:
        """Redact, dedupe, embed, store and audit validated new memories (one transaction)."""
        if not memories:
            return []
        # Redaction comes before anything is embedded, indexed or written.
        memories = [self._redact_memory(m) for m in memories]
        vectors = self.embedder.embed([m.content for m in memories])
        plan = self._plan_dedupe(memories, vectors, force=force)
        model_id = self.embedder.model_id
        with self.store.atomic():
            if plan.new:
                self.store.add(plan.new, vectors[plan.rows], model_id=model_id, actor=plan.new[0].agent)
            merged = self._apply_merges(plan, model_id=model_id)
            self._audit_records(
                [
                    *(write_record("create", m, at=now) for m in plan.new),
                    *(write_record("merge", m, at=now, memory_id=t, similarity=s) for t, m, s in plan.merges),
                ]
            )
        final = {m.id: m for m in plan.new} | merged
        return [final[target] for target in plan.targets]

    def _new_memory(self, item: Mapping[str, Any], *, now: datetime) -> Memory:
        if not isinstance(item, Mapping):
            raise ValidationError(f"each item must be a mapping, not {type(item).__name__}")
        unknown = set(item) - {"content", "agent", "kind", "tags", "metadata", "visibility", "confidence"}
        if unknown:
            raise ValidationError(f"unknown field(s) {', '.join(sorted(unknown))}")
        conf = item.get("confidence")
        return Memory(
            id=new_id(),
            agent=check.agent_name(item.get("agent", "default")),
            kind=check.kind(item.get("kind", "knowledge")),
            content=check.content(item.get("content")),
            tags=check.tags(item.get("tags")),
            metadata=check.metadata(item.get("metadata")),
            created_at=now,
            updated_at=now,
            confidence=0.5 if conf is None else check.confidence(conf),
            visibility=check.visibility(item.get("visibility", "private")),
        )

    def update(self, memory_id: str, *, agent: str | None = None, **changes: Any) -> Memory:
        """Change fields of a memory (content, tags, metadata, kind, confidence, visibility).

        With ``agent`` given, only that agent's own memory can be changed. The old
        values go to :meth:`history`. Changing content re-embeds it.
        """
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise ValidationError(
                f"cannot update {', '.join(sorted(unknown))} (updatable: {', '.join(sorted(_UPDATABLE))})"
            )
        if not changes:
            raise ValidationError("nothing to update")
        current = self._owned(memory_id, agent)
        clean: dict[str, Any] = {}
        for field, value in changes.items():
            validator: Callable[[Any], Any] = getattr(check, field)
            clean[field] = validator(value)
        clean = self._redact_changes(clean, current)
        clean = {k: v for k, v in clean.items() if getattr(current, k) != v}
        if not clean:
            return current
        vector = self.embedder.embed([clean["content"]]) if "content" in clean else None
        actor, at = agent or current.agent, utcnow()
        with self.store.atomic():
            updated = self.store.update(
                memory_id, clean, vector=vector, model_id=self.embedder.model_id, actor=actor, at=at
            )
            self._audit(
                "update",
                agent=actor,
                memory_id=memory_id,
                detail={"fields": sorted(set(clean) - {"redacted"}), "redacted": list(clean.get("redacted", ()))},
                at=at,
            )
        return updated

    def forget(self, memory_id: str, *, agent: str | None = None) -> None:
        """Remove a memory for good: content, keyword index, vector; history keeps a tombstone."""
        current = self._owned(memory_id, agent)
        actor, at = agent or current.agent, utcnow()
        self.store.delete(memory_id, actor=actor, at=at)
        self._audit("forget", agent=actor, memory_id=memory_id, detail={"kind": current.kind}, at=at)

    def _owned(self, memory_id: str, agent: str | None) -> Memory:
        memory = self._get(memory_id, agent)
        if agent is not None and memory.agent != agent:
            # Shared with the agent, but not theirs to change: as invisible as a private one.
            raise NotFound(f"no memory {memory_id!r} owned by agent {agent!r}")
        return memory

    # -- reads ------------------------------------------------------------------------------
    def get(self, memory_id: str, *, agent: str | None = None) -> Memory:
        """One memory by id. With ``agent`` given, it must be visible to that agent."""
        memory = self._get(memory_id, agent)
        self._audit_read("get", agent=agent, ids=[memory.id])
        return memory

    def _get(self, memory_id: str, agent: str | None) -> Memory:
        if not isinstance(memory_id, str) or not memory_id:
            raise ValidationError("memory id must be a non-empty string")
        flt = Filter(agent=check.agent_name(agent)) if agent is not None else None
        memory = self.store.get(memory_id, flt)
        if memory is None:
            scope = f" visible to agent {agent!r}" if agent is not None else ""
            raise NotFound(f"no memory with id {memory_id!r}{scope}")
        return memory

    def search(
        self,
        query: str,
        *,
        agent: str = "default",
        kind: str | Sequence[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 10,
    ) -> list[Hit]:
        """The memories most relevant to ``query``, best first.

        ``agent``, ``kind`` and ``tags`` (all required) are hard filters. Relevance
        (keywords and meaning) comes first; recency, confidence, access and past
        success adjust the order gently. Each returned memory counts as accessed.
        """
        query = check.content(query, what="query")
        flt = _read_filter(agent, kind, tags)
        hits = self._searcher.search(query, flt, limit=check.limit(limit), now=utcnow())
        self._audit_read("search", agent=flt.agent, ids=[h.memory.id for h in hits], kinds=flt.kinds)
        return hits

    def list(
        self,
        *,
        agent: str = "default",
        kind: str | Sequence[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Memory]:
        """An agent's memories (and those shared with it), newest first."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError(f"offset must be a non-negative integer, not {offset!r}")
        flt = _read_filter(agent, kind, tags)
        memories = self.store.list(flt, limit=check.limit(limit), offset=offset)
        self._audit_read("list", agent=flt.agent, ids=[m.id for m in memories], kinds=flt.kinds, offset=offset or None)
        return memories

    def count(self, *, agent: str = "default", kind: str | Sequence[str] | None = None) -> int:
        """How many memories ``agent`` can see (of ``kind``)."""
        return self.store.count(Filter(agent=check.agent_name(agent), kinds=check.kinds(kind)))

    def history(self, memory_id: str, *, agent: str | None = None) -> builtins.list[Change]:
        """Every change of a memory, oldest first; a forgotten memory keeps only scrubbed entries."""
        if agent is not None:
            self._owned(memory_id, agent)
        changes = self.store.history(memory_id)
        if not changes:
            raise NotFound(f"no history for memory {memory_id!r}")
        return changes

    # -- short-term memory ------------------------------------------------------------------
    def session(self, agent: str = "default", *, token_budget: int = 2000) -> SessionContext:
        """The in-process short-term context of ``agent`` (the same object on every call)."""
        agent = check.agent_name(agent)
        with self._lock:
            ctx = self._sessions.get(agent)
            if ctx is None:
                ctx = SessionContext(
                    agent, token_budget=token_budget, count_tokens=count_tokens, promoter=self.remember
                )
                self._sessions[agent] = ctx
            return ctx


def _read_filter(agent: str, kind: str | Sequence[str] | None, tags: Iterable[str] | None) -> Filter:
    """The hard filter of a read: the agent's scope, and kinds and tags when given (no tags: no restriction)."""
    wanted = None if tags is None else check.tags(tags if isinstance(tags, str) else list(tags))
    return Filter(agent=check.agent_name(agent), kinds=check.kinds(kind), tags=wanted or None)


def _terminal_progress(total: int) -> Progress:
    """A rich progress bar on an interactive stderr; silent otherwise."""
    if total == 0 or not sys.stderr.isatty():
        return lambda done, total: None
    from rich.progress import Progress as RichProgress

    bar = RichProgress(transient=True)
    task = bar.add_task("re-embedding memories", total=total)
    bar.start()

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done)
        if done >= total:
            bar.stop()

    return report

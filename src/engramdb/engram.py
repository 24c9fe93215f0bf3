"""The :class:`Engram` facade: creates the store, the embedder, the write pipeline, the reads and the services.

The core verbs stay flat on the facade (``remember``, ``search``, ``get``, ``update``,
``forget``, ...); each area is one attribute holding a service: ``mem.learning``,
``mem.failures``, ``mem.episodes``, ``mem.code``, ``mem.sharing``, ``mem.knowledge``,
``mem.audit``, ``mem.retention``, ``mem.routing`` and ``mem.keys``. The brain's entry points
``context`` and ``reason`` and the store check ``doctor`` are verbs too. Services get their
collaborators here and never know the facade.
"""

from __future__ import annotations

import builtins
import inspect
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from engramdb import _validate as check
from engramdb._areas import Areas
from engramdb._progress import Progress
from engramdb._reembed import check_model, reembed
from engramdb._validate import DEFAULT_TOKEN_BUDGET
from engramdb.config import Settings, load_settings
from engramdb.embeddings import count_tokens, make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.errors import ConfigError, ValidationError
from engramdb.models import (
    AddResult,
    Change,
    Context,
    HealthReport,
    Hit,
    Kind,
    Memory,
    Reasoning,
    ReasoningMode,
    RedactionPolicy,
    Visibility,
)
from engramdb.pipeline import UPDATABLE, WritePipeline
from engramdb.recall import Recall, scope_filter, warm_retrieval_early
from engramdb.services._base import ServiceContext
from engramdb.shortterm import SessionContext, SessionRegistry
from engramdb.storage import open_store, require_store
from engramdb.storage.base import Filter, Store
from engramdb.vectorqueue import VectorQueue, waiting_store

if TYPE_CHECKING:
    from engramdb.brain.llm import LLM
    from engramdb.learning.recommend import RecommendConfig
    from engramdb.retrieval.ranking import RankingWeights
    from engramdb.sessions_redis import RedisSessions

__all__ = ["Engram"]

log = logging.getLogger("engramdb")


class Engram(Areas):
    """A memory store for agents: remember, search, update, forget, and learn from outcomes.

    ``Engram()`` opens the embedded store at ``$ENGRAM_HOME`` (else ``~/.engram``); ``Engram("dir")`` one at that
    folder; ``Engram(":memory:")`` an ephemeral one; ``Engram("postgresql://...")`` a PostgreSQL + pgvector one.
    One instance is safe to share across threads; use it as a context manager or call :meth:`close`.

    ``settings`` (or keyword ``overrides`` of single settings) configure it; ``weights`` tune search ranking and
    ``recommend`` outcome learning, for this instance only. ``embedder`` is an
    :class:`~engramdb.embeddings.base.Embedder` or a setting string (``"local"``, ``"openai:<model>"``,
    ``"sentence-transformers:<model>"``). Calls that do not name an ``agent`` act for the ``agent`` setting
    (``ENGRAM_AGENT``, ``"default"`` unless configured).

    A missing store folder is created, unless ``create=False``: then a folder that holds no store raises
    :class:`~engramdb.errors.NotFound` (:func:`require_store`), so a read-only tool pointed at a mistyped path
    fails instead of answering from a new, empty store.

    ``Engram("http://host:8765", api_key=KEY)`` (or ``$ENGRAM_URL``, ``$ENGRAM_API_KEY``) returns a
    :class:`~engramdb.client.RemoteEngram`: the same API through a running ``engram serve``.
    """

    def __new__(
        cls, location: str | os.PathLike[str] | None = None, *, api_key: str | None = None, **options: Any
    ) -> Engram:
        url = location if location is not None else os.environ.get("ENGRAM_URL") or None
        if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
            from engramdb.client.remote import RemoteEngram

            # Not an Engram subclass, so Python does not run Engram.__init__ on it: a client with the same API.
            return cast("Engram", RemoteEngram.opened(url, api_key=api_key, **options))
        return super().__new__(cls)

    def __init__(
        self,
        location: str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | str | None = None,
        settings: Settings | None = None,
        weights: RankingWeights | None = None,
        recommend: RecommendConfig | None = None,
        llm: LLM | None = None,
        progress: Progress | None = None,
        create: bool = True,
        api_key: str | None = None,
        **overrides: Any,
    ) -> None:
        if api_key is not None:
            raise ConfigError("api_key is for a server (Engram('http://host:port', api_key=...)), not a local store")
        if isinstance(embedder, str):
            overrides = {**overrides, "embedder": embedder}
            embedder = None
        elif embedder is not None and not isinstance(embedder, Embedder):
            raise ConfigError(
                f"embedder must be an Embedder or a setting string such as 'local' or 'openai:<model>', "
                f"not {type(embedder).__name__}"
            )
        self.settings = settings.replace(**overrides) if settings is not None else load_settings(**overrides)
        if location is not None and not isinstance(location, str | os.PathLike):
            raise ConfigError(f"location must be a path or a URL, not {type(location).__name__}")
        self.location = os.fspath(location) if location is not None else str(self.settings.home)
        if not isinstance(self.location, str):
            raise ConfigError("location must be a text path, not bytes")
        if not create:
            require_store(self.location)
        # The retrieval tables are built beside the embedder's load and the store's open; Recall waits for them.
        tables = warm_retrieval_early() if self.settings.warm else None
        try:
            self.embedder: Embedder = embedder if embedder is not None else make_embedder(self.settings)
            self._vectors: VectorQueue | None = None
            self._plain_store = open_store(self.location, settings=self.settings)
            # What close() releases, registered as it is opened: the store last, the vector queue (flushed) first.
            self._closing = ExitStack()
            self._closing.callback(self._plain_store.close)
            try:
                self._wire(weights=weights, recommend=recommend, llm=llm)
                self._check_model(progress)
                if self.settings.retention_interval_hours > 0:  # else no schedule: the area stays unbuilt
                    self.retention.run_scheduled()
            except BaseException:
                self.close()
                raise
        finally:
            if tables is not None:
                tables.join()  # done already unless the open failed before its Recall: no thread outlives it

    def _wire(self, *, weights: RankingWeights | None, recommend: RecommendConfig | None, llm: LLM | None) -> None:
        """Create the write pipeline, the reads and the services over the open store."""
        if self.settings.vectors == "background":
            self._vectors = VectorQueue(
                self._plain_store,
                self.embedder,
                batch_size=self.settings.vector_batch_size,
                relax_commit=self.settings.synchronous == "NORMAL",
            )
            self._closing.callback(self._vectors.drain, self.location)
        #: The store; with background vectors, a view whose vector reads wait for this instance's queue.
        self.store: Store = (
            self._plain_store if self._vectors is None else waiting_store(self._plain_store, self._vectors)
        )
        store, embedder, settings = self.store, self.embedder, self.settings
        queue = self._vectors
        self._recall = recall = Recall(
            store,
            embedder,
            settings,
            weights=weights,
            # Late-bound: the pipeline is made below, on the audited store.
            audit=lambda records: self._pipeline.audit(records),  # noqa: PLW0108
            settle=None if queue is None else lambda: queue.settle(rebuild=False),
        )
        self._closing.callback(recall.close)
        # Readers of the audit trail see the searches' batched entries (written first; see Recall.audited), and
        # writers append through the same store as everyone else.
        self.store = store = recall.audited(store)
        self._pipeline = pipeline = WritePipeline(store, embedder, settings, vectors=self._vectors)
        self._services = ServiceContext(
            store=store, embedder=embedder, settings=settings, pipeline=pipeline, recall=recall, audit=pipeline.audit
        )
        #: The configured LLM (``ENGRAM_LLM=openai:MODEL``), or None: every feature then stays deterministic.
        # A client made here from the settings is closed with the store; one passed in belongs to the caller.
        self._own_llm: LLM | None = None
        if llm is None and settings.llm:
            from engramdb.brain.llm import llm_from_settings

            self._own_llm = llm_from_settings(
                settings.llm, base_url=settings.llm_base_url, key_env=settings.llm_key_env
            )
        self.llm: LLM | None = llm if llm is not None else self._own_llm
        if self._own_llm is not None:
            self._closing.callback(self._own_llm.close)
        # The areas (mem.learning, mem.failures, ...) are built at their first use (engramdb._areas).
        self._recommend = recommend
        self._build_lock = threading.RLock()
        # Shared short-term windows (ENGRAM_SESSIONS=redis://...): several processes see one thread's window.
        self._shared_sessions: RedisSessions | None = None
        if settings.session_url:
            from engramdb.sessions_redis import RedisSessions

            self._shared_sessions = RedisSessions(settings.session_url, prefix=settings.session_prefix)
            self._closing.callback(self._shared_sessions.close)
        shared = self._shared_sessions
        self._sessions = SessionRegistry(
            count_tokens=count_tokens,
            promoter=self._pipeline.remember,
            shared=None if shared is None else lambda a, u, s: shared.window(a, user=u, session=s),
        )

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Write the queued vectors (:meth:`flush`), then close the store (and the LLM client and shared
        sessions). The instance must not be used afterwards. A failure to embed is logged, not raised here:
        those memories stay pending and are embedded when the store is next opened."""
        self._closing.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _agent(self, agent: str | None) -> str:
        """``agent`` checked, or the ``agent`` setting when None."""
        return check.agent_or_default(agent, self.settings)

    def __repr__(self) -> str:
        return f"Engram({self.location!r}, model={self.embedder.model_id!r})"

    @property
    def redaction(self) -> RedactionPolicy:
        """What this store redacts before storage (settings ``redact_secrets``, ``redact_pii``, ``pii_region``)."""
        return self._pipeline.redaction

    # -- embedding model --------------------------------------------------------------------------------
    def _check_model(self, progress: Progress | None) -> None:
        check_model(
            self.store,
            self.embedder,
            self.settings,
            plain=self._plain_store,
            queue=self._vectors,
            location=self.location,
            progress=progress,
        )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every vector this instance queued is written; True when done, False on ``timeout``.

        With the ``vectors="background"`` setting, :meth:`remember` returns once the memory is
        committed and keyword-searchable and a worker thread adds its vector; ``flush`` waits for
        that (and for memories left without a vector by an earlier process, queued at open).
        :meth:`search` waits for this instance's queue by itself. If the embedder failed in the
        worker, the error (an ``EmbeddingError``, or the ``StorageError`` of a failed write) is
        raised here; those memories stay pending and are queued again. Searches' access counts
        still waiting in this instance (the ``access_flush_seconds`` setting) are written first.
        """
        timeout = check.timeout(timeout)
        self._recall.flush()
        if self._vectors is None:
            return True
        return self._vectors.flush(timeout)

    @property
    def pending_vectors(self) -> int:
        """Memories written here still waiting for their vector (the background queue's depth; 0 in sync mode)."""
        return 0 if self._vectors is None else self._vectors.pending

    def reembed(self, *, progress: Progress | None = None) -> int:
        """Re-embed every memory whose vector is missing or from another model; returns how many.

        Resumable: an interrupted run leaves finished batches in place and the next run
        continues with the rest. Shows a progress bar on an interactive terminal unless
        ``progress`` is given.
        """
        return reembed(self.store, self.embedder, self.settings, progress=progress)

    # -- writes -----------------------------------------------------------------------------------------
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
        user: str | None = None,
        session: str | None = None,
        at: datetime | str | None = None,
        key: str | None = None,
    ) -> Memory:
        """Store one memory and return it as stored (secrets replaced by placeholders, see ``redacted``).

        ``user`` (a person the agent serves) and ``session`` (a conversation thread or a run) scope it: a read
        for another user never sees it. ``at`` (aware datetime or ISO 8601) is when it happened (default: now).

        A near-duplicate of a memory of the same agent and kind is merged into that
        one, which is returned; ``force=True`` adds it as a new memory regardless.
        Conversations, episodes, decisions and failures are never merged.

        With ``key`` (a preference or fact that changes: ``key="editor"``) the memory is the agent's (and
        ``user``'s) current value of that key: a later ``remember`` with the same key supersedes it in place
        (history action ``supersede``), so search and context show only the current value. The old value is
        kept as a memory whose ``valid_until`` is when it was superseded, for ``search(..., as_of=...)`` and
        ``recall_key(..., as_of=...)``. The key is in ``metadata["key"]`` and the tag ``key:<name>``.

        With the ``vectors="background"`` setting (the default) a memory that is not checked for
        near-duplicates (conversations, episodes, decisions, failures, ``force=True``, keyed
        memories, ``dedupe`` off) returns once it is committed and keyword-searchable; its vector
        is added by a worker thread moments later (:meth:`flush` waits for it; :meth:`search` in
        this process waits by itself). A checked memory is embedded before the write, as in sync mode.
        """
        return self._pipeline.remember(
            content,
            agent=agent,
            kind=kind,
            tags=tags,
            metadata=metadata,
            visibility=visibility,
            confidence=confidence,
            force=force,
            key=key,
            user=user,
            session=session,
            at=at,
        )

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, force: bool = False) -> builtins.list[Memory]:
        """Store many memories in one batch: embedded together, written in one transaction.

        Every item is validated before anything is embedded or written; one bad item
        rejects the whole batch and the error names its position. Then, in order:
        secrets (and, if enabled, personal data) in content, tags and metadata are
        replaced by typed placeholders; near-duplicates of stored memories (or of
        earlier items) of the same agent and kind are merged into them unless
        ``force``; the rest are embedded and stored; every write is audited. Returns,
        for each item, the memory as stored (the merged one for a duplicate). An item
        without ``agent`` is the ``agent`` setting's; an item with ``key`` supersedes
        that key's current memory (see :meth:`remember`). Items may carry ``user``, ``session``
        and ``at`` as :meth:`remember` takes them, and ``successes``/``attempts``: outcome counts a migration
        brings along (non-negative, successes at most attempts; a merged duplicate adds them to its own).
        """
        return self._pipeline.remember_many(items, force=force)

    def add(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        agent: str | None = None,
        user: str | None = None,
        session: str | None = None,
        at: datetime | str | None = None,
    ) -> AddResult:
        """Conversations in: every message stored as a ``conversation`` turn, and the durable facts it states.

        ``messages``: OpenAI-style ``[{"role": "user", "content": "I moved to Berlin"}, ...]`` (optional ``name``,
        the speaker, and ``at``); bad input is one ValidationError and nothing is written. A deterministic extractor
        (or a configured LLM, checked first, the rules standing in if it fails) keys each fact, so a changed fact
        supersedes the stored one (:class:`~engramdb.services.conversations.Conversations`).
        """
        return self._conversations.add(messages, agent=self._agent(agent), user=user, session=session, at=at)

    def update(self, memory_id: str, *, agent: str | None = None, **changes: Any) -> Memory:
        """Change fields of a memory (content, tags, metadata, kind, confidence, visibility).

        With ``agent`` given, only that agent's own memory can be changed. The old
        values go to :meth:`history`. Changing content re-embeds it.
        """
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise ValidationError(
                f"cannot update {', '.join(sorted(unknown))} (updatable: {', '.join(sorted(UPDATABLE))})"
            )
        current = self._recall.owned(memory_id, agent)
        return self._pipeline.update(memory_id, changes, actor=agent or current.agent, current=current)

    def forget(
        self, memory_id: str, *, agent: str | None = None, user: str | None = None, session: str | None = None
    ) -> None:
        """Remove a memory for good: content, keyword index, vector; history keeps a tombstone.

        With ``agent`` it must be that agent's own, with ``user``/``session`` in their scope (else NotFound).
        """
        current = self._recall.owned(memory_id, agent, user=user, session=session)
        self._pipeline.forget(memory_id, actor=agent or current.agent, current=current)

    def clear(self, *, agent: str, confirm: str, user: str | None = None, session: str | None = None) -> int:
        """Forget every memory of ``agent`` (its own; shared ones stay with their owners); return how many.

        With ``user``, only that user's memories (not the agent's own); with ``session``, only that thread's.

        ``confirm`` must repeat the agent's name, else ValidationError and nothing
        changes. Each memory is forgotten as :meth:`forget` does, with its own audit
        entry (``forget``, reason ``clear``), one transaction per page of
        :data:`~engramdb._validate.PAGE_SIZE` memories.
        """
        owner = check.agent_name(agent)
        if not isinstance(confirm, str) or confirm != owner:
            raise ValidationError(
                f"clearing every memory of agent {owner!r} needs confirm={owner!r} (the agent's name); "
                "nothing was changed"
            )
        users, sessions = scope_filter(user, session, exact=True)
        flt = Filter(agent=owner, include_shared=False, users=users, sessions=sessions, superseded=True)
        return self._pipeline.forget_all(flt, actor=owner, reason="clear")

    # -- reads ------------------------------------------------------------------------------------------
    def get(
        self, memory_id: str, *, agent: str | None = None, user: str | None = None, session: str | None = None
    ) -> Memory:
        """One memory by id. With ``agent`` given, it must be visible to that agent; with ``user``, it must be
        that user's or the agent's own (no user); with ``session``, of that thread."""
        return self._recall.get(memory_id, agent=agent, user=user, session=session)

    def recall_key(
        self,
        key: str,
        *,
        agent: str | None = None,
        user: str | None = None,
        as_of: datetime | str | None = None,
    ) -> Memory:
        """The current memory of ``agent``'s (and ``user``'s) ``key`` (see :meth:`remember`); NotFound if none.

        With ``as_of`` (a datetime or ISO 8601 string; a date alone means its end) the value the key had
        then. Earlier values are also in :meth:`history` of the returned memory (action ``supersede``).
        """
        return self._recall.keyed(key, agent=self._agent(agent), user=user, as_of=as_of)

    def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        kind: Kind | Sequence[Kind] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 10,
        user: str | None = None,
        session: str | None = None,
        as_of: datetime | str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        min_score: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Hit]:
        """The memories most relevant to ``query``, best first.

        ``agent``, ``kind``, ``tags`` (all required) and the creation-time bounds ``since``/``until`` (as in
        :meth:`list`) are hard filters. So are the scopes: with ``user`` the agent's own memories (no user)
        and that user's, never another user's; with ``session`` that thread's only. Superseded values of
        keyed facts are left out; with ``as_of`` (a datetime or ISO 8601 string) the search answers with
        what was true then: memories that had happened by then, each fact's value at that moment. A time the
        query names relative to when it is asked ("last Saturday", "two weeks ago", "in May") counts from
        ``as_of``, else from now: memories whose ``occurred_at`` lies in or near it rank higher. Relevance (keywords
        and meaning) comes first; recency, confidence, access and past success adjust the order gently.
        Near-identical memories come as one hit (``Hit.duplicates``). Each returned memory counts as accessed.
        Every hit carries a calibrated ``relevance`` in [0, 1] (README, "Relevance"); hits below ``min_score``
        (default: the ``min_score`` setting, 0) are left out. ``metadata={"language": "python"}``: only memories
        whose metadata holds each key with exactly that value (a JSON scalar; several keys: all of them)."""
        return self._recall.search(
            query,
            agent=self._agent(agent),
            kind=kind,
            tags=tags,
            limit=limit,
            since=since,
            until=until,
            user=user,
            session=session,
            as_of=as_of,
            min_score=min_score,
            metadata=metadata,
        )

    def list(
        self,
        *,
        agent: str | None = None,
        kind: Kind | Sequence[Kind] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        user: str | None = None,
        session: str | None = None,
        as_of: datetime | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        """An agent's memories (and those shared with it), newest first.

        ``since``/``until`` bound the creation time, both inclusive: timezone-aware datetimes, or ISO 8601
        strings (a date alone is its whole day, UTC; a time without an offset is UTC). ``user``, ``session``,
        ``as_of`` and ``metadata`` filter as in :meth:`search`."""
        return self._recall.list(
            agent=self._agent(agent),
            kind=kind,
            tags=tags,
            limit=limit,
            offset=offset,
            since=since,
            until=until,
            user=user,
            session=session,
            as_of=as_of,
            metadata=metadata,
        )

    def count(
        self,
        *,
        agent: str | None = None,
        kind: Kind | Sequence[Kind] | None = None,
        user: str | None = None,
        session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """How many memories ``agent`` can see (of ``kind``; with ``user``/``session``/``metadata`` as in search)."""
        a = self._agent(agent)
        return self._recall.count(agent=a, kind=kind, user=user, session=session, metadata=metadata)

    def history(self, memory_id: str, *, agent: str | None = None) -> builtins.list[Change]:
        """Every change of a memory, oldest first; a forgotten memory keeps only scrubbed entries."""
        return self._recall.history(memory_id, agent=agent)

    # -- short-term memory ------------------------------------------------------------------------------
    def session(
        self,
        agent: str | None = None,
        *,
        user: str | None = None,
        session: str | None = None,
        token_budget: int = 2000,
    ) -> SessionContext:
        """The short-term context of ``agent``'s conversation ``session`` with ``user`` (the same object on every
        call for one thread; each (agent, user, session) has its own window). Promoted items keep the scopes."""
        agent = check.agent_name(self._agent(agent))
        user, session = check.scope(user, what="user"), check.scope(session, what="session")
        return self._sessions.get(agent, user=user, session=session, token_budget=token_budget)

    # -- the brain: context and reasoning ---------------------------------------------------------------
    def context(
        self,
        task: str,
        *,
        agent: str | None = None,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        user: str | None = None,
        session: str | None = None,
    ) -> Context:
        """What ``agent`` should know before ``task``, best first: the recommended approach and its alternatives,
        warnings from recurring failures with prevention checks, known fixes, preferences, the most relevant
        memories and the short-term window. ``ctx.render()`` is a prompt block within ``token_budget`` tokens.
        Needs no LLM. With ``user``/``session`` the memories and the window are that user's and thread's (and
        the agent's own); what the agent learned from outcomes is shared across its users."""
        a = self._agent(agent)
        return self._context.build(task, agent=a, token_budget=token_budget, user=user, session=session)

    def reason(
        self,
        goal: str,
        *,
        agent: str | None = None,
        mode: ReasoningMode = "plan",
        options: Sequence[str] | None = None,
    ) -> Reasoning:
        """Plan, think or decide about ``goal`` with the configured LLM over the agent's context.

        The decision is recorded as a pending outcome record, so its outcome can be attached later.
        Raises ``LLMNotConfigured`` (an ``EngramError``) saying how to configure one when none is.
        """
        return self._reasoner.reason(goal, agent=self._agent(agent), mode=mode, options=options)

    # -- maintenance ------------------------------------------------------------------------------------
    def doctor(self, *, quick: bool = False) -> HealthReport:
        """Check the store: file integrity, keyword index, vectors, the audit chain, and that every change
        has its audit entry. ``quick`` runs SQLite's quick check instead of the full integrity check."""
        from engramdb.services.doctor import Doctor

        return Doctor(self.store, self.embedder, self.settings, quick=quick).run()


# What inspect and help() show for Engram(...) is __init__'s parameters (__new__ only routes a URL to the client).
_init = inspect.signature(Engram.__init__)
Engram.__signature__ = _init.replace(  # type: ignore[attr-defined]
    parameters=list(_init.parameters.values())[1:], return_annotation=inspect.Signature.empty
)

"""Knowledge as a service: files (``export_file``, ``import_file``), ``merge`` between agents,
``distill`` (groups of similar memories into one) and ``seed`` (the shipped knowledge packs).

The file format and its validation are :mod:`engramdb.knowledge.files`; this service says what
arrives (owner, trust, provenance, trusted vectors); the write pipeline (``pipeline.transfers``,
:mod:`engramdb.transfers`) redacts, embeds, applies the near-duplicate rule, plans
(:mod:`engramdb.knowledge.transfer`) and writes it with its audit entries in one transaction.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb._util import new_id
from engramdb.errors import NotFound, ValidationError
from engramdb.knowledge import files as knowledge
from engramdb.knowledge import provenance as rules
from engramdb.models import AuditRecord, Change, Kind, Memory, PackReport
from engramdb.recall import scope_filter
from engramdb.services._base import Service, ServiceContext
from engramdb.services.distill import Distiller
from engramdb.services.failures import FailureService
from engramdb.services.packs import ServiceTarget, seed_pack
from engramdb.storage.base import Filter
from engramdb.transfers import Arrival

if TYPE_CHECKING:
    from engramdb.knowledge.transfer import Vector

__all__ = ["KnowledgeService", "Target"]

#: Where a knowledge file goes or comes from: a path, or an open binary stream (``-`` on the CLI).
Target = str | os.PathLike[str] | IO[bytes]


class KnowledgeService(Service):
    """Moves knowledge between agents and stores: export to a file, import from one, merge between agents."""

    def __init__(self, ctx: ServiceContext, *, distiller: Distiller, failures: FailureService) -> None:
        super().__init__(ctx)
        self._distiller = distiller
        self._failures = failures

    # -- distillation and packs -----------------------------------------------------------------------------
    def distill(
        self,
        *,
        agent: str | None = None,
        kind: Kind | Sequence[Kind] | None = None,
        min_group: int = 3,
        dry_run: bool = False,
        archive_sources: bool = False,
    ) -> builtins.list[Memory]:
        """Distil each group of at least ``min_group`` similar memories of ``agent`` into one ``knowledge`` memory.

        Re-running updates a group's distilled memory instead of adding another; sources stay
        (tagged ``archived`` when ``archive_sources``). ``dry_run`` writes nothing and returns
        what would be written.
        """
        return self._distiller.distill(
            agent=agent, kind=kind, min_group=min_group, dry_run=dry_run, archive_sources=archive_sources
        )

    def seed(self, pack: str, *, agent: str | None = None) -> PackReport:
        """Load the shipped knowledge pack ``pack`` (python, git, http, sql, docker, ci, patterns) as ``agent``'s
        memories.

        Idempotent and versioned: loading the same version again writes nothing.
        """
        pack = check.name(pack, what="pack")
        agent = check.agent_or_default(agent, self._settings)
        return seed_pack(ServiceTarget(self._pipeline, self._recall, self._failures), pack, agent=agent)

    # -- export -------------------------------------------------------------------------------------------
    def export_file(
        self,
        path: Target,
        *,
        agent: str,
        tag: str | None = None,
        with_vectors: bool = False,
        with_history: bool = False,
        user: str | None = None,
        session: str | None = None,
    ) -> int:
        """Write ``agent``'s own memories (those carrying ``tag``, if given) to a knowledge file; return how many.

        Only the agent's own memories are exported, never those others shared with it; with ``user``
        only that user's (a person's data, e.g. to hand it over), with ``session`` only that thread's.
        Superseded values of keyed facts are exported too, with their validity.
        The file (see :mod:`engramdb.knowledge.files`) keeps ids, timestamps, statistics,
        tags, metadata and visibility; ``with_vectors`` adds the vectors, ``with_history``
        each memory's change history. A file path is written atomically: a failed export
        leaves no partial file behind.
        """
        source = _name(path)
        owner = check.agent_name(agent)
        clean_tag = check.tag(tag) if tag is not None else None
        with_vectors = check.flag(with_vectors, what="with_vectors")
        with_history = check.flag(with_history, what="with_history")
        users, sessions = scope_filter(user, session, exact=True)
        flt = Filter(
            agent=owner,
            include_shared=False,
            tags=(clean_tag,) if clean_tag else None,
            users=users,
            sessions=sessions,
            superseded=True,
        )
        memories = self._recall.all(flt)
        vectors = self._stored_vectors([m.id for m in memories]) if with_vectors else {}

        def records() -> Iterator[dict[str, Any]]:
            for m in memories:
                yield knowledge.encode_memory(m, vectors.get(m.id))
            if with_history:
                for m in memories:
                    for change in self._store.memories.history(m.id):
                        yield knowledge.encode_change(change)

        now = self._clock()
        with _opened_for_writing(path) as out:
            knowledge.write_bundle(
                out,
                records(),
                model=self._embedder.model_id,
                dim=self._embedder.dim if vectors else None,
                exported_at=now,
                agent=owner,
                tag=clean_tag,
                key=self._pipeline.settings.knowledge_key,
            )
        ids = [m.id for m in memories]
        detail = {
            "file": source,
            "tag": clean_tag,
            "count": len(ids),
            "ids": ids[: check.AUDIT_IDS],
            "vectors": bool(vectors),
            "history": with_history,
            "signed": self._pipeline.settings.knowledge_key is not None,
        }
        with self._pipeline.transaction():
            self._audit([AuditRecord(action="export", agent=owner, memory_id=None, at=now, detail=detail)])
        return len(memories)

    def _stored_vectors(self, memory_ids: builtins.list[str]) -> dict[str, Vector]:
        """Stored vectors of the current model, fetched a page at a time (ids without one are left out)."""
        found: dict[str, Vector] = {}
        model_id = self._embedder.model_id
        for start in range(0, len(memory_ids), check.PAGE_SIZE):
            found.update(self._store.vectors.get(memory_ids[start : start + check.PAGE_SIZE], model_id=model_id))
        return found

    # -- import -------------------------------------------------------------------------------------------
    def import_file(
        self, path: Target, *, agent: str | None = None, keep_agents: bool = False, dry_run: bool = False
    ) -> int:
        """Import a knowledge file; return how many of its memories were added or merged. All or nothing.

        The whole file is validated first (format, version, checksum, signature, counts,
        every value, with the limits ``remember`` enforces) and checked against the store
        (an id that belongs to another agent's memory is refused); any problem raises
        ValidationError with one line naming it, and nothing is written. Then everything
        is written in one transaction through the write pipeline: secrets are redacted,
        and a memory that nearly duplicates one stored before the import merges into it
        (provenance kept; importing the same file again changes nothing).

        The file is trusted only as far as it proves itself (see :mod:`engramdb.knowledge.files`):

        - *agents*: ``agent`` makes every imported memory that agent's. Without it the
          records must belong to the ``agent`` setting, unless ``keep_agents=True``
          says to keep the agents the file names.
        - *signed* (the header's HMAC verifies with the ``knowledge_key`` setting): the
          file's vectors are used when its model is this store's, and its statistics
          (access counts, successes, attempts) and history are kept. A signature that
          does not verify with the configured key is refused.
        - *unsigned* (or no key configured): every memory is embedded afresh, its
          counters start at zero and its history is just the import.
        - always: ids and timestamps are kept, but none later than now; each memory's
          ``metadata["provenance"]`` says ``{"source": <file name>, "imported_at": ...,
          "signed": bool}`` and its history ends with an ``import`` entry.

        ``dry_run`` validates and counts without writing.
        """
        owner = check.agent_name(agent) if agent is not None else None
        keep_agents = check.flag(keep_agents, what="keep_agents")
        dry_run = check.flag(dry_run, what="dry_run")
        source = _name(path)
        with _opened_for_reading(path) as stream:
            bundle = knowledge.read_bundle(stream, source=source)
        settings = self._pipeline.settings
        key = settings.knowledge_key
        signed = key is not None and knowledge.verify(bundle.header, key)
        if bundle.header.signature is not None and key is not None and not signed:
            raise ValidationError(
                f"{source}: the signature does not verify with this store's knowledge key (the file was changed "
                "after it was signed, or signed with another key); nothing was imported"
            )
        if owner is None and not keep_agents:
            foreign = sorted({e.memory.agent for e in bundle.entries} - {settings.agent})
            if foreign:
                names = ", ".join(repr(a) for a in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
                raise ValidationError(
                    f"{source}: the file holds memories of agent(s) {names}: import them as one agent with "
                    "agent=NAME (CLI --agent), or keep their agents with keep_agents=True; nothing was imported"
                )
        now = self._clock()
        existing = self._recall.get_many([e.memory.id for e in bundle.entries])
        for entry in bundle.entries:
            # Checked again by the plan; caught here before anything is embedded.
            old = existing.get(entry.memory.id)
            if old is not None and old.agent != (owner or entry.memory.agent):
                raise ValidationError(
                    f"{source}: memory id {entry.memory.id!r} already exists in this store for another agent; "
                    "nothing was imported"
                )
        provenance = {"source": _base_name(source), "imported_at": now.isoformat(), "signed": signed}
        try:
            incoming = self._incoming(bundle, owner=owner, signed=signed, now=now, provenance=provenance)
        except ValidationError as exc:
            raise ValidationError(f"{source}: {exc}; nothing was imported") from None
        history: dict[str, builtins.list[Change]] = {}
        if signed:
            for change in bundle.changes:
                history.setdefault(change.memory_id, []).append(dataclasses.replace(change, at=min(change.at, now)))
        actor = owner or "import"
        try:
            plan = self._pipeline.transfers.plan_import(
                incoming, existing=existing, history=history, actor=actor, at=now
            )
        except ValidationError as exc:
            raise ValidationError(f"{source}: {exc}; nothing was imported") from None
        if not dry_run:
            detail = {"file": source, "signed": signed}
            self._pipeline.transfers.apply(plan, actor=actor, at=now, added_action="import", detail=detail)
        return plan.written

    def _incoming(
        self,
        bundle: knowledge.Bundle,
        *,
        owner: str | None,
        signed: bool,
        now: datetime,
        provenance: dict[str, Any],
    ) -> builtins.list[Arrival]:
        """The file's memories as they will be stored (owner, trust, provenance), each with the file's vector when
        it is signed, of this model and of the same text; the pipeline redacts and embeds the rest."""
        header = bundle.header
        usable = signed and header.model == self._embedder.model_id and header.dim == self._embedder.dim
        out = []
        for entry in bundle.entries:
            memory = _neutralised(entry.memory, signed=signed, now=now)
            # The provenance replaces one from an earlier import and does not count against the caller's limit.
            metadata = check.stored_metadata({**memory.metadata, _PROVENANCE: provenance})
            memory = dataclasses.replace(memory, agent=owner or memory.agent, metadata=metadata)
            vector = entry.vector if usable and memory.content == entry.memory.content else None
            # Provenance names the memory as its origin knew it: its own agent (and id).
            origin = dataclasses.replace(memory, agent=entry.memory.agent)
            out.append(Arrival(memory=memory, vector=vector, source=origin))
        return out

    # -- merge --------------------------------------------------------------------------------------------
    def merge(self, *, from_agent: str, to_agent: str, tag: str | None = None) -> int:
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
        clean_tag = check.tag(tag) if tag is not None else None
        flt = Filter(agent=giver, tags=(clean_tag,) if clean_tag else None)
        offered = [m for m in self._recall.all(flt) if m.agent != taker]
        # Consent: only what the giver (or a third agent) has shared with the taker, or made public.
        readable = self._recall.get_many([m.id for m in offered], Filter(agent=taker))
        given = [m for m in offered if m.id in readable]
        known: set[tuple[str, str]] = set()
        for m in self._recall.all(Filter(agent=taker, include_shared=False)):
            known |= rules.origins(m)
        now = self._clock()
        vectors = self._stored_vectors([m.id for m in given])
        arrivals = [
            Arrival(memory=rules.copied(m, to_agent=taker, new_id=new_id(), at=now), vector=vectors.get(m.id), source=m)
            for m in given
        ]
        transfers = self._pipeline.transfers
        plan = transfers.plan_merge(arrivals, known_origins=known, at=now)
        transfers.apply(plan, actor=taker, at=now, added_action="merge", detail={"from_agent": giver})
        return plan.written


#: Metadata key of an imported memory's provenance: ``{"source", "imported_at", "signed"}``.
_PROVENANCE: Final = check.PROVENANCE_KEY


def _neutralised(memory: Memory, *, signed: bool, now: datetime) -> Memory:
    """``memory`` as far as an import may believe it: no time after ``now``; counters only from a signed file."""
    created = min(memory.created_at, now)
    updated = max(created, min(memory.updated_at, now))
    if signed:
        accessed = None if memory.last_accessed is None else min(memory.last_accessed, now)
        return dataclasses.replace(memory, created_at=created, updated_at=updated, last_accessed=accessed)
    return dataclasses.replace(
        memory,
        created_at=created,
        updated_at=updated,
        last_accessed=None,
        access_count=0,
        successes=0.0,
        attempts=0.0,
    )


def _name(target: Target) -> str:
    """A knowledge file's name for messages and the audit trail (the path as given; a stream's ``name``)."""
    if isinstance(target, str):
        return check.text(target, what="path", limit=4096, empty=False)
    if isinstance(target, os.PathLike):
        path = os.fspath(target)
        if not isinstance(path, str):
            raise ValidationError("path must be text, not bytes")
        return check.text(path, what="path", limit=4096, empty=False)
    if isinstance(target, bool | int | float | bytes | bytearray) or not (
        hasattr(target, "read") or hasattr(target, "write")
    ):
        raise ValidationError(f"path must be a file path or an open binary stream, not {type(target).__name__}")
    name = getattr(target, "name", None)
    return name if isinstance(name, str) and name.isprintable() and len(name) <= 4096 else "<stream>"


def _base_name(source: str) -> str:
    """The last part of a file name (provenance keeps no directories)."""
    return os.path.basename(source) or source


@contextlib.contextmanager
def _opened_for_reading(target: Target) -> Iterator[IO[bytes]]:
    """A binary stream to read from: the given one, or the named file opened (and closed afterwards)."""
    if not isinstance(target, str | os.PathLike):
        yield target
        return
    try:
        stream = open(target, "rb")  # noqa: SIM115 - closed below; open errors need their own message
    except FileNotFoundError:
        raise NotFound(f"no knowledge file at {os.fspath(target)!s}") from None
    except IsADirectoryError:
        raise ValidationError(f"{os.fspath(target)!s} is a directory, not a knowledge file") from None
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read knowledge file {os.fspath(target)!s}: {_reason(exc)}") from None
    with stream:
        try:
            yield stream
        except OSError as exc:
            raise ValidationError(f"cannot read knowledge file {os.fspath(target)!s}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0][:200]


@contextlib.contextmanager
def _opened_for_writing(target: Target) -> Iterator[IO[bytes]]:
    """A binary stream to write to; for a path, a temporary file renamed into place on success."""
    if not isinstance(target, str | os.PathLike):
        yield target
        target.flush()
        return
    final = Path(target)
    try:
        directory = final.is_dir()  # raises for a name the file system refuses (e.g. over 255 bytes)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot write knowledge file {final}: {_reason(exc)}") from None
    if directory:
        raise ValidationError(f"{final} is a directory: name a file to export to")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot write knowledge file {final}: {_reason(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ValidationError(f"cannot write knowledge file {final}: {_reason(exc)}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""Conversations in: ``mem.add(messages)`` stores the turns and the durable facts they state.

Every message becomes a ``conversation`` memory (``"role: text"``, the role in ``metadata["role"]``,
as the short-term window promotes a message), linked to the turn before it. Then the facts:

- without an LLM (the default), :func:`~engramdb.brain.extract.extract_facts` reads the user's
  turns; each fact is written with its key (``home``, ``pref:editor``), so a changed fact
  supersedes the stored one in place (history action ``supersede``) and an unchanged one is left
  alone;
- with an LLM configured, it decides against the agent's nearest stored facts (ADD, UPDATE,
  DELETE, NONE: :mod:`~engramdb.brain._add_llm`); its answer is checked whole before anything is
  written, and if it fails (unreachable, bad JSON, a decision naming no offered fact) the rules
  stand in and the result says why.

All writes go through the write pipeline (redaction, near-duplicate merging for notes, the
audit trail), facts carrying where they came from (``metadata["from"]``: the turn's id).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb.brain import _add_llm
from engramdb.brain.extract import Fact, extract_facts
from engramdb.errors import LLMError
from engramdb.models import AddResult, ChatMessage, FactAction, FactChange, Kind, Memory
from engramdb.retrieval.context import ROLE_KEY
from engramdb.services._base import Service
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.brain.llm import LLM
    from engramdb.services._base import ServiceContext

__all__ = ["FACT_TAG", "Conversations"]

log = logging.getLogger("engramdb")

#: The tag every fact written by ``add`` carries (``mem.list(tags=["fact"])``).
FACT_TAG: Final = "fact"
#: Stored facts offered to the LLM to decide against.
_CANDIDATES: Final = 10
_FACT_KINDS: Final = ("preference", "knowledge")
#: Who the facts of an unnamed user are about.
_SUBJECT: Final = "The user"


@dataclass(frozen=True, slots=True)
class _Planned:
    """A fact to write: its text, kind and key, where it came from, and what writing it will do."""

    content: str
    kind: Kind
    key: str | None
    metadata: dict[str, Any]
    action: FactAction
    previous: Memory | None
    #: When it was said (the fact's event time).
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Scope:
    """The agent, user and session of one ``add`` call, checked."""

    agent: str
    user: str | None
    session: str | None

    @property
    def origin(self) -> dict[str, Any]:
        """Metadata of every fact: written by ``add``, in which conversation thread."""
        return {"source": "add"} if self.session is None else {"source": "add", "session": self.session}


class Conversations(Service):
    """``add``: turns in as conversation memories, facts out through the write pipeline."""

    def __init__(self, ctx: ServiceContext, *, llm: LLM | None) -> None:
        super().__init__(ctx)
        self._llm = llm

    def add(
        self,
        messages: object,
        *,
        agent: str,
        user: str | None = None,
        session: str | None = None,
        at: datetime | str | None = None,
    ) -> AddResult:
        """Store ``messages`` as turns and the facts they state; see :meth:`engramdb.Engram.add`."""
        msgs = check.messages(messages)
        scope = _Scope(
            agent=check.agent_name(agent),
            user=check.scope(user, what="user"),
            session=check.scope(session, what="session"),
        )
        when = check.event_time(at, what="at")
        decisions: list[_add_llm.Decision] | None = None
        llm_error: str | None = None
        if self._llm is not None:
            try:
                decisions = _add_llm.decide(self._llm, msgs, self._candidates(msgs, scope))
            except LLMError as exc:
                llm_error = str(exc)
                log.warning("add: the LLM's decisions were not used (%s); the rules read the facts", exc)
        turns = self._pipeline.remember_many([_turn(m, i, scope, when) for i, m in enumerate(msgs)])
        if decisions is not None and self._llm is not None:
            origin = _origin(msgs, turns, scope, by=self._llm.name)
            # The LLM's facts were said when the last user turn was.
            said = next((m.at for m in reversed(msgs) if m.role == "user" and m.at is not None), when)
            facts = self._apply(decisions, scope, origin, at=said, by=self._llm.name)
            return AddResult(turns=tuple(turns), facts=tuple(facts), extractor=f"llm:{self._llm.name}")
        found = [
            (fact, turn, msg)
            for msg, turn in zip(msgs, turns, strict=True)
            if msg.role == "user"
            for fact in extract_facts(msg.content, now=turn.occurred_at, subject=msg.name or _SUBJECT)
        ]
        planned = self._plan(found, scope, when)
        return AddResult(turns=tuple(turns), facts=tuple(self._write(planned, scope)), llm_error=llm_error)

    # -- the rules' facts ------------------------------------------------------------------------------------
    def _plan(
        self,
        found: Sequence[tuple[Fact, Memory, ChatMessage]],
        scope: _Scope,
        when: datetime | None,
    ) -> list[_Planned]:
        """What writing each fact does, against the stored value of its key (or an earlier fact of this call)."""
        current: dict[str, Memory | str | None] = {}
        planned: list[_Planned] = []
        for fact, turn, msg in found:
            key = fact.key if fact.key is None or msg.name is None else f"{_speaker(msg.name)}:{fact.key}"
            meta: dict[str, Any] = {**scope.origin, "category": fact.category, "from": turn.id}
            if fact.date is not None:
                meta["date"] = fact.date
            said = msg.at or when
            action: FactAction = "add"
            previous: Memory | None = None
            if key is not None:
                if key not in current:
                    current[key] = self._pipeline.keyed(scope.agent, key, scope.user)
                held = current[key]
                held_text = held.content if isinstance(held, Memory) else held
                if held_text == fact.content:
                    if isinstance(held, Memory):
                        planned.append(_Planned(fact.content, fact.kind, key, meta, "none", held, said))
                    continue
                if held is not None:
                    action = "supersede"
                    previous = held if isinstance(held, Memory) else None
                current[key] = fact.content
            planned.append(_Planned(fact.content, fact.kind, key, meta, action, previous, said))
        return planned

    def _write(self, planned: Sequence[_Planned], scope: _Scope) -> list[FactChange]:
        """Write the planned facts in one batch (the unchanged ones are reported, not written). A fact belongs
        to the call's user, not to its session: what a person states holds beyond the thread it was said in."""
        todo = [p for p in planned if p.action != "none"]
        started = self._clock()
        items = [
            {"content": p.content, "agent": scope.agent, "user": scope.user, "kind": p.kind, "key": p.key,
             "metadata": p.metadata, "tags": [FACT_TAG], "at": p.at}
            for p in todo
        ]  # fmt: skip
        written = iter(self._pipeline.remember_many(items) if items else [])
        seen: set[str] = set()
        out: list[FactChange] = []
        earlier: dict[str, str] = {}
        for p in planned:
            if p.action == "none" and p.previous is not None:
                out.append(FactChange(action="none", memory=p.previous, key=p.key, previous=None))
                continue
            memory = next(written)
            action = p.action
            previous = p.previous.content if p.previous is not None else None
            if p.key is not None and action == "supersede" and previous is None:
                previous = earlier.get(p.key)  # superseding a fact written earlier in this call
            if p.key is not None and memory.valid_until is not None:
                # Said about a time before the current value's: it went into the past, the current value stays.
                action, previous = "add", None
            if p.key is None and memory.created_at < started:
                # A note merged into a near-duplicate stored before: the same words change nothing.
                action = "none" if memory.content == p.content else "update"
            elif p.key is None and memory.id in seen:
                action = "none"  # the same note twice in one call
            seen.add(memory.id)
            if p.key is not None:
                earlier[p.key] = p.content
            out.append(FactChange(action=action, memory=memory, key=p.key, previous=previous))
        return out

    # -- the LLM's decisions ---------------------------------------------------------------------------------
    def _candidates(self, msgs: Sequence[ChatMessage], scope: _Scope) -> list[Memory]:
        """The stored facts nearest to what the user said: the agent's own (not shared), preference and knowledge,
        of this user only (with no user: of no user), so a conversation never changes another user's facts."""
        said = " ".join(m.content for m in msgs if m.role == "user")[-4000:]
        if not said.strip():
            return []
        flt = Filter(agent=scope.agent, kinds=_FACT_KINDS, include_shared=False, users=(scope.user,))
        vector = self._pipeline.embed([said])[0]
        found = self._store.search.vector_candidates(vector, flt, limit=_CANDIDATES)
        stored = self._store.memories.get_many([c.id for c in found], flt) if found else {}
        return [stored[c.id] for c in found if c.id in stored]

    def _apply(
        self,
        decisions: Sequence[_add_llm.Decision],
        scope: _Scope,
        origin: dict[str, Any],
        *,
        at: datetime | None,
        by: str,
    ) -> list[FactChange]:
        """Carry out checked decisions through the pipeline (each write audited there); ``by`` names the LLM."""
        out: list[FactChange] = []
        adds: list[_Planned] = []
        current: dict[str, Memory | str | None] = {}
        for d in decisions:
            if d.event == "ADD" and d.text is not None:
                action: FactAction = "add"
                previous: Memory | None = None
                if d.key is not None:
                    held = current[d.key] if d.key in current else self._pipeline.keyed(scope.agent, d.key, scope.user)
                    if held is not None:
                        action, previous = "supersede", held if isinstance(held, Memory) else None
                    current[d.key] = d.text
                adds.append(_Planned(d.text, d.kind, d.key, dict(origin), action, previous, at))
            elif d.event == "UPDATE" and d.target is not None and d.text is not None:
                memory = self._pipeline.update(d.target.id, {"content": d.text}, actor=scope.agent, current=d.target)
                out.append(FactChange(action="update", memory=memory, key=d.target.metadata.get("key"),
                                      previous=d.target.content))  # fmt: skip
            elif d.event == "DELETE" and d.target is not None:
                detail = {"kind": d.target.kind, "reason": "add", "by": by}
                self._pipeline.forget(d.target.id, actor=scope.agent, detail=detail, current=d.target)
                out.append(FactChange(action="delete", memory=d.target, key=d.target.metadata.get("key"),
                                      previous=d.target.content))  # fmt: skip
            elif d.target is not None:
                out.append(FactChange(action="none", memory=d.target, key=d.target.metadata.get("key")))
        return [*out, *self._write(adds, scope)]


def _origin(msgs: Sequence[ChatMessage], turns: Sequence[Memory], scope: _Scope, *, by: str) -> dict[str, Any]:
    """The metadata of facts an LLM decided: which LLM, from which turn (the last user turn)."""
    origin = {**scope.origin, "by": by}
    last_user = next((t for m, t in zip(reversed(msgs), reversed(turns), strict=True) if m.role == "user"), None)
    if last_user is not None:
        origin["from"] = last_user.id
    return origin


def _speaker(name: str) -> str:
    """A named speaker's part of a key: ``"Caroline"`` -> ``"caroline"`` (facts of two speakers stay apart)."""
    return "-".join(name.lower().split())[:60]


def _turn(msg: ChatMessage, index: int, scope: _Scope, when: datetime | None) -> dict[str, Any]:
    """The ``remember_many`` item of one message: ``"role: text"`` in the call's scope, said at its time (else the
    call's ``at``, else now), the role (and speaker) in metadata."""
    meta: dict[str, Any] = {ROLE_KEY: msg.role, "turn": index}
    if msg.name is not None:
        meta["name"] = msg.name
    return {"content": f"{msg.name or msg.role}: {msg.content}", "agent": scope.agent, "kind": "conversation",
            "metadata": meta, "user": scope.user, "session": scope.session, "at": msg.at or when}  # fmt: skip

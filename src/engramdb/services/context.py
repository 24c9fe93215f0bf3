"""Context for a prompt: what an agent should know before it works on a task (``mem.context``).

:class:`ContextBuilder` gathers, for a task, from the services the facade gives it:

- the recommended approach with its success rate, confidence and alternatives (``learning.suggest``),
- warnings from failures that resemble the task and their prevention checks (``failures.preflight``),
- known fixes of those failures (``failures.solutions`` and the warnings' patterns),
- the agent's preferences (memories of kind ``preference``) most related to the task,
- the most relevant memories (hybrid search; archived sources of distilled knowledge left out),
- the agent's short-term window (its session, if one exists in this process).

The result is a :class:`~engramdb.models.Context`; its ``render()`` fits the budget, counted
with the bundled tokenizer. Nothing is written, and no LLM is involved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from engramdb import _validate as check
from engramdb._validate import DEFAULT_TOKEN_BUDGET, MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET
from engramdb.embeddings import count_tokens
from engramdb.errors import ValidationError
from engramdb.learning.records import parse_decision
from engramdb.models import (
    Approach,
    Context,
    ContextItem,
    ContextSection,
    FailureWarning,
    Hit,
    Kind,
    Memory,
    SolutionStats,
    Suggestion,
)
from engramdb.services._base import Service, ServiceContext
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.services.failures import FailureService
    from engramdb.services.learning import LearningService
    from engramdb.shortterm import SessionContext

__all__ = [
    "ARCHIVED_TAG",
    "DEFAULT_TOKEN_BUDGET",
    "MAX_TOKEN_BUDGET",
    "MIN_TOKEN_BUDGET",
    "ContextBuilder",
    "SessionLookup",
]

#: Tag of a memory archived by distillation: its distilled knowledge stands for it in a context.
ARCHIVED_TAG: Final = "archived"

#: Relevant memories fetched (before archived ones are left out) and preferences, warnings, fixes kept.
_MEMORIES: Final = 12
_PREFERENCES: Final = 6
_WARNINGS: Final = 3
_FIXES: Final = 5
#: Prevention checks kept per warning.
_CHECKS: Final = 2
#: A memory whose meaning is less similar than this to the task, and that shares no keyword, is noise.
_MIN_SIMILARITY: Final = 0.25
#: Cosine at which two decision contexts are one situation (MiniLM puts rewordings near 0.5-0.7 and other
#: situations that share a word, "npm install for the deploy" against "the deploy failed on an env var", near 0.3).
_SAME_SITUATION: Final = 0.45
#: Decision records read to find which situations the suggested options come from.
_SITUATION_RECORDS: Final = 60
#: Kinds shown as relevant memories (failures come as warnings, preferences in their own section).
_MEMORY_KINDS: Final[tuple[Kind, ...]] = (
    "knowledge",
    "success",
    "decision",
    "code_pattern",
    "episode",
    "conversation",
    "collaboration",
)

#: The session of an agent in this process, if it has one.
SessionLookup = Callable[..., "SessionContext | None"]

_TITLES: Final = {
    "approach": "Recommended approach",
    "warnings": "Warnings from past failures",
    "fixes": "Known fixes",
    "preferences": "Preferences",
    "memories": "Relevant memories",
    "session": "Current session",
}


def budget(value: object) -> int:
    """A token budget: an integer within [:data:`MIN_TOKEN_BUDGET`, :data:`MAX_TOKEN_BUDGET`]."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_TOKEN_BUDGET <= value <= MAX_TOKEN_BUDGET:
        raise ValidationError(
            f"token_budget must be an integer within [{MIN_TOKEN_BUDGET}, {MAX_TOKEN_BUDGET}], not {check.shown(value)}"
        )
    return value


@dataclass(frozen=True, slots=True)
class _Scope:
    """The user and conversation thread a context is built for (None: not narrowed)."""

    user: str | None
    session: str | None


class ContextBuilder(Service):
    """Builds the :class:`~engramdb.models.Context` of a task from an agent's memories and what it learned."""

    def __init__(
        self, ctx: ServiceContext, *, learning: LearningService, failures: FailureService, sessions: SessionLookup
    ) -> None:
        super().__init__(ctx)
        self._learning = learning
        self._failures = failures
        self._sessions = sessions

    def build(
        self,
        task: str,
        *,
        agent: str = "default",
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        user: str | None = None,
        session: str | None = None,
    ) -> Context:
        """The context of ``task`` for ``agent``; ``render()`` fits ``token_budget`` tokens.

        ``user``/``session`` scope the memories and the short-term window (outcome learning stays the
        agent's). Bad input (empty task, a budget outside [32, 200000], a bad agent name) raises
        ValidationError before anything is read.
        """
        task = check.content(task, what="task")
        agent = check.agent_name(agent)
        scope = _Scope(check.scope(user, what="user"), check.scope(session, what="session"))
        size = budget(token_budget)
        suggestion = self._learning.suggest(task, agent=agent)
        suggestion = self._same_situation(task, agent, suggestion)
        warnings = self._failures.preflight(task, agent=agent, limit=_WARNINGS)
        fixes = self._fixes(task, agent, warnings)
        sections = [
            self._approach_section(suggestion),
            _section("warnings", [_warning_item(w) for w in warnings] + _check_items(warnings)),
            _section("fixes", fixes),
            _section("preferences", self._memory_items(self._preferences(task, agent, scope))),
            _section("memories", self._memory_items(self._memories(task, agent, scope))),
            self._session_section(agent, scope),
        ]
        return Context(
            task=task,
            agent=agent,
            token_budget=size,
            sections=tuple(s for s in sections if s.items),
            approach=_approach(suggestion),
            count_tokens=count_tokens,
        )

    # -- gathering -------------------------------------------------------------------------------------------
    def _same_situation(self, task: str, agent: str, s: Suggestion) -> Suggestion:
        """``s`` without the options tried only in situations unlike the top option's.

        The learning engine pools outcomes down to a low similarity floor, so "npm install
        for the deploy" also gathers "the deploy failed on a missing env var"; its action
        is no alternative to the npm fix. An option stays when a context it was tried in (or
        listed as an alternative in) is as close to one of the top option's contexts as
        rewordings of one situation are (:data:`_SAME_SITUATION`).
        """
        if len(s.options) < 2:
            return s
        top = s.recommended or s.options[0].action
        query = self._embedder.embed([task])[0]
        flt = Filter(agent=agent, kinds=("decision",))
        cands = self._store.search.vector_candidates(query, flt, limit=_SITUATION_RECORDS)
        found = self._store.memories.get_many([c.id for c in cands], flt)
        contexts: dict[str, set[str]] = {}
        for m in found.values():
            rec = parse_decision(m)
            if rec is not None:
                for action in (rec.action, *rec.alternatives):
                    contexts.setdefault(action, set()).add(rec.context)
        mine = sorted(contexts.get(top, set()))
        if not mine:
            return s
        others = sorted({c for a, cs in contexts.items() if a != top for c in cs} - set(mine))
        near = set(mine)
        if others:
            vectors = np.asarray(self._embedder.embed([*mine, *others]), dtype=np.float64)
            closest = (vectors[len(mine) :] @ vectors[: len(mine)].T).max(axis=1)
            near |= {c for c, cos in zip(others, closest, strict=True) if cos >= _SAME_SITUATION}
        kept = [o for o in s.options if o.action == top or contexts.get(o.action, set()) & near]
        return dataclasses.replace(s, options=kept)

    def _fixes(self, task: str, agent: str, warnings: Sequence[FailureWarning]) -> list[ContextItem]:
        """Fixes known for the task itself (when it is an error) and for the failures it resembles, best first."""
        found: list[tuple[SolutionStats, str | None]] = [(s, None) for s in self._failures.solutions(task, agent=agent)]
        for w in warnings:
            found += [(s, w.pattern.signature) for s in w.pattern.solutions]
        found.sort(key=lambda f: (-f[0].success_rate, -f[0].attempts))
        items: list[ContextItem] = []
        seen: set[str] = set()
        for sol, signature in found:
            key = sol.solution.casefold()
            if key in seen or sol.successes <= 0:
                continue
            seen.add(key)
            where = f" (for: {signature})" if signature else ""
            text = f"{sol.solution}{where}: worked {_num(sol.successes)} of {_num(sol.attempts)} times"
            items.append(ContextItem(text=text, score=round(sol.success_rate, 4)))
            if len(items) >= _FIXES:
                break
        return items

    def _preferences(self, task: str, agent: str, scope: _Scope) -> list[Hit]:
        hits = self._recall.search(
            task, agent=agent, kind="preference", limit=_PREFERENCES, user=scope.user, session=scope.session
        )
        # A preference learned from feedback belongs to the task it was about: only a related task recalls it
        # (stated preferences, "editor: vim", hold everywhere).
        return [
            h
            for h in hits
            if ARCHIVED_TAG not in h.memory.tags
            and (
                "feedback" not in h.memory.tags
                or h.keyword_score is not None
                or (h.vector_score or 0.0) >= _MIN_SIMILARITY
            )
        ]

    def _memories(self, task: str, agent: str, scope: _Scope) -> list[Hit]:
        hits = self._recall.search(
            task, agent=agent, kind=_MEMORY_KINDS, limit=_MEMORIES, user=scope.user, session=scope.session
        )
        return [
            h
            for h in hits
            if ARCHIVED_TAG not in h.memory.tags
            and (h.keyword_score is not None or (h.vector_score or 0.0) >= _MIN_SIMILARITY)
        ]

    def _memory_items(self, hits: Sequence[Hit]) -> list[ContextItem]:
        """One line per memory, the same line once (repeated decisions in one context say the same)."""
        items: dict[str, ContextItem] = {}
        for h in hits:
            item = _memory_item(h.memory, h)
            items.setdefault(item.text.casefold(), item)
        return list(items.values())

    def _session_section(self, agent: str, scope: _Scope) -> ContextSection:
        session = self._sessions(agent, user=scope.user, session=scope.session)
        if session is None:
            return _section("session", [])
        lines = session.render().splitlines()
        return ContextSection(
            name="session",
            title=_TITLES["session"],
            items=tuple(ContextItem(text=line) for line in lines if line.strip()),
            chronological=True,
        )

    def _approach_section(self, s: Suggestion) -> ContextSection:
        items: list[ContextItem] = []
        if s.recommended is not None:
            top = s.options[0] if s.options and s.options[0].action == s.recommended else None
            rate = f"success rate {top.success_rate:.0%} over {_num(top.attempts)} similar attempts, " if top else ""
            tentative = "; tentative" if s.tentative else ""
            items.append(
                ContextItem(
                    text=f"{s.recommended} ({rate}confidence {s.confidence:.2f}{tentative})",
                    score=round(s.confidence, 4),
                )
            )
        for o in s.options:
            if o.action == s.recommended or o.attempts <= 0:
                continue
            items.append(
                ContextItem(
                    text=f"Alternative: {o.action} (success rate {o.success_rate:.0%}, {_num(o.attempts)} attempts)",
                    score=round(o.success_rate, 4),
                )
            )
        return _section("approach", items)


# -- items -----------------------------------------------------------------------------------------------------


def _section(name: str, items: Sequence[ContextItem]) -> ContextSection:
    return ContextSection(name=name, title=_TITLES[name], items=tuple(items))


def _approach(s: Suggestion) -> Approach | None:
    if s.recommended is None and not any(o.attempts > 0 for o in s.options):
        return None
    top = next((o for o in s.options if o.action == s.recommended), None)
    return Approach(
        recommended=s.recommended,
        success_rate=top.success_rate if top is not None else None,
        confidence=s.confidence,
        attempts=top.attempts if top is not None else 0.0,
        tentative=s.tentative,
        alternatives=tuple(o for o in s.options if o.action != s.recommended),
        reason=s.reason,
    )


def _warning_item(w: FailureWarning) -> ContextItem:
    return ContextItem(text=w.message, memory_id=None, score=w.similarity)


def _check_items(warnings: Sequence[FailureWarning]) -> list[ContextItem]:
    items: list[ContextItem] = []
    said = " ".join(w.message for w in warnings).casefold()
    seen: set[str] = set()
    for w in warnings:
        for text in w.pattern.prevention[:_CHECKS]:
            if text.casefold() not in seen and text.casefold() not in said:
                seen.add(text.casefold())
                items.append(ContextItem(text=f"Check: {text}", score=w.similarity))
    return items


def _memory_item(m: Memory, hit: Hit) -> ContextItem:
    notes: list[str] = []
    if m.kind not in ("knowledge", "preference"):
        notes.append(m.kind)
    if "distilled" in m.tags:
        notes.append(f"distilled from {m.metadata.get('source_count', '?')}")
    if m.success_rate is not None:
        notes.append(f"worked {m.success_rate:.0%}")
    prefix = f"[{', '.join(notes)}] " if notes else ""
    record = parse_decision(m)
    text = f"{m.content}: did {record.action!r}, {record.outcome}" if record is not None else m.content
    return ContextItem(text=prefix + text, memory_id=m.id, score=round(hit.score, 4))


def _num(x: float) -> str:
    """A count that may be fractional (similarity-weighted evidence), shortly."""
    return f"{round(x, 1):g}"

"""Reasoning with memory: ``mem.reason(goal, mode=...)`` (the seed's reasoning engine). Needs a configured LLM.

One call: build the context for the goal (the memories, approaches, warnings, fixes and
preferences that ``mem.context`` gathers, rendered to fit a token budget), ask the LLM
to plan, think or decide with it, check its answer (a JSON object: ``steps``,
``decision``, ``rationale``; in ``decide`` mode the decision must be one of the
options), and record the decision as a *pending* ``decision`` memory whose outcome is
attached later with :meth:`Reasoner.resolve`, which turns it into an outcome record
the learning engine counts (``mem.learning.suggest`` and ``choose`` then learn from it).

Without an LLM, :meth:`Reasoner.reason` raises :class:`~engramdb.brain.llm.LLMNotConfigured`
saying how to configure one. A bad answer raises :class:`~engramdb.brain.llm.LLMError`
and records nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Protocol

from engramdb import _validate as check
from engramdb.brain.llm import HOW_TO_CONFIGURE, LLM, LLMError, LLMNotConfigured
from engramdb.errors import NotFound, ValidationError
from engramdb.learning.records import MAX_ACTION_CHARS, PENDING, decision_metadata, resolved_metadata
from engramdb.models import REASONING_MODES, Memory, Reasoning, ReasoningMode
from engramdb.services._base import Service
from engramdb.storage.base import Filter

if TYPE_CHECKING:
    from engramdb.services._base import ServiceContext

__all__ = ["ContextSource", "Reasoner", "RenderedContext"]

#: Most steps kept from an answer, and the longest step.
MAX_STEPS: Final = 50
MAX_STEP_CHARS: Final = 2000
MAX_OPTIONS: Final = 50

_SYSTEM: Final = (
    "You are the reasoning engine of an AI agent that has a persistent memory. Use the memory context you are "
    "given: prefer approaches that worked before, heed warnings and known fixes, and respect the user's "
    "preferences. Be concrete and brief."
)
_INSTRUCTIONS: Final[Mapping[str, str]] = {
    "plan": "Break the goal into concrete, ordered steps (one action each). In `decision`, state the overall "
    "approach you commit to, in one line.",
    "think": "Think the goal through step by step, one line of reasoning per step. In `decision`, state your "
    "conclusion in one line.",
    "decide": "Weigh the options against the goal and the memory context, one consideration per step. In "
    "`decision`, give exactly one of the options, spelled as listed.",
}


class RenderedContext(Protocol):
    """A context for a prompt (``mem.context``'s value): it renders itself as a prompt block."""

    def render(self) -> str:
        """The prompt block."""
        ...


class ContextSource(Protocol):
    """What builds that context (the brain's ContextBuilder)."""

    def build(self, task: str, *, agent: str = "default", token_budget: int = 1500) -> RenderedContext:
        """The context for ``task``, within ``token_budget`` tokens."""
        ...


class Reasoner(Service):
    """Plan, think or decide with an LLM over the agent's memory; record decisions for outcome learning.

    ``llm`` None means none is configured (:meth:`reason` then says how to configure
    one). ``context`` builds the memory context; None reasons over the goal alone.
    The context's pipeline writes the pending decision (so redaction and the audit trail apply);
    its store reads it back in :meth:`resolve`.
    """

    def __init__(
        self,
        ctx: ServiceContext,
        *,
        llm: LLM | None,
        context: ContextSource | None,
        token_budget: int = 1500,
    ) -> None:
        super().__init__(ctx)
        self._llm = llm
        self._context = context
        self.token_budget = token_budget

    @property
    def llm(self) -> LLM | None:
        """The configured LLM, or None."""
        return self._llm

    def reason(
        self,
        goal: str,
        *,
        agent: str = "default",
        mode: ReasoningMode = "plan",
        options: Sequence[str] | None = None,
        token_budget: int | None = None,
        record: bool = True,
    ) -> Reasoning:
        """Reason about ``goal`` with the agent's memory; returns the steps, the decision and its recorded id.

        ``mode`` is ``plan`` (ordered steps and the approach), ``think`` (chain of
        thought and a conclusion) or ``decide`` (one of ``options``, which it requires).
        With ``record`` (the default) a decision is kept as a pending ``decision``
        memory (``Reasoning.decision_id``); attach its outcome with :meth:`resolve`.
        """
        goal = check.content(goal, what="goal")
        agent = check.agent_name(agent)
        if mode not in REASONING_MODES:
            raise ValidationError(
                f"unknown reasoning mode {check.shown(mode)} (choose from {', '.join(REASONING_MODES)})"
            )
        opts = _options(options)
        if mode == "decide" and len(opts) < 2:
            raise ValidationError("mode 'decide' needs at least two options")
        budget = self.token_budget if token_budget is None else token_budget
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValidationError(f"token_budget must be a positive integer, not {check.shown(budget)}")
        if self._llm is None:
            raise LLMNotConfigured(f"reasoning needs an LLM and none is configured: {HOW_TO_CONFIGURE}")
        block = self._context.build(goal, agent=agent, token_budget=budget).render() if self._context else ""
        answer = self._llm.complete(_messages(goal, mode, opts, block), schema=_schema(mode, opts), temperature=0.2)
        if not isinstance(answer, dict):
            raise LLMError("the LLM's answer should be a JSON object")
        steps, decision, rationale = _parse(answer, mode, opts)
        reasoning = Reasoning(
            goal=goal,
            mode=mode,
            steps=steps,
            decision=decision,
            rationale=rationale,
            options=tuple(opts),
            model=getattr(self._llm, "name", ""),
        )
        if record and decision is not None:
            memory = self._record(reasoning, agent)
            reasoning = replace(reasoning, decision_id=memory.id)
        return reasoning

    def _record(self, r: Reasoning, agent: str) -> Memory:
        action = r.decision if r.decision is not None else ""
        if len(action) > MAX_ACTION_CHARS:
            action = action[: MAX_ACTION_CHARS - 1] + "…"
        # The same pending format as ``mem.learning.record(..., outcome=None)``, so the decision shows in
        # ``mem.learning.pending()`` and ``mem.learning.resolve`` (or ``engram learning resolve``) attaches its outcome.
        action, meta = decision_metadata(
            action,
            None,
            alternatives=[o for o in r.options if o != action],
            extra={"reasoning": {"mode": r.mode, "steps": list(r.steps), "rationale": r.rationale, "model": r.model}},
        )
        return self._pipeline.remember(
            r.goal,
            agent=agent,
            kind="decision",
            tags=["reasoning", f"mode:{r.mode}", f"action:{action}", PENDING],
            metadata=meta,
        )

    def resolve(self, decision_id: str, outcome: str | bool | float, *, agent: str = "default") -> Memory:
        """Attach how a decision from :meth:`reason` turned out; returns it as an outcome record.

        ``outcome`` is success/failure/partial, a boolean or a reward in [-1, 1]. The
        pending memory becomes an ordinary outcome record (what ``mem.learning.record``
        writes), so suggestions learn from it; ``mem.learning.resolve`` does the same.
        It must be ``agent``'s own pending decision: an unknown id raises NotFound, a
        resolved one ValidationError.
        """
        agent = check.agent_name(agent)
        decision_id = check.memory_id(decision_id)
        current = self._store.memories.get(decision_id, Filter(agent=agent, include_shared=False))
        if current is None or current.kind != "decision" or current.agent != agent:
            raise NotFound(f"no decision {decision_id!r} of agent {agent!r}")
        meta = resolved_metadata(current.metadata, outcome)
        tags = [t for t in current.tags if t != PENDING] + [f"action:{meta['action']}"]
        return self._pipeline.update(
            decision_id,
            {"metadata": meta, "tags": list(dict.fromkeys(tags))},
            actor=agent,
            action="resolve",
            current=current,
        )


# -- prompt and answer ------------------------------------------------------------------------------------------


def _options(options: Sequence[str] | None) -> list[str]:
    if options is None:
        return []
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise ValidationError("options must be a list of strings")
    out: list[str] = []
    for o in options:
        if not isinstance(o, str) or not o.strip():
            raise ValidationError(f"each option must be a non-empty string, not {check.shown(o)}")
        if len(o) > MAX_ACTION_CHARS:
            raise ValidationError(f"an option is too long ({len(o)} characters; the limit is {MAX_ACTION_CHARS})")
        out.append(o.strip())
    out = list(dict.fromkeys(out))
    if len(out) > MAX_OPTIONS:
        raise ValidationError(f"too many options ({len(out)}; the limit is {MAX_OPTIONS})")
    return out


def _messages(goal: str, mode: str, options: Sequence[str], context: str) -> list[dict[str, str]]:
    parts = []
    if context.strip():
        parts.append(f"## Memory context\n{context.strip()}")
    parts.append(f"## Goal\n{goal}")
    if options:
        parts.append("## Options\n" + "\n".join(f"- {o}" for o in options))
    parts.append(f"## Task\n{_INSTRUCTIONS[mode]}\nReply with JSON: steps (list of strings), decision, rationale.")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _schema(mode: str, options: Sequence[str]) -> dict[str, Any]:
    decision: dict[str, Any] = {"type": ["string", "null"]}
    if mode == "decide":
        decision = {"type": "string"}
    return {
        "type": "object",
        "properties": {
            "steps": {"type": "array", "items": {"type": "string"}},
            "decision": decision,
            "rationale": {"type": "string"},
        },
        "required": ["steps", "decision", "rationale"],
    }


def _parse(answer: Mapping[str, Any], mode: str, options: Sequence[str]) -> tuple[tuple[str, ...], str | None, str]:
    steps = tuple(s.strip()[:MAX_STEP_CHARS] for s in answer["steps"] if s.strip())[:MAX_STEPS]
    raw = answer["decision"]
    decision = raw.strip() if isinstance(raw, str) and raw.strip() else None
    rationale = answer["rationale"].strip()
    if mode == "decide":
        matched = _match_option(decision, options)
        if matched is None:
            raise LLMError(f"the LLM decided {decision!r}, which is not one of the options {list(options)!r}")
        decision = matched
    if not steps and decision is None:
        raise LLMError("the LLM's answer has neither steps nor a decision")
    return steps, decision, rationale


def _match_option(decision: str | None, options: Sequence[str]) -> str | None:
    if decision is None:
        return None
    key = " ".join(decision.casefold().strip(" .`'\"").split())
    for o in options:
        if " ".join(o.casefold().split()) == key:
            return o
    return None

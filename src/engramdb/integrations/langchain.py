"""LangChain tools over an engramdb store, bound to one agent (``pip install "engramdb[langchain]"``).

>>> from engramdb import Engram
>>> from engramdb.integrations.langchain import memory_tools
>>> mem = Engram("./memory")                                            # doctest: +SKIP
>>> tools = memory_tools(mem, agent="surfer")                           # doctest: +SKIP
>>> model.bind_tools(tools)  # or create_agent(model, tools=tools)      # doctest: +SKIP

The tools (``langchain_core`` :class:`~langchain_core.tools.StructuredTool` objects with pydantic argument
schemas):

- ``save_pattern(task, actions, success_rate=1.0, context="")``: store a task pattern that worked (seed 004);
  it becomes a ``success`` memory tagged ``pattern`` whose ``confidence`` is the success rate (saving the same
  task with the same actions again merges into the stored pattern, keeping the higher rate).
- ``recall_patterns(task, max_results=3, min_success_rate=0.5)``: similar patterns with their actions,
  success rate and how often they were used.
- ``get_pattern_stats()``: how many patterns, their success rates and usage.
- ``remember(content, kind="knowledge", tags=[])`` and ``search(query, kind=None, tags=None, limit=5)``.
- ``update(memory_id, content=None, tags=None, kind=None)`` and ``forget(memory_id)``: correct or remove one of
  the agent's own memories (the old values stay in its history; a forgotten one leaves a tombstone).
- ``suggest(context, options=None)``: what to do, from the outcomes of similar situations.
- ``record_outcome(context, action, outcome, alternatives=[], used_memory_ids=[])``: how an action turned out;
  the outcome is fed back to the memories (patterns) that were used, which updates their success rate and
  usage count.

A mistake the model can fix (an unknown kind, an unknown id, empty text, a bad argument) comes back to it as
the tool's answer, one line, never a traceback. Everything goes through the public API, so secrets are redacted
before they are stored and every read and write is audited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import wraps
from typing import TYPE_CHECKING, Any, Final, Literal, ParamSpec

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from engramdb import validate as check
from engramdb.errors import ConfigError, EngramError
from engramdb.integrations._patterns import (
    PATTERN_KIND,
    PATTERN_TAG,
    same_task,
    similarity_text,
    task_of,
)
from engramdb.models import Kind
from engramdb.storage.base import Filter
from engramdb.toolkit import text_relevance

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.models import Hit

__all__ = [
    "PATTERN_KIND",
    "PATTERN_TAG",
    "ForgetArgs",
    "GetPatternStatsArgs",
    "RecallPatternsArgs",
    "RecordOutcomeArgs",
    "RememberArgs",
    "SavePatternArgs",
    "SearchArgs",
    "SuggestArgs",
    "UpdateArgs",
    "memory_tools",
]


#: Longest piece of a memory's content shown to the model in a tool answer.
_SHOWN_CHARS: Final = 500

P = ParamSpec("P")


# -- argument schemas (their descriptions are what the model reads) -----------------------------------------
class SavePatternArgs(BaseModel):
    """Arguments of ``save_pattern``."""

    task: str = Field(description="Natural language description of the task that was completed.")
    actions: list[dict[str, Any]] = Field(
        description='The tool calls that solved the task, in order, each as {"tool": "<name>", "args": {...}}.'
    )
    success_rate: float = Field(default=1.0, ge=0.0, le=1.0, description="How reliably this worked, 0.0 to 1.0.")
    context: str = Field(default="", description="When this pattern applies (conditions, caveats); optional.")


class RecallPatternsArgs(BaseModel):
    """Arguments of ``recall_patterns``."""

    task: str = Field(description="The task you are about to do, in natural language.")
    max_results: int = Field(default=3, ge=1, le=10, description="At most this many patterns.")
    min_success_rate: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Leave out patterns whose success rate is below this."
    )


class GetPatternStatsArgs(BaseModel):
    """``get_pattern_stats`` takes no arguments."""


class RememberArgs(BaseModel):
    """Arguments of ``remember``."""

    content: str = Field(description="What to remember, as a self-contained statement.")
    kind: Kind = Field(
        default="knowledge",
        description="What sort of memory this is: knowledge (a fact), preference, decision, success, failure, "
        "code_pattern, conversation, episode or collaboration.",
    )
    tags: list[str] = Field(default_factory=list, description="Short labels to find it by later; optional.")


class SearchArgs(BaseModel):
    """Arguments of ``search``."""

    query: str = Field(description="What you are looking for, in natural language or keywords.")
    kind: Kind | None = Field(default=None, description="Only memories of this kind (e.g. failure, decision).")
    tags: list[str] | None = Field(default=None, description="Only memories carrying all of these tags.")
    limit: int = Field(default=5, ge=1, le=50, description="At most this many memories.")


class UpdateArgs(BaseModel):
    """Arguments of ``update``."""

    memory_id: str = Field(description="The id of the memory to change (from search or remember).")
    content: str | None = Field(default=None, description="The corrected text; leave empty to keep it.")
    tags: list[str] | None = Field(default=None, description="The new tags (replacing the old ones); optional.")
    kind: Kind | None = Field(default=None, description="The new kind; optional.")


class ForgetArgs(BaseModel):
    """Arguments of ``forget``."""

    memory_id: str = Field(description="The id of the memory to delete for good (from search or remember).")


class SuggestArgs(BaseModel):
    """Arguments of ``suggest``."""

    context: str = Field(description="The situation you are in, in words (e.g. 'login page shows a captcha').")
    options: list[str] | None = Field(
        default=None, description="The actions you could take; leave empty to consider every action tried before."
    )


class RecordOutcomeArgs(BaseModel):
    """Arguments of ``record_outcome``."""

    context: str = Field(description="The situation the action was taken in, in words.")
    action: str = Field(description="The action you took, as a short name (e.g. 'retry-with-backoff').")
    outcome: Literal["success", "failure", "partial"] | float = Field(
        description='How it turned out: "success", "failure", "partial", or a reward from -1.0 to 1.0.'
    )
    alternatives: list[str] = Field(default_factory=list, description="Other actions that were possible.")
    used_memory_ids: list[str] = Field(
        default_factory=list,
        description="Ids of memories or patterns you relied on (from recall_patterns or search); "
        "the outcome updates their success rate.",
    )


#: A pattern is recalled only at this calibrated relevance or more (README, "Relevance"): unrelated tasks get
#: 0.1-0.2 with the default model, rewordings above 0.7 ("Sign into FB" / "Login to Facebook" 0.98, "Go to
#: FB" 0.83), so an unrelated pattern is never offered as a similar one. Seed 004's rule, reuse a pattern
#: above 0.7, reads the "Similarity" line, which shows this relevance against the pattern's task (not its steps).
_MIN_RELEVANCE: Final = 0.3


# -- the tools ----------------------------------------------------------------------------------------------
def memory_tools(
    mem: Engram, *, agent: str | None = None, user: str | None = None, session: str | None = None
) -> list[BaseTool]:
    """The engramdb tools for a LangChain agent, every one acting as ``agent`` on ``mem`` (default: its
    ``agent`` setting). With ``user`` (and ``session``) the memory tools (``remember``, ``search``,
    ``update``, ``forget``) keep to that user's scope: what they store is the user's, what they find is the
    user's and the agent's own, never another user's; patterns and outcomes stay the agent's (shared learning).

    Returns ``save_pattern``, ``recall_patterns``, ``get_pattern_stats``, ``remember``, ``search``,
    ``update``, ``forget``, ``suggest`` and ``record_outcome``. An :class:`~engramdb.errors.EngramError`
    raised while a tool runs (and invalid arguments) become the tool's answer, so the model can correct itself.
    """
    if not hasattr(mem, "store"):  # the pattern statistics aggregate in the store
        raise ConfigError(
            "memory_tools needs a store in this process (Engram(path) or a database URL), not a server's client"
        )
    agent = check.agent_or_default(agent, mem.settings)
    tools = _Tools(mem, agent, user=check.scope(user, what="user"), session=check.scope(session, what="session"))
    specs: list[tuple[str, Callable[..., str], type[BaseModel], str]] = [
        (
            "save_pattern",
            tools.save_pattern,
            SavePatternArgs,
            "Save a task pattern that worked, for reuse. Call it after completing a task successfully, "
            "with the task and the tool calls that solved it. This is how you learn over time.",
        ),
        (
            "recall_patterns",
            tools.recall_patterns,
            RecallPatternsArgs,
            "Recall patterns of similar tasks solved before, with their actions and success rates. "
            "Call it when starting a task; reuse a pattern that fits. Each pattern has an id: pass it to "
            "record_outcome as used_memory_ids once you know whether it worked.",
        ),
        (
            "get_pattern_stats",
            tools.get_pattern_stats,
            GetPatternStatsArgs,
            "Statistics about the saved patterns: how many, average and best success rate, total usage, "
            "the most used pattern.",
        ),
        (
            "remember",
            tools.remember,
            RememberArgs,
            "Store a fact, preference, decision or lesson in long-term memory so it can be found later, "
            "also after a restart.",
        ),
        (
            "search",
            tools.search,
            SearchArgs,
            "Search long-term memory for what is relevant to a query (by meaning and keywords). "
            "Returns memories with their ids, kinds and relevance, best first.",
        ),
        (
            "update",
            tools.update,
            UpdateArgs,
            "Correct one of your memories: new text, tags or kind (only what you pass changes). "
            "The old version stays in the memory's history.",
        ),
        (
            "forget",
            tools.forget,
            ForgetArgs,
            "Delete one of your memories for good, when it is wrong or no longer wanted.",
        ),
        (
            "suggest",
            tools.suggest,
            SuggestArgs,
            "Ask which action to take in a situation, from the outcomes recorded in similar situations. "
            "Returns a recommendation (or none when evidence is thin) and each option's success statistics.",
        ),
        (
            "record_outcome",
            tools.record_outcome,
            RecordOutcomeArgs,
            "Record how an action turned out in a situation (success, failure, partial, or a reward), so "
            "future suggestions improve. Pass the ids of memories or patterns you used to update their "
            "success rates.",
        ),
    ]
    return [
        StructuredTool.from_function(
            func=func,
            name=name,
            description=description,
            args_schema=schema,
            handle_tool_error=True,
            handle_validation_error=_validation_message(name),
        )
        for name, func, schema, description in specs
    ]


def _guarded(name: str) -> Callable[[Callable[P, str]], Callable[P, str]]:
    """Turns an EngramError of a tool into a ToolException: the model gets its one-line message."""

    def wrap(func: Callable[P, str]) -> Callable[P, str]:
        @wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> str:
            try:
                return func(*args, **kwargs)
            except EngramError as exc:
                raise ToolException(f"{name} failed: {exc}") from exc

        return run

    return wrap


def _validation_message(name: str) -> Callable[[Any], str]:
    """The answer a tool gives to arguments its schema rejects: which field and why, on one line."""

    def message(exc: Any) -> str:
        if isinstance(exc, PydanticValidationError):
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
            )
            return f"{name} got invalid arguments: {problems}"
        return f"{name} got invalid arguments: {exc}"

    return message


class _Tools:
    """The tool functions, bound to one store and one agent."""

    def __init__(self, mem: Engram, agent: str, *, user: str | None = None, session: str | None = None) -> None:
        self._mem = mem
        self._agent = agent
        self._user, self._session = user, session

    @_guarded("save_pattern")
    def save_pattern(
        self, task: str, actions: list[dict[str, Any]], success_rate: float = 1.0, context: str = ""
    ) -> str:
        """Stores the pattern as a ``success`` memory; its confidence is the success rate."""
        text = task.strip()
        steps = _format_steps(actions)
        content = f"{text}\nActions: {steps}" if steps else text
        if context.strip():
            content += f"\nWhen: {context.strip()}"
        memory = self._mem.remember(
            content,
            agent=self._agent,
            kind=PATTERN_KIND,
            tags=[PATTERN_TAG],
            metadata={"task": text, "actions": actions, "context": context},
            confidence=success_rate,
        )
        return f"Saved pattern {memory.id} for task: {_shown(str(memory.metadata.get('task', text)))}"

    @_guarded("recall_patterns")
    def recall_patterns(self, task: str, max_results: int = 3, min_success_rate: float = 0.5) -> str:
        """Searches the agent's patterns; keeps those at or above the success rate."""
        hits = self._mem.search(
            task, agent=self._agent, kind=PATTERN_KIND, tags=[PATTERN_TAG], limit=max(max_results * 4, 10)
        )
        floor = max(_MIN_RELEVANCE, self._mem.settings.min_score)
        able = [h for h in hits if h.memory.confidence >= min_success_rate]
        alike = sorted(
            ((h, s) for h, s in zip(able, self._similarities(task, able), strict=True) if s >= floor),
            key=lambda pair: -pair[1],
        )
        kept = alike[:max_results]
        if not kept:
            return f"No similar patterns found for task: {_shown(task)}"
        lines = [f"Found {len(kept)} similar pattern{'s' if len(kept) != 1 else ''}:"]
        for i, (hit, similarity) in enumerate(kept, 1):
            m = hit.memory
            lines.append(f"{i}. Task: {_shown(task_of(m))}")
            lines.append(f"   Pattern id: {m.id}")
            lines.append(f"   Similarity: {similarity_text(similarity, same=same_task(task, task_of(m)))}")
            lines.append(f"   Success rate: {m.confidence:.0%}")
            lines.append(f"   Times used: {_count(m.attempts)}")
            when = m.metadata.get("context")
            if isinstance(when, str) and when.strip():
                lines.append(f"   When: {_shown(when)}")
            actions = m.metadata.get("actions")
            lines.append("   Actions:")
            if isinstance(actions, list) and actions:
                lines.extend(f"      {j}. {_format_action(a)}" for j, a in enumerate(actions, 1))
            else:
                lines.append("      (none recorded)")
        return "\n".join(lines)

    def _similarities(self, task: str, hits: Sequence[Hit]) -> list[float]:
        """Each pattern's calibrated relevance to ``task``, against the pattern's task rather than its steps.

        Against the task alone, as seed 004 embeds a pattern (its document is the task): ``save_pattern`` also
        writes the steps into the memory's text, and tool names diluted a rewording ("Go to FB" 0.45 against
        "Login to Facebook" and its steps, 0.83 against the task).
        """
        tasks = [task_of(h.memory) for h in hits]
        # A pattern whose text is its task (imported from Chroma, written by hand) was scored on it by the search.
        todo = [i for i, (h, t) in enumerate(zip(hits, tasks, strict=True)) if t != h.memory.content]
        out = [h.relevance for h in hits]
        if todo:
            vectors = self._mem.embedder.embed([task, *(tasks[i] for i in todo)])
            for i, cosine in zip(todo, vectors[1:] @ vectors[0], strict=True):
                out[i] = text_relevance(task, tasks[i], cosine=float(cosine), embedder=self._mem.embedder)
        return out

    @_guarded("get_pattern_stats")
    def get_pattern_stats(self) -> str:
        """Totals over every pattern the agent can see, aggregated in the store (no pattern is loaded)."""
        # The agent's scope (its own, shared with it, public), as every read of it: the Filter's agent rule.
        flt = Filter(agent=check.agent_name(self._agent), kinds=(PATTERN_KIND,), tags=(PATTERN_TAG,))
        memories = self._mem.store.memories
        total = memories.count(flt)
        if not total:
            return "Pattern statistics:\n- Total patterns: 0"
        usage = memories.usage(flt)
        top = memories.list(flt, limit=1, order="most_used")
        # The one pattern this names is read through the audited API, as a listing of it would be.
        most_used = self._mem.get(top[0].id, agent=self._agent) if top and top[0].attempts > 0 else None
        return "\n".join(
            [
                "Pattern statistics:",
                f"- Total patterns: {total}",
                f"- Average success rate: {usage.confidence_sum / total:.0%}",
                f"- Best success rate: {usage.best_confidence or 0.0:.0%}",
                f"- Total usage: {_count(usage.attempts)}",
                f"- Most used pattern: {most_used.id if most_used is not None else 'none used yet'}",
            ]
        )

    @_guarded("remember")
    def remember(self, content: str, kind: Kind = "knowledge", tags: Sequence[str] = ()) -> str:
        """Stores one memory; says which secrets were redacted."""
        memory = self._mem.remember(
            content, agent=self._agent, kind=kind, tags=list(tags), user=self._user, session=self._session
        )
        note = f" (redacted before storing: {', '.join(memory.redacted)})" if memory.redacted else ""
        return f"Remembered {memory.id} ({memory.kind}){note}."

    @_guarded("search")
    def search(self, query: str, kind: Kind | None = None, tags: Sequence[str] | None = None, limit: int = 5) -> str:
        """Hybrid search in the agent's memories (and those shared with it)."""
        wanted = list(tags) if tags else None
        hits = self._mem.search(
            query, agent=self._agent, kind=kind, tags=wanted, limit=limit, user=self._user, session=self._session
        )
        if not hits:
            return f"No memories found for: {_shown(query)}"
        lines = [f"Found {len(hits)} memor{'ies' if len(hits) != 1 else 'y'}, best first:"]
        for i, hit in enumerate(hits, 1):
            m = hit.memory
            tag_text = f" tags={','.join(m.tags)}" if m.tags else ""
            shared = f" shared by {m.shared_by}" if m.shared_by else ""
            same = f" (stands for {hit.stands_for} near-identical memories)" if hit.duplicates else ""
            lines.append(f"{i}. [{m.kind}] id={m.id} relevance={hit.relevance:.2f}{tag_text}{shared}{same}")
            lines.append(f"   {_shown(m.content)}")
        return "\n".join(lines)

    @_guarded("update")
    def update(
        self, memory_id: str, content: str | None = None, tags: Sequence[str] | None = None, kind: Kind | None = None
    ) -> str:
        """Changes the fields given of one of the agent's own memories."""
        changes: dict[str, Any] = {"content": content, "tags": None if tags is None else list(tags), "kind": kind}
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            return "Nothing to change: pass content, tags or kind."
        if self._user is not None or self._session is not None:  # in the user's scope, else NotFound
            self._mem.get(memory_id, agent=self._agent, user=self._user, session=self._session)
        memory = self._mem.update(memory_id, agent=self._agent, **changes)
        return f"Updated {memory.id} ({', '.join(sorted(changes))})."

    @_guarded("forget")
    def forget(self, memory_id: str) -> str:
        """Deletes one of the agent's own memories."""
        self._mem.forget(memory_id, agent=self._agent, user=self._user, session=self._session)
        return f"Forgot {memory_id}."

    @_guarded("suggest")
    def suggest(self, context: str, options: Sequence[str] | None = None) -> str:
        """The learning layer's recommendation, with each option's statistics."""
        s = self._mem.learning.suggest(context, agent=self._agent, options=list(options) if options else None)
        if s.recommended is not None:
            head = f"Recommended: {s.recommended} (confidence {s.confidence:.0%} that it is the best option)."
        else:
            head = "No confident recommendation yet: the recorded evidence is too thin."
        lines = [head]
        if s.reason:
            lines.append(f"Why: {s.reason}")
        if s.options:
            lines.append("Options (best first):")
            lines.extend(
                f"- {o.action}: {o.success_rate:.0%} success over {_count(o.attempts)} similar attempt"
                f"{'s' if o.attempts != 1 else ''} (plausible range {o.low:.0%}-{o.high:.0%})"
                for o in s.options
            )
        else:
            lines.append("No outcomes recorded in similar situations yet.")
        return "\n".join(lines)

    @_guarded("record_outcome")
    def record_outcome(
        self,
        context: str,
        action: str,
        outcome: str | float,
        alternatives: Sequence[str] = (),
        used_memory_ids: Sequence[str] = (),
    ) -> str:
        """Records the outcome; the memories used get it as feedback (their success rates move)."""
        memory = self._mem.learning.record(
            context,
            action,
            outcome,
            agent=self._agent,
            alternatives=list(alternatives),
            used=list(used_memory_ids),
        )
        fed = f"; updated {len(set(used_memory_ids))} used memor{'ies' if len(set(used_memory_ids)) != 1 else 'y'}"
        return f"Recorded outcome {memory.id}: {action} -> {outcome}{fed if used_memory_ids else ''}."


# -- formatting -----------------------------------------------------------------------------------------------
def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _count(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _format_action(action: Any) -> str:
    if isinstance(action, dict):
        tool = action.get("tool", action.get("name", "unknown"))
        args = action.get("args", action.get("arguments", {}))
        return f"{tool}: {args}"
    return str(action)


def _format_steps(actions: Sequence[Any]) -> str:
    names = [str(a.get("tool", a.get("name", "step"))) if isinstance(a, dict) else str(a) for a in actions]
    return " -> ".join(names)

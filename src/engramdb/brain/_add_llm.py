"""``add`` with an LLM: mem0-style decisions (ADD, UPDATE, DELETE, NONE) against the nearest stored facts.

The LLM gets the conversation and the agent's stored facts nearest to it, each under a short
number (never a real id: a model that invents or mistypes one cannot reach another memory), and
answers with one decision per fact. The whole answer is checked before anything is written: its
shape (:func:`~engramdb.brain.llm.check_shape`), every number naming an offered memory, every
text and key passing the checks ``remember`` applies, no memory decided twice. Anything wrong is
an :class:`~engramdb.errors.LLMError`, and ``add`` falls back to the deterministic extractor.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from engramdb import _validate as check
from engramdb.brain.llm import LLM, check_shape
from engramdb.errors import LLMError, ValidationError
from engramdb.models import ChatMessage, Memory

__all__ = ["DECISION_SCHEMA", "MAX_DECISIONS", "Decision", "decide", "prompt"]

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]
#: Most decisions one answer may hold.
MAX_DECISIONS: Final = 50
#: Characters of conversation shown to the LLM (the newest kept).
_MAX_CHARS: Final = 12_000

DECISION_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "required": ["facts"],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["event"],
                "properties": {
                    "event": {"type": "string", "enum": ["ADD", "UPDATE", "DELETE", "NONE"]},
                    "id": {"type": ["string", "integer", "null"]},
                    "text": {"type": ["string", "null"]},
                    "kind": {"type": ["string", "null"], "enum": ["preference", "knowledge", None]},
                    "key": {"type": ["string", "null"]},
                },
            },
        }
    },
}

_SYSTEM: Final = """You keep an assistant's long-term memory about the people it talks to.
From the conversation, find durable facts the user states about themselves: name, home, work, family, pets,
health, diet, dated plans, preferences, and anything they ask you to remember. Compare each with the stored
facts and decide:
- ADD: a new fact (give text; kind "preference" or "knowledge"; key: a short stable name such as "home",
  "employer", "pref:editor" when the fact is a value that can change, else null);
- UPDATE: a stored fact that is now different or more complete (give its id and the new text);
- DELETE: a stored fact the conversation says is no longer true and that nothing replaces (give its id);
- NONE: a stored fact the conversation repeats unchanged (give its id).
Write each text as one sentence about the user ("The user lives in Berlin."). Ignore questions, hypotheticals
and what the assistant says. Answer with JSON only: {"facts": [{"event": ..., "id": ..., "text": ..., "kind": ...,
"key": ...}]}; an empty list when there is nothing durable."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One checked decision of the LLM."""

    event: Event
    #: The new text (ADD, UPDATE).
    text: str | None = None
    kind: Literal["preference", "knowledge"] = "knowledge"
    key: str | None = None
    #: The stored memory it is about (UPDATE, DELETE, NONE).
    target: Memory | None = None


def prompt(messages: Sequence[ChatMessage], candidates: Sequence[Memory]) -> list[dict[str, str]]:
    """The chat messages asking for decisions; stored facts are numbered from 0 in ``candidates`` order."""
    lines = [f"{m.name or m.role}: {m.content}" for m in messages if m.role in ("user", "assistant")]
    talk = "\n".join(lines)[-_MAX_CHARS:]
    stored = [{"id": str(i), "text": m.content, "key": m.metadata.get("key")} for i, m in enumerate(candidates)]
    user = f"## Stored facts\n{json.dumps(stored, ensure_ascii=False)}\n\n## Conversation\n{talk}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def decide(llm: LLM, messages: Sequence[ChatMessage], candidates: Sequence[Memory]) -> list[Decision]:
    """Ask ``llm`` and check its whole answer; LLMError if anything in it is wrong (nothing is written then)."""
    answer = llm.complete(prompt(messages, candidates), schema=DECISION_SCHEMA, temperature=0.0)
    if not isinstance(answer, dict):
        raise LLMError("the LLM's answer is not a JSON object")
    check_shape(answer, DECISION_SCHEMA)
    items = cast("list[dict[str, Any]]", answer["facts"])
    if len(items) > MAX_DECISIONS:
        raise LLMError(f"the LLM's answer holds {len(items)} decisions (the limit is {MAX_DECISIONS})")
    decided: set[int] = set()
    return [_decision(item, i, candidates, decided) for i, item in enumerate(items)]


def _decision(item: Mapping[str, Any], i: int, candidates: Sequence[Memory], decided: set[int]) -> Decision:
    where = f"decision {i}"
    event = cast("Event", item["event"])
    target: Memory | None = None
    if event != "ADD":
        raw = item.get("id")
        number = int(raw) if isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit()) else -1
        if not 0 <= number < len(candidates):
            raise LLMError(f"the LLM's {where} ({event}) names no stored fact offered to it: {raw!r}")
        if number in decided:
            raise LLMError(f"the LLM's {where} decides stored fact {number} a second time")
        decided.add(number)
        target = candidates[number]
    text: str | None = None
    key: str | None = None
    try:
        if event in ("ADD", "UPDATE"):
            text = check.content(item.get("text"), what=f"{where}: text").strip()
        if event == "ADD" and item.get("key") is not None:
            key = check.key(item["key"])
    except ValidationError as exc:
        raise LLMError(f"the LLM's {exc}") from None
    kind: Literal["preference", "knowledge"] = "preference" if item.get("kind") == "preference" else "knowledge"
    return Decision(event=event, text=text, kind=kind, key=key, target=target)

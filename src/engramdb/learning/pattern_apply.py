"""``apply-pattern`` on a memory: what to do for a task, from what the memory says, not its text echoed back.

Seed 001: ``engram learning apply-pattern migration-rollback-strategy --task db-migration-456``
after finding "migration-rollback-strategy (95% success rate)" among alice's memories. The plan
says what to do (a decision's action; a procedure's steps, one per sentence or numbered item; a
code pattern's code), how well it worked (the memory's own successes and attempts, and a
decision's recorded outcome), where it came from (the context it was learned in, who shared it)
and which checks to run first (the failure patterns the task resembles). Pure: values in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from engramdb.models import Memory, PatternPlan

__all__ = ["apply_memory", "memory_words", "procedure_steps"]

#: A procedure's steps: numbered or bulleted items, else sentences, else "->" / ";" separated parts.
_ITEM: Final = re.compile(r"(?:^|\s)(?:\d+[.)]|[-*•])\s+")
_SENTENCE: Final = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_PARTS: Final = re.compile(r"\s*(?:->|→|;|, then )\s*")
_TITLE: Final = re.compile(r"^\s*([A-Za-z0-9][\w .\-/]{0,80}?)\s*:\s+(?=\S)")


def memory_words(memory: Memory) -> str:
    """The text a memory is named by: its action, key, name, tags and first line."""
    meta = memory.metadata
    named = [str(meta[k]) for k in ("action", "key", "name") if isinstance(meta.get(k), str)]
    first = memory.content.strip().splitlines()[0] if memory.content.strip() else ""
    return " ".join([*named, *memory.tags, first])


def procedure_steps(text: str) -> list[str]:
    """``text`` as ordered steps: its numbered or bulleted items, else its sentences, else its ``->`` parts."""
    body = _TITLE.sub("", text.strip(), count=1)
    for splitter in (_ITEM, _SENTENCE, _PARTS):
        parts = [p.strip(" .;") for p in splitter.split(body) if p.strip(" .;")]
        if len(parts) >= 2:
            return [p[0].upper() + p[1:] for p in parts]
    return [body.strip()] if body.strip() else []


def _record(memory: Memory) -> str | None:
    if memory.attempts:
        rate = memory.successes / memory.attempts
        return f"It worked {memory.successes:g} of {memory.attempts:g} times it was used ({rate:.0%})."
    return None


def apply_memory(
    memory: Memory, task: str, relevance: float, *, reader: str, checks: Sequence[str] = ()
) -> PatternPlan:
    """How to apply ``memory`` to ``task`` for agent ``reader``: checks first, then what to do, with its record."""
    meta = memory.metadata
    first_line = memory.content.strip().splitlines()[0] if memory.content.strip() else memory.id
    origin = f" (learned by {memory.agent})" if memory.agent != reader else ""
    if memory.kind == "code_pattern":
        name = str(meta.get("name") or first_line)
        signature = meta.get("signature")
        steps = [*checks, f"Reuse {name}" + (f" ({signature})" if signature else "") + f" for: {task}"]
        if meta.get("context"):
            steps.append(f"It was written for: {meta['context']}.")
        if meta.get("handled"):
            steps.append(f"It handles: {', '.join(str(h) for h in meta['handled'])}.")
        if meta.get("complexity_level"):
            steps.append(f"Complexity: {meta['complexity_level']} ({meta.get('complexity')}).")
        header = meta.get("header_lines")
        lines = memory.content.splitlines()
        code_text = (
            "\n".join(lines[header:]) if isinstance(header, int) and 0 <= header < len(lines) else memory.content
        )
        return PatternPlan(
            task=task,
            pattern_id=memory.id,
            kind="code_pattern",
            title=f"{meta.get('pattern_type', 'code')} {name}",
            relevance=relevance,
            steps=steps,
            code=code_text,
        )
    steps = list(checks)
    action = meta.get("action")
    if isinstance(action, str) and action:
        outcome = meta.get("outcome")
        steps.append(f"Do: {action} (it was done for {memory.content.strip()!r}{f', {outcome}' if outcome else ''}).")
        alternatives = meta.get("alternatives")
        if isinstance(alternatives, list) and alternatives:
            steps.append(f"Considered instead: {', '.join(str(a) for a in alternatives)}.")
        title = f"{action}{origin}"
    else:
        steps += procedure_steps(memory.content)
        match = _TITLE.match(memory.content.strip())
        title = (match.group(1) if match else first_line[:80]) + origin
    record = _record(memory)
    if record:
        steps.append(record)
    return PatternPlan(task=task, pattern_id=memory.id, kind=memory.kind, title=title, relevance=relevance, steps=steps)

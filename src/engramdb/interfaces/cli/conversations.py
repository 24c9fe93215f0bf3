"""``engram memory add``: a conversation in (OpenAI-style messages from a file or standard input), facts out."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import AgentOption, JsonOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, emit_json, shorten

__all__ = ["add", "read_messages"]

#: Largest conversation file read (bytes): ``add`` takes at most 10,000 messages anyway.
MAX_BYTES = 64 * 1024 * 1024


def read_messages(raw: str, *, source: str) -> Any:
    """The messages in ``raw``: a JSON list of messages, an object with ``messages`` (a chat request body), or
    JSON Lines (one message per line). Only the format is checked here; ``add`` checks the messages."""
    text = raw.strip()
    if not text:
        raise ValidationError(f"{source} is empty: give a JSON list of messages")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            data = [json.loads(line) for line in lines]
        except ValueError as exc:
            raise ValidationError(f"{source} is neither JSON nor JSON Lines ({exc})") from None
    if isinstance(data, dict) and "messages" in data:
        return data["messages"]
    return data


def add(
    ctx: typer.Context,
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help='Messages as JSON ([{"role": "user", "content": "..."}, ...], or {"messages": [...]}, or one '
            "message per line); '-' or nothing reads standard input.",
        ),
    ] = "-",
    *,
    agent: AgentOption = "default",
    user: Annotated[
        str | None,
        typer.Option("--user", metavar="USER", help="The user the conversation is with.", show_default=False),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="SESSION", help="The conversation thread it belongs to.", show_default=False),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="WHEN",
            help="When it was said (ISO 8601), for messages without their own 'at'.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a conversation: store every message as a turn and keep the durable facts it states.

    Facts (name, home, job, family, preferences, health, dated plans, "remember that ...") get a stable
    key, so a changed fact supersedes the old one. With an LLM configured (ENGRAM_LLM) it decides.
    """
    if file == "-":
        raw, source = sys.stdin.read(MAX_BYTES + 1), "standard input"
    else:
        path = Path(file)
        if not path.is_file():
            raise ValidationError(f"{file} is a directory, not a file" if path.is_dir() else f"no such file: {file}")
        raw, source = path.read_text(encoding="utf-8", errors="replace")[: MAX_BYTES + 1], file
    if len(raw) > MAX_BYTES:
        raise ValidationError(f"{source} is larger than {MAX_BYTES // (1024 * 1024)} MB; add it in parts")
    messages = read_messages(raw, source=source)
    with open_engram(ctx, store, create=True) as mem:
        result = mem.add(messages, agent=agent, user=user, session=session, at=at)
    if as_json:
        emit_json(result.to_dict())
        return
    out = console()
    counts = result.to_dict()
    summary = ", ".join(
        f"{counts[name]} {name}" for name in ("added", "updated", "superseded", "deleted", "unchanged") if counts[name]
    )
    out.print(
        f"Stored {len(result.turns)} turn{'s' if len(result.turns) != 1 else ''} for agent {escape(repr(agent))}; "
        f"facts: {summary or 'none found'} ({escape(result.extractor)})."
    )
    if result.llm_error:
        out.print(f"[dim]The LLM was not used: {escape(result.llm_error)}[/]")
    if result.facts:
        table = Table(show_header=True, header_style="bold")
        for column in ("action", "key", "fact", "was"):
            table.add_column(column)
        for fact in result.facts:
            table.add_row(
                fact.action,
                escape(fact.key or ""),
                escape(shorten(fact.memory.content, 60)),
                escape(shorten(fact.previous or "", 40)),
            )
        out.print(table)

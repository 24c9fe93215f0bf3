"""How ``engram`` prints: JSON on ``--json``, else rich tables and short lines.

JSON is always a value's own ``to_dict()`` (the one serializer of the library),
printed by :func:`emit_json`. The tables here show the core values (memories,
hits, history); a command's own tables live next to the command.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import typer
from rich import box
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from engramdb.models import Change, FailurePattern, Hit, Memory

__all__ = [
    "CONTENT_WIDTH",
    "WIDE",
    "console",
    "count_memories",
    "count_text",
    "emit_json",
    "format_when",
    "history_table",
    "hits_table",
    "listing_table",
    "memories_table",
    "memory_detail",
    "pct",
    "printable",
    "shorten",
]

#: Characters of content shown in a table cell; ``show`` prints it whole.
CONTENT_WIDTH: Final = 160
#: Terminal width from which tables show their optional columns.
WIDE: Final = 120


# -- basics --------------------------------------------------------------------------------------------


def printable(text: str) -> str:
    """``text`` with control characters (ESC, BEL, ...; not newline and tab) shown as ``\\xNN``.

    Memories hold what agents and imported files wrote: printed raw, an escape sequence in
    one could clear the screen, retitle the window or fake output on the user's terminal.
    """
    if text.isprintable() or not any(_is_control(c) for c in text):
        return text
    return "".join(f"\\x{ord(c):02x}" if _is_control(c) else c for c in text)


def _is_control(char: str) -> bool:
    return char not in "\n\t" and unicodedata.category(char) == "Cc"


class _Printable:
    """A renderable as its segments, with the control characters of its text made visible (:func:`printable`)."""

    def __init__(self, inner: ConsoleRenderable) -> None:
        self._inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self._inner, options):
            # Control segments are rich's own cursor moves; only text can carry what a memory held.
            if segment.control is None and not segment.text.isprintable():
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment


class _PrintableHook(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Printable(r) for r in renderables]


def console() -> Console:
    """A rich console on the current stdout (created per call: tests swap stdout).

    Everything it prints goes through :func:`printable`: no stored text reaches the terminal
    as a control sequence.
    """
    out = Console(highlight=False, width=_pipe_width())
    out.push_render_hook(_PrintableHook())
    return out


#: Width of output written to a pipe or file: wide enough that no table column is cut, as ``grep`` and ``less -S``
#: users expect; rich would otherwise assume 80 columns and cut every wide cell.
PIPE_WIDTH: Final = 250


def _pipe_width() -> int | None:
    """None (rich measures) on a terminal or when ``COLUMNS`` says; :data:`PIPE_WIDTH` on a pipe or a file."""
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty else PIPE_WIDTH


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def shorten(text: str, width: int = CONTENT_WIDTH) -> str:
    """``text`` on one line (control characters made visible), cut to ``width`` characters with an ellipsis."""
    # Made visible before the cut and the table layout, so that a row keeps its width.
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def format_when(ts: datetime | None) -> str:
    """A timestamp as the CLI shows it: local time to the minute (``-`` for None)."""
    return ts.astimezone().strftime("%Y-%m-%d %H:%M") if ts is not None else "-"


def count_memories(n: int) -> str:
    """``1 memory``, ``3 memories``."""
    return f"{n} memor{'y' if n == 1 else 'ies'}"


def count_text(x: float) -> str:
    """A count that may be weighted: ``3``, ``0.49`` (evidence from similar contexts counts in part)."""
    return f"{x:g}" if float(x).is_integer() else f"{x:.2f}".rstrip("0").rstrip(".") or "0"


def pct(x: float | None) -> str:
    """A rate as a whole percentage (``-`` for None)."""
    return "-" if x is None else f"{x:.0%}"


def _tags(tags: Sequence[str]) -> str:
    return ", ".join(tags)


def listing_table(title: str | None) -> Table:
    """An empty table in the style of every listing (light borders, left title), for a command's own rows."""
    # Light borders: a listing should read like `ls -l`, and leave room for the content (80 columns hold
    # a 32-character id and three more columns; heavy borders cost three characters per column).
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        header_style="bold",
    )


def _add_row(table: Table, *cells: str | Text) -> None:
    # Plain strings in a rich table are parsed as markup: a tag like "[wip]" would vanish.
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def _id_column(table: Table) -> None:
    # Ids are what users copy into `show`/`update`/`forget`: never wrap or cut them.
    table.add_column("id", no_wrap=True, min_width=32, style="cyan")


def memories_table(
    memories: Sequence[Memory], *, agent: str | None = None, title: str | None = None, width: int = 80
) -> Table:
    """Memories one per row: id, kind, content (shortened) and tags; more columns when ``width`` allows."""
    wide = width >= WIDE
    foreign = any(agent is not None and m.agent != agent for m in memories)
    table = listing_table(title)
    _id_column(table)
    table.add_column("kind", no_wrap=True, style="magenta")
    if foreign:
        table.add_column("agent", no_wrap=True)
    table.add_column("content", ratio=1, min_width=20)
    if wide:
        table.add_column("tags", max_width=None if width >= PIPE_WIDTH else 30)
        table.add_column("used", justify="right", no_wrap=True)
        table.add_column("created", no_wrap=True)
    for m in memories:
        row: list[str | Text] = [m.id, m.kind, *([m.agent] if foreign else []), _content_cell(m, wide)]
        if wide:
            row += [_tags(m.tags), str(m.access_count), format_when(m.created_at)[:10]]
        _add_row(table, *row)
    return table


def hits_table(hits: Sequence[Hit], *, agent: str | None = None, title: str | None = None, width: int = 80) -> Table:
    """Search results best first: calibrated relevance, id, kind, content (shortened) and tags."""
    wide = width >= WIDE
    foreign = any(agent is not None and h.memory.agent != agent for h in hits)
    table = listing_table(title)
    table.add_column("relevance", justify="right", no_wrap=True, style="green")
    _id_column(table)
    table.add_column("kind", no_wrap=True, style="magenta")
    if foreign:
        table.add_column("agent", no_wrap=True)
    table.add_column("content", ratio=1, min_width=20)
    if wide:
        table.add_column("tags", max_width=None if width >= PIPE_WIDTH else 30)
    for h in hits:
        m = h.memory
        row: list[str | Text] = [f"{h.relevance:.2f}", m.id, m.kind, *([m.agent] if foreign else [])]
        cell = _content_cell(m, wide)
        note = _hit_note(h)
        if note:
            cell.append("\n" + note, style="dim")
        row.append(cell)
        if wide:
            row.append(_tags(m.tags))
        _add_row(table, *row)
    return table


def _hit_note(h: Hit) -> str:
    """What an outcome record did and how it went (its content is only the context), and what a hit folds."""
    meta = h.memory.metadata
    action, outcome = meta.get("action"), meta.get("outcome")
    parts = []
    if isinstance(action, str) and isinstance(outcome, str):
        parts.append(shorten(f"{action}: {outcome}", CONTENT_WIDTH // 2))
    if h.duplicates:
        parts.append(f"stands for {h.stands_for} near-identical memories")
    return "; ".join(parts)


def _content_cell(m: Memory, wide: bool) -> Text:
    if wide:
        return Text(shorten(m.content))
    # A narrow terminal has no room for a tags column: tags go under the (shorter) content.
    cell = Text(shorten(m.content, CONTENT_WIDTH // 2))
    if m.tags:
        cell.append("\n" + " ".join(f"#{t}" for t in m.tags), style="dim")
    return cell


def memory_detail(m: Memory) -> Table:
    """Every field of one memory, the content in full."""
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    rate = m.success_rate
    rows: list[tuple[str, str | Text]] = [
        ("id", Text(m.id, style="cyan")),
        ("agent", m.agent + (f" (shared by {m.shared_by})" if m.shared_by else "")),
        ("kind", m.kind),
        ("content", Text(printable(m.content))),
        ("tags", _tags(m.tags) or "-"),
        ("metadata", Text(json.dumps(dict(m.metadata), ensure_ascii=False)) if m.metadata else "-"),
        ("visibility", m.visibility),
        ("confidence", f"{m.confidence:.2f}"),
        ("success rate", f"{rate:.0%} ({m.successes:g} of {m.attempts:g})" if rate is not None else "-"),
        ("access count", str(m.access_count)),
        ("last accessed", format_when(m.last_accessed)),
        ("created", format_when(m.created_at)),
        ("updated", format_when(m.updated_at)),
    ]
    if m.redacted:
        rows.append(("redacted", ", ".join(m.redacted)))
    for name, value in rows:
        _add_row(table, name, value)
    return table


def _change_summary(change: Change) -> str:
    before: Mapping[str, Any] = change.before or {}
    after: Mapping[str, Any] = change.after or {}
    if change.action != "update":
        # A create/merge records the whole memory: its content says more than its field names.
        content = after.get("content")
        if isinstance(content, str):
            return shorten(content, 80)
        return ", ".join(sorted(after or before)) or "-"
    parts = []
    for field in sorted(set(before) | set(after)):
        old = shorten(json.dumps(before.get(field), ensure_ascii=False, default=str), 40)
        new = shorten(json.dumps(after.get(field), ensure_ascii=False, default=str), 40)
        parts.append(f"{field}: {old} → {new}")
    return "; ".join(parts) or "-"


def history_table(changes: Sequence[Change], *, title: str | None = None) -> Table:
    """A memory's history, oldest first: what changed, when and by whom."""
    table = listing_table(title)
    # The store-wide change number, not a row count: a memory's history skips other memories' changes (2, 9, ...).
    table.add_column("seq", justify="right")
    table.add_column("when", no_wrap=True)
    table.add_column("action", style="magenta", no_wrap=True)
    table.add_column("actor", no_wrap=True)
    table.add_column("changes", ratio=1, overflow="fold")
    for c in changes:
        _add_row(table, str(c.seq), format_when(c.at), c.action, c.actor, _change_summary(c))
    return table


def pattern_facts(pattern: FailurePattern) -> list[str]:
    """Seed 001's lines about a failure pattern: where it occurs, and what its prevention did (plain text)."""
    lines = []
    if pattern.occurs_in:
        lines.append("Occurs in: " + "; ".join(shorten(c, 60) for c in pattern.occurs_in))
    e = pattern.effect
    if e is not None:
        when = format_when(e.since)
        if e.prevented is None:
            lines.append(
                f"Prevention since {when}: {e.after} recurrence(s) since; too early to tell "
                f"({e.expected_after:.2g} expected at the earlier rate)"
            )
        else:
            lines.append(
                f"Success rate after applying prevention: {e.prevented:.0%} of expected recurrences prevented "
                f"({e.after} seen since {when}, {e.expected_after:.3g} expected at the earlier rate)"
            )
    return lines

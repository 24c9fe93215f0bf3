"""Plumbing every ``engram`` command group shares.

A command group is a module with a :func:`new_group` Typer app; its commands
parse arguments, call the :class:`~engramdb.Engram` API inside
:func:`open_engram`, and print with :func:`emit_json` or a rich table. They do
not catch errors: :class:`EngramGroup`, the root command, turns every user error
(:class:`~engramdb.EngramError`, usage errors, an aborted prompt) into one line
on stderr and exit code 1, so each group gets the same behaviour for free.

The options every command takes (``--store``, ``--json``, ``--agent``) are
declared once here as ``Annotated`` aliases, so they read the same everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from engramdb.errors import EngramError, ValidationError
from engramdb.models import KINDS, VISIBILITIES

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.models import Change, Hit, Memory

__all__ = [
    "AgentOption",
    "EngramGroup",
    "JsonOption",
    "KindsOption",
    "LimitOption",
    "MetaOption",
    "OptionalAgentOption",
    "StoreOption",
    "TagsOption",
    "check_kind",
    "check_visibility",
    "console",
    "count_memories",
    "emit_json",
    "format_when",
    "history_table",
    "hits_table",
    "memories_table",
    "memory_detail",
    "new_group",
    "open_engram",
    "parse_meta",
    "parse_outcome",
    "shorten",
]

#: Characters of content shown in a table cell; ``show`` prints it whole.
CONTENT_WIDTH: Final = 160
#: The help panel of the options every command shares.
COMMON_PANEL: Final = "Common options"
#: Terminal width from which tables show their optional columns.
WIDE: Final = 120

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        metavar="PATH",
        rich_help_panel=COMMON_PANEL,
        help="Store folder (or database URL). Default: $ENGRAM_HOME, else ~/.engram.",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON on stdout.", rich_help_panel=COMMON_PANEL)
]
AgentOption = Annotated[str, typer.Option("--agent", "-a", metavar="NAME", help="The agent whose memories these are.")]
OptionalAgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        "-a",
        metavar="NAME",
        help="Act as this agent: the memory must be visible to it. Default: any agent.",
        show_default=False,
    ),
]
KindsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--type",
        "--kind",
        "-t",
        metavar="KIND",
        help="Only memories of this kind (repeatable).",
        show_default=False,
    ),
]
TagsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tag", metavar="TAG", help="Only memories carrying this tag (repeatable: all must match).", show_default=False
    ),
]
MetaOption = Annotated[
    list[str] | None,
    typer.Option(
        "--meta",
        "-m",
        metavar="KEY=VALUE",
        help="Metadata entry (repeatable). VALUE is parsed as JSON when it is valid JSON, else kept as a string.",
        show_default=False,
    ),
]
LimitOption = Annotated[int, typer.Option("--limit", "-n", metavar="N", min=1, help="At most this many results.")]


@dataclass(slots=True)
class CliState:
    """What the root command parsed, for the subcommands (``ctx.obj``)."""

    store: str | None = None


# -- the root command group: one place that maps errors to exit codes -------------------------------------


class EngramGroup(TyperGroup):
    """The ``engram`` command: every user error becomes ``error: <one line>`` on stderr and exit code 1.

    Click's own convention (a usage banner plus exit code 2 for usage errors) is
    replaced because the contract promises exit code 1 and one line for any user
    error, whether the parser or the library found it.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exit (or return the exit code when ``standalone_mode`` is false)."""
        try:
            rv = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
            # Without standalone mode the parser returns an exit code for --help / typer.Exit,
            # and the command's return value otherwise (always None for our commands).
            code = rv if isinstance(rv, int) else 0
        except typer.Exit as exc:
            code = exc.exit_code
        except typer.Abort:
            code = _report("aborted")
        except typer.TyperException as exc:  # click's ClickException and UsageError derive from it
            code = _report(_usage_message(exc))
        except EngramError as exc:
            code = _report(str(exc))
        except BrokenPipeError:
            code = _broken_pipe()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                code = _broken_pipe()
            else:
                # A file the user named cannot be read or written: their problem to fix, not a crash.
                code = _report(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            code = 130
        if not standalone_mode:
            return code
        sys.exit(code)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _report(message: str) -> int:
    """Print ``error: message`` on one line to stderr; the exit code of a user error."""
    sys.stderr.write(f"error: {_one_line(message) or 'failed'}\n")
    sys.stderr.flush()
    return 1


def _usage_message(exc: typer.TyperException) -> str:
    message = _one_line(exc.format_message()).rstrip(".")
    # Click capitalises its messages ("No such option: --x"); ours are lower case.
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    command_path = getattr(ctx, "command_path", None)
    if command_path:
        message = f"{message} (see '{command_path} --help')"
    return message


def _broken_pipe() -> int:
    # The reader went away (``engram memory list | head``): stop quietly, and keep Python
    # from complaining again when it flushes stdout at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests): nothing to redirect
        pass
    finally:
        os.close(devnull)
    return 1


def new_group(name: str, help: str) -> typer.Typer:  # noqa: A002 - mirrors typer's own keyword
    """A command group (``engram <name> ...``); add it to the root app with ``app.add_typer(group)``.

    Without a subcommand the group prints its help and exits 0, instead of
    click's "missing command" usage error.
    """
    group = typer.Typer(name=name, help=help, invoke_without_command=True, add_completion=False)

    @group.callback()
    def _show_help(ctx: typer.Context) -> None:
        if ctx.invoked_subcommand is None:
            print_help(ctx)

    return group


def print_help(ctx: typer.Context) -> None:
    """Print the help of ``ctx``'s command and exit 0."""
    text = ctx.get_help()  # typer's rich formatter prints the help itself and returns ""
    if text:
        typer.echo(text)
    raise typer.Exit(0)


# -- opening the store ---------------------------------------------------------------------------------


def store_location(ctx: typer.Context, store: str | None) -> str | None:
    """The store to open: the command's ``--store``, else the root's, else None (the library default)."""
    if store:
        return store
    root = ctx.find_root().obj
    return root.store if isinstance(root, CliState) else None


@contextmanager
def open_engram(ctx: typer.Context, store: str | None, **options: Any) -> Iterator[Engram]:
    """Open the selected store for one command and close it afterwards.

    ``options`` go to :class:`~engramdb.Engram` (``on_model_mismatch=...``, ``progress=...``).
    """
    from engramdb import Engram

    location = store_location(ctx, store)
    mem = Engram(location, **options)
    with mem:
        yield mem


# -- input parsing -------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN/Infinity, which are not JSON: keep such values as strings.
    raise ValueError(name)


def parse_value(raw: str) -> Any:
    """``raw`` parsed as JSON when it is valid JSON (``3``, ``true``, ``{"a": 1}``), else the string itself."""
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except ValueError:
        return raw


def parse_outcome(raw: str) -> str | bool | float:
    """An ``--outcome`` value: a word (success/failure/partial), a boolean, or a reward in [-1, 1]."""
    value = parse_value(raw.strip())
    if isinstance(value, bool | int | float):
        return value if isinstance(value, bool) else float(value)
    # Anything else goes to the library as given: it owns the list of accepted words.
    return raw.strip()


def parse_meta(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--meta KEY=VALUE`` entries as a dict (later keys win); values via :func:`parse_value`."""
    result: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValidationError(f"bad --meta {pair!r}: expected KEY=VALUE")
        result[key] = parse_value(raw)
    return result


def check_kind(kind: str | None) -> None:
    """Reject an unknown kind before the store is opened (so nothing is created)."""
    if kind is not None and kind not in KINDS:
        raise ValidationError(f"unknown kind {kind!r} (choose from {', '.join(sorted(KINDS))})")


def check_visibility(visibility: str | None) -> None:
    """Reject an unknown visibility before the store is opened."""
    if visibility is not None and visibility not in VISIBILITIES:
        raise ValidationError(f"unknown visibility {visibility!r} (choose from {', '.join(sorted(VISIBILITIES))})")


# -- output --------------------------------------------------------------------------------------------


def console() -> Console:
    """A rich console on the current stdout (created per call: tests swap stdout)."""
    return Console(highlight=False)


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def shorten(text: str, width: int = CONTENT_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def format_when(ts: datetime | None) -> str:
    """A timestamp as the CLI shows it: local time to the minute (``-`` for None)."""
    return ts.astimezone().strftime("%Y-%m-%d %H:%M") if ts is not None else "-"


def count_memories(n: int) -> str:
    """``1 memory``, ``3 memories``."""
    return f"{n} memor{'y' if n == 1 else 'ies'}"


def _tags(tags: Sequence[str]) -> str:
    return ", ".join(tags)


def _table(title: str | None) -> Table:
    # Light borders: a listing should read like `ls -l`, and leave room for the content.
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
    table = _table(title)
    _id_column(table)
    table.add_column("kind", no_wrap=True, style="magenta")
    if foreign:
        table.add_column("agent", no_wrap=True)
    table.add_column("content", ratio=1, min_width=20)
    if wide:
        table.add_column("tags", max_width=30)
        table.add_column("used", justify="right", no_wrap=True)
        table.add_column("created", no_wrap=True)
    for m in memories:
        row: list[str | Text] = [m.id, m.kind, *([m.agent] if foreign else []), _content_cell(m, wide)]
        if wide:
            row += [_tags(m.tags), str(m.access_count), format_when(m.created_at)[:10]]
        _add_row(table, *row)
    return table


def hits_table(hits: Sequence[Hit], *, agent: str | None = None, title: str | None = None, width: int = 80) -> Table:
    """Search results best first: score, id, kind, content (shortened) and tags."""
    wide = width >= WIDE
    foreign = any(agent is not None and h.memory.agent != agent for h in hits)
    table = _table(title)
    table.add_column("score", justify="right", no_wrap=True, style="green")
    _id_column(table)
    table.add_column("kind", no_wrap=True, style="magenta")
    if foreign:
        table.add_column("agent", no_wrap=True)
    table.add_column("content", ratio=1, min_width=20)
    if wide:
        table.add_column("tags", max_width=30)
    for h in hits:
        m = h.memory
        row: list[str | Text] = [f"{h.score:.3f}", m.id, m.kind, *([m.agent] if foreign else [])]
        row.append(_content_cell(m, wide))
        if wide:
            row.append(_tags(m.tags))
        _add_row(table, *row)
    return table


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
        ("content", Text(m.content)),
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
    table = _table(title)
    table.add_column("#", justify="right")
    table.add_column("when", no_wrap=True)
    table.add_column("action", style="magenta", no_wrap=True)
    table.add_column("actor", no_wrap=True)
    table.add_column("changes", ratio=1, overflow="fold")
    for c in changes:
        _add_row(table, str(c.seq), format_when(c.at), c.action, c.actor, _change_summary(c))
    return table

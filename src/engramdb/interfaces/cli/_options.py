"""What ``engram`` commands accept: the shared options, their parsing, and the store they open.

The options every command takes (``--store``, ``--json``, ``--agent``, ...) are
declared once here as ``Annotated`` aliases, so they read the same everywhere.
Parsers turn option text into library arguments and reject bad input before a
store is opened (so a typo creates nothing). :func:`open_engram` opens the store
selected by ``--store`` (on the command, else on the root, else the default).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final, cast

import typer

from engramdb.errors import ValidationError

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.models import Kind, Visibility

__all__ = [
    "COMMON_PANEL",
    "AgentOption",
    "CliState",
    "ContextOption",
    "CreatedSinceOption",
    "CreatedUntilOption",
    "JsonOption",
    "KindsOption",
    "LimitOption",
    "MetaFilterOption",
    "MetaOption",
    "OptionalAgentOption",
    "SinceOption",
    "StoreOption",
    "TagsOption",
    "check_kind",
    "check_kinds",
    "check_visibility",
    "open_engram",
    "parse_meta",
    "parse_outcome",
    "parse_since",
    "parse_value",
    "store_location",
]

#: The help panel of the options every command shares.
COMMON_PANEL: Final = "Common options"

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


def _configured_agent(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """Without --agent or ENGRAM_AGENT, the ``agent`` of the config file (the library's settings order)."""
    source = ctx.get_parameter_source(param.name) if param.name is not None else None
    if source is None or source.name != "DEFAULT":  # given as --agent or ENGRAM_AGENT
        return value
    from engramdb.config import load_settings
    from engramdb.errors import EngramError

    try:
        return load_settings().agent
    except EngramError:  # a broken config file: the command reports it when it opens the store
        return value


# The agent setting is the default without --agent (ENGRAM_AGENT, else the config file): seed 001's commands
# run without it.
AgentOption = Annotated[
    str,
    typer.Option(
        "--agent",
        "-a",
        metavar="NAME",
        envvar="ENGRAM_AGENT",
        callback=_configured_agent,
        help="The agent whose memories these are (default: the agent setting).",
    ),
]
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
MetaFilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--meta",
        "-m",
        metavar="KEY=VALUE",
        help="Only memories whose metadata holds KEY with exactly VALUE (repeatable: all must hold). VALUE is "
        'read as JSON when it is valid JSON (2, true, null, "2"), else as a string.',
        show_default=False,
    ),
]
CreatedSinceOption = Annotated[
    str | None, typer.Option("--since", metavar="WHEN", help="Created at or after (ISO 8601; UTC by default).")
]
CreatedUntilOption = Annotated[
    str | None, typer.Option("--until", metavar="WHEN", help="Created at or before (ISO 8601; UTC by default).")
]
LimitOption = Annotated[int, typer.Option("--limit", "-n", metavar="N", min=1, help="At most this many results.")]
UserOption = Annotated[
    str | None,
    typer.Option(
        "--user",
        "-u",
        metavar="NAME",
        help="A user of the agent: that user's memories and the agent's own, never another user's.",
        show_default=False,
    ),
]
LearningUserOption = Annotated[
    str | None,
    typer.Option(
        "--user",
        "-u",
        metavar="NAME",
        help="Learning of one user: that user's outcomes and the agent's own, never another user's "
        "(default: the agent's outcomes of every user).",
        show_default=False,
    ),
]
OnlyUserOption = Annotated[
    str | None,
    typer.Option("--user", "-u", metavar="NAME", help="Only this user's memories.", show_default=False),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session", metavar="ID", help="A conversation thread or run: only its memories.", show_default=False
    ),
]
AtOption = Annotated[
    str | None,
    typer.Option(
        "--at", metavar="WHEN", help="When it happened (ISO 8601; UTC by default). Default: now.", show_default=False
    ),
]
AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="WHEN",
        help="What was true then (ISO 8601; a date alone: its end): a changed fact's value at that time.",
        show_default=False,
    ),
]
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        "--recent",
        metavar="AGE|DATE",
        help="Only outcomes from the last AGE (30m, 12h, 7d, 4w) or since DATE (2026-01-31, ISO 8601).",
        show_default=False,
    ),
]
ContextOption = Annotated[str, typer.Option("--context", "-c", help="The situation, in words.", show_default=False)]


# -- the store -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class CliState:
    """What the root command parsed, for the subcommands (``ctx.obj``)."""

    store: str | None = None


def store_location(ctx: typer.Context, store: str | None) -> str | None:
    """The store to open: the command's ``--store``, else the root's, else None (the library default)."""
    if store:
        return store
    root = ctx.find_root().obj
    return root.store if isinstance(root, CliState) else None


@contextmanager
def open_engram(
    ctx: typer.Context,
    store: str | None,
    *,
    create: bool = False,
    local: bool = False,
    remote_ok: bool = True,
    **options: Any,
) -> Iterator[Engram]:
    """Open the selected store for one command and close it afterwards.

    Only a command that writes passes ``create=True``: the others fail on a path that holds no
    store (one line naming it) instead of creating an empty store there and answering from it,
    so a mistyped ``--store`` shows at once. ``options`` go to :class:`~engramdb.Engram`
    (``on_model_mismatch=...``, ``progress=...``).

    With ``$ENGRAM_URL`` set and no ``--store``, the command goes through that server (the remote
    client: no store and no model in this process; ``options`` are then the server's business),
    unless ``local`` (the servers themselves: ``engram serve`` must not serve a client of itself).
    A command that needs the store in this process (``remote_ok=False``) refuses ``$ENGRAM_URL`` in one line.
    Only the servers (``local``) warm the search caches at open (the ``warm`` setting).
    """
    location = store_location(ctx, store)
    url = os.environ.get("ENGRAM_URL") or None
    if location is None and url is not None and not local:
        if not remote_ok:
            raise ValidationError(
                f"this command needs the store in this process, not a server: pass --store (ENGRAM_URL is {url})"
            )
        # The client module directly (what Engram(url) returns): the facade's module would import the storage.
        from engramdb import RemoteEngram

        with RemoteEngram(url) as remote:
            yield cast("Engram", remote)
        return
    from engramdb import Engram  # here, so `engram --help` does not load the library

    if location is None and url is not None:
        from engramdb.config import load_settings

        location = str(load_settings().home)
    if not local:
        # One command, then the process ends: warming the search caches on threads at open would only
        # compete with it for the CPU (the servers keep the setting; they answer many searches).
        options.setdefault("warm", False)
    with Engram(location, create=create, **options) as mem:
        yield mem
        # A failure of the background vector writer during the command is this command's error (one line,
        # exit 1), not a warning at close.
        mem.flush()


# -- parsing -------------------------------------------------------------------------------------------


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


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS: Final = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """``--since``/``--recent``: an age (``7d``, ``12h``, ``30m``, ``2w``) or an ISO date; None stays None."""
    if text is None:
        return None
    now = now or datetime.now(UTC)
    m = _AGE.match(text)
    if m:
        return now - timedelta(**{_UNITS[m.group(2).lower()]: float(m.group(1))})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(
            f"bad --since {text!r}: use an age like 7d, 12h, 30m, 2w or a date like 2026-01-31"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def check_kind(kind: str | None) -> Kind | None:
    """``kind`` if it is a known kind (None stays None); rejected before the store is opened (so nothing is created)."""
    if kind is None:
        return None
    from engramdb.models import KINDS  # here: the models cost `engram --help` 60 ms

    if kind not in KINDS:
        raise ValidationError(f"unknown kind {kind!r} (choose from {', '.join(sorted(KINDS))})")
    return kind


def check_kinds(kinds: Sequence[str] | None) -> list[Kind] | None:
    """Repeated ``--type`` values, each checked with :func:`check_kind`; None when none was given."""
    checked = [k for k in (check_kind(kind) for kind in kinds or ()) if k is not None]
    return checked or None


def check_visibility(visibility: str | None) -> Visibility | None:
    """``visibility`` if it is a known one (None stays None); rejected before the store is opened."""
    if visibility is None:
        return None
    from engramdb.models import VISIBILITIES

    if visibility not in VISIBILITIES:
        raise ValidationError(f"unknown visibility {visibility!r} (choose from {', '.join(sorted(VISIBILITIES))})")
    return visibility

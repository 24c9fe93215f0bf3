"""``engram episodes start | event | end``: a task recorded by id, across separate commands.

``start`` prints the new episode's id; ``event`` adds what happened (with the agent role
that did it); ``end`` finishes it as a success or a failure with its metrics. Decisions
recorded with ``engram memory record ... --outcome pending --episode ID`` get credit from
the episode's outcome when it ends. :mod:`engramdb.interfaces.cli.app` registers these commands.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import AgentOption, JsonOption, StoreOption, open_engram, parse_value
from engramdb.interfaces.cli._render import console, emit_json

__all__ = ["end", "event", "start"]

EpisodeArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The episode's id (printed by 'engram episodes start').", show_default=False)
]


#: ``event`` and ``end`` act as the episode's own agent unless told otherwise (its id names it).
EpisodeAgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        "-a",
        metavar="NAME",
        envvar="ENGRAM_AGENT",
        help="The agent acting (default: the episode's own; another agent must own it).",
        show_default=False,
    ),
]


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _json_object(raw: str | None, option: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except ValueError:
        raise ValidationError(f"bad {option} {raw!r}: expected a JSON object like '{{\"tests\": 12}}'") from None
    if not isinstance(value, dict):
        raise ValidationError(f"bad {option} {raw!r}: expected a JSON object, not {type(value).__name__}")
    return value


def start(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(metavar="TASK", help="What the episode is about.", show_default=False)],
    *,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", metavar="TAG", help="A tag (repeatable).", show_default=False)
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start an episode and print its id (use it with 'event' and 'end')."""
    with open_engram(ctx, store, create=True) as mem:
        episode_id = mem.episodes.start(task, agent=agent, tags=tuple(tags or ()))
    if as_json:
        emit_json({"id": episode_id, "task": task, "agent": agent, "outcome": "running"})
    else:
        typer.echo(episode_id)


def event(
    ctx: typer.Context,
    episode_id: EpisodeArgument,
    kind: Annotated[
        str, typer.Argument(metavar="KIND", help="What happened: 'build', 'test', 'review'...", show_default=False)
    ],
    *,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            metavar="JSON",
            help="Details: parsed as JSON when it is valid JSON, else kept as text.",
            show_default=False,
        ),
    ] = None,
    role: Annotated[
        str | None,
        typer.Option("--role", metavar="ROLE", help="The agent role that produced it.", show_default=False),
    ] = None,
    agent: EpisodeAgentOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add an event to a running episode."""
    value = parse_value(data) if data is not None else None
    with open_engram(ctx, store) as mem:
        mem.episodes.event(episode_id, kind, value, role=role, agent=agent)
    if as_json:
        emit_json({"id": episode_id, "kind": kind, "data": value, "role": role})
    else:
        by = f" by {escape(role)}" if role else ""
        console().print(f"Event [magenta]{escape(kind)}[/]{by} added to episode [cyan]{escape(episode_id)}[/]")


def end(
    ctx: typer.Context,
    episode_id: EpisodeArgument,
    *,
    outcome: Annotated[
        str, typer.Option("--outcome", metavar="OUTCOME", help="success or failure.", show_default=False)
    ],
    metrics: Annotated[
        str | None,
        typer.Option("--metrics", metavar="JSON", help="Measurements, a JSON object.", show_default=False),
    ] = None,
    error: Annotated[
        str | None,
        typer.Option("--error", metavar="TEXT", help="What went wrong (for a failure).", show_default=False),
    ] = None,
    agent: EpisodeAgentOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """End a running episode as a success or a failure; its pending decisions get credit from the outcome."""
    word = outcome.strip().lower()
    if word not in ("success", "failure"):
        raise ValidationError(f"an episode ends as success or failure, not {outcome!r}")
    measured = _json_object(metrics, "--metrics")
    with open_engram(ctx, store) as mem:
        record = mem.episodes.end(episode_id, word, agent=agent, metrics=measured, error=error)
    if as_json:
        emit_json(record.to_dict())
        return
    style = "green" if record.outcome == "success" else "red"
    out = console()
    out.print(
        f"Episode [cyan]{record.id}[/] ended: [{style}]{record.outcome}[/] after {record.duration:.1f} s, "
        f"{len(record.events)} events"
    )
    if record.credited:
        out.print(f"Credited {record.credited} pending decision(s) with the outcome.")
    if record.metrics:
        out.print("Metrics: " + escape(", ".join(f"{k}={v}" for k, v in record.metrics.items())))

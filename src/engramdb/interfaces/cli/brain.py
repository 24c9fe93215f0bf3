"""``engram route``, ``engram route-record`` and ``engram reason``: learned LLM routing and reasoning over memory.

Plain functions; :mod:`engramdb.interfaces.cli.app` registers them. ``route`` and
``route-record`` work without an LLM; ``reason`` needs one (``ENGRAM_LLM=openai:MODEL``)
and says so when none is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import AgentOption, JsonOption, StoreOption, open_engram, parse_outcome
from engramdb.interfaces.cli._render import console, emit_json, pct

if TYPE_CHECKING:
    from engramdb.models import ReasoningMode, RouteChoice

__all__ = ["reason", "route", "route_record"]

TaskOption = Annotated[str, typer.Option("--task", help="The task, in words.", show_default=False)]
TaskTypeOption = Annotated[
    str | None,
    typer.Option(
        "--task-type",
        "-T",
        metavar="TYPE",
        help="reasoning, code_generation, classification, summarization, ... (groups the outcomes).",
        show_default=False,
    ),
]


def _choice_table(choice: RouteChoice) -> Table:
    table = Table(title="Candidates, best expected utility first", title_justify="left")
    table.add_column("model", style="cyan")
    table.add_column("tier")
    for col in ("success", "95% interval", "evidence", "cost", "latency", "utility"):
        table.add_column(col, justify="right")
    for c in choice.candidates:
        table.add_row(
            escape(c.model),
            c.tier,
            pct(c.expected_success),
            f"{pct(c.low)}–{pct(c.high)}",
            f"{c.evidence:.3g}",
            f"{c.expected_cost:.3g}",
            f"{c.expected_latency_ms:.0f} ms",
            f"{c.utility:.3f}",
        )
    return table


def route(
    ctx: typer.Context,
    *,
    task: TaskOption,
    models: Annotated[
        list[str], typer.Option("--model", "-m", help="A candidate model (repeatable).", show_default=False)
    ],
    task_type: TaskTypeOption = None,
    complexity: Annotated[
        str | None,
        typer.Option("--complexity", "-C", metavar="LEVEL", help="simple, medium or complex.", show_default=False),
    ] = None,
    context_length: Annotated[
        int, typer.Option("--context-length", min=0, help="Tokens of context the task reads (over 32,000: long).")
    ] = 0,
    require_fast: Annotated[bool, typer.Option("--fast", help="The answer is needed quickly.")] = False,
    require_cheap: Annotated[bool, typer.Option("--cheap", help="The call must cost (next to) nothing.")] = False,
    cost_weight: Annotated[
        float | None,
        typer.Option(
            "--cost-weight",
            min=0.0,
            help="Points of success probability the most expensive candidate costs (default 0.1).",
            show_default=False,
        ),
    ] = None,
    latency_weight: Annotated[
        float | None,
        typer.Option(
            "--latency-weight", min=0.0, help="The same for the slowest candidate (default 0).", show_default=False
        ),
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pick the LLM for a task: seed 002's routing table until outcomes say otherwise, cost against success."""
    if not models:
        raise ValidationError("give at least one --model")
    with open_engram(ctx, store) as mem:
        choice = mem.routing.decide(
            task,
            task_type=task_type,
            models=models,
            agent=agent,
            complexity=complexity,
            context_length=context_length,
            require_fast=require_fast,
            require_cheap=require_cheap,
            cost_weight=cost_weight,
            latency_weight=latency_weight,
        )
    if as_json:
        emit_json(choice.to_dict())
        return
    out = console()
    fallback = f" (fallback: [cyan]{escape(choice.fallback)}[/])" if choice.fallback else ""
    out.print(f"Use [bold cyan]{escape(choice.model)}[/]{fallback}")
    out.print(escape(choice.reason))
    out.print(_choice_table(choice))


def route_record(
    ctx: typer.Context,
    *,
    task: TaskOption,
    model: Annotated[str, typer.Option("--model", "-m", help="The model that did the task.", show_default=False)],
    outcome: Annotated[
        str,
        typer.Option(
            "--outcome", "-o", help="success, failure, partial, true/false, or a reward in [-1, 1].", show_default=False
        ),
    ],
    task_type: TaskTypeOption = None,
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", min=0.0, help="How long the call took.", show_default=False)
    ] = None,
    cost: Annotated[
        float | None, typer.Option("--cost", min=0.0, help="What the call cost (any unit, the same for all models).")
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Record how a model did on a task, so routing learns from it."""
    result = parse_outcome(outcome)
    with open_engram(ctx, store, create=True) as mem:
        memory = mem.routing.record(
            task, model, result, task_type=task_type, latency_ms=latency_ms, cost=cost, agent=agent
        )
    if as_json:
        emit_json(memory.to_dict())
        return
    console().print(f"Recorded {escape(model)}: {memory.metadata.get('outcome', outcome)} ({memory.id})")


def _mode(mode: str) -> ReasoningMode:
    """``--mode``, checked before the store is opened."""
    from engramdb.models import REASONING_MODES  # here: `engram --help` lists this command without the models

    for m in REASONING_MODES:
        if m == mode:
            return m
    raise ValidationError(f"unknown reasoning mode {mode!r} (choose from {', '.join(REASONING_MODES)})")


def reason(
    ctx: typer.Context,
    *,
    goal: Annotated[str, typer.Option("--goal", "-g", help="What to reason about.", show_default=False)],
    mode: Annotated[str, typer.Option("--mode", help="plan, think or decide.")] = "plan",
    options: Annotated[
        list[str] | None,
        typer.Option("--option", help="An option to decide between (repeatable; mode decide).", show_default=False),
    ] = None,
    agent: AgentOption = "default",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Plan, think or decide with the configured LLM over the agent's memory (needs ENGRAM_LLM=openai:MODEL)."""
    checked = _mode(mode)
    with open_engram(ctx, store, create=True) as mem:
        r = mem.reason(goal, agent=agent, mode=checked, options=options or None)
    if as_json:
        emit_json(r.to_dict())
        return
    out = console()
    for i, step in enumerate(r.steps, 1):
        out.print(f"{i}. {escape(step)}")
    if r.decision is not None:
        out.print(f"Decision: [bold cyan]{escape(r.decision)}[/]")
    if r.rationale:
        out.print(escape(r.rationale))
    if r.decision_id:
        out.print(
            f"[dim]Recorded as pending decision {r.decision_id}; attach its outcome when known: "
            f"engram learning resolve {r.decision_id} --outcome success --agent {escape(agent)}[/]"
        )

"""``engram memory ...``: record, find, inspect, change and forget memories.

The other commands of the ``memory`` group live with their area: ``share``, ``unshare`` and
``shares`` in ``sharing.py``, ``patterns`` in ``failures.py``, ``cleanup`` in ``retention.py``.
:mod:`engramdb.interfaces.cli.app` registers them all.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from engramdb.errors import ValidationError
from engramdb.interfaces.cli._options import (
    AgentOption,
    AsOfOption,
    AtOption,
    CreatedSinceOption,
    CreatedUntilOption,
    JsonOption,
    KindsOption,
    LimitOption,
    MetaFilterOption,
    MetaOption,
    OptionalAgentOption,
    SessionOption,
    StoreOption,
    TagsOption,
    UserOption,
    check_kind,
    check_kinds,
    check_visibility,
    open_engram,
    parse_meta,
    parse_outcome,
)
from engramdb.interfaces.cli._refs import agent_hint, full_id
from engramdb.interfaces.cli._render import (
    console,
    emit_json,
    history_table,
    hits_table,
    memories_table,
    memory_detail,
    shorten,
)

if TYPE_CHECKING:
    pass

__all__ = ["forget", "history", "list_", "record", "retrieve", "search", "show", "update"]

OUTCOME_PANEL = "Outcome record (instead of CONTENT)"

IdArgument = Annotated[
    str,
    typer.Argument(metavar="ID", help="The memory's id, or a unique prefix of it (6+ digits).", show_default=False),
]
TagOption = Annotated[
    list[str] | None,
    typer.Option("--tag", metavar="TAG", help="A tag (repeatable).", show_default=False),
]
ConfidenceOption = Annotated[
    float | None,
    typer.Option(
        "--confidence", metavar="0..1", min=0.0, max=1.0, help="Confidence in this memory.", show_default=False
    ),
]
VisibilityOption = Annotated[
    str | None,
    typer.Option(
        "--visibility",
        metavar="VISIBILITY",
        help="Who may read it: private (the agent only), shared, or public (every agent). Default: private.",
        show_default=False,
    ),
]


def record(
    ctx: typer.Context,
    content: Annotated[
        str | None,
        typer.Argument(
            metavar="CONTENT", help="What to remember ('-' reads it from standard input).", show_default=False
        ),
    ] = None,
    *,
    agent: AgentOption = "default",
    kind: Annotated[
        str | None,
        typer.Option(
            "--type",
            "--kind",
            "-t",
            metavar="KIND",
            help="Kind of memory: decision, failure, success, episode, knowledge, preference, code_pattern, "
            "conversation, collaboration. Default: knowledge.",
            show_default=False,
        ),
    ] = None,
    tags: TagOption = None,
    meta: MetaOption = None,
    visibility: VisibilityOption = None,
    confidence: ConfidenceOption = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            metavar="TEXT",
            help="The situation the decision was made in.",
            show_default=False,
            rich_help_panel=OUTCOME_PANEL,
        ),
    ] = None,
    action: Annotated[
        str | None,
        typer.Option(
            "--action", metavar="TEXT", help="What was done.", show_default=False, rich_help_panel=OUTCOME_PANEL
        ),
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option(
            "--outcome",
            metavar="OUTCOME",
            help="success, failure, partial, true/false, a reward in [-1, 1], or pending "
            "(the outcome comes later: 'engram learning resolve ID --outcome ...').",
            show_default=False,
            rich_help_panel=OUTCOME_PANEL,
        ),
    ] = None,
    episode: Annotated[
        str | None,
        typer.Option(
            "--episode",
            metavar="ID",
            help="The episode the decision belongs to (with --outcome pending it is credited when the episode ends).",
            show_default=False,
            rich_help_panel=OUTCOME_PANEL,
        ),
    ] = None,
    alternatives: Annotated[
        list[str] | None,
        typer.Option(
            "--alternative",
            metavar="ACTION",
            help="Another action that was possible (repeatable).",
            show_default=False,
            rich_help_panel=OUTCOME_PANEL,
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            metavar="SECONDS",
            min=0.0,
            help="How long the action took.",
            show_default=False,
            rich_help_panel=OUTCOME_PANEL,
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            metavar="NAME",
            help="A fact or preference that changes (e.g. editor): the new value supersedes the agent's previous "
            "value of NAME, which stays in the history.",
            show_default=False,
        ),
    ] = None,
    user: UserOption = None,
    session: SessionOption = None,
    at: AtOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remember something, or record how an action turned out.

    Give either CONTENT (a memory of any kind),
    or --context, --action and --outcome together (a decision and its outcome, for the learning engine).
    """
    checked_kind = check_kind(kind)
    checked_visibility = check_visibility(visibility)
    metadata = parse_meta(meta)
    if context is None and action is None and outcome is None:
        if content is None:
            raise ValidationError("nothing to record: give CONTENT, or --context, --action and --outcome")
        if alternatives or duration is not None or episode is not None:
            raise ValidationError("--alternative, --duration and --episode only apply to --context/--action/--outcome")
        text = sys.stdin.read() if content == "-" else content
        if not text.strip():
            raise ValidationError("content must not be empty")
        with open_engram(ctx, store, create=True) as mem:
            memory = mem.remember(
                text,
                agent=agent,
                kind=checked_kind or "knowledge",
                tags=tuple(tags or ()),
                metadata=metadata or None,
                visibility=checked_visibility or "private",
                confidence=confidence,
                key=key,
                user=user,
                session=session,
                at=at,
            )
    else:
        if content is not None:
            raise ValidationError("give either CONTENT or --context/--action/--outcome, not both")
        if context is None or action is None or outcome is None:
            trio = {"--context": context, "--action": action, "--outcome": outcome}
            missing = ", ".join(name for name, value in trio.items() if value is None)
            raise ValidationError(f"--context, --action and --outcome go together (missing {missing})")
        if kind not in (None, "decision"):
            raise ValidationError(f"an outcome record is a decision, not {kind!r}: drop --type or use decision")
        content_only = {
            "--tag": tags,
            "--visibility": visibility,
            "--confidence": confidence,
            "--key": key,
            "--session": session,
            "--at": at,
        }
        extra = [name for name, value in content_only.items() if value is not None]
        if extra:
            raise ValidationError(f"{', '.join(extra)} cannot be used with --context/--action/--outcome")
        with open_engram(ctx, store, create=True) as mem:
            memory = mem.learning.record(
                context,
                action,
                None if outcome.strip().lower() == "pending" else parse_outcome(outcome),
                agent=agent,
                alternatives=tuple(alternatives or ()),
                duration=duration,
                metadata=metadata or None,
                episode=episode,
                user=user,
            )

    if as_json:
        emit_json(memory.to_dict())
    else:
        out = console()
        out.print(f"Remembered [cyan]{memory.id}[/] ({memory.kind}, agent {escape(memory.agent)})")
        if memory.redacted:
            # Worth saying out loud: what was stored is not exactly what was typed.
            out.print(f"[dim]Replaced before storing: {escape(', '.join(memory.redacted))}[/]")


def list_(
    ctx: typer.Context,
    *,
    agent: AgentOption = "default",
    kinds: KindsOption = None,
    tags: TagsOption = None,
    limit: LimitOption = 100,
    offset: Annotated[int, typer.Option("--offset", metavar="N", min=0, help="Skip this many first.")] = 0,
    since: CreatedSinceOption = None,
    until: CreatedUntilOption = None,
    user: UserOption = None,
    session: SessionOption = None,
    as_of: AsOfOption = None,
    meta: MetaFilterOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List an agent's memories (its own and those shared with it), newest first."""
    kind_filter = check_kinds(kinds)
    meta_filter = parse_meta(meta) if meta else None
    with open_engram(ctx, store) as mem:
        memories = mem.list(
            agent=agent,
            kind=kind_filter,
            tags=tags or None,
            limit=limit,
            offset=offset,
            since=since,
            until=until,
            user=user,
            session=session,
            as_of=as_of,
            metadata=meta_filter,
        )
        hint = agent_hint(mem, agent, empty=not memories and not as_json)
    if as_json:
        emit_json([m.to_dict() for m in memories])
        return
    if not memories:
        held = f" holding {escape(json.dumps(meta_filter))}" if meta_filter else ""
        console().print(f"No memories for agent {escape(repr(agent))}{held}.")
        if hint:
            console().print(hint)
        return
    out = console()
    out.print(memories_table(memories, agent=agent, width=out.width))


MinScoreOption = Annotated[
    float | None,
    typer.Option(
        "--min-score",
        min=0.0,
        max=1.0,
        metavar="RELEVANCE",
        help="Leave out hits whose calibrated relevance is below this (0..1; below 0.3 is unrelated, above 0.7 "
        "says the same thing). Default: the min_score setting ($ENGRAM_MIN_SCORE, else 0: off).",
        show_default=False,
    ),
]


def _search(
    ctx: typer.Context,
    query: str,
    *,
    agent: str,
    kinds: list[str] | None,
    tags: list[str] | None,
    limit: int,
    since: str | None,
    until: str | None,
    min_score: float | None,
    store: str | None,
    as_json: bool,
    user: str | None,
    session: str | None,
    as_of: str | None,
    meta: list[str] | None = None,
) -> None:
    kind_filter = check_kinds(kinds)
    meta_filter = parse_meta(meta) if meta else None
    if not query.strip():
        raise ValidationError("the query must not be empty")
    # The cutoff is a setting of the opened store (this command opens its own), not an argument of search.
    options: dict[str, Any] = {} if min_score is None else {"min_score": min_score}
    with open_engram(ctx, store, **options) as mem:
        hits = mem.search(
            query,
            agent=agent,
            kind=kind_filter,
            tags=tags or None,
            limit=limit,
            since=since,
            until=until,
            user=user,
            session=session,
            as_of=as_of,
            metadata=meta_filter,
        )
        hint = agent_hint(mem, agent, empty=not hits and not as_json)
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    if not hits:
        console().print(f"Nothing found for {escape(repr(query))}.")
        if hint:
            console().print(hint)
        return
    out = console()
    out.print(hits_table(hits, agent=agent, width=out.width))


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What to look for, in words.", show_default=False)],
    *,
    agent: AgentOption = "default",
    kinds: KindsOption = None,
    tags: TagsOption = None,
    limit: LimitOption = 10,
    since: CreatedSinceOption = None,
    until: CreatedUntilOption = None,
    min_score: MinScoreOption = None,
    user: UserOption = None,
    session: SessionOption = None,
    as_of: AsOfOption = None,
    meta: MetaFilterOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find memories by meaning and keywords, best first."""
    _search(
        ctx,
        query,
        agent=agent,
        kinds=kinds,
        tags=tags,
        limit=limit,
        since=since,
        until=until,
        min_score=min_score,
        store=store,
        as_json=as_json,
        user=user,
        session=session,
        as_of=as_of,
        meta=meta,
    )


def retrieve(
    ctx: typer.Context,
    *,
    context: Annotated[
        str,
        typer.Option("--context", "-c", metavar="TEXT", help="The situation at hand, in words.", show_default=False),
    ],
    agent: AgentOption = "default",
    kinds: KindsOption = None,
    tags: TagsOption = None,
    limit: LimitOption = 10,
    since: CreatedSinceOption = None,
    until: CreatedUntilOption = None,
    min_score: MinScoreOption = None,
    user: UserOption = None,
    session: SessionOption = None,
    as_of: AsOfOption = None,
    meta: MetaFilterOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recall the memories most relevant to a context (search, phrased for agents)."""
    _search(
        ctx,
        context,
        agent=agent,
        kinds=kinds,
        tags=tags,
        limit=limit,
        since=since,
        until=until,
        min_score=min_score,
        store=store,
        as_json=as_json,
        user=user,
        session=session,
        as_of=as_of,
        meta=meta,
    )


def key_(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The key, as given to record --key.", show_default=False)],
    *,
    agent: AgentOption = "default",
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", metavar="NAME", help="That user's value of the key.", show_default=False),
    ] = None,
    as_of: AsOfOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the agent's current value of a key (the memory that superseded the earlier ones), or its value then."""
    with open_engram(ctx, store) as mem:
        memory = mem.recall_key(name, agent=agent, user=user, as_of=as_of)
    if as_json:
        emit_json(memory.to_dict())
    else:
        console().print(memory_detail(memory))


def show(
    ctx: typer.Context,
    memory_id: IdArgument,
    *,
    agent: OptionalAgentOption = None,
    user: UserOption = None,
    session: SessionOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one memory in full."""
    with open_engram(ctx, store) as mem:
        memory = mem.get(full_id(mem, memory_id, agent=agent), agent=agent, user=user, session=session)
    if as_json:
        emit_json(memory.to_dict())
    else:
        console().print(memory_detail(memory))


def update(
    ctx: typer.Context,
    memory_id: IdArgument,
    *,
    content: Annotated[
        str | None, typer.Option("--content", metavar="TEXT", help="New content.", show_default=False)
    ] = None,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tag", metavar="TAG", help="New tags, replacing the old ones (repeatable).", show_default=False),
    ] = None,
    clear_tags: Annotated[bool, typer.Option("--clear-tags", help="Remove every tag.")] = False,
    meta: MetaOption = None,
    confidence: ConfidenceOption = None,
    kind: Annotated[
        str | None, typer.Option("--type", "--kind", "-t", metavar="KIND", help="New kind.", show_default=False)
    ] = None,
    visibility: VisibilityOption = None,
    agent: OptionalAgentOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change a memory. --meta entries are merged into its metadata; --tag replaces its tags."""
    check_kind(kind)
    check_visibility(visibility)
    metadata = parse_meta(meta)
    if tags and clear_tags:
        raise ValidationError("give --tag or --clear-tags, not both")
    if content is not None and not content.strip():
        raise ValidationError("content must not be empty")
    changes: dict[str, Any] = {}
    if content is not None:
        changes["content"] = content
    if tags or clear_tags:
        changes["tags"] = tuple(tags or ())
    if confidence is not None:
        changes["confidence"] = confidence
    if kind is not None:
        changes["kind"] = kind
    if visibility is not None:
        changes["visibility"] = visibility
    if not changes and not metadata:
        raise ValidationError(
            "nothing to update: give --content, --tag, --clear-tags, --meta, --confidence, --type or --visibility"
        )
    with open_engram(ctx, store) as mem:
        memory_id = full_id(mem, memory_id, agent=agent)
        if metadata:
            current = mem.get(memory_id, agent=agent)
            changes["metadata"] = {**current.metadata, **metadata}
        memory = mem.update(memory_id, agent=agent, **changes)
    if as_json:
        emit_json(memory.to_dict())
    else:
        console().print(f"Updated [cyan]{memory.id}[/]")


def forget(
    ctx: typer.Context,
    memory_id: IdArgument,
    *,
    agent: OptionalAgentOption = None,
    user: UserOption = None,
    session: SessionOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget a memory: its content is erased and its history scrubbed (a tombstone stays)."""
    with open_engram(ctx, store) as mem:
        memory_id = full_id(mem, memory_id, agent=agent)
        memory = mem.get(memory_id, agent=agent, user=user, session=session)
        if not (yes or as_json):
            if not sys.stdin.isatty():
                raise ValidationError("refusing to forget without confirmation: pass --yes")
            question = f"Forget {memory.id} ({memory.kind}: {shorten(memory.content, 60)!r})?"
            if not typer.confirm(question, default=False):
                raise typer.Abort
        mem.forget(memory_id, agent=agent, user=user, session=session)
    if as_json:
        emit_json({"id": memory.id, "forgotten": True})
    else:
        console().print(f"Forgot [cyan]{memory.id}[/]")


def history(
    ctx: typer.Context,
    memory_id: IdArgument,
    *,
    agent: OptionalAgentOption = None,
    user: UserOption = None,
    session: SessionOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show how a memory changed over time, oldest first."""
    with open_engram(ctx, store) as mem:
        memory_id = full_id(mem, memory_id, agent=agent)
        if user is not None or session is not None:
            mem.get(memory_id, agent=agent, user=user, session=session)  # in their scope, else not found
        changes = mem.history(memory_id, agent=agent)
    if as_json:
        emit_json([c.to_dict() for c in changes])
    else:
        console().print(history_table(changes))

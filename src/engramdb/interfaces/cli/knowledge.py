"""``engram knowledge ...``: move what agents know between stores and agents (export, import, merge)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from engramdb.errors import NotFound, ValidationError
from engramdb.interfaces.cli._options import JsonOption, OnlyUserOption, SessionOption, StoreOption, open_engram
from engramdb.interfaces.cli._render import console, count_memories, emit_json
from engramdb.validate import MAX_LIMIT

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = ["export", "import_", "merge"]

DomainOption = Annotated[
    str | None,
    typer.Option("--domain", "--tag", metavar="TAG", help="Only memories carrying this tag.", show_default=False),
]
FileOption = Annotated[
    str | None,
    typer.Option("--file", "-f", metavar="FILE", help="The knowledge file; '-' for standard input/output."),
]


def export(
    ctx: typer.Context,
    *,
    agent: Annotated[str, typer.Option("--agent", "-a", metavar="AGENT", help="Whose memories to export.")],
    domain: DomainOption = None,
    file: FileOption = None,
    with_vectors: Annotated[
        bool, typer.Option("--with-vectors", help="Include the vectors (spares re-embedding on import).")
    ] = False,
    with_history: Annotated[bool, typer.Option("--with-history", help="Include each memory's change history.")] = False,
    user: OnlyUserOption = None,
    session: SessionOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write an agent's own memories (of a domain) to a knowledge file, or to standard output.

    The file keeps ids, timestamps, statistics, tags, metadata and visibility, with a header
    (format version, embedding model, counts, sha256 checksum) so an import can verify it.
    """
    to_stdout = file in (None, "-")
    if to_stdout and as_json:
        raise ValidationError("--json reports on stdout, so it needs --file to write the knowledge elsewhere")
    with open_engram(ctx, store) as mem:
        target = sys.stdout.buffer if to_stdout else Path(file or "")
        count = mem.knowledge.export_file(
            target,
            agent=agent,
            tag=domain,
            with_vectors=with_vectors,
            with_history=with_history,
            user=user,
            session=session,
        )
    if to_stdout:
        return
    if as_json:
        emit_json({"exported": count, "file": file, "agent": agent, "domain": domain})
    else:
        console().print(f"Exported {count_memories(count)} of {escape(repr(agent))} to {escape(str(file))}.")


def import_(
    ctx: typer.Context,
    *,
    file: Annotated[
        str, typer.Option("--file", "-f", metavar="FILE", help="The knowledge file; '-' reads standard input.")
    ],
    agent: Annotated[
        str | None,
        typer.Option("--agent", "-a", metavar="AGENT", help="Import every memory as this agent's.", show_default=False),
    ] = None,
    keep_agents: Annotated[
        bool,
        typer.Option("--keep-agents", help="Keep each memory's agent from the file (the default without --agent)."),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and count; write nothing.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import a knowledge file: validated completely first, then written all at once (or not at all).

    Secrets are redacted and near-duplicates merge into existing memories, as for any write.
    """
    source = sys.stdin.buffer if file == "-" else Path(file)
    if isinstance(source, Path) and not source.is_file():
        problem = f"{file} is a directory, not a knowledge file" if source.is_dir() else f"no such file: {file}"
        raise ValidationError(problem)
    # Seed 001 writes `engram knowledge import --file auth-knowledge.json`: shared knowledge keeps the agents the
    # file names unless --agent says whose it becomes (the library asks for that choice; the command makes it).
    keep = keep_agents or agent is None
    with open_engram(ctx, store, create=True) as mem:
        count = mem.knowledge.import_file(source, agent=agent, keep_agents=keep, dry_run=dry_run)
    if as_json:
        emit_json({"imported": count, "file": file, "agent": agent, "kept_agents": keep, "dry_run": dry_run})
        return
    verb = "Would import" if dry_run else "Imported"
    whose = (
        f"as agent {escape(repr(agent))}"
        if agent is not None
        else "each kept as the agent the file names; --agent NAME makes them one agent's"
    )
    console().print(f"{verb} {count_memories(count)} from {escape(file)} (added or merged; {whose}).")


def merge(
    ctx: typer.Context,
    *,
    from_agent: Annotated[
        str, typer.Option("--from-agent", "--from", metavar="AGENT", help="The agent whose knowledge to take.")
    ],
    to_agent: Annotated[
        str,
        typer.Option("--to-agent", "--to", "--agent", "-a", metavar="AGENT", help="The agent receiving it."),
    ] = "default",
    domain: DomainOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Merge another agent's knowledge (of a domain) into an agent's own memories.

    Takes what the giver owns, and what was shared with it that the receiver may read
    anyway. Near-duplicates merge with their statistics combined; provenance is kept.
    Running it again changes nothing.
    """
    with open_engram(ctx, store) as mem:
        count = mem.knowledge.merge(from_agent=from_agent, to_agent=to_agent, tag=domain)
        why = _why_nothing_merged(mem, from_agent=from_agent, to_agent=to_agent, domain=domain) if not count else None
    if as_json:
        emit_json({"merged": count, "from_agent": from_agent, "to_agent": to_agent, "domain": domain, "why": why})
        return
    console().print(
        f"Merged {count_memories(count)} of {escape(repr(from_agent))} into {escape(repr(to_agent))} "
        "(copied or combined)."
    )
    if why:
        console().print(escape(why))


def _why_nothing_merged(mem: Engram, *, from_agent: str, to_agent: str, domain: str | None) -> str:
    """Why a merge took nothing: the giver has nothing (of the domain), shared nothing, or it was all merged before."""
    tagged = f" tagged {domain!r}" if domain else ""
    owned = [
        m
        for m in mem.list(agent=from_agent, tags=[domain] if domain else None, limit=MAX_LIMIT)
        if m.agent == from_agent
    ]
    if not owned:
        return f"{from_agent!r} has no memories{tagged} in this store, so there was nothing to merge."
    shared = 0
    for m in owned:
        try:
            mem.get(m.id, agent=to_agent)
            shared += 1
        except NotFound:
            continue
    if not shared:
        domain_arg = f" --domain {domain}" if domain else ""
        return (
            f"{from_agent!r} has {count_memories(len(owned))}{tagged}, but shared none with {to_agent!r}: a merge "
            f"takes only what was shared (consent). Share first: engram memory share --from {from_agent} "
            f"--to {to_agent}{domain_arg}"
        )
    return (
        f"What {from_agent!r} shared with {to_agent!r}{tagged} ({count_memories(shared)}) was merged before; "
        "merging again changes nothing."
    )

"""``engram demo``: a short, real tour of engramdb in a throwaway store."""

from __future__ import annotations

import tempfile
from typing import Any, Final

from engramdb.interfaces.cli._options import JsonOption
from engramdb.interfaces.cli._render import (
    console,
    emit_json,
    history_table,
    hits_table,
    memories_table,
    memory_detail,
)

__all__ = ["demo"]

AGENT: Final = "demo-agent"

#: What an agent might have lived through: decisions, failures with their fixes, knowledge, preferences.
MEMORIES: Final[tuple[dict[str, Any], ...]] = (
    {
        "kind": "decision",
        "content": "Chose PostgreSQL over MongoDB for the orders service: we need transactions across tables.",
        "tags": ["database", "architecture"],
    },
    {
        "kind": "failure",
        "content": "Login to the billing API returned 401 after the nightly token rotation. "
        "Fix: refresh the OAuth token before retrying the request.",
        "tags": ["auth", "api"],
        "metadata": {"service": "billing", "status": 401},
    },
    {
        "kind": "failure",
        "content": "npm install timed out in CI on large dependency trees. "
        "Fix: restore the npm cache and raise fetch-timeout to 120 seconds.",
        "tags": ["ci", "npm"],
    },
    {
        "kind": "knowledge",
        "content": "The payments API allows 100 requests per minute per key; on HTTP 429 back off exponentially.",
        "tags": ["api", "rate-limit"],
    },
    {
        "kind": "success",
        "content": "Shipped the schema migration with zero downtime: add nullable columns first, "
        "backfill in batches of 10k rows, then switch reads.",
        "tags": ["database", "migration"],
    },
    {
        "kind": "preference",
        "content": "The user prefers short answers with a runnable Python example.",
        "tags": ["style"],
    },
    {
        "kind": "code_pattern",
        "content": "Wrap each SQLite write in `with conn:` so it commits, or rolls back on error, atomically.",
        "tags": ["python", "sqlite"],
    },
    {
        "kind": "episode",
        "content": "Debugged a flaky integration test with the QA agent: two tests shared one temp directory.",
        "tags": ["testing"],
    },
)

SEARCHES: Final = (
    "authentication keeps failing after credentials change",
    "how do we change the database schema without downtime",
    "our build server keeps timing out when fetching packages",
)


def demo(as_json: JsonOption = False) -> None:
    """Take a two-second tour: remember, search, inspect and update memories in a temporary store.

    Uses the real embedding model; the store is deleted afterwards.
    """
    # Imported here so `engram --help` stays fast.
    from engramdb import Engram

    out = console()
    with tempfile.TemporaryDirectory(prefix="engram-demo-") as tmp, Engram(tmp) as mem:
        remembered = mem.remember_many([{**item, "agent": AGENT} for item in MEMORIES])
        if not as_json:
            out.rule(f"1. An agent ({AGENT}) remembers {len(remembered)} things")
            out.print(memories_table(remembered, width=out.width))

        searches = []
        for i, query in enumerate(SEARCHES):
            hits = mem.search(query, agent=AGENT, limit=3)
            searches.append({"query": query, "hits": [h.to_dict() for h in hits]})
            if not as_json:
                if i == 0:
                    out.rule("2. Later it recalls by meaning, not only by shared words")
                out.print(hits_table(hits, title=f"search: {query!r}", width=out.width))

        # The best answer to the first question, read back: recall is counted in access_count.
        first = mem.search(SEARCHES[0], agent=AGENT, limit=1)
        if not first:  # pragma: no cover - the demo memories always match
            raise RuntimeError("the demo search found nothing")
        shown = mem.get(first[0].memory.id, agent=AGENT)
        if not as_json:
            out.rule("3. Every memory keeps its metadata and how often it was recalled")
            out.print(memory_detail(shown))

        updated = mem.update(
            shown.id,
            agent=AGENT,
            tags=(*shown.tags, "verified"),
            confidence=0.9,
        )
        changes = mem.history(updated.id)
        if not as_json:
            out.rule("4. Changes are kept in its history")
            out.print(history_table(changes))

        summary = {
            "agent": AGENT,
            "remembered": [m.to_dict() for m in remembered],
            "searches": searches,
            "shown": shown.to_dict(),
            "updated": updated.to_dict(),
            "history": [c.to_dict() for c in changes],
        }

    if as_json:
        emit_json(summary)
        return
    out.rule()
    out.print(
        "That store lived in a temporary folder and is gone. "
        "Next: [bold]engram memory record --help[/], or the README for the Python API."
    )

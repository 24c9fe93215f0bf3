"""An MCP server over one :class:`~engramdb.Engram` (the official ``mcp`` SDK); run it with ``engram mcp``.

Tools: ``remember``, ``search``, ``get``, ``forget``, ``record_outcome``,
``suggest``, ``choose``, ``record_failure``, ``solutions``, ``failure_patterns``.
Each is a thin call of the library method of (nearly) the same name and returns a
JSON-ready dict; lists come wrapped (``{"hits": [...]}``) so every result is an
object. A library error (bad input, unknown id, ...) becomes a tool error result
with its one-line message, which the model can read and act on.

Every tool takes an ``agent`` argument (default ``"default"``), as in the Python
API: like the library, the server trusts its client. Over stdio the client is the
local process that started it.

Works with the SDK's 1.x (``FastMCP``) and 2.x (``MCPServer``) lines. Requires the
``mcp`` extra: ``pip install 'engramdb[mcp]'``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from engramdb.errors import EngramError
from engramdb.interfaces._json import pattern_dict, solution_dict, suggestion_dict

if TYPE_CHECKING:
    from engramdb import Engram

__all__ = ["SERVER_NAME", "TOOLS", "create_server", "serve_stdio"]

SERVER_NAME: Final = "engramdb"
#: The tools the server offers, in the order it lists them.
TOOLS: Final = (
    "remember",
    "search",
    "get",
    "forget",
    "record_outcome",
    "suggest",
    "choose",
    "record_failure",
    "solutions",
    "failure_patterns",
)

_INSTRUCTIONS: Final = (
    "Persistent memory for this agent. Use `search` before a task to recall what is known, `remember` to keep "
    "facts, decisions and preferences, `record_outcome` after acting and `suggest`/`choose` before acting to learn "
    "what works, `record_failure` and `solutions` for errors and their fixes. Pass the same `agent` name throughout."
)
_MISSING: Final = "the MCP server needs the mcp SDK: pip install 'engramdb[mcp]'"


def _sdk() -> tuple[Any, type[Exception]]:
    """The SDK's server class and its ``ToolError`` (a failure reported to the model, without a traceback)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        pass
    else:
        return MCPServer, ToolError
    try:  # the 1.x line: the same API under its earlier name
        fastmcp = importlib.import_module("mcp.server.fastmcp")
        exceptions = importlib.import_module("mcp.server.fastmcp.exceptions")
    except ImportError as exc:
        raise ImportError(_MISSING, name=exc.name) from exc
    server: Any = fastmcp.FastMCP
    error: type[Exception] = exceptions.ToolError
    return server, error


def create_server(mem: Engram) -> Any:
    """An MCP server (the SDK's ``MCPServer``/``FastMCP``) whose tools act on ``mem``; the caller owns ``mem``."""
    server_cls, tool_error = _sdk()
    server = server_cls(SERVER_NAME, instructions=_INSTRUCTIONS)

    def guarded(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        # A user error goes back to the model as a readable tool error; anything else is a bug,
        # which the SDK reports without a traceback.
        try:
            return call()
        except EngramError as exc:
            raise tool_error(" ".join(str(exc).split()) or type(exc).__name__) from exc

    # Keyword-only after the first argument, as in the library; MCP passes every argument by name.
    def remember(
        content: str,
        *,
        agent: str = "default",
        kind: str = "knowledge",
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        visibility: str = "private",
    ) -> dict[str, Any]:
        """Store a memory (kinds: knowledge, preference, decision, episode, ...); returns it as stored."""
        return guarded(
            lambda: mem.remember(
                content, agent=agent, kind=kind, tags=tags or (), metadata=metadata, visibility=visibility
            ).to_dict()
        )

    def search(
        query: str,
        agent: str = "default",
        kind: str | list[str] | None = None,
        tags: list[str] | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """Find the agent's memories most relevant to a query (by meaning and keywords), best first."""
        return guarded(
            lambda: {"hits": [h.to_dict() for h in mem.search(query, agent=agent, kind=kind, tags=tags, limit=limit)]}
        )

    def get(memory_id: str, agent: str = "default") -> dict[str, Any]:
        """One memory by id; it must be visible to the agent."""
        return guarded(lambda: mem.get(memory_id, agent=agent).to_dict())

    def forget(memory_id: str, agent: str = "default") -> dict[str, Any]:
        """Delete one of the agent's own memories for good."""

        def call() -> dict[str, Any]:
            mem.forget(memory_id, agent=agent)
            return {"forgotten": memory_id}

        return guarded(call)

    def record_outcome(
        context: str,
        action: str,
        outcome: str | bool | float,
        *,
        agent: str = "default",
        alternatives: list[str] | None = None,
        duration: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record how an action turned out in a situation.

        outcome: "success", "failure", "partial", true/false, or a reward in [-1, 1].
        """
        return guarded(
            lambda: mem.record(
                context,
                action,
                outcome,
                agent=agent,
                alternatives=alternatives or (),
                duration=duration,
                metadata=metadata,
            ).to_dict()
        )

    def suggest(
        context: str, agent: str = "default", options: list[str] | None = None, limit: int = 5
    ) -> dict[str, Any]:
        """What to do in a situation, from the outcomes of similar ones; recommended is null when evidence is thin."""
        return guarded(lambda: suggestion_dict(mem.suggest(context, agent=agent, options=options, limit=limit)))

    def choose(context: str, options: list[str], agent: str = "default") -> dict[str, Any]:
        """Pick one of the options for a situation, balancing trying new ones and using the best known."""
        return guarded(lambda: {"chosen": mem.choose(context, options, agent=agent)})

    def record_failure(
        error: str,
        agent: str = "default",
        context: str = "",
        solution: str | None = None,
        failed_solutions: list[str] | None = None,
    ) -> dict[str, Any]:
        """Record one failure: the error message, the fix that worked (if any) and fixes that did not."""
        return guarded(
            lambda: mem.record_failure(
                error, agent=agent, context=context, solution=solution, failed_solutions=failed_solutions or ()
            ).to_dict()
        )

    def solutions(error: str, agent: str = "default", limit: int = 3) -> dict[str, Any]:
        """Fixes that worked for this error (or errors like it) before, best first."""
        return guarded(
            lambda: {"solutions": [solution_dict(s) for s in mem.solutions(error, agent=agent, limit=limit)]}
        )

    def failure_patterns(agent: str = "default", recurring: bool = False) -> dict[str, Any]:
        """The kinds of failure the agent has seen, with their fixes and prevention checks."""
        return guarded(
            lambda: {"patterns": [pattern_dict(p) for p in mem.failure_patterns(agent=agent, recurring=recurring)]}
        )

    tools: dict[str, Callable[..., dict[str, Any]]] = {
        "remember": remember,
        "search": search,
        "get": get,
        "forget": forget,
        "record_outcome": record_outcome,
        "suggest": suggest,
        "choose": choose,
        "record_failure": record_failure,
        "solutions": solutions,
        "failure_patterns": failure_patterns,
    }
    for name in TOOLS:
        server.tool(name=name)(tools[name])
    return server


def serve_stdio(mem: Engram) -> None:
    """Serve ``mem`` over MCP on stdin/stdout until the client disconnects."""
    create_server(mem).run("stdio")

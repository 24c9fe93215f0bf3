"""What the MCP server says about its tools and offers besides them: each tool's annotations (read-only,
destructive, idempotent) and output schema, the agent's memories as resources, and a prompt.

- **Annotations** are hints a client shows or acts on (asking before a destructive call):
  a tool that only reads is ``readOnlyHint``; a write that removes or overwrites is
  ``destructiveHint`` (others only add); ``idempotentHint`` when the same call twice changes
  nothing more. Only ``reason`` reaches outside the store (the configured LLM): ``openWorldHint``.
- **Output schemas** are the operations' result models (:mod:`._responses_more`): the
  structured content of every successful call conforms to its tool's.
- **Resources**: ``engram://memories/{id}``, one per memory the caller's agent sees
  (``resources/list`` lists the newest :data:`RESOURCE_LIMIT`; the template reads any), as
  the JSON of ``Memory.to_dict()``.
- **Prompts**: ``recall``, everything relevant to a task (``mem.context``) as one user message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
from mcp import types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from engramdb.errors import EngramError, NotFound
from engramdb.interfaces._responses_more import TOOL_RESULTS
from engramdb.validate import DEFAULT_TOKEN_BUDGET

if TYPE_CHECKING:
    from engramdb import Engram
    from engramdb.interfaces._access import Caller
    from engramdb.interfaces._ops import Tool

__all__ = ["RESOURCE_LIMIT", "RESOURCE_PREFIX", "Extras", "output_schema", "tool_annotations"]

RESOURCE_PREFIX: Final = "engram://memories/"
#: Memories ``resources/list`` names (the newest); any other is read through the template.
RESOURCE_LIMIT: Final = 100
#: MCP's error code for a resource that does not exist.
RESOURCE_NOT_FOUND: Final = -32002

#: Writes that remove or overwrite (the others only add).
DESTRUCTIVE: Final = frozenset({"forget", "update", "clear", "unshare", "remove_check", "cleanup", "distill"})
#: Writes that change nothing more when repeated with the same arguments.
IDEMPOTENT: Final = frozenset({"forget", "update", "clear", "share", "unshare", "remove_check", "cleanup"})
#: Tools that reach outside the store.
OPEN_WORLD: Final = frozenset({"reason"})


def tool_annotations(tool: Tool) -> types.ToolAnnotations:
    """The hints of one tool."""
    title = tool.name.replace("_", " ").capitalize()
    if not tool.writes:
        return types.ToolAnnotations(
            title=title, read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        )
    return types.ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=tool.name in DESTRUCTIVE,
        idempotent_hint=tool.name in IDEMPOTENT,
        open_world_hint=tool.name in OPEN_WORLD,
    )


def output_schema(tool: Tool) -> dict[str, Any] | None:
    """The JSON schema of the tool's structured result (None if its result has no model yet)."""
    model = TOOL_RESULTS.get(tool.name)
    return None if model is None else model.model_json_schema(mode="serialization")


def _not_found(uri: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, f"no such resource: {uri}")


class Extras:
    """The resource and prompt handlers of one server over ``mem``; ``caller_of`` finds a request's caller."""

    def __init__(self, mem: Engram, caller_of: Callable[[Any], Caller | None]) -> None:
        self._mem = mem
        self._caller_of = caller_of

    def _caller(self, ctx: Any) -> Caller:
        caller = self._caller_of(ctx)
        if caller is None:
            raise MCPError(INVALID_PARAMS, "not authenticated")
        return caller

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        caller = self._caller(ctx)
        found = await anyio.to_thread.run_sync(lambda: self._mem.list(agent=caller.agent(None), limit=RESOURCE_LIMIT))
        resources = [
            types.Resource(
                uri=f"{RESOURCE_PREFIX}{m.id}",
                name=m.id,
                title=" ".join(m.content.split())[:80],
                description=f"{m.kind} memory of {m.agent}",
                mime_type="application/json",
            )
            for m in found
        ]
        return types.ListResourcesResult(resources=resources)

    async def list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=f"{RESOURCE_PREFIX}{{id}}",
            name="memory",
            title="A memory by id",
            description="One memory the agent sees, as JSON (Memory.to_dict()).",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        caller = self._caller(ctx)
        uri = str(params.uri)
        memory_id = uri.removeprefix(RESOURCE_PREFIX)
        if memory_id == uri or not memory_id or "/" in memory_id:
            raise _not_found(uri)
        try:
            memory = await anyio.to_thread.run_sync(lambda: self._mem.get(memory_id, agent=caller.scope(None)))
        except NotFound as exc:
            raise _not_found(uri) from exc
        except EngramError as exc:
            raise MCPError(INVALID_PARAMS, " ".join(str(exc).split())) from exc
        text = json.dumps(memory.to_dict(), ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        recall = types.Prompt(
            name="recall",
            title="Recall before a task",
            description=(
                "Everything memory holds that is relevant to a task (the approach that worked, warnings from past "
                "failures, known fixes, preferences, relevant memories) as one message to start from."
            ),
            arguments=[
                types.PromptArgument(name="task", description="The task about to be worked on.", required=True),
                types.PromptArgument(
                    name="token_budget",
                    description=f"At most this many tokens of memory (default {DEFAULT_TOKEN_BUDGET}).",
                    required=False,
                ),
            ],
        )
        return types.ListPromptsResult(prompts=[recall])

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != "recall":
            raise MCPError(INVALID_PARAMS, f"unknown prompt {params.name!r} (prompts: recall)")
        caller = self._caller(ctx)
        arguments = params.arguments or {}
        task = arguments.get("task", "")
        budget_text = arguments.get("token_budget") or str(DEFAULT_TOKEN_BUDGET)
        if not budget_text.isdigit():
            raise MCPError(INVALID_PARAMS, "token_budget must be a whole number of tokens")
        try:
            context = await anyio.to_thread.run_sync(
                lambda: self._mem.context(task, agent=caller.agent(None), token_budget=int(budget_text))
            )
        except EngramError as exc:
            raise MCPError(INVALID_PARAMS, " ".join(str(exc).split())) from exc
        known = context.render() or "(nothing relevant in memory yet)"
        text = f"Task: {task}\n\nWhat memory holds that is relevant to it:\n\n{known}"
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        return types.GetPromptResult(description=f"What memory holds for: {task[:80]}", messages=[message])

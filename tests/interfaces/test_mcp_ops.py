"""The MCP server's description of itself: version, tool annotations and output schemas, memories as resources,
the ``recall`` prompt; ``engram mcp`` as a subprocess driven by the SDK's own client."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import jsonschema  # the mcp SDK depends on it
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from test_mcp import _engram, payload

import engramdb
from engramdb.interfaces._mcp_more import RESOURCE_PREFIX
from engramdb.interfaces.mcp import TOOLS


def test_version_annotations_output_schemas_resources_and_prompts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    command, prefix = _engram()
    params = StdioServerParameters(
        command=command,
        args=[*prefix, "mcp", "--store", str(store)],
        env={**os.environ, "ENGRAM_HOME": str(tmp_path / "home")},
    )
    seen: dict[str, Any] = {}

    async def main() -> None:
        with (tmp_path / "server.log").open("w") as errlog, anyio.fail_after(120):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                hello = await session.initialize()
                seen["server"] = hello.server_info
                seen["capabilities"] = hello.capabilities
                tools = {t.name: t for t in (await session.list_tools()).tools}
                seen["tools"] = tools

                remembered = await session.call_tool(
                    "remember", {"content": "The release train leaves on Thursdays", "tags": ["release"]}
                )
                memory = payload(remembered)
                seen["memory"] = memory
                seen["structured"] = remembered.structured_content
                searched = await session.call_tool("search", {"query": "when does the release train leave"})
                seen["search"] = searched.structured_content

                seen["resources"] = (await session.list_resources()).resources
                seen["templates"] = (await session.list_resource_templates()).resource_templates
                seen["read"] = (await session.read_resource(f"{RESOURCE_PREFIX}{memory['id']}")).contents
                with pytest.raises(MCPError, match="no such resource"):
                    await session.read_resource(f"{RESOURCE_PREFIX}no-such-id")

                seen["prompts"] = (await session.list_prompts()).prompts
                seen["prompt"] = await session.get_prompt("recall", {"task": "plan the next release"})
                with pytest.raises(MCPError, match="unknown prompt"):
                    await session.get_prompt("nothing", {})

    anyio.run(main)

    assert seen["server"].name == "engramdb"
    assert seen["server"].version == engramdb.__version__
    assert seen["capabilities"].resources is not None
    assert seen["capabilities"].prompts is not None

    tools = seen["tools"]
    assert set(tools) == set(TOOLS)
    for tool in tools.values():
        hints = tool.annotations
        assert hints is not None, tool.name
        assert tool.output_schema is not None, tool.name
        assert tool.output_schema["type"] == "object", tool.name
        if hints.read_only_hint:
            assert not hints.destructive_hint, tool.name
    assert tools["search"].annotations.read_only_hint
    assert not tools["remember"].annotations.read_only_hint
    assert not tools["remember"].annotations.destructive_hint
    assert tools["forget"].annotations.destructive_hint
    assert tools["forget"].annotations.idempotent_hint
    assert not tools["record_outcome"].annotations.idempotent_hint
    # The structured results conform to the tools' output schemas.
    jsonschema.validate(seen["structured"], tools["remember"].output_schema)
    jsonschema.validate(seen["search"], tools["search"].output_schema)
    assert seen["search"]["hits"][0]["memory"]["id"] == seen["memory"]["id"]

    uris = [str(r.uri) for r in seen["resources"]]
    assert f"{RESOURCE_PREFIX}{seen['memory']['id']}" in uris
    assert [t.uri_template for t in seen["templates"]] == [f"{RESOURCE_PREFIX}{{id}}"]
    (content,) = seen["read"]
    assert content.mime_type == "application/json"
    assert json.loads(content.text) == seen["memory"] | {
        k: json.loads(content.text)[k]
        for k in ("access_count", "last_accessed")  # the search read it since
    }

    assert [p.name for p in seen["prompts"]] == ["recall"]
    (message,) = seen["prompt"].messages
    assert message.role == "user"
    assert "release train leaves on Thursdays" in message.content.text

"""LangMem's own memory tools over EngramStore, in a real LangGraph graph: two users stay apart out of the box.

``create_manage_memory_tool`` and ``create_search_memory_tool`` from the real ``langmem`` package, under
LangMem's default namespace ``("memories", "{langgraph_user_id}")``, run by LangGraph's ``ToolNode`` in a
compiled graph whose store is an :class:`EngramStore` with its default scope mapping. No LLM: each turn is
an ``AIMessage`` carrying the tool call a model would make, so the tools, the graph and the store are real.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from integration_extras import require

require("langgraph", "langgraph")
require("langmem", "dev")

from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402
from langmem import create_manage_memory_tool, create_search_memory_tool  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.integrations.langgraph import EngramStore  # noqa: E402

#: LangMem's documented default namespace: one namespace per user id of the run's config.
NAMESPACE = ("memories", "{langgraph_user_id}")


@pytest.fixture
def app(mem: Engram) -> Any:
    tools = [create_manage_memory_tool(namespace=NAMESPACE), create_search_memory_tool(namespace=NAMESPACE)]
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile(store=EngramStore(mem))


def _turn(name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def _as(user: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user}}


def _call(app: Any, user: str, name: str, **args: Any) -> str:
    out = app.invoke(_turn(name, args), _as(user))
    reply = out["messages"][-1]
    assert isinstance(reply, ToolMessage)
    assert reply.status != "error", reply.content
    return str(reply.content)


def _search(app: Any, user: str, query: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(_call(app, user, "search_memory", query=query))
    return found


def _created_id(reply: str) -> str:
    assert reply.startswith("created memory "), reply
    return reply.removeprefix("created memory ").strip()


def test_langmem_tools_keep_two_users_apart(app: Any, mem: Engram) -> None:
    ana = _created_id(_call(app, "ana", "manage_memory", content="I am allergic to peanuts", action="create"))
    _created_id(_call(app, "ben", "manage_memory", content="I am allergic to shellfish", action="create"))
    mem.flush()
    for user, mine, theirs in (("ana", "peanuts", "shellfish"), ("ben", "shellfish", "peanuts")):
        found = _search(app, user, "which food allergies do I have")
        assert [f["namespace"] for f in found] == [["memories", user]]
        assert mine in found[0]["value"]["content"]
        assert all(theirs not in json.dumps(f) for f in found)
    # Underneath: memories of agent "memories", each in its user's scope, as the Python API sees them.
    assert {(m.user, m.content) for m in mem.list(agent="memories")} == {
        ("ana", "content: I am allergic to peanuts"),
        ("ben", "content: I am allergic to shellfish"),
    }
    assert [h.memory.user for h in mem.search("allergic", agent="memories", user="ben")] == ["ben"]
    # Ben's tools cannot reach Ana's memory even with its id: his update and delete stay in his namespace.
    _call(app, "ben", "manage_memory", content="I am allergic to nothing", action="update", id=ana)
    _call(app, "ben", "manage_memory", action="delete", id=ana)
    assert [f["value"]["content"] for f in _search(app, "ana", "allergies")] == ["I am allergic to peanuts"]
    # Ana's own update supersedes her value; her delete forgets it; Ben's memory is untouched throughout.
    _call(app, "ana", "manage_memory", content="I am allergic to peanuts and cashews", action="update", id=ana)
    assert [f["value"]["content"] for f in _search(app, "ana", "allergies")] == ["I am allergic to peanuts and cashews"]
    _call(app, "ana", "manage_memory", action="delete", id=ana)
    assert _search(app, "ana", "allergies") == []
    assert [f["value"]["content"] for f in _search(app, "ben", "allergies")] == ["I am allergic to shellfish"]


def test_langmem_tools_run_async_with_the_same_isolation(app: Any, mem: Engram) -> None:
    async def main() -> list[Any]:
        for user, text in (("ana", "my sister lives in Porto"), ("ben", "my brother lives in Oslo")):
            await app.ainvoke(_turn("manage_memory", {"content": text, "action": "create"}), _as(user))
        mem.flush()
        return [
            (await app.ainvoke(_turn("search_memory", {"query": "where does my family live"}), _as(user)))["messages"][
                -1
            ]
            for user in ("ana", "ben")
        ]

    ana, ben = asyncio.run(main())
    assert "Porto" in ana.content
    assert "Oslo" not in ana.content
    assert "Oslo" in ben.content
    assert "Porto" not in ben.content

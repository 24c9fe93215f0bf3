"""The LangChain tools (seed 004) with the real langchain-core: schemas, answers, errors, an agent loop.

The agent loop is driven by langchain-core's own ``GenericFakeChatModel`` (no network): scripted tool calls,
each tool answer going back into the conversation, and memories that persist across a restart (seed 004's
verification steps 4-6: save patterns, recall them in a new session, see the statistics).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from integration_extras import require

require("langchain_core", "langchain")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.errors import ValidationError  # noqa: E402
from engramdb.integrations.langchain import PATTERN_KIND, PATTERN_TAG, memory_tools  # noqa: E402

NAMES = [
    "save_pattern",
    "recall_patterns",
    "get_pattern_stats",
    "remember",
    "search",
    "update",
    "forget",
    "suggest",
    "record_outcome",
]
LOGIN_ACTIONS = [
    {"tool": "browser_navigate", "args": {"url": "https://facebook.com"}},
    {"tool": "human_login", "args": {}},
]


def tools_of(mem: Engram, agent: str = "surfer") -> dict[str, BaseTool]:
    return {t.name: t for t in memory_tools(mem, agent=agent)}


def call(tool: BaseTool, args: dict[str, Any], call_id: str = "call-1") -> ToolMessage:
    """Invoke a tool the way an agent runtime does: with a tool call, getting a ToolMessage back."""
    out = tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": call_id})
    assert isinstance(out, ToolMessage)
    return out


def schema_of(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema a chat model's tool binding sends for ``tool``."""
    model = tool.tool_call_schema
    assert isinstance(model, type)
    assert issubclass(model, BaseModel)
    return model.model_json_schema()


def text(message: ToolMessage) -> str:
    assert isinstance(message.content, str)
    return message.content


# -- the tools themselves -----------------------------------------------------------------------------------
def test_tools_are_structured_tools_with_schemas_an_llm_can_read(mem: Engram) -> None:
    tools = memory_tools(mem, agent="surfer")
    assert [t.name for t in tools] == NAMES
    for tool in tools:
        assert isinstance(tool, StructuredTool)
        assert len(tool.description) > 40
        schema = schema_of(tool)
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    save = schema_of(next(t for t in tools if t.name == "save_pattern"))
    assert set(save["required"]) == {"task", "actions"}
    assert save["properties"]["success_rate"]["maximum"] == 1.0
    remember = schema_of(next(t for t in tools if t.name == "remember"))
    assert "knowledge" in str(remember["properties"]["kind"])  # the kinds are an enum the model sees


def test_save_then_recall_a_pattern_with_its_actions(mem: Engram) -> None:
    tools = tools_of(mem)
    saved = text(call(tools["save_pattern"], {"task": "Login to Facebook", "actions": LOGIN_ACTIONS}))
    assert saved.startswith("Saved pattern ")
    pattern_id = saved.split()[2]
    stored = mem.get(pattern_id)
    assert stored.agent == "surfer"
    assert stored.kind == PATTERN_KIND
    assert PATTERN_TAG in stored.tags
    assert stored.metadata["actions"] == LOGIN_ACTIONS
    assert stored.confidence == 1.0

    recalled = text(call(tools["recall_patterns"], {"task": "Sign into FB"}))
    assert "Found 1 similar pattern" in recalled
    assert f"Pattern id: {pattern_id}" in recalled
    assert "browser_navigate: {'url': 'https://facebook.com'}" in recalled
    assert "Success rate: 100%" in recalled
    assert "Times used: 0" in recalled


def test_recall_leaves_out_patterns_below_the_success_rate_and_other_agents(mem: Engram) -> None:
    tools = tools_of(mem)
    call(tools["save_pattern"], {"task": "Post on the timeline", "actions": [{"tool": "post"}], "success_rate": 0.3})
    call(tools_of(mem, "other")["save_pattern"], {"task": "Post on the timeline", "actions": [{"tool": "x"}]})
    assert "No similar patterns" in text(call(tools["recall_patterns"], {"task": "post on timeline"}))
    low = text(call(tools["recall_patterns"], {"task": "post on timeline", "min_success_rate": 0.2}))
    assert "Found 1 similar pattern" in low
    assert "post: {}" in low


def test_outcomes_update_a_patterns_success_rate_and_usage(mem: Engram) -> None:
    tools = tools_of(mem)
    pattern_id = text(call(tools["save_pattern"], {"task": "Login to Facebook", "actions": LOGIN_ACTIONS})).split()[2]
    for outcome in ("success", "success", "failure"):
        answer = text(
            call(
                tools["record_outcome"],
                {
                    "context": "Login to Facebook",
                    "action": "reuse-login-pattern",
                    "outcome": outcome,
                    "used_memory_ids": [pattern_id],
                },
            )
        )
        assert "updated 1 used memory" in answer
    pattern = mem.get(pattern_id)
    assert pattern.attempts == 3
    assert pattern.confidence < 1.0  # a failure pulled it down
    stats = text(call(tools["get_pattern_stats"], {}))
    assert "Total patterns: 1" in stats
    assert "Total usage: 3" in stats
    assert f"Most used pattern: {pattern_id}" in stats
    assert "Times used: 3" in text(call(tools["recall_patterns"], {"task": "Login to Facebook"}))


def test_pattern_stats_when_there_are_none(mem: Engram) -> None:
    assert "Total patterns: 0" in text(call(tools_of(mem)["get_pattern_stats"], {}))


def test_remember_and_search(mem: Engram) -> None:
    tools = tools_of(mem)
    answer = text(call(tools["remember"], {"content": "The staging database listens on port 5433", "tags": ["infra"]}))
    memory_id = re.search(r"Remembered (\S+) \(knowledge\)", answer)
    assert memory_id is not None
    found = text(call(tools["search"], {"query": "which port does staging postgres use", "tags": ["infra"]}))
    assert memory_id.group(1) in found
    assert "port 5433" in found
    assert "No memories found" in text(call(tools["search"], {"query": "port", "kind": "failure"}))


def test_update_and_forget_correct_the_agents_own_memories(mem: Engram) -> None:
    tools = tools_of(mem)
    answer = text(call(tools["remember"], {"content": "The staging database listens on port 5432"}))
    found = re.search(r"Remembered (\S+) ", answer)
    assert found is not None
    memory_id = found.group(1)
    assert "Updated" in text(call(tools["update"], {"memory_id": memory_id, "content": "Staging listens on 5433"}))
    assert mem.get(memory_id).content == "Staging listens on 5433"
    assert [c.action for c in mem.history(memory_id)] == ["create", "update"]
    assert "Nothing to change" in text(call(tools["update"], {"memory_id": memory_id}))
    other = mem.remember("bob's note", agent="bob")
    refused = text(call(tools["forget"], {"memory_id": other.id}))
    assert "forget failed" in refused
    assert mem.get(other.id).content == "bob's note"  # another agent's memory is not the tool's to delete
    assert f"Forgot {memory_id}" in text(call(tools["forget"], {"memory_id": memory_id}))
    assert mem.list(agent="surfer") == []


def test_remember_reports_redacted_secrets(mem: Engram) -> None:
    key = "AKIA" + "QWERTYUIOPASDFGH"
    answer = text(call(tools_of(mem)["remember"], {"content": f"deploy uses key id {key} for S3"}))
    assert "redacted before storing" in answer
    [stored] = mem.list(agent="surfer")
    assert key not in stored.content


def test_suggest_learns_from_recorded_outcomes(mem: Engram) -> None:
    tools = tools_of(mem)
    assert "No outcomes recorded" in text(call(tools["suggest"], {"context": "login page shows a captcha"}))
    for _ in range(6):
        call(
            tools["record_outcome"],
            {
                "context": "login page shows a captcha",
                "action": "ask-human",
                "outcome": "success",
                "alternatives": ["retry"],
            },
        )
        call(tools["record_outcome"], {"context": "login page shows a captcha", "action": "retry", "outcome": -1.0})
    answer = text(call(tools["suggest"], {"context": "a captcha appeared on the login page"}))
    assert answer.startswith("Recommended: ask-human")
    assert "- ask-human:" in answer
    assert "- retry:" in answer


def test_engram_errors_come_back_as_one_line_answers(mem: Engram) -> None:
    tools = tools_of(mem)
    cases: list[tuple[BaseTool, dict[str, Any], str]] = [
        (tools["remember"], {"content": "   "}, "remember failed: content must not be empty"),
        (tools["record_outcome"], {"context": "c", "action": "a", "outcome": 7.0}, "record_outcome failed:"),
        (
            tools["record_outcome"],
            {"context": "c", "action": "a", "outcome": "success", "used_memory_ids": ["nope"]},
            "record_outcome failed: no memory 'nope'",
        ),
        (tools["search"], {"query": ""}, "search failed:"),
    ]
    for tool, args, expected in cases:
        message = call(tool, args)
        assert message.status == "error"
        assert text(message).startswith(expected), text(message)
        assert "Traceback" not in text(message)
        assert "\n" not in text(message)


def test_invalid_arguments_come_back_as_messages(mem: Engram) -> None:
    tools = tools_of(mem)
    message = call(tools["remember"], {"content": "x", "kind": "gossip"})
    assert message.status == "error"
    assert text(message).startswith("remember got invalid arguments: kind:")
    message = call(tools["save_pattern"], {"task": "t", "actions": [], "success_rate": 2})
    assert "success_rate" in text(message)
    assert mem.count(agent="surfer") == 0


def test_the_agent_name_is_checked_once_when_binding() -> None:
    with Engram(":memory:") as mem, pytest.raises(ValidationError, match="agent"):
        memory_tools(mem, agent=" ")


def test_tools_work_asynchronously(mem: Engram) -> None:
    tools = tools_of(mem)

    async def run() -> str:
        await tools["remember"].ainvoke({"content": "Async agents need memory too"})
        out = await tools["search"].ainvoke({"query": "asynchronous agents"})
        assert isinstance(out, str)
        return out

    assert "Async agents need memory too" in asyncio.run(run())


# -- an agent loop with langchain-core's fake chat model ----------------------------------------------------
def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def run_agent(model: GenericFakeChatModel, tools: list[BaseTool], prompt: str) -> list[BaseMessage]:
    """The classic tool-calling loop: call the model, run the tools it asks for, repeat until it answers."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(prompt)]
    for _ in range(10):
        reply = model.invoke(messages)
        assert isinstance(reply, AIMessage)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        for tc in reply.tool_calls:
            result = by_name[tc["name"]].invoke({**tc, "type": "tool_call"})
            assert isinstance(result, ToolMessage)
            messages.append(result)
    raise AssertionError("the agent did not finish")


def tool_answers(messages: list[BaseMessage], name: str) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == name]


def test_agent_loop_learns_and_remembers_across_a_restart(
    reopen: Callable[[], AbstractContextManager[Engram]],
) -> None:
    # Session 1: nothing recalled; the agent does the task and saves the pattern (seed 004, step 4).
    with reopen() as mem:
        first = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage("", tool_calls=[tool_call("recall_patterns", {"task": "Log into Facebook"}, "c1")]),
                    AIMessage(
                        "",
                        tool_calls=[
                            tool_call("save_pattern", {"task": "Log into Facebook", "actions": LOGIN_ACTIONS}, "c2"),
                            tool_call(
                                "remember", {"content": "The user's Facebook account uses two-factor auth"}, "c3"
                            ),
                        ],
                    ),
                    AIMessage("Logged in and saved the pattern."),
                ]
            )
        )
        messages = run_agent(first, memory_tools(mem, agent="surfer"), "Log into Facebook")
        assert "No similar patterns" in tool_answers(messages, "recall_patterns")[0]
        assert tool_answers(messages, "save_pattern")[0].startswith("Saved pattern")
        assert messages[-1].content == "Logged in and saved the pattern."

    # Session 2, after a restart: the recalled pattern's id flows from a tool answer into the next call.
    with reopen() as mem:
        conversation: list[BaseMessage] = []

        def script() -> Iterator[AIMessage]:
            yield AIMessage("", tool_calls=[tool_call("recall_patterns", {"task": "Sign in to FB"}, "d1")])
            recalled = str(conversation[-1].content)
            found = re.search(r"Pattern id: (\S+)", recalled)
            assert found is not None, recalled
            yield AIMessage(
                "",
                tool_calls=[
                    tool_call(
                        "record_outcome",
                        {
                            "context": "Sign in to FB",
                            "action": "reuse-pattern",
                            "outcome": "success",
                            "used_memory_ids": [found.group(1)],
                        },
                        "d2",
                    ),
                    tool_call("search", {"query": "facebook two-factor"}, "d3"),
                    tool_call("get_pattern_stats", {}, "d4"),
                ],
            )
            yield AIMessage("Reused the saved login pattern.")

        second = GenericFakeChatModel(messages=script())
        tools = memory_tools(mem, agent="surfer")
        by_name = {t.name: t for t in tools}
        conversation.append(HumanMessage("Sign in to FB"))
        while True:  # the same loop, keeping the conversation visible to the script
            reply = second.invoke(conversation)
            conversation.append(reply)
            if not isinstance(reply, AIMessage) or not reply.tool_calls:
                break
            for tc in reply.tool_calls:
                conversation.append(by_name[tc["name"]].invoke({**tc, "type": "tool_call"}))

        recalled = tool_answers(conversation, "recall_patterns")[0]
        assert "Found 1 similar pattern" in recalled  # seed 004 step 5: recall across sessions
        assert "human_login" in recalled
        assert "two-factor" in tool_answers(conversation, "search")[0]
        stats = tool_answers(conversation, "get_pattern_stats")[0]  # step 6: statistics
        assert "Total patterns: 1" in stats
        assert "Total usage: 1" in stats
        assert conversation[-1].content == "Reused the saved login pattern."
        # Every tool write went through the audited pipeline.
        assert mem.audit.verify()


def test_recall_does_not_offer_an_unrelated_pattern(mem: Engram) -> None:
    tools = tools_of(mem)
    call(tools["save_pattern"], {"task": "Login to Facebook", "actions": LOGIN_ACTIONS})
    call(tools["save_pattern"], {"task": "Post on the timeline", "actions": [{"tool": "post"}]})
    assert "No similar patterns" in text(call(tools["recall_patterns"], {"task": "bake a chocolate cake"}))
    assert "Found 1 similar pattern" in text(call(tools["recall_patterns"], {"task": "Sign into FB"}))


def test_tools_bound_to_a_user_keep_to_that_users_scope(mem: Engram) -> None:
    ana = {t.name: t for t in memory_tools(mem, agent="assistant", user="ana", session="chat-1")}
    ben = {t.name: t for t in memory_tools(mem, agent="assistant", user="ben")}
    ana["remember"].invoke({"content": "Ana's door code is 4711"})
    ben["remember"].invoke({"content": "Ben's door code is 1234"})
    [stored] = mem.list(agent="assistant", user="ana", session="chat-1")
    assert (stored.user, stored.session) == ("ana", "chat-1")
    found = ben["search"].invoke({"query": "door code"})
    assert "1234" in found
    assert "4711" not in found
    assert stored.id in ben["forget"].invoke({"memory_id": stored.id})  # not Ben's: a one-line error
    assert mem.get(stored.id).content == "Ana's door code is 4711"

"""The OpenAI-compatible client against a real HTTP server on loopback speaking the protocol with scripted answers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engramdb.brain.llm import (
    LLMError,
    LLMNotConfigured,
    OpenAICompatibleLLM,
    check_shape,
    llm_from_settings,
    parse_json_answer,
)
from engramdb.errors import EngramError
from llm_server import FakeServer, Reply


def client(server: FakeServer, **kw: Any) -> OpenAICompatibleLLM:
    kw.setdefault("timeout", 2.0)
    kw.setdefault("backoff", 0.0)
    return OpenAICompatibleLLM("test-model", base_url=server.url, api_key="sk-test", **kw)


SCHEMA = {
    "type": "object",
    "properties": {"reward": {"type": "number"}, "label": {"type": "string", "enum": ["pos", "neg"]}},
    "required": ["reward"],
}
MSGS = [{"role": "user", "content": "rate: great job"}]


def test_plain_completion_speaks_the_protocol(server: FakeServer) -> None:
    server.script = [Reply("hi there")]
    llm = client(server)
    assert llm.complete(MSGS) == "hi there"
    req = server.requests[0]
    assert req["model"] == "test-model"
    assert req["messages"] == MSGS
    assert "response_format" not in req
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert llm.name == "openai:test-model"


def test_structured_output_is_parsed_and_checked(server: FakeServer) -> None:
    server.script = [Reply('```json\n{"reward": 0.8, "label": "pos"}\n```')]
    llm = client(server)
    assert llm.complete(MSGS, schema=SCHEMA) == {"reward": 0.8, "label": "pos"}
    req = server.requests[0]
    assert req["response_format"]["type"] == "json_schema"
    assert req["response_format"]["json_schema"]["schema"] == SCHEMA
    assert req["messages"][0]["role"] == "system"
    assert "JSON Schema" in req["messages"][0]["content"]


def test_json_object_mode(server: FakeServer) -> None:
    server.script = [Reply('{"reward": -1}')]
    assert client(server, json_mode="object").complete(MSGS, schema=SCHEMA) == {"reward": -1}
    assert server.requests[0]["response_format"] == {"type": "json_object"}


def test_slow_server_times_out_with_a_clear_error(server: FakeServer) -> None:
    server.script = [Reply(delay=1.5), Reply(delay=1.5)]
    llm = client(server, timeout=0.2, max_retries=1)
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"failed after 2 attempts: no answer within 0.2 s"):
        llm.complete(MSGS)
    assert time.monotonic() - start < 1.5


def test_malformed_json_answer_is_an_llm_error(server: FakeServer) -> None:
    server.script = [Reply("sure! the reward is {reward: high")]
    with pytest.raises(LLMError, match="not valid JSON"):
        client(server).complete(MSGS, schema=SCHEMA)


def test_body_that_is_not_json_is_an_llm_error(server: FakeServer) -> None:
    server.script = [Reply(raw="<html>gateway</html>")]
    with pytest.raises(LLMError, match="not JSON"):
        client(server).complete(MSGS)


def test_missing_choices_is_an_llm_error(server: FakeServer) -> None:
    server.script = [Reply(raw='{"object": "chat.completion", "choices": []}')]
    with pytest.raises(LLMError, match=r"choices\[0\]"):
        client(server).complete(MSGS)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"label": "pos"}', "lacks the field 'reward'"),
        ('{"reward": "high"}', r"answer.reward should be number"),
        ('{"reward": 1, "label": "meh"}', "should be one of"),
        ("[1, 2]", "should be object"),
    ],
)
def test_wrong_shape_is_an_llm_error(server: FakeServer, content: str, message: str) -> None:
    server.script = [Reply(content)]
    with pytest.raises(LLMError, match=message):
        client(server).complete(MSGS, schema=SCHEMA)


def test_429_then_ok_retries_and_honours_retry_after(server: FakeServer) -> None:
    waits: list[float] = []
    server.script = [Reply(status=429, headers={"Retry-After": "0.05"}), Reply("ok now")]
    llm = client(server, sleep=waits.append, backoff=5.0)
    assert llm.complete(MSGS) == "ok now"
    assert len(server.requests) == 2
    assert waits == [0.05]  # the server's Retry-After, not the 5 s backoff


def test_500_repeated_gives_up_after_bounded_retries(server: FakeServer) -> None:
    waits: list[float] = []
    server.script = [Reply(status=500) for _ in range(10)]
    llm = client(server, max_retries=3, backoff=0.1, max_backoff=0.3, sleep=waits.append)
    with pytest.raises(LLMError, match=r"failed after 4 attempts: HTTP 500: 'scripted 500'"):
        llm.complete(MSGS)
    assert len(server.requests) == 4
    # Exponential backoff with jitter, capped.
    assert 0.1 <= waits[0] <= 0.125
    assert 0.2 <= waits[1] <= 0.25
    assert waits[2] == 0.3


def test_client_error_is_not_retried(server: FakeServer) -> None:
    server.script = [Reply(status=401), Reply("never")]
    with pytest.raises(LLMError, match=r"refused the request \(HTTP 401\)"):
        client(server).complete(MSGS)
    assert len(server.requests) == 1


def test_unreachable_server_is_an_llm_error() -> None:
    llm = OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1", timeout=0.5, max_retries=1, backoff=0.0)
    with pytest.raises(LLMError, match="cannot reach"):
        llm.complete(MSGS)


def test_bad_messages_are_rejected_before_any_request(server: FakeServer) -> None:
    llm = client(server)
    for bad in ([], "hello", [{"role": "robot", "content": "x"}], [{"role": "user"}]):
        with pytest.raises(LLMError):
            llm.complete(bad)  # type: ignore[arg-type]
    assert server.requests == []


def test_llm_error_is_an_engram_error() -> None:
    assert issubclass(LLMError, EngramError)
    assert issubclass(LLMNotConfigured, LLMError)


def test_parse_json_answer_finds_the_object() -> None:
    assert parse_json_answer('Here you go: {"a": 1} hope it helps') == {"a": 1}
    with pytest.raises(LLMError):
        parse_json_answer("no json here")


def test_check_shape_nested_arrays() -> None:
    schema = {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "string"}}}}
    check_shape({"steps": ["a", "b"]}, schema)
    with pytest.raises(LLMError, match=r"answer.steps\[1\] should be string"):
        check_shape({"steps": ["a", 2]}, schema)


# -- settings ------------------------------------------------------------------------------------------------


def test_llm_from_settings_parses_the_spec() -> None:
    assert llm_from_settings(None) is None
    assert llm_from_settings("") is None
    llm = llm_from_settings("openai:gpt-4o-mini", key_env="MY_KEY", env={"MY_KEY": "sk-1"})
    assert llm is not None
    assert llm.model == "gpt-4o-mini"
    assert llm.base_url == "https://api.openai.com/v1"
    local = llm_from_settings("ollama:llama3.1:8b")
    assert local is not None
    assert local.model == "llama3.1:8b"
    assert local.base_url == "http://localhost:11434/v1"
    custom = llm_from_settings("openai:qwen", base_url="http://127.0.0.1:8000/v1/")
    assert custom is not None
    assert custom.base_url == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize("spec", ["gpt-4o", "anthropic:claude", "openai:", ":model"])
def test_bad_llm_spec_says_how_to_configure(spec: str) -> None:
    with pytest.raises(LLMNotConfigured, match="ENGRAM_LLM=openai:MODEL"):
        llm_from_settings(spec)


def test_unset_key_variable_is_an_error() -> None:
    with pytest.raises(LLMNotConfigured, match="'OPENAI_API_KEY'"):
        llm_from_settings("openai:gpt-4o-mini", key_env="OPENAI_API_KEY", env={})


def test_end_to_end_from_settings_against_the_server(server: FakeServer) -> None:
    server.script = [Reply('{"reward": 0.5}')]
    llm = llm_from_settings("vllm:my-model", base_url=server.url, key_env="K", env={"K": "secret"})
    assert llm is not None
    assert llm.complete(MSGS, schema=SCHEMA) == {"reward": 0.5}
    assert server.headers[0]["Authorization"] == "Bearer secret"
    assert llm.name == "vllm:my-model"

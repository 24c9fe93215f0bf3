"""Shared session windows in Redis: the in-process window's behaviour, shared by processes, with a TTL.

Runs against a real ``redis-server`` started by the tests (``redis_server.py``); other
processes are real Python processes (``session_worker.py``).
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import skip_or_fail, unavailable

from engramdb import Engram, StorageError, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.shortterm import InProcessWindow, SessionContext, SessionWindow

WORKER = Path(__file__).with_name("session_worker.py")


def _until(check: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    """Poll ``check`` until true; fail after ``limit`` seconds (a bound for a loaded machine, not a timing)."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"waited {limit:.0f} s for {what}"
        time.sleep(0.02)


def words(text: str) -> int:
    return len(text.split())


def refuse(content: str, **kwargs: Any) -> Any:
    raise AssertionError("not promoted in this test")


@pytest.fixture
def sessions(redis_url: str) -> Iterator[Any]:
    from engramdb.sessions_redis import RedisSessions

    with RedisSessions(redis_url, ttl=60) as s:
        yield s


@pytest.fixture(params=["in-process", "redis"])
def make_window(request: pytest.FixtureRequest) -> Callable[[str], SessionWindow]:
    """A fresh window of either kind: the same tests hold for both."""
    if request.param == "in-process":
        return lambda agent: InProcessWindow()
    reason = unavailable()
    if reason is not None:
        skip_or_fail(reason)
    s = request.getfixturevalue("sessions")
    window: Callable[[str], SessionWindow] = s.window
    return window


def context(window: SessionWindow, budget: int, promoter: Callable[..., Any] = refuse) -> SessionContext:
    return SessionContext("alice", token_budget=budget, count_tokens=words, promoter=promoter, window=window)


def worker(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), url, *args], capture_output=True, text=True, timeout=120, check=True
    )


def dump(url: str, agent: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(worker(url, agent, "dump").stdout)
    return out


# -- the same behaviour as the in-process window ----------------------------------------------------------


def test_window_trims_oldest_messages_to_the_budget(make_window: Callable[[str], SessionWindow]) -> None:
    ctx = context(make_window("alice"), 10)
    for i in range(6):
        ctx.add(f"message number {i}")  # 3 tokens each
    assert ctx.tokens <= 10
    assert [m.content for m in ctx.messages] == ["message number 3", "message number 4", "message number 5"]


def test_variables_count_but_are_never_trimmed(make_window: Callable[[str], SessionWindow]) -> None:
    ctx = context(make_window("alice"), 8)
    ctx.add("one two three")
    ctx.set("goal", {"ship": ["the", "release"], "today": True})
    assert ctx.get("goal") == {"ship": ["the", "release"], "today": True}
    assert ctx.get("missing", 42) == 42
    ctx.add("four five six")
    assert ctx.variables == {"goal": {"ship": ["the", "release"], "today": True}}
    assert [m.content for m in ctx.messages] == ["four five six"]
    ctx.unset("goal")
    assert ctx.variables == {}
    assert ctx.tokens == 3


def test_an_oversized_message_stays_and_render_and_clear(make_window: Callable[[str], SessionWindow]) -> None:
    ctx = context(make_window("alice"), 2)
    ctx.add("this single message is longer than the budget", role="assistant")
    assert len(ctx.messages) == 1
    ctx.set("region", "eu-west-1")
    assert ctx.render() == 'region: "eu-west-1"\nassistant: this single message is longer than the budget'
    ctx.clear()
    assert ctx.messages == []
    assert ctx.variables == {}
    assert ctx.render() == ""


def test_promote_moves_items_into_long_term_memory(
    make_window: Callable[[str], SessionWindow], tmp_path: Path, embedder: Embedder
) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        ctx = context(make_window("alice"), 200, promoter=mem.remember)
        ctx.add("The deploy key lives in the vault under ops/deploy", role="user")
        ctx.add("Noted.", role="assistant")
        ctx.set("preferred_region", "eu-west-1")
        m1 = ctx.promote(0)
        m2 = ctx.promote("preferred_region", kind="preference")
        assert [m.content for m in ctx.messages] == ["Noted."]
        assert "preferred_region" not in ctx.variables
        assert (m1.kind, m1.agent) == ("conversation", "alice")
        assert m1.metadata["role"] == "user"
        assert m2.kind == "preference"
        assert mem.get(m2.id).content == 'preferred_region: "eu-west-1"'
        with pytest.raises(ValidationError):
            ctx.promote(5)
        with pytest.raises(ValidationError):
            ctx.promote("missing")


# -- shared by processes ----------------------------------------------------------------------------------


def test_two_processes_share_one_agents_window(sessions: Any, redis_url: str) -> None:
    here = sessions.context("alice", promoter=refuse, count_tokens=words, token_budget=10_000)
    here.add("hello from the parent", role="user")
    worker(redis_url, "alice", "add", "child", "3", "10000")
    worker(redis_url, "alice", "set", "plan", '{"step": 2}')
    assert [m.content for m in here.messages] == ["hello from the parent", "child 0", "child 1", "child 2"]
    assert here.get("plan") == {"step": 2}
    here.set("owner", "parent")
    seen = dump(redis_url, "alice")
    assert seen["messages"][0] == ["user", "hello from the parent"]
    assert seen["variables"] == {"plan": {"step": 2}, "owner": "parent"}
    assert seen["tokens"] == here.tokens
    # Another agent's window is another window.
    assert dump(redis_url, "bob") == {"messages": [], "variables": {}, "tokens": 0}


def test_concurrent_writers_lose_nothing_and_keep_the_budget(sessions: Any, redis_url: str) -> None:
    budgets = (100_000, 40)
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), redis_url, f"agent{budget}", "add", label, "150", str(budget)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for budget in budgets
        for label in ("left", "right")
    ]  # four processes at once, two on each window
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    for budget in budgets:
        state = sessions.window(f"agent{budget}").snapshot()
        for label in ("left", "right"):
            mine = [int(m.content.split()[1]) for m in state.messages if m.role == label]
            assert mine == sorted(mine)  # each writer's messages stay in its order
            if budget == 100_000:
                assert mine == list(range(150))  # nothing lost
        if budget == 40:
            assert state.tokens <= 40  # 2 tokens a message: the newest 20 remain
            assert len(state.messages) == 20


def test_the_window_expires_after_its_ttl(redis_url: str) -> None:
    from engramdb.sessions_redis import RedisSessions

    # Each step waits for the event it means (the TTL seen running down, the window gone), never a fixed sleep:
    # with sleeps of 0.4 s against a 0.6 s TTL a loaded machine let the window expire before the renewing write.
    ttl = 2.0
    with RedisSessions(redis_url, ttl=ttl) as short:
        ctx = short.context("alice", promoter=refuse, count_tokens=words)
        window = short.window("alice")
        assert window.ttl() is None  # nothing stored yet
        ctx.add("soon gone")
        ctx.set("x", 1)
        left = window.ttl()
        assert left is not None
        assert 0 < left <= ttl
        _until(lambda: (window.ttl() or ttl) < ttl - 0.2, "the TTL to run down")
        ran_down = window.ttl()
        ctx.add("still here")  # a write renews the TTL of the whole window
        renewed = window.ttl()
        assert ran_down is not None
        assert renewed is not None
        assert renewed > ran_down
        assert [m.content for m in ctx.messages] == ["soon gone", "still here"]
        _until(lambda: ctx.messages == [], "the window to expire")
        assert ctx.variables == {}
    with RedisSessions(redis_url, ttl=None) as forever:
        forever.context("alice", promoter=refuse).add("kept")
        assert forever.window("alice").ttl() is None


def test_bad_arguments_and_an_unreachable_server() -> None:
    if importlib.util.find_spec("redis") is None:
        skip_or_fail("python package 'redis' is missing (pip install 'engramdb[redis]')")
    from engramdb.sessions_redis import RedisSessions

    with pytest.raises(ValidationError, match="either a Redis url or a client"):
        RedisSessions()
    with pytest.raises(ValidationError, match="ttl must be a positive number"):
        RedisSessions("redis://127.0.0.1:1/0", ttl=0)
    with pytest.raises(ValidationError, match="bad Redis url"):
        RedisSessions("http://127.0.0.1/0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        with RedisSessions(f"redis://127.0.0.1:{port}/0") as nowhere:
            ctx = nowhere.context("alice", promoter=refuse, count_tokens=words)
            with pytest.raises(StorageError, match="session store"):
                ctx.add("hello")
            with pytest.raises(StorageError):
                nowhere.ping()

"""Short-term windows per conversation thread (agent, user, session), in process and in Redis, and a Redis key
prefix per store so two stores sharing one Redis database keep their windows apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import Engram
from engramdb.errors import ValidationError


@pytest.fixture(params=["in-process", "redis"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None

    def make(name: str = "store", prefix: str | None = None) -> Engram:
        extra = {} if url is None else {"session_url": url}
        if prefix is not None:
            extra["session_prefix"] = prefix
        return Engram(tmp_path / name, embedder="static", **extra)

    return make


def test_each_thread_has_its_own_window(open_store) -> None:  # type: ignore[no-untyped-def]
    with open_store() as mem:
        ana_1 = mem.session("bot", user="ana", session="t1")
        ana_2 = mem.session("bot", user="ana", session="t2")
        ben_1 = mem.session("bot", user="ben", session="t1")
        ana_1.add("my flight leaves at nine")
        ben_1.add("I need a vegetarian meal")
        assert [m.content for m in ana_1.messages] == ["my flight leaves at nine"]
        assert ana_2.messages == []
        assert [m.content for m in ben_1.messages] == ["I need a vegetarian meal"]
        assert mem.session("bot").messages == []  # the agent's own window is a thread of its own
        assert mem.session("bot", user="ana", session="t1") is ana_1
        # The context of a thread shows that thread's window only.
        rendered = mem.context("book the trip", agent="bot", user="ana", session="t1").render()
        assert "flight leaves at nine" in rendered
        assert "vegetarian" not in rendered


def test_promoted_items_keep_the_threads_scopes(open_store) -> None:  # type: ignore[no-untyped-def]
    with open_store() as mem:
        ctx = mem.session("bot", user="ana", session="t1")
        msg = ctx.add("I moved to Berlin")
        memory = ctx.promote(-1)
        assert (memory.user, memory.session, memory.occurred_at) == ("ana", "t1", msg.at)
        assert mem.search("moved", agent="bot", user="ben") == []


def test_bad_thread_names_are_rejected(open_store) -> None:  # type: ignore[no-untyped-def]
    with open_store() as mem:
        with pytest.raises(ValidationError):
            mem.session("bot", user="")
        with pytest.raises(ValidationError):
            mem.session("bot", session=" padded ")


def test_two_stores_on_one_redis_database_keep_windows_apart(redis_url: str, tmp_path: Path) -> None:
    with (
        Engram(tmp_path / "a", embedder="static", session_url=redis_url, session_prefix="app-a") as a,
        Engram(tmp_path / "b", embedder="static", session_url=redis_url, session_prefix="app-b") as b,
        Engram(tmp_path / "c", embedder="static", session_url=redis_url, session_prefix="app-a") as c,
    ):
        a.session("bot", user="ana", session="t1").add("store a's message")
        assert b.session("bot", user="ana", session="t1").messages == []
        # The same prefix is the same windows: that is how several processes of one store share them.
        assert [m.content for m in c.session("bot", user="ana", session="t1").messages] == ["store a's message"]

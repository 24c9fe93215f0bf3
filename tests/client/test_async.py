"""AsyncEngram: the same API awaitable, embedded (work on worker threads) and remote (native async httpx)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engramdb import AsyncEngram, EngramError, Hit, Memory, NotFound, ValidationError


@pytest.fixture(params=["embedded", "remote"])
def location(request, tmp_path):
    if request.param == "remote":
        return request.getfixturevalue("server").url
    return str(tmp_path / "store")


def test_every_verb_is_awaitable_with_the_same_answers_and_errors(location, agent):
    async def scenario() -> None:
        async with AsyncEngram(location) as amem:
            m = await amem.remember("Use pnpm, not npm, in the web repo", agent=agent, kind="preference", key="pm")
            assert isinstance(m, Memory)
            hits = await amem.search("which package manager for the web repo", agent=agent)
            assert isinstance(hits[0], Hit)
            assert hits[0].memory.id == m.id
            assert (await amem.recall_key("pm", agent=agent)).content == m.content
            changed = await amem.update(m.id, agent=agent, tags=["web"])
            assert changed.tags == ("web", "key:pm")
            assert [c.action for c in await amem.history(m.id, agent=agent)] == ["create", "update"]
            await amem.learning.record("ci is red", "rerun", "success", agent=agent)
            assert (await amem.learning.suggest("ci is red", agent=agent)).options[0].action == "rerun"
            assert await amem.audit.verify() is True
            assert await amem.count(agent=agent) == 2
            with pytest.raises(NotFound):
                await amem.get("missing", agent=agent)
            with pytest.raises(ValidationError):
                await amem.remember("x", agent=agent, kind="nope")
            assert await amem.clear(agent=agent, confirm=agent) == 2

    asyncio.run(scenario())


def test_concurrent_calls_and_the_loop_stays_free(location, agent):
    async def scenario() -> None:
        async with AsyncEngram(location) as amem:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            beat = asyncio.create_task(ticker())
            made = await asyncio.gather(*(amem.remember(f"note {i}", agent=agent, force=True) for i in range(8)))
            beat.cancel()
            assert len({m.id for m in made}) == 8
            assert ticks > 0  # the loop ran other work while the writes were in flight
            assert await amem.count(agent=agent) == 8

    asyncio.run(scenario())


def test_embedded_work_runs_off_the_event_loop(tmp_path, agent):
    async def scenario() -> None:
        async with AsyncEngram(str(tmp_path / "s")) as amem:
            assert amem.sync is not None
            seen: list[str] = []
            original = amem.sync.count

            def spy(**kwargs):
                seen.append(threading.current_thread().name)
                return original(**kwargs)

            amem.sync.count = spy  # type: ignore[method-assign]
            await amem.count(agent=agent)
            assert seen
            assert seen[0] != threading.main_thread().name

    asyncio.run(scenario())


def test_remote_only_in_process_methods_say_why(server):
    async def scenario() -> None:
        async with AsyncEngram(server.url) as amem:
            with pytest.raises(EngramError, match="not available through a server"):
                await amem.failures.run_checks()

    asyncio.run(scenario())

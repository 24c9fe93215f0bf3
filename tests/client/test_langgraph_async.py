"""The LangGraph store's async methods run on AsyncEngram: embedded (worker threads) and through a server."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph")

from engramdb import AsyncEngram, Engram
from engramdb.integrations.langgraph import EngramStore


@pytest.fixture(params=["embedded", "remote"])
def store_mem(request, tmp_path, embedder):
    if request.param == "remote":
        with Engram(request.getfixturevalue("server").url) as mem:
            yield mem
    else:
        with Engram(tmp_path / "s", embedder=embedder) as mem:
            yield mem


def test_async_put_get_search_delete(store_mem, agent):
    store = EngramStore(store_mem)
    ns = (agent, "prefs")

    async def run() -> None:
        await asyncio.gather(*(store.aput(ns, f"k{i}", {"text": f"likes tea number {i}"}) for i in range(3)))
        item = await store.aget(ns, "k1")
        assert item is not None
        assert item.value == {"text": "likes tea number 1"}
        found = await store.asearch(ns, query="tea", limit=5)
        assert {i.key for i in found} == {"k0", "k1", "k2"}
        assert ns in await store.alist_namespaces(prefix=(agent,))
        await store.adelete(ns, "k1")
        assert await store.aget(ns, "k1") is None

    asyncio.run(run())
    assert isinstance(store._amem, AsyncEngram)  # the async path went through AsyncEngram
    # What the async methods wrote, the sync ones read: one store.
    assert {i.key for i in store.search(ns)} == {"k0", "k2"}


def test_langchain_tools_say_they_need_a_local_store(remote):
    pytest.importorskip("langchain_core")
    from engramdb import ConfigError
    from engramdb.integrations.langchain import memory_tools

    with pytest.raises(ConfigError, match="store in this process"):
        memory_tools(remote, agent="a")

"""EngramStore against LangGraph's BaseStore contract, with the real langgraph package.

langgraph ships no store conformance suite in its package, so these tests cover what one would: get/put/
delete, search (namespace prefix, value filters with operators, limit/offset, natural-language queries),
list_namespaces (prefix/suffix/wildcards/max_depth/limit/offset), batch and the async API, compared with
LangGraph's own ``InMemoryStore`` where the two must agree, plus a real compiled ``StateGraph`` whose nodes
read and write the store, and persistence across a restart.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Annotated, Any, TypedDict

import pytest
from integration_extras import require

require("langgraph", "langgraph")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.errors import ValidationError  # noqa: E402
from engramdb.integrations.langgraph import EngramStore  # noqa: E402


@pytest.fixture
def store(mem: Engram) -> EngramStore:
    return EngramStore(mem)


# -- get / put / delete -------------------------------------------------------------------------------------
def test_put_then_get_returns_exactly_the_value(store: EngramStore, mem: Engram) -> None:
    value = {"theme": "dark", "size": 14, "ratio": 0.5, "on": True, "none": None, "nested": {"a": [1, "two"]}}
    store.put(("alice", "prefs"), "editor", value)
    item = store.get(("alice", "prefs"), "editor")
    assert isinstance(item, Item)
    assert item.value == value
    assert item.key == "editor"
    assert item.namespace == ("alice", "prefs")
    assert item.created_at == item.updated_at
    assert item.created_at.tzinfo is not None
    # The namespace's first label is the engramdb agent that owns the memory.
    [memory] = mem.list(agent="alice")
    assert memory.agent == "alice"
    assert "langgraph" in memory.tags
    assert "theme: dark" in memory.content
    assert store.get(("alice", "prefs"), "missing") is None
    assert store.get(("bob", "prefs"), "editor") is None


def test_put_again_updates_in_place_and_history_keeps_the_old_value(store: EngramStore, mem: Engram) -> None:
    store.put(("alice", "prefs"), "editor", {"theme": "dark"})
    first = store.get(("alice", "prefs"), "editor")
    store.put(("alice", "prefs"), "editor", {"theme": "light"})
    second = store.get(("alice", "prefs"), "editor")
    assert first is not None
    assert second is not None
    assert second.value == {"theme": "light"}
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    [memory] = mem.list(agent="alice")
    assert [c.action for c in mem.history(memory.id)] == ["create", "update"]


def test_delete_and_put_none_remove_the_item(store: EngramStore, mem: Engram) -> None:
    store.put(("alice", "prefs"), "a", {"x": 1})
    store.put(("alice", "prefs"), "b", {"x": 2})
    store.delete(("alice", "prefs"), "a")
    store.batch([PutOp(("alice", "prefs"), "b", None)])
    assert store.get(("alice", "prefs"), "a") is None
    assert store.get(("alice", "prefs"), "b") is None
    assert mem.count(agent="alice") == 0
    store.delete(("alice", "prefs"), "never-there")  # deleting nothing is not an error


def test_keys_are_exact_and_namespaces_separate(store: EngramStore) -> None:
    store.put(("alice", "a"), "k", {"v": 1})
    store.put(("alice", "a", "b"), "k", {"v": 2})
    store.put(("alice", "a"), "k ", {"v": 3})
    store.put(("alice", "a"), "K", {"v": 4})
    values = []
    for ns, k in [(("alice", "a"), "k"), (("alice", "a", "b"), "k"), (("alice", "a"), "k "), (("alice", "a"), "K")]:
        item = store.get(ns, k)
        assert item is not None
        values.append(item.value["v"])
    assert values == [1, 2, 3, 4]


def test_secrets_in_values_are_redacted_by_design(store: EngramStore, mem: Engram) -> None:
    key = "AKIA" + "QWERTYUIOPASDFGH"
    store.put(("alice", "creds"), "aws", {"note": f"key id {key}", "password": "hunter2-hunter2"})
    item = store.get(("alice", "creds"), "aws")
    assert item is not None
    assert key not in str(item.value)
    assert "[REDACTED:" in item.value["note"]
    assert item.value["password"] != "hunter2-hunter2"
    assert mem.audit.verify()
    assert any(e.action == "create" for e in mem.audit.log(agent="alice"))


def test_bad_namespaces_and_values_are_rejected(store: EngramStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("alice", "a.b"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])  # direct ops are checked too
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {"v": 1})])
    with pytest.raises(ValidationError, match="value"):
        store.put(("alice",), "k", {"when": object()})
    with pytest.raises(NotImplementedError):
        store.put(("alice",), "k", {"v": 1}, ttl=5)


# -- search -------------------------------------------------------------------------------------------------
def seed(store: BaseStore) -> None:
    store.put(("alice", "docs"), "d1", {"text": "Python tutorial", "level": 1, "tag": "code"})
    store.put(("alice", "docs"), "d2", {"text": "TypeScript guide", "level": 2, "tag": "code"})
    store.put(("alice", "docs", "old"), "d3", {"text": "Perl notes", "level": 3, "tag": "legacy"})
    store.put(("alice", "food"), "f1", {"text": "Prefers green tea over coffee", "level": 1})
    store.put(("bob", "docs"), "d1", {"text": "Rust book", "level": 5, "tag": "code"})


def keys(items: list[SearchItem]) -> set[tuple[tuple[str, ...], str]]:
    return {(i.namespace, i.key) for i in items}


def test_search_by_prefix_filter_limit_and_offset_agrees_with_in_memory_store(store: EngramStore) -> None:
    reference = InMemoryStore()
    seed(store)
    seed(reference)
    # Every case against the reference store (as sets: the two stores order a listing differently).
    cases: list[tuple[tuple[str, ...], dict[str, Any] | None]] = [
        (("alice",), None),
        (("alice", "docs"), None),
        (("alice", "docs", "old"), None),
        ((), None),
        (("bob",), None),
        (("carol",), None),
        (("alice",), {"tag": "code"}),
        ((), {"tag": "code"}),
        ((), {"level": {"$gte": 2}}),
        ((), {"level": {"$gt": 1, "$lt": 5}}),
        ((), {"tag": {"$ne": "code"}}),
        ((), {"level": {"$lte": 1}, "text": {"$eq": "Python tutorial"}}),
    ]
    for prefix, flt in cases:
        ours = store.search(prefix, filter=flt, limit=100)
        assert all(isinstance(i, SearchItem) and i.score is None for i in ours)
        assert keys(ours) == keys(reference.search(prefix, filter=flt, limit=100)), (prefix, flt)
    # Paging: consecutive pages are disjoint and together are the whole result.
    pages = [store.search((), limit=2, offset=o) for o in (0, 2, 4)]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert set().union(*(keys(p) for p in pages)) == keys(reference.search((), limit=100))
    assert store.search((), limit=2, offset=10) == []


def test_search_with_a_query_ranks_by_meaning(store: EngramStore) -> None:
    seed(store)
    hits = store.search(("alice",), query="what does she like to drink?", limit=2)
    assert hits[0].key == "f1"
    assert all(h.score is not None for h in hits)
    assert hits[0].score >= hits[1].score  # type: ignore[operator]
    hits = store.search(("alice", "docs"), query="learning python", limit=5)
    assert hits[0].key == "d1"
    assert {h.namespace[:2] for h in hits} == {("alice", "docs")}
    assert keys(store.search(("alice",), query="programming", filter={"tag": "legacy"})) == {
        (("alice", "docs", "old"), "d3")
    }
    # Across agents (empty prefix): bob's item too.
    assert (("bob", "docs"), "d1") in keys(store.search((), query="a book about rust", limit=3))
    offset = store.search(("alice",), query="programming guide", limit=2, offset=1)
    assert [h.key for h in offset] == [h.key for h in store.search(("alice",), query="programming guide", limit=3)][1:]


def test_index_fields_choose_the_searched_text(mem: Engram) -> None:
    store = EngramStore(mem, index=["title"])
    store.put(("alice", "notes"), "n1", {"title": "Kubernetes upgrade", "body": "recipe for lemon cake"})
    store.put(("alice", "notes"), "n2", {"title": "x", "body": "kubernetes"}, index=["body"])
    store.put(("alice", "notes"), "n3", {"title": "kubernetes"}, index=False)
    by_key = {m.metadata["langgraph"]["key"]: m.content for m in mem.list(agent="alice")}
    assert by_key == {"n1": "Kubernetes upgrade", "n2": "kubernetes", "n3": "alice/notes/n3"}


# -- namespaces ---------------------------------------------------------------------------------------------
def test_list_namespaces_agrees_with_in_memory_store(store: EngramStore) -> None:
    reference = InMemoryStore()
    for s in (store, reference):
        seed(s)
        s.put(("carol", "docs", "v1"), "k", {"v": 1})
        s.put(("carol", "cache", "v1"), "k", {"v": 1})
    cases: list[dict[str, Any]] = [
        {},
        {"prefix": ("alice",)},
        {"prefix": ("alice", "docs")},
        {"suffix": ("v1",)},
        {"suffix": ("docs",)},
        {"prefix": ("*", "docs")},
        {"prefix": ("carol",), "suffix": ("v1",)},
        {"max_depth": 1},
        {"max_depth": 2},
        {"prefix": ("alice",), "max_depth": 2},
        {"limit": 2},
        {"limit": 2, "offset": 2},
        {"prefix": ("nobody",)},
    ]
    for case in cases:
        assert store.list_namespaces(**case) == reference.list_namespaces(**case), case


def test_a_namespace_whose_last_item_is_deleted_is_no_longer_listed(store: EngramStore) -> None:
    store.put(("alice", "tmp"), "k", {"v": 1})
    store.put(("alice", "keep"), "k", {"v": 1})
    store.delete(("alice", "tmp"), "k")
    assert store.list_namespaces() == [("alice", "keep")]
    store.put(("alice", "tmp"), "k2", {"v": 2})
    assert store.list_namespaces() == [("alice", "keep"), ("alice", "tmp")]


# -- batch and async ----------------------------------------------------------------------------------------
def test_batch_runs_mixed_operations_in_order(store: EngramStore) -> None:
    results = store.batch(
        [
            PutOp(("alice", "b"), "k1", {"n": 1}),
            GetOp(("alice", "b"), "k1"),
            PutOp(("alice", "b"), "k2", {"n": 2}),
            SearchOp(("alice",), filter={"n": {"$gt": 1}}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("alice",)),)),
            PutOp(("alice", "b"), "k1", None),
            GetOp(("alice", "b"), "k1"),
        ]
    )
    assert results[0] is None
    assert isinstance(results[1], Item)
    assert results[1].value == {"n": 1}
    assert [i.key for i in results[3]] == ["k2"]  # type: ignore[union-attr]
    assert results[4] == [("alice", "b")]
    assert results[6] is None


def test_async_api(store: EngramStore) -> None:
    async def run() -> None:
        await store.aput(("alice", "a"), "k", {"text": "asynchronous memory"})
        item = await store.aget(("alice", "a"), "k")
        assert item is not None
        assert item.value == {"text": "asynchronous memory"}
        found = await store.asearch(("alice",), query="async")
        assert [i.key for i in found] == ["k"]
        assert await store.alist_namespaces() == [("alice", "a")]
        results = await store.abatch([GetOp(("alice", "a"), "k"), PutOp(("alice", "a"), "k", None)])
        assert isinstance(results[0], Item)
        await asyncio.gather(*(store.aput(("alice", "many"), f"k{i}", {"i": i}) for i in range(5)))
        assert len(await store.asearch(("alice", "many"), limit=10)) == 5
        await store.adelete(("alice", "many"), "k0")
        assert await store.aget(("alice", "a"), "k") is None
        assert await store.aget(("alice", "many"), "k0") is None

    asyncio.run(run())


def test_items_persist_across_a_restart(reopen: Callable[[], AbstractContextManager[Engram]]) -> None:
    with reopen() as mem:
        EngramStore(mem).put(("alice", "prefs"), "editor", {"theme": "dark"})
    with reopen() as mem:
        store = EngramStore(mem)
        item = store.get(("alice", "prefs"), "editor")
        assert item is not None
        assert item.value == {"theme": "dark"}
        assert store.list_namespaces() == [("alice", "prefs")]
        assert [i.key for i in store.search((), query="editor theme")] == ["editor"]


# -- a real LangGraph graph ---------------------------------------------------------------------------------
class State(TypedDict):
    user: str
    message: str
    recalled: Annotated[list[str], operator.add]


def test_a_compiled_state_graph_reads_and_writes_the_store(
    reopen: Callable[[], AbstractContextManager[Engram]],
) -> None:
    def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put((state["user"], "memories"), state["message"], {"text": state["message"]})
        return {}

    def recall(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search((state["user"], "memories"), query=state["message"], limit=3)
        return {"recalled": [str(h.value["text"]) for h in hits if h.key != state["message"]]}

    def build(mem: Engram) -> Any:
        graph = StateGraph(State)
        graph.add_node("remember", remember)
        graph.add_node("recall", recall)
        graph.add_edge(START, "remember")
        graph.add_edge("remember", "recall")
        graph.add_edge("recall", END)
        return graph.compile(store=EngramStore(mem))

    with reopen() as mem:
        app = build(mem)
        app.invoke({"user": "alice", "message": "I am allergic to peanuts", "recalled": []})
        out = app.invoke({"user": "alice", "message": "Book a table for Friday evening", "recalled": []})
        assert out["recalled"] == ["I am allergic to peanuts"]
        assert mem.audit.verify()
    with reopen() as mem:  # a new process: the graph's long-term memory is still there
        app = build(mem)
        out = app.invoke({"user": "alice", "message": "Any food allergies to tell the restaurant?", "recalled": []})
        assert out["recalled"] == ["I am allergic to peanuts", "Book a table for Friday evening"]
        bob = app.invoke({"user": "bob", "message": "Any food allergies?", "recalled": []})
        assert bob["recalled"] == []  # another user's namespace: another agent's memories
        assert mem.count(agent="bob") == 1


# -- scopes: LangMem's default namespace isolates users -----------------------------------------------------
class Turn(TypedDict):
    message: str
    recalled: Annotated[list[str], operator.add]


def _langmem_style_graph(mem: Engram, **options: Any) -> Any:
    """A graph whose nodes use the store as LangMem's manage/search tools do: the namespace template
    ``("memories", "{langgraph_user_id}")`` filled from the run's config."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_store

    def namespace(config: RunnableConfig) -> tuple[str, ...]:
        return ("memories", str(config["configurable"]["langgraph_user_id"]))

    def manage(state: Turn, config: RunnableConfig) -> dict[str, Any]:
        get_store().put(namespace(config), f"m{abs(hash(state['message']))}", {"content": state["message"]})
        return {}

    def search(state: Turn, config: RunnableConfig) -> dict[str, Any]:
        hits = get_store().search(namespace(config), query=state["message"], limit=5)
        return {"recalled": [str(h.value["content"]) for h in hits if h.value["content"] != state["message"]]}

    graph = StateGraph(Turn)
    graph.add_node("manage", manage)
    graph.add_node("search", search)
    graph.add_edge(START, "manage")
    graph.add_edge("manage", "search")
    graph.add_edge("search", END)
    return graph.compile(store=EngramStore(mem, **options))


def _as(user: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user}}


def test_langmem_default_namespace_keeps_users_apart(mem: Engram) -> None:
    app = _langmem_style_graph(mem)
    app.invoke({"message": "I am allergic to peanuts", "recalled": []}, _as("ana"))
    app.invoke({"message": "I am allergic to shellfish", "recalled": []}, _as("ben"))
    out = app.invoke({"message": "which food allergies do I have", "recalled": []}, _as("ana"))
    assert out["recalled"] == ["I am allergic to peanuts"]
    # The items are memories of agent "memories" in each user's scope: the Python API sees the same partition.
    assert {m.user for m in mem.list(agent="memories")} == {"ana", "ben"}
    found = [h.memory.content for h in mem.search("allergic", agent="memories", user="ben")]
    assert found == ["content: I am allergic to shellfish"]


def test_scopes_map_labels_to_a_fixed_agents_users(mem: Engram) -> None:
    store = EngramStore(mem, scopes=("user", "session"), agent="assistant")
    store.put(("ana", "t1"), "k", {"text": "ana's first thread"})
    store.put(("ben", "t1"), "k", {"text": "ben's first thread"})
    [memory] = mem.list(agent="assistant", user="ana")
    assert (memory.user, memory.session) == ("ana", "t1")
    assert [i.value["text"] for i in store.search(("ana",))] == ["ana's first thread"]
    assert store.get(("ben", "t1"), "k") is not None


@pytest.mark.parametrize(
    "options",
    [
        {"scopes": ("agent", "agent")},
        {"scopes": ("owner",)},
        {"scopes": "agent"},
        {"scopes": ("agent", "user"), "agent": "x"},
    ],
)
def test_bad_scope_mappings_are_rejected(mem: Engram, options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        EngramStore(mem, **options)

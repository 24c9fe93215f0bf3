"""Batch writes look up their near-duplicates all at once (``search.vector_candidates_many``) and wait only for
the queued vectors those lookups could find: a batch with knowledge items does not wait for the conversation
turns queued before it, yet still merges into memories whose vectors are queued. On both backends, with the real
model; several writer processes on PostgreSQL lose nothing and keep one audit chain.
"""

from __future__ import annotations

import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest
from pg_server import SERVER

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.storage import open_store
from engramdb.storage.base import Filter
from test_background_vectors import Gate

STORED = [
    "The build cache lives in /var/cache/build on every runner",
    "Deploys go out on Tuesdays after the standup",
    "The staging database is restored from a nightly snapshot",
]


@pytest.fixture(params=("sqlite", "postgres"))
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return SERVER.get().new_database() if request.param == "postgres" else str(tmp_path / "store")


def test_a_batch_merges_stored_and_in_batch_duplicates_only_within_agent_kind_and_user(
    location: str, embedder: Embedder
) -> None:
    with Engram(location, embedder=embedder) as mem:
        stored = mem.remember_many([{"content": c, "agent": "ops"} for c in STORED])
        mem.remember("Alice prefers tabs over spaces", agent="ops", kind="preference", user="alice")
        out = mem.remember_many(
            [
                {"content": "hi, how was the weekend?", "agent": "ops", "kind": "conversation"},
                {"content": "Deploys go out on Tuesdays after the standup.", "agent": "ops"},  # stored[1]
                {"content": "The on-call rota changes every Monday at noon", "agent": "ops"},  # new
                {"content": "The on-call rota changes every Monday at noon.", "agent": "ops"},  # the one before
                {"content": "The build cache lives in /var/cache/build on every runner", "agent": "dev"},  # other agent
                {"content": "The build cache lives in /var/cache/build on every runner", "agent": "ops",
                 "kind": "preference"},  # other kind
                {"content": "Alice prefers tabs over spaces", "agent": "ops", "kind": "preference", "user": "bob"},
                {"content": "The staging database is restored from a nightly snapshot!", "agent": "ops"},  # stored[2]
            ]
        )  # fmt: skip
        assert out[1].id == stored[1].id
        assert out[1].metadata["merge_count"] == 1
        assert out[3].id == out[2].id
        assert out[7].id == stored[2].id
        new = [out[0], out[2], out[4], out[5], out[6]]
        assert len({m.id for m in new} | {m.id for m in stored}) == len(new) + len(stored)
        mem.flush()
        assert mem.audit.verify()
        assert [e.action for e in mem.audit.log(memory_id=stored[1].id)] == ["merge", "create"]


def test_a_checked_batch_waits_only_for_queued_memories_it_could_merge_with(location: str, embedder: Embedder) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        turns = mem.remember_many([{"content": f"turn {i} about the hike", "kind": "conversation"} for i in range(3)])
        forced = mem.remember("Deploys go out on Tuesdays after the standup", force=True)  # queued, not checked
        # Another agent's knowledge, and this agent's of another kind: none of the queued memories can be theirs.
        done: list[str] = []

        def other_groups() -> None:
            done.extend(
                m.id
                for m in mem.remember_many(
                    [
                        {"content": "The build cache lives in /var/cache/build", "agent": "dev"},
                        {"content": "Bob likes short standups", "kind": "preference"},
                    ]
                )
            )

        writer = threading.Thread(target=other_groups)
        writer.start()
        writer.join(30)
        assert not writer.is_alive(), "a batch of other agents and kinds waited for the queued turns"
        assert len(done) == 2
        # This agent's knowledge could be a duplicate of the queued forced memory: the write waits for its vector.
        merged: list[str] = []
        same = threading.Thread(
            target=lambda: merged.append(mem.remember("Deploys go out on Tuesdays after standup").id)
        )
        same.start()
        same.join(1.0)
        assert same.is_alive()
        assert not merged
        gate.open()
        same.join(30)
        assert merged == [forced.id]
        mem.flush()
        plain = open_store(location, settings=load_settings({}))
        try:
            assert plain.vectors.count_stale(embedder.model_id) == 0
            assert {m.id for m in plain.memories.list(Filter(agent="default"), limit=50)} >= {t.id for t in turns}
        finally:
            plain.close()


def test_a_kind_changed_while_its_vector_is_queued_is_still_found(location: str, embedder: Embedder) -> None:
    gate = Gate(embedder)
    with Engram(location, embedder=gate) as mem:
        forced = mem.remember("Alice prefers tabs over spaces in Go code", force=True)  # queued as knowledge
        mem.update(forced.id, kind="preference")
        merged: list[str] = []
        same = threading.Thread(
            target=lambda: merged.append(
                mem.remember("Alice prefers tabs over spaces in Go code", kind="preference").id
            )
        )
        same.start()
        same.join(1.0)
        assert same.is_alive()
        gate.open()
        same.join(30)
        assert merged == [forced.id]


def _write(url: str, wid: int) -> list[str]:
    from engramdb.embeddings import make_embedder

    ids: list[str] = []
    with Engram(url, embedder=make_embedder(load_settings({}))) as mem:
        for batch in range(3):
            items = [
                {"content": f"writer {wid} batch {batch} turn {i}: we talked about trains", "kind": "conversation",
                 "agent": f"agent-{i % 3}"}
                for i in range(10)
            ] + [
                {"content": f"Fact {wid}-{batch}-{i}: service {wid * 100 + batch * 10 + i} listens on its own port",
                 "agent": f"agent-{i % 3}"}
                for i in range(5)
            ]  # fmt: skip
            ids += [m.id for m in mem.remember_many(items)]
    return ids


def test_writer_processes_lose_nothing_and_keep_one_audit_chain(embedder: Embedder) -> None:
    url = SERVER.get().new_database()
    with Engram(url, embedder=embedder) as mem:
        mem.remember("the store exists", agent="agent-0")
    with ProcessPoolExecutor(max_workers=3, mp_context=get_context("spawn")) as pool:
        written = list(pool.map(_write, [url] * 3, range(3)))
    ids = {i for w in written for i in w}
    plain = open_store(url, settings=load_settings({}))
    try:
        found = plain.memories.get_many(list(ids))
        assert set(found) == ids
        assert plain.vectors.count_stale(embedder.model_id) == 0
    finally:
        plain.close()
    with Engram(url, embedder=embedder) as mem:
        assert mem.audit.verify()
        assert len(mem.audit.log(limit=1000)) >= len(ids) + 1

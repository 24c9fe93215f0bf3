"""New vectors staged on PostgreSQL (schema step 6): found by meaning at once, folded into the HNSW graphs by one
mover, nothing lost when a mover dies mid-batch, a store made before the step migrates in place, and a memory's vector
is in exactly one table whatever writers do while the mover works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import psycopg
from pg_server import PgServer, fold_staged, old_store
from pgvector.psycopg import register_vector
from storage_helpers import DIM, MODEL, NOW, memory, unit_vectors

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings.base import Embedder
from engramdb.storage import _pg_schema
from engramdb.storage._pg_staging import move_batch, staged_load, staged_rows, wait_for_room
from engramdb.storage.base import Filter
from engramdb.storage.postgres import open_postgres

#: Seconds a test waits at most for another process or thread to reach a point.
LIMIT = 60.0
#: A store instance that leaves its staged vectors where they are (the test moves them).
NO_MOVER = load_settings({}, pg_vector_mover=False)


def _staged(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return staged_rows(conn)


def _where(url: str, ids: list[str]) -> dict[str, str]:
    """Which table holds each memory's vector ("staged" or "folded"); asserts none is in both or twice."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT memory_id, 'staged' FROM vectors_staged WHERE memory_id = ANY(%s) "
            "UNION ALL SELECT memory_id, 'folded' FROM vectors WHERE memory_id = ANY(%s)",
            (ids, ids),
        ).fetchall()
    found: dict[str, str] = {}
    for memory_id, table in rows:
        assert memory_id not in found, f"{memory_id} has two vectors"
        found[str(memory_id)] = str(table)
    return found


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_memory_is_found_by_meaning_while_its_vector_is_staged(postgres_server: PgServer, embedder: Embedder) -> None:
    url = postgres_server.new_database()
    with (
        Engram(url, embedder=embedder, pg_vector_mover=False) as writer,
        Engram(url, embedder=embedder, pg_vector_mover=False) as other,
    ):
        writer.remember_many(
            [{"content": f"filler note number {i} about the weather", "agent": "a"} for i in range(30)]
        )
        target = writer.remember("The billing service moved to rack 7 in the Frankfurt data centre", agent="a")
        shared = writer.remember("Deploys freeze every Friday afternoon", agent="a", visibility="public")
        writer.flush()
        assert _where(url, [target.id, shared.id]) == {target.id: "staged", shared.id: "staged"}
        # Found by meaning (no shared keyword) from this process and from another one, before any mover ran.
        for mem in (writer, other):
            hits = mem.search("where is the invoicing system hosted", agent="a", limit=3)
            assert hits[0].memory.id == target.id
        assert other.search("when can we not ship", agent="b", limit=1)[0].memory.id == shared.id
        # Another agent never sees a private staged memory.
        assert target.id not in {h.memory.id for h in other.search("billing rack", agent="b", limit=50)}
        question = "where is the invoicing system hosted"
        before = [(h.memory.id, round(h.score, 5)) for h in other.search(question, agent="a")]
        fold_staged(url)
        assert set(_where(url, [target.id, shared.id]).values()) == {"folded"}
        after = [(h.memory.id, round(h.score, 5)) for h in other.search(question, agent="a")]
        assert after == before


def test_sharing_a_staged_memory_shows_it_to_the_other_agent_at_once(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url, settings=NO_MOVER) as store:
        ms = [memory(f"note {i}", agent="a") for i in range(20)] + [memory("b's own", agent="b")]
        vecs = unit_vectors(21, seed=17)
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        target = ms[5]
        seen = Filter(agent="b")
        assert target.id not in {c.id for c in store.search.vector_candidates(vecs[5], seen, limit=21)}
        store.shares.share([target.id], from_agent="a", to_agent="b", at=NOW)
        assert store.search.vector_candidates(vecs[5], seen, limit=1)[0].id == target.id
        store.shares.unshare([target.id], from_agent="a", to_agent="b", at=NOW)
        assert target.id not in {c.id for c in store.search.vector_candidates(vecs[5], seen, limit=21)}
        store.memories.update(target.id, {"visibility": "public"}, vector=None, model_id=MODEL, actor="a", at=NOW)
        assert store.search.vector_candidates(vecs[5], seen, limit=1)[0].id == target.id
        assert _where(url, [target.id]) == {target.id: "staged"}
        # The same answers once folded into the graphs.
        fold_staged(url)
        assert store.search.vector_candidates(vecs[5], seen, limit=1)[0].id == target.id


def test_a_staged_vector_is_found_as_a_near_duplicate(postgres_server: PgServer, embedder: Embedder) -> None:
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder, pg_vector_mover=False) as mem:
        first = mem.remember_many([{"content": "Use exponential backoff for the payments API", "agent": "a"}])[0]
        assert _where(url, [first.id]) == {first.id: "staged"}
        again = mem.remember_many([{"content": "Use exponential backoff for the payments API.", "agent": "a"}])[0]
        assert again.id == first.id  # merged into the staged one, not a second memory
        assert mem.count(agent="a") == 1
        assert mem.audit.verify()


def test_staged_rows_are_read_nearest_first_and_the_answers_stay_exact(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url, settings=NO_MOVER) as store:
        base = unit_vectors(1, seed=5)[0]
        rng = np.random.default_rng(9)
        # Staged rows from ~0.999 down to ~0.6 cosine of the query; one far ``decision``; another agent's near copies.
        vecs = np.vstack(
            [base + rng.normal(0.0, s, DIM).astype(np.float32) for s in np.linspace(0.002, 1.2, 40) / np.sqrt(DIM)]
        )
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        kinds = ["knowledge"] * 36 + ["decision", "knowledge", "knowledge", "knowledge"]
        agents = ["a"] * 37 + ["b", "b", "b"]
        ms = [memory(f"note {i}", agent=a, kind=k) for i, (a, k) in enumerate(zip(agents, kinds, strict=True))]
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        assert set(_where(url, [m.id for m in ms]).values()) == {"staged"}
        cosine = {m.id: float(v @ base) for m, v in zip(ms, vecs, strict=True)}

        def exact(agent: str, kind: str | None, k: int) -> list[str]:
            ids = [m.id for m in ms if m.agent == agent and (kind is None or m.kind == kind)]
            return sorted(ids, key=lambda i: -cosine[i])[:k]

        for kind, k in (("knowledge", 5), ("knowledge", 50), ("decision", 5)):
            flt = Filter(agent="a", kinds=(kind,), include_shared=False)
            for near in (None, 0.95):
                got = store.search.vector_candidates_many([(base, flt), (base, flt)], limit=k, near=near)
                assert [[c.id for c in cands] for cands in got] == [exact("a", kind, k)] * 2
                assert all(abs(c.score - cosine[c.id]) < 1e-4 for c in got[0])
            assert [c.id for c in store.search.vector_candidates(base, flt, limit=k)] == exact("a", kind, k)
        # Another agent's private staged rows stay out; made public, they come in at their place.
        assert [c.id for c in store.search.vector_candidates(base, Filter(agent="a"), limit=60)] == exact("a", None, 60)
        store.memories.update(ms[38].id, {"visibility": "public"}, vector=None, model_id=MODEL, actor="b", at=NOW)
        seen = [*exact("a", None, 60), ms[38].id]
        got = [c.id for c in store.search.vector_candidates(base, Filter(agent="a"), limit=60)]
        assert got == sorted(seen, key=lambda i: -cosine[i])


def test_the_mover_folds_every_staged_vector_once_and_unchanged(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"note {i}", agent=f"a{i % 5}") for i in range(700)]
    vecs = unit_vectors(700, seed=4)
    with open_postgres(url) as store:  # its own mover folds them in the background
        store.memories.add(ms, vecs, model_id=MODEL, actor="t")
        # Watched through staged_rows, whose statement the mover knows as its own: a look at the tables is a read at
        # work, which the mover yields to (looks every 0.05 s kept it yielding for YIELD_MAX on a loaded machine).
        _until(lambda: _staged(url) == 0, "the mover to fold every vector")
        assert set(_where(url, [m.id for m in ms]).values()) == {"folded"}
        got = store.vectors.get([m.id for m in ms], model_id=MODEL)
        assert all(np.allclose(got[m.id], vecs[n], atol=1e-6) for n, m in enumerate(ms))
        assert store.vectors.count_stale(MODEL) == 0
        query = vecs[11]
        assert store.search.vector_candidates(query, Filter(agent="a1"), limit=1)[0].id == ms[11].id


_KILLED_MOVER = """
import sys, psycopg
from engramdb.storage._pg_staging import move_batch
conn = psycopg.connect(sys.argv[1], autocommit=True, application_name="killed-mover")
move_batch(conn, limit=100_000)
"""


def test_a_mover_killed_mid_batch_loses_nothing(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"note {i}", agent=f"a{i % 3}") for i in range(400)]
    vecs = unit_vectors(400, seed=8)
    with open_postgres(url, settings=None) as store:
        store.memories.add(ms[:1], vecs[:1], model_id=MODEL, actor="t")  # the model's index
    fold_staged(url)
    with open_postgres(url, settings=NO_MOVER) as store:
        store.memories.add(ms[1:], vecs[1:], model_id=MODEL, actor="t")
    ids = [m.id for m in ms[1:]]
    assert set(_where(url, ids).values()) == {"staged"}
    blocker = psycopg.connect(url)  # a transaction, left open: the mover's insert of ms[200] waits for it
    register_vector(blocker)
    blocker.execute(
        "INSERT INTO vectors (memory_id, agent, model_id, dim, embedding) VALUES (%s, %s, %s, %s, %s)",
        (ms[200].id, ms[200].agent, MODEL, DIM, vecs[200]),
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    mover = subprocess.Popen([sys.executable, "-c", _KILLED_MOVER, url], env=env)
    try:
        with psycopg.connect(url, autocommit=True) as watch:

            def waiting() -> bool:
                row = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'killed-mover' "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()
                return row is not None and row[0] == 1

            _until(waiting, "the mover to be mid-batch (its staged rows deleted, some inserted, one waiting)")
            mover.send_signal(signal.SIGKILL)
            mover.wait(LIMIT)
            blocker.rollback()
            _until(
                lambda: (
                    watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'killed-mover'"
                    ).fetchone()
                    == (0,)
                ),
                "the killed mover's session to end",
            )
            assert staged_rows(watch) == 399
    finally:
        mover.kill()
        blocker.close()
    assert set(_where(url, ids).values()) == {"staged"}
    fold_staged(url)
    with open_postgres(url) as store:
        got = store.vectors.get(ids, model_id=MODEL)
        assert all(np.allclose(got[m.id], vecs[n + 1], atol=1e-6) for n, m in enumerate(ms[1:]))
        assert store.vectors.count_stale(MODEL) == 0
    assert set(_where(url, ids).values()) == {"folded"}


def _step5_store(url: str, n: int) -> tuple[list[Any], Any]:
    """A store at schema step 5 (no staging table): vectors straight into the partitioned table."""
    ms = [memory(f"old note {i}", agent=f"a{i % 3}") for i in range(n)]
    vecs = unit_vectors(n, seed=12)
    old_store(url, step=5, memories=ms, vectors=vecs, model=MODEL)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('vectors_staged')").fetchone() == (None,)
    return ms, vecs


def test_a_store_made_before_the_staging_table_migrates_in_place(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    ms, vecs = _step5_store(url, 60)
    with open_postgres(url, settings=NO_MOVER) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
        # The old vectors stay where they were; nothing is stale; old and new are found alike.
        assert set(_where(url, [m.id for m in ms]).values()) == {"folded"}
        assert store.vectors.count_stale(MODEL) == 0
        new = memory("written after the step", agent="a1")
        query = unit_vectors(1, seed=99)
        store.memories.add([new], query, model_id=MODEL, actor="t")
        assert _where(url, [new.id]) == {new.id: "staged"}
        assert store.search.vector_candidates(query[0], Filter(agent="a1"), limit=1)[0].id == new.id
        assert store.search.vector_candidates(vecs[4], Filter(agent="a1"), limit=1)[0].id == ms[4].id
        # An old vector replaced: from the graphs' table to the staging table, still one row.
        store.vectors.set([ms[4].id], unit_vectors(1, seed=5), model_id=MODEL)
        assert _where(url, [ms[4].id]) == {ms[4].id: "staged"}
        assert store.vectors.count_stale(MODEL) == 0
    fold_staged(url)
    assert set(_where(url, [m.id for m in ms] + [new.id]).values()) == {"folded"}


def test_writers_replacing_and_forgetting_while_the_mover_works_leave_one_vector_each(
    postgres_server: PgServer,
) -> None:
    url = postgres_server.new_database()
    ms = [memory(f"note {i}", agent=f"a{i % 4}") for i in range(300)]
    latest = {m.id: v for m, v in zip(ms, unit_vectors(300, seed=1), strict=True)}
    stop = threading.Event()
    errors: list[BaseException] = []

    def mover() -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                while not stop.is_set():
                    move_batch(conn, limit=7)
        except BaseException as exc:  # noqa: BLE001 (reported below: a thread's exception would vanish)
            errors.append(exc)

    with open_postgres(url, settings=NO_MOVER) as store:
        store.memories.add(ms, np.stack(list(latest.values())), model_id=MODEL, actor="t")
        thread = threading.Thread(target=mover)
        thread.start()
        rng = np.random.default_rng(3)
        forgotten: set[str] = set()
        try:
            for step in range(150):
                m = ms[int(rng.integers(len(ms)))]
                if m.id in forgotten:
                    continue
                if step % 10 == 9:
                    store.memories.delete(m.id, actor="t", at=NOW)
                    forgotten.add(m.id)
                    latest.pop(m.id)
                else:
                    vector = unit_vectors(1, seed=1000 + step)
                    store.vectors.set([m.id], vector, model_id=MODEL)
                    latest[m.id] = vector[0]
        finally:
            stop.set()
            thread.join(LIMIT)
        assert not errors
        where = _where(url, [m.id for m in ms])
        assert set(where) == set(latest)  # one vector per living memory (checked by _where), none for the forgotten
        got = store.vectors.get(list(latest), model_id=MODEL)
        assert all(np.allclose(got[i], v, atol=1e-6) for i, v in latest.items())
        fold_staged(url)
        got = store.vectors.get(list(latest), model_id=MODEL)
        assert all(np.allclose(got[i], v, atol=1e-6) for i, v in latest.items())
        assert set(_where(url, list(latest)).values()) == {"folded"}


def test_background_writes_wait_for_room_in_the_staging_table(postgres_server: PgServer) -> None:
    url = postgres_server.new_database()
    with open_postgres(url, settings=NO_MOVER) as store:
        store.memories.add([memory(f"n{i}") for i in range(30)], unit_vectors(30, seed=2), model_id=MODEL, actor="t")
    done = threading.Event()

    def waiter() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            wait_for_room(conn, cap=10, timeout=LIMIT)
        done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        assert not done.wait(1.0)  # 30 staged, room below 10
        fold_staged(url)
        assert done.wait(LIMIT)
    finally:
        thread.join(LIMIT)
    # With no mover at work, the wait gives up after its timeout rather than blocking the writer for good.
    with open_postgres(url, settings=NO_MOVER) as store:
        store.memories.add([memory(f"m{i}") for i in range(30)], unit_vectors(30, seed=3), model_id=MODEL, actor="t")
    with psycopg.connect(url, autocommit=True) as conn:
        began = time.monotonic()
        wait_for_room(conn, cap=10, timeout=0.5)
        assert 0.5 <= time.monotonic() - began < LIMIT
        assert staged_rows(conn) == 30


def test_background_writes_wait_while_one_agent_has_its_cap_staged(postgres_server: PgServer) -> None:
    """A search scans its own agent's staged rows: the cap that bounds it is one agent's, whatever the others'."""
    url = postgres_server.new_database()
    with open_postgres(url, settings=NO_MOVER) as store:
        ms = [memory(f"n{i}", agent="busy" if i < 12 else f"quiet-{i}") for i in range(30)]
        store.memories.add(ms, unit_vectors(30, seed=4), model_id=MODEL, actor="t")
    with psycopg.connect(url, autocommit=True) as conn:
        assert staged_load(conn) == (30, 12)
        began = time.monotonic()
        wait_for_room(conn, cap=100, agent_cap=20, timeout=LIMIT)  # 30 in all, 12 of one agent: room
        assert time.monotonic() - began < LIMIT
    done = threading.Event()

    def waiter() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            wait_for_room(conn, cap=100, agent_cap=10, timeout=LIMIT)
        done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        assert not done.wait(1.0)  # 12 of "busy" staged, room below 10 an agent
        fold_staged(url)
        assert done.wait(LIMIT)
    finally:
        thread.join(LIMIT)


def test_a_store_at_the_first_staging_step_gets_the_open_flags(postgres_server: PgServer) -> None:
    """Step 6 staged vectors without ``open``; step 7 adds it, set from each memory's visibility."""
    url = postgres_server.new_database()
    ms = [memory("private note", agent="a"), memory("public note", agent="a", visibility="public")]
    vecs = unit_vectors(2, seed=6)
    old_store(url, step=6, memories=ms, vectors=vecs, model=MODEL, staged=True)
    with open_postgres(url, settings=NO_MOVER) as store:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
            flags = dict(conn.execute("SELECT memory_id, open FROM vectors_staged").fetchall())
        assert flags == {ms[0].id: False, ms[1].id: True}
        seen = [c.id for c in store.search.vector_candidates(vecs[1], Filter(agent="b"), limit=5)]
        assert seen == [ms[1].id]

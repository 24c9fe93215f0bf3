"""Running a PostgreSQL store (issue 26): batched writes from several processes, the pool size, backup and restore
with ``pg_dump``/``pg_restore``, and ``engram doctor``, against the session's real server."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import PgServer

from engramdb import Engram
from engramdb.config import SERVER_PG_POOL_SIZE, server_overrides
from engramdb.embeddings.base import Embedder
from engramdb.interfaces.cli.app import app

SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0"


#: Vector rows of the given memories, staged or folded into the graphs (schema step 6: one each).
VECTORS_OF = (
    "SELECT count(*) FROM (SELECT memory_id FROM vectors UNION ALL SELECT memory_id FROM vectors_staged) v "
    "WHERE v.memory_id = ANY(%s)"
)


def _batch(tag: str, n: int) -> list[dict[str, Any]]:
    """A mixed batch: conversation turns (written without a near-duplicate check) and knowledge (checked)."""
    return [
        {
            "content": f"{tag} item {i}: the {('staging', 'billing', 'search')[i % 3]} service moved to rack {i}",
            "agent": f"agent-{i % 2}",
            "kind": ("conversation", "knowledge")[i % 2],
            "tags": [tag],
        }
        for i in range(n)
    ]


def test_remember_many_writes_a_mixed_batch_in_order_with_history_and_audit(
    postgres_server: PgServer, embedder: Embedder
) -> None:
    url = postgres_server.new_database()
    items = _batch("mixed", 12)
    items[3]["content"] += f" (api key {SECRET})"
    with Engram(url, embedder=embedder) as mem:
        written = mem.remember_many(items)
        assert [m.content.split(":")[0] for m in written] == [f"mixed item {i}" for i in range(12)]
        assert SECRET not in written[3].content
        assert written[3].redacted
        mem.flush()
        for m in written:
            history = mem.history(m.id)
            assert [(c.action, c.actor) for c in history] == [("create", m.agent)]
            assert mem.get(m.id).content == m.content
        # Newest first, and memories of one call in the order given (one insert, one rid order).
        listed = [m.id for m in mem.list(agent="agent-0", limit=100)]
        assert listed == [m.id for m in reversed(written) if m.agent == "agent-0"]
        assert mem.audit.verify()
        created = [e.memory_id for e in mem.audit.log(limit=1000) if e.action == "create"]
        assert sorted(created) == sorted(m.id for m in written)
    with psycopg.connect(url) as conn:
        row = conn.execute(VECTORS_OF, ([m.id for m in written],))
        assert row.fetchone() == (12,)
        assert conn.execute("SELECT count(*) FROM memories WHERE content LIKE %s", (f"%{SECRET}%",)).fetchone() == (0,)


def _writer(url: str, tag: str, batches: int, out: Any) -> None:
    from engramdb.embeddings.static import StaticEmbedder

    ids: list[str] = []
    with Engram(url, embedder=StaticEmbedder()) as mem:
        for b in range(batches):
            ids.extend(m.id for m in mem.remember_many(_batch(f"{tag}-{b}", 20)))
    out.put((tag, ids))


def test_four_writer_processes_lose_nothing_and_keep_one_audit_chain(postgres_server: PgServer) -> None:
    """Four processes call ``remember_many`` at once: every id returned is stored with its vector, none twice,
    and the audit chain they extended together verifies (the audit lock orders them; nothing interleaves)."""
    from engramdb.embeddings.static import StaticEmbedder

    url = postgres_server.new_database()
    with Engram(url, embedder=StaticEmbedder()) as mem:
        mem.remember("first write: schema, model and index", agent="setup")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, f"w{w}", 5, out)) for w in range(4)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    ids = [i for tag in sorted(results) for i in results[tag]]
    assert len(ids) == len(set(ids)) == 4 * 5 * 20
    with Engram(url, embedder=StaticEmbedder()) as mem:
        assert mem.audit.verify()
        assert len([e for e in mem.audit.log(limit=10_000) if e.action == "create"]) == 401
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM memories WHERE id = ANY(%s)", (ids,)).fetchone() == (400,)
        assert conn.execute(VECTORS_OF, (ids,)).fetchone() == (400,)
        seqs = [r[0] for r in conn.execute("SELECT seq FROM audit ORDER BY seq").fetchall()]
        assert seqs == list(range(1, len(seqs) + 1))


def _connections(url: str) -> int:
    """Client sessions on ``url``'s database other than these checks' own (which name themselves).

    Only client backends: an autovacuum worker analysing the fresh tables is a session on the database too.
    """
    with psycopg.connect(url, autocommit=True, application_name="pool-check") as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND application_name IS DISTINCT FROM 'pool-check'"
        ).fetchone()
    return int(row[0]) if row is not None else 0


def test_pg_pool_size_bounds_the_connections_of_a_process(
    postgres_server: PgServer, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder, pg_pool_size=2) as mem:
        mem.remember_many(_batch("pool", 6))
        mem.flush()
        seen: list[int] = []
        errors: list[BaseException] = []

        def search() -> None:
            try:
                for _ in range(5):
                    mem.search("which rack did the billing service move to", agent="agent-0")
                    seen.append(_connections(url))
            except Exception as exc:  # noqa: BLE001 (reported below: a thread's exception would vanish)
                errors.append(exc)

        threads = [threading.Thread(target=search) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # Eight threads searching at once (and the vector and access-count threads) share two connections.
        assert len(seen) == 40
        assert max(seen) <= 2
    # The servers' automatic size, unless the setting names one.
    monkeypatch.delenv("ENGRAM_PG_POOL_SIZE", raising=False)
    monkeypatch.setenv("ENGRAM_CONFIG", os.devnull)
    assert server_overrides() == {"pg_pool_size": SERVER_PG_POOL_SIZE}
    monkeypatch.setenv("ENGRAM_PG_POOL_SIZE", "3")
    assert server_overrides() == {}


def _pg_tool(server: PgServer, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(server.bin_dir / tool), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)


def test_pg_dump_and_pg_restore_round_trip_keeps_the_audit_chain(
    postgres_server: PgServer, embedder: Embedder, tmp_path: Path
) -> None:
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder) as mem:
        written = mem.remember_many(_batch("backup", 8))
        mem.update(written[1].id, content="the billing service moved to rack 42", agent="agent-1")
        mem.forget(written[2].id)
        mem.sharing.share([written[0].id], from_agent="agent-0", to_agent="agent-1")
        mem.flush()
        before_hits = [h.memory.id for h in mem.search("billing service rack", agent="agent-1")]
        before_log = [e.to_dict() for e in mem.audit.log(limit=1000)]
        before_counts = [mem.count(agent="agent-0"), mem.count(agent="agent-1")]
        assert before_hits
        assert mem.audit.verify()
    dump = tmp_path / "store.dump"
    source = url.rsplit("/", 1)[1]
    done = _pg_tool(postgres_server, "pg_dump", "-Fc", "-f", str(dump), source)
    assert done.returncode == 0, done.stderr
    target = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{target}"')
    done = _pg_tool(postgres_server, "pg_restore", "--exit-on-error", "-d", target, str(dump))
    assert done.returncode == 0, done.stderr
    restored = postgres_server.url(target)
    with Engram(restored, embedder=embedder) as mem:
        assert mem.audit.verify()
        assert [e.to_dict() for e in mem.audit.log(limit=1000)] == before_log
        assert [h.memory.id for h in mem.search("billing service rack", agent="agent-1")] == before_hits
        assert mem.get(written[1].id).content == "the billing service moved to rack 42"
        assert [mem.count(agent="agent-0"), mem.count(agent="agent-1")] == before_counts == [3, 5]
        # The restored store goes on: identities and the chain continue where the dump left them.
        again = mem.remember("restored stores take new writes", agent="agent-0")
        assert [c.action for c in mem.history(again.id)] == ["create"]
        assert mem.audit.verify()
        assert mem.doctor().ok


def test_engram_doctor_checks_a_postgres_store(postgres_server: PgServer, embedder: Embedder) -> None:
    from typer.testing import CliRunner

    url = postgres_server.new_database()
    with Engram(url, embedder=embedder) as mem:
        mem.remember_many(_batch("doctor", 4))
        mem.flush()
        report = mem.doctor()
        assert report.ok, report.to_dict()
    runner = CliRunner()
    env = {"ENGRAM_EMBEDDER": "local"}
    healthy = runner.invoke(app, ["doctor", "--store", url, "--json"], env=env)
    assert healthy.exit_code == 0, healthy.output
    assert json.loads(healthy.stdout)["ok"] is True
    # An audit entry edited behind the store's back (the append-only trigger switched off by a superuser).
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE audit DISABLE TRIGGER audit_append_only")
        conn.execute("UPDATE audit SET agent = 'mallory' WHERE seq = 2")
        conn.execute("ALTER TABLE audit ENABLE TRIGGER audit_append_only")
    damaged = runner.invoke(app, ["doctor", "--store", url], env=env)
    assert damaged.exit_code == 1
    assert "audit" in damaged.output


def test_a_batch_checks_every_item_for_near_duplicates_on_the_pool(
    postgres_server: PgServer, embedder: Embedder
) -> None:
    """The batch's near-duplicate lookups run side by side on the pool's connections; each item still merges
    into its own stored twin (same agent and kind only), and twins inside the batch fold into one."""
    url = postgres_server.new_database()
    with Engram(url, embedder=embedder) as mem:
        stored = mem.remember_many(
            [
                {"content": f"The {name} service moved to rack {n}.", "agent": agent}
                for n, name in enumerate(("staging", "billing", "search", "payments", "auth"))
                for agent in ("alice", "bob")
            ]
        )
        items = [
            {"content": f"the {name} service moved to rack {n}", "agent": "alice"}
            for n, name in enumerate(("staging", "billing", "search", "payments", "auth"))
        ]
        items += [{"content": "The queue service moved to rack 9.", "agent": "alice"}] * 2
        items += [{"content": "the staging service moved to rack 0", "agent": "carol"}]
        written = mem.remember_many(items)
    alice = {m.content: m.id for m in stored if m.agent == "alice"}
    assert [m.id for m in written[:5]] == list(alice.values())
    assert written[5].id == written[6].id
    assert written[5].id not in {m.id for m in stored}
    assert written[7].agent == "carol"
    assert written[7].id not in {m.id for m in stored}


def test_a_concurrent_insert_of_the_same_id_is_bad_input_and_leaves_the_block_usable(
    postgres_server: PgServer, tmp_path: Path
) -> None:
    """The id check before the COPY cannot see another transaction's uncommitted row: the COPY then waits for it and
    fails on the unique index, inside a savepoint, so the caller gets a ValidationError and its block goes on."""
    from storage_helpers import StoreFactory, add, memory

    from engramdb.config import load_settings
    from engramdb.errors import ValidationError

    factory = StoreFactory("postgres", postgres_server.new_database(), load_settings({}, home=tmp_path / "home"))
    first, second = factory.open(), factory.open()
    try:
        clash = memory("written by the first writer")
        inserted, release = threading.Event(), threading.Event()

        def hold() -> None:
            with first.atomic():
                add(first, [clash])
                inserted.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        assert inserted.wait(30)
        outcome: list[BaseException | None] = []
        other = memory("written by the second writer")

        def race() -> None:
            with second.atomic():
                try:
                    add(second, [memory("same id, other words", id=clash.id)], seed=1)
                except ValidationError as exc:
                    outcome.append(exc)
                add(second, [other], seed=2)  # the block is still usable

        racer = threading.Thread(target=race)
        racer.start()
        racer.join(1.0)
        assert racer.is_alive()  # waiting on the first writer's uncommitted row
        release.set()
        holder.join(30)
        racer.join(30)
        assert len(outcome) == 1
        assert "already exists" in str(outcome[0])
        assert first.memories.get(clash.id) == clash
        assert second.memories.get(other.id) == other
    finally:
        factory.close_all()

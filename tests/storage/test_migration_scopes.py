"""A store made by the release before scopes (schema 2) migrates in place to schema 3, on both backends.

The old store is built with the released migration steps (they are append-only, so steps 1 and 2 are
exactly the DDL that release wrote) and a memory inserted in that release's column layout.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from pg_server import SERVER

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage import _pg_schema, _sqlite_schema
from engramdb.storage._migrations import run_steps

CREATED = "2026-01-02T03:04:05.000000+00:00"
_OLD_INSERT = (
    "INSERT INTO memories (id, agent, kind, content, tags, metadata, created_at, updated_at, visibility) "
    "VALUES (?, 'bot', 'knowledge', 'the deploy freeze starts on Friday at noon', '[]', '{}', ?, ?, 'private')"
)


def _old_sqlite(tmp_path: Path, embedder: Embedder) -> str:
    folder = tmp_path / "store"
    folder.mkdir()
    conn = sqlite3.connect(folder / "engram.db", isolation_level=None)
    _sqlite_schema.migrate(conn, location="old", migrations=_sqlite_schema.MIGRATIONS[:2])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.execute(_OLD_INSERT, ("m1", CREATED, CREATED))
    vec = embedder.embed(["the deploy freeze starts on Friday at noon"])[0].astype(np.float32)
    conn.execute(
        "INSERT INTO vectors (memory_id, model_id, dim, vec) VALUES ('m1', ?, ?, ?)",
        (embedder.model_id, vec.shape[0], vec.tobytes()),
    )
    conn.execute("INSERT INTO meta (key, value) VALUES ('model_id', ?)", (embedder.model_id,))
    conn.close()
    return str(folder)


def _old_postgres(embedder: Embedder) -> str:
    import psycopg

    url = SERVER.get().new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        run_steps(
            _pg_schema.MIGRATIONS[:2],
            version=0,
            location="old",
            step_transaction=lambda: _pg_schema._step_transaction(conn),
            apply=lambda step, version: _pg_schema._apply(conn, step, version),
        )
        assert conn.execute("SELECT version FROM engram_schema").fetchone() == (2,)
        conn.execute(_OLD_INSERT.replace("?", "%s"), ("m1", CREATED, CREATED))
        vec = embedder.embed(["the deploy freeze starts on Friday at noon"])[0]
        conn.execute(
            "INSERT INTO vectors (memory_id, model_id, dim, embedding) VALUES ('m1', %s, %s, %s::vector)",
            (embedder.model_id, vec.shape[0], "[" + ",".join(f"{x:.7f}" for x in vec) + "]"),
        )
        conn.execute("INSERT INTO meta (key, value) VALUES ('model_id', %s)", (embedder.model_id,))
    return url


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_release_2_store_migrates_in_place(backend: str, tmp_path: Path, embedder: Embedder) -> None:
    location = _old_sqlite(tmp_path, embedder) if backend == "sqlite" else _old_postgres(embedder)
    with Engram(location, embedder=embedder) as mem:
        old = mem.get("m1")
        assert (old.user, old.session, old.valid_until) == (None, None, None)
        assert old.occurred_at == old.created_at
        assert [h.memory.id for h in mem.search("when does the deploy freeze start", agent="bot")] == ["m1"]
        # The old memory is the agent's own: every user of the agent sees it, and scoped writes work.
        assert [h.memory.id for h in mem.search("deploy freeze", agent="bot", user="ana")] == ["m1"]
        mem.remember("Ana deploys on Thursdays", agent="bot", user="ana")
        assert mem.count(agent="bot", user="ana") == 2
        assert mem.count(agent="bot", user="ben") == 1
    # Opening again finds the store at the new version: nothing is applied twice.
    with Engram(location, embedder=embedder) as mem:
        assert mem.count(agent="bot") == 2
    if backend == "sqlite":
        conn = sqlite3.connect(Path(location) / "engram.db")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _sqlite_schema.SCHEMA_VERSION == 3
        conn.close()

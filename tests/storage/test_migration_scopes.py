"""A store made by the release before scopes (schema 2) migrates in place to schema 3, on both backends.

The old store is built with the released migration steps (they are append-only, so steps 1 and 2 are
exactly the DDL that release wrote) and a memory inserted in that release's column layout.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from pg_server import SERVER, schema_at

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.storage import _pg_schema, _sqlite_schema

CREATED = "2026-01-02T03:04:05.000000+00:00"
_OLD_INSERT = (
    "INSERT INTO memories (id, agent, kind, content, tags, metadata, created_at, updated_at, visibility) "
    "VALUES (?, 'bot', 'knowledge', 'the deploy freeze starts on Friday at noon', '[]', '{}', ?, ?, 'private')"
)
#: An outcome record as that release wrote it: a decision memory with its action and outcome in the metadata.
DECISION = "the nightly deploy failed with a timeout"
_OLD_DECISION = (
    "INSERT INTO memories (id, agent, kind, content, tags, metadata, created_at, updated_at, visibility) "
    f"VALUES ('d1', 'bot', 'decision', '{DECISION}', '[\"action:retry\"]', "
    '\'{"action": "retry", "outcome": "success", "success": 1.0}\', ?, ?, \'private\')'
)


def _old_sqlite(tmp_path: Path, embedder: Embedder, *, decision: bool = False, level: int = 2) -> str:
    folder = tmp_path / "store"
    folder.mkdir()
    conn = sqlite3.connect(folder / "engram.db", isolation_level=None)
    _sqlite_schema.migrate(conn, location="old", migrations=_sqlite_schema.MIGRATIONS[:level])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == level
    conn.execute(_OLD_INSERT, ("m1", CREATED, CREATED))
    vec = embedder.embed(["the deploy freeze starts on Friday at noon"])[0].astype(np.float32)
    conn.execute(
        "INSERT INTO vectors (memory_id, model_id, dim, vec) VALUES ('m1', ?, ?, ?)",
        (embedder.model_id, vec.shape[0], vec.tobytes()),
    )
    conn.execute("INSERT INTO meta (key, value) VALUES ('model_id', ?)", (embedder.model_id,))
    if decision:
        conn.execute(_OLD_DECISION, (CREATED, CREATED))
        dvec = embedder.embed([DECISION])[0].astype(np.float32)
        conn.execute(
            "INSERT INTO vectors (memory_id, model_id, dim, vec) VALUES ('d1', ?, ?, ?)",
            (embedder.model_id, dvec.shape[0], dvec.tobytes()),
        )
    conn.close()
    return str(folder)


def _old_postgres(embedder: Embedder, *, decision: bool = False, level: int = 2) -> str:
    import psycopg

    url = SERVER.get().new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        schema_at(conn, level)
        assert conn.execute("SELECT version FROM engram_schema").fetchone() == (level,)
        conn.execute(_OLD_INSERT.replace("?", "%s"), ("m1", CREATED, CREATED))
        vec = embedder.embed(["the deploy freeze starts on Friday at noon"])[0]
        conn.execute(
            "INSERT INTO vectors (memory_id, model_id, dim, embedding) VALUES ('m1', %s, %s, %s::vector)",
            (embedder.model_id, vec.shape[0], "[" + ",".join(f"{x:.7f}" for x in vec) + "]"),
        )
        conn.execute("INSERT INTO meta (key, value) VALUES ('model_id', %s)", (embedder.model_id,))
        if decision:
            conn.execute(_OLD_DECISION.replace("?", "%s"), (CREATED, CREATED))
            dvec = embedder.embed([DECISION])[0]
            conn.execute(
                "INSERT INTO vectors (memory_id, model_id, dim, embedding) VALUES ('d1', %s, %s, %s::vector)",
                (embedder.model_id, dvec.shape[0], "[" + ",".join(f"{x:.7f}" for x in dvec) + "]"),
            )
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
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _sqlite_schema.SCHEMA_VERSION == 7
        conn.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_release_2_stores_outcomes_learn_per_user_after_migrating(
    backend: str, tmp_path: Path, embedder: Embedder
) -> None:
    """Outcomes need no migration of their own: a decision is a memory, and migration 3 gave memories their user.
    The old outcome is the agent's own, so every user learns from it; a user's new ones stay that user's."""
    location = (
        _old_sqlite(tmp_path, embedder, decision=True)
        if backend == "sqlite"
        else _old_postgres(embedder, decision=True)
    )
    with Engram(location, embedder=embedder) as mem:
        before = mem.learning.suggest(DECISION, agent="bot")
        assert [(o.action, o.attempts > 0) for o in before.options] == [("retry", True)]
        assert [r.id for r in mem.learning.outcomes(agent="bot", user="ana")] == ["d1"]
        for n in range(3):
            mem.learning.record(f"{DECISION} #{n}", "rollback", "success", agent="bot", user="ben")
        assert {r.id for r in mem.learning.outcomes(agent="bot", user="ana")} == {"d1"}
        assert len(mem.learning.outcomes(agent="bot", user="ben")) == 4
        assert len(mem.learning.outcomes(agent="bot")) == 4
        ana = mem.learning.suggest(DECISION, agent="bot", user="ana")
        assert {o.action for o in ana.options} == {"retry"}
        ben = mem.learning.suggest(DECISION, agent="bot", user="ben")
        assert {o.action for o in ben.options} == {"retry", "rollback"}


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_store_of_every_earlier_release_upgrades_in_place(
    backend: str, level: int, tmp_path: Path, embedder: Embedder
) -> None:
    """Each earlier schema level (1: before the audit trail, 2: before scopes) opens at the current one, its
    memory intact and searchable, and the writes after the upgrade are audited in a chain that verifies."""
    location = (
        _old_sqlite(tmp_path, embedder, level=level) if backend == "sqlite" else _old_postgres(embedder, level=level)
    )
    with Engram(location, embedder=embedder) as mem:
        assert mem.get("m1").content == "the deploy freeze starts on Friday at noon"
        assert [h.memory.id for h in mem.search("when does the deploy freeze start", agent="bot")] == ["m1"]
        added = mem.remember_many([{"content": "the freeze ends on Monday", "agent": "bot"}])
        mem.update("m1", content="the deploy freeze starts on Friday at 11:00", agent="bot")
        assert mem.audit.verify()
        logged = {(e.action, e.memory_id) for e in mem.audit.log(limit=1000)}
        assert {("create", added[0].id), ("update", "m1")} <= logged
    if backend == "postgres":
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM engram_schema").fetchone() == (_pg_schema.SCHEMA_VERSION,)
    else:
        conn_ = sqlite3.connect(Path(location) / "engram.db")
        assert conn_.execute("PRAGMA user_version").fetchone()[0] == _sqlite_schema.SCHEMA_VERSION
        conn_.close()

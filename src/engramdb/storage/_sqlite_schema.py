"""Schema and versioned migrations of the SQLite store.

The schema version lives in ``PRAGMA user_version`` (it is in the database header,
so it changes atomically with the migration's transaction) and the file is marked
as ours with ``PRAGMA application_id``. Each :class:`Migration` runs in its own
``BEGIN IMMEDIATE`` transaction; the version is re-read inside it, so two processes
opening a fresh or old store at the same moment apply each step exactly once.

To change the schema, append a step to :data:`MIGRATIONS` (never edit a released one)::

    Migration(
        version=2,
        description="outcome records",
        script='''
            CREATE TABLE outcomes (...);
            CREATE INDEX outcomes_memory ON outcomes(memory_id);
        ''',
    )

``script`` may hold several statements, triggers included; ``apply`` is an optional
Python step (for data rewrites) that runs after the script in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from engramdb.errors import NotAStoreError, StorageError
from engramdb.storage._migrations import check_not_newer, run_steps

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "Migration", "check_header", "migrate", "split_script"]

#: The first bytes of every SQLite database file.
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"

#: Marks a SQLite file as an engramdb store ("engr" in ASCII).
APPLICATION_ID: Final = 0x656E6772


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One schema step: SQL statements (and optionally Python) taking the store to ``version``."""

    version: int
    description: str
    script: str = ""
    apply: Callable[[sqlite3.Connection], None] | None = None


# Bumps the vector-index epoch. Every change that can make a cached copy of the vectors (or of
# the per-row agent/kind/visibility the in-memory index filters on) stale goes through a
# trigger, so code added later (retention, import, other processes) cannot forget to do it.
_BUMP_EPOCH = "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vec_epoch';"
# Bumps the share epoch, which tells a store's cache of "ids shared with agent X" to refetch.
_BUMP_SHARES = "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'share_epoch';"

_V1 = f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('vec_epoch', '0'), ('share_epoch', '0');

-- rid is the stable integer key the FTS index and the vector cache refer to. An explicit
-- INTEGER PRIMARY KEY (unlike an implicit rowid) survives VACUUM, and AUTOINCREMENT
-- never reuses the key of a forgotten memory.
CREATE TABLE memories (
    rid           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    agent         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    content       TEXT NOT NULL,
    tags          TEXT NOT NULL DEFAULT '[]',
    metadata      TEXT NOT NULL DEFAULT '{{}}',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    last_accessed TEXT,
    access_count  INTEGER NOT NULL DEFAULT 0,
    confidence    REAL NOT NULL DEFAULT 0.5,
    successes     REAL NOT NULL DEFAULT 0,
    attempts      REAL NOT NULL DEFAULT 0,
    visibility    TEXT NOT NULL DEFAULT 'private' CHECK (visibility IN ('private', 'shared', 'public')),
    redacted      TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX memories_agent_kind_created ON memories (agent, kind, created_at);
CREATE INDEX memories_agent_created ON memories (agent, created_at);
CREATE INDEX memories_created ON memories (created_at);
CREATE INDEX memories_public ON memories (created_at) WHERE visibility = 'public';

CREATE TABLE memory_tags (
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    tag       TEXT NOT NULL,
    PRIMARY KEY (memory_id, tag)
) WITHOUT ROWID;
CREATE INDEX memory_tags_tag ON memory_tags (tag, memory_id);

-- External content: the text lives once, in memories; the index holds only terms.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, tags,
    content = 'memories', content_rowid = 'rid',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.rid, new.content, new.tags);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
    VALUES ('delete', old.rid, old.content, old.tags);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
    VALUES ('delete', old.rid, old.content, old.tags);
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.rid, new.content, new.tags);
END;

CREATE TABLE vectors (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL UNIQUE REFERENCES memories (id) ON DELETE CASCADE,
    model_id  TEXT NOT NULL,
    dim       INTEGER NOT NULL,
    vec       BLOB NOT NULL
);
-- No index on model_id: searches read every row anyway, and one would lure the planner away
-- from the seq range when the vector cache loads only the rows appended since it last looked.
CREATE TRIGGER vectors_epoch_delete AFTER DELETE ON vectors BEGIN {_BUMP_EPOCH} END;
CREATE TRIGGER vectors_epoch_update AFTER UPDATE ON vectors BEGIN {_BUMP_EPOCH} END;
CREATE TRIGGER memories_epoch_update AFTER UPDATE OF agent, kind, visibility ON memories
WHEN old.agent IS NOT new.agent OR old.kind IS NOT new.kind OR old.visibility IS NOT new.visibility
BEGIN {_BUMP_EPOCH} END;

-- No foreign key: the history of a forgotten memory stays (scrubbed) with its tombstone.
CREATE TABLE history (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL,
    action    TEXT NOT NULL,
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    before    TEXT,
    after     TEXT
);
CREATE INDEX history_memory ON history (memory_id, seq);

-- to_agent '*' shares with every agent.
CREATE TABLE shares (
    memory_id  TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    from_agent TEXT NOT NULL,
    to_agent   TEXT NOT NULL,
    shared_at  TEXT NOT NULL,
    PRIMARY KEY (memory_id, to_agent)
) WITHOUT ROWID;
CREATE INDEX shares_to ON shares (to_agent, memory_id);
CREATE TRIGGER shares_epoch_insert AFTER INSERT ON shares BEGIN {_BUMP_SHARES} END;
CREATE TRIGGER shares_epoch_delete AFTER DELETE ON shares BEGIN {_BUMP_SHARES} END;
CREATE TRIGGER shares_epoch_update AFTER UPDATE ON shares BEGIN {_BUMP_SHARES} END;
"""

# The audit trail: append-only, hash-chained (see engramdb.auditchain). The sequence number is
# assigned by the appender inside its write transaction, right after reading the last hash, so
# two processes appending at once still build one unbroken chain. The triggers make editing or
# deleting entries through SQL fail loudly; the chain catches whoever drops the triggers first.
_V2_AUDIT = """
CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    action    TEXT NOT NULL,
    agent     TEXT,
    memory_id TEXT,
    detail    TEXT NOT NULL DEFAULT '{}',
    hash      TEXT NOT NULL
);
CREATE INDEX audit_agent ON audit (agent, seq);
CREATE INDEX audit_memory ON audit (memory_id, seq);
CREATE TRIGGER audit_append_only_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER audit_append_only_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""

# Scopes and time (issue 23): the user and the conversation thread a memory belongs to, when its event
# happened, and until when a superseded value of a keyed fact was true. Existing memories belong to no user
# or thread, happened when they were stored, and are current. The vector cache holds current rows only
# and learns a row's scope from SQL (storage._sqlite_search), so no epoch trigger is needed for these.
_V3_SCOPES = """
ALTER TABLE memories ADD COLUMN user_id TEXT;
ALTER TABLE memories ADD COLUMN session_id TEXT;
ALTER TABLE memories ADD COLUMN occurred_at TEXT;
ALTER TABLE memories ADD COLUMN valid_until TEXT;
UPDATE memories SET occurred_at = created_at;
CREATE INDEX memories_agent_user ON memories (agent, user_id, created_at);
CREATE INDEX memories_session ON memories (session_id, created_at) WHERE session_id IS NOT NULL;
CREATE INDEX memories_past ON memories (agent, valid_until) WHERE valid_until IS NOT NULL;
"""

# Issue 27: searches keep each (agent, users) scope's row keys between searches (storage._tenant_rows) and trust
# them as the scope's exact rows, so every change that moves a row into or out of a user's or thread's rows, or
# out of the current values, moves ``scope_epoch``: whoever writes it (another process, plain SQL).
_BUMP_SCOPES = "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'scope_epoch';"
_V4_SCOPE_EPOCH = f"""
INSERT OR IGNORE INTO meta (key, value) VALUES ('scope_epoch', '0');
CREATE TRIGGER memories_scope_update AFTER UPDATE OF user_id, session_id, valid_until ON memories
WHEN old.user_id IS NOT new.user_id OR old.session_id IS NOT new.session_id OR old.valid_until IS NOT new.valid_until
BEGIN {_BUMP_SCOPES} END;
"""

# Issue 27: every open counts the current model's vectors against the memories (vectors.count_stale / iter_stale).
# Without an index that reads every vector row (1.5 KB each: 25-64 s for 1M memories whose pages are not cached,
# and at open it competes with the first searches for the disk); by this index it reads the index alone. Partial
# (``dim > 0``, true of every vector, named by the counts only) so that no other query's plan can pick it: a plain
# index on model_id (step 5 as first written) drove vectors.get through every row of the model, ~450 ms a search
# at 1M; step 6 drops it.
_VECTORS_COUNTED = "CREATE INDEX IF NOT EXISTS vectors_model_count ON vectors (model_id, dim) WHERE dim > 0;"
_V5_VECTORS_MODEL = _VECTORS_COUNTED
_V6_VECTORS_COUNTED = f"""
DROP INDEX IF EXISTS vectors_model;
{_VECTORS_COUNTED}
"""

# Issue 27: the vectors counted per model and dimension by triggers, so the open's count (count_stale) and every
# vector write's dimension check read a row or two instead of every vector row (the dimension check scanned the
# table on each write: ~50 ms at 100k warm, seconds at 1M cold), and no index on the vectors takes disk for it.
# Counted from step 6's index (every dimension is positive), which is then dropped.
_COUNT_UP = (
    "INSERT INTO vector_counts (model_id, dim, n) VALUES (new.model_id, new.dim, 1) "
    "ON CONFLICT (model_id, dim) DO UPDATE SET n = n + 1;"
)
_COUNT_DOWN = "UPDATE vector_counts SET n = n - 1 WHERE model_id = old.model_id AND dim = old.dim;"
_V7_VECTOR_COUNTS = f"""
CREATE TABLE vector_counts (
    model_id TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (model_id, dim)
) WITHOUT ROWID;
INSERT INTO vector_counts (model_id, dim, n)
SELECT model_id, dim, count(*) FROM vectors WHERE dim > 0 GROUP BY model_id, dim;
DROP INDEX IF EXISTS vectors_model_count;
CREATE TRIGGER vectors_count_insert AFTER INSERT ON vectors BEGIN {_COUNT_UP} END;
CREATE TRIGGER vectors_count_delete AFTER DELETE ON vectors BEGIN {_COUNT_DOWN} END;
CREATE TRIGGER vectors_count_update AFTER UPDATE OF model_id, dim ON vectors BEGIN {_COUNT_DOWN} {_COUNT_UP} END;
"""

#: Every schema step, in order. Append only.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(version=1, description="memories, keyword index, vectors, history, shares, meta", script=_V1),
    Migration(version=2, description="hash-chained audit trail", script=_V2_AUDIT),
    Migration(version=3, description="user and session scopes, event time, validity", script=_V3_SCOPES),
    Migration(version=4, description="scope epoch: user, thread and validity changes", script=_V4_SCOPE_EPOCH),
    Migration(version=5, description="vectors by model: the open's count reads an index", script=_V5_VECTORS_MODEL),
    Migration(version=6, description="the vectors' model index only the counts use", script=_V6_VECTORS_COUNTED),
    Migration(version=7, description="vectors counted by model and dimension", script=_V7_VECTOR_COUNTS),
)

#: The schema version this code writes and understands.
SCHEMA_VERSION: Final = MIGRATIONS[-1].version


def split_script(script: str) -> Iterator[str]:
    """Split a SQL script into complete statements (trigger bodies and quoted ``;`` stay whole).

    ``Connection.executescript`` would commit the surrounding transaction first,
    so migrations execute statement by statement instead. Keep ``;`` out of comments.
    """
    *pieces, rest = script.split(";")
    pending = ""
    for piece in pieces:
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            if statement.rstrip(";").strip():
                yield statement
            pending = ""
    rest = pending + rest
    if any(line.strip() and not line.strip().startswith("--") for line in rest.splitlines()):
        raise ValueError(f"incomplete SQL statement in migration script: {rest.strip()[:60]!r}")


def _user_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


@contextmanager
def _step_transaction(conn: sqlite3.Connection) -> Iterator[int]:
    """One ``BEGIN IMMEDIATE`` transaction (the write lock), yielding the version read inside it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield _user_version(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _apply(conn: sqlite3.Connection, step: Migration) -> None:
    for statement in split_script(step.script):
        conn.execute(statement)
    if step.apply is not None:
        step.apply(conn)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {int(step.version)}")


def migrate(conn: sqlite3.Connection, *, location: str, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the schema up to the last of ``migrations``, one transaction per step; return the version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Raises
    :class:`~engramdb.errors.SchemaVersionError` if the store is newer than this code.
    """
    if [m.version for m in migrations] != list(range(1, len(migrations) + 1)):
        raise ValueError("migration versions must be 1, 2, 3, ... in order")
    version = _user_version(conn)
    check_not_newer(version, migrations[-1].version, location)
    return run_steps(
        migrations,
        version=version,
        location=location,
        step_transaction=lambda: _step_transaction(conn),
        apply=lambda step, _: _apply(conn, step),
    )


def check_header(db: Path) -> None:
    """Refuse (without touching it) an existing file that is not a SQLite database."""
    if db.is_dir():
        raise NotAStoreError(f"{db} is a directory, not an engramdb database file")
    try:
        with db.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"cannot read {db}: {exc.strerror or exc}") from exc
    if head and head != _SQLITE_MAGIC:
        raise NotAStoreError(f"{db} is not an engramdb store (not a SQLite database)")

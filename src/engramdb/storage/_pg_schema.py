"""Schema and versioned migrations of the PostgreSQL store.

The version lives in a one-row ``engram_schema`` table that also marks the database
(or the schema on the connection's ``search_path``) as an engramdb store. Each
:class:`PgMigration` runs in its own transaction under a transaction-scoped advisory
lock, and the version is re-read inside it, so two processes opening a fresh store at
the same moment apply each step exactly once (PostgreSQL DDL is transactional: a
failed step leaves nothing behind).

The tables mirror the SQLite store's (see ``_sqlite_schema``): timestamps are the same
fixed-width UTC ISO strings and JSON the same compact text, so rows decode with the
same code on both backends. What differs:

* keywords: a generated ``tsvector`` column (English stemming, content and tags) with a GIN index, and its lexemes
  with their counts in ``memory_terms`` (step 11: BM25 postings, kept in step by triggers; step 12 dropped the
  narrow copy ``memory_words`` of step 8);
* vectors: a dimensionless ``vector`` column; an HNSW index needs a fixed dimension, so one
  partial expression index per (model, dimension) is created when that pair is first
  written (see ``PostgresBackend._ensure_vector_index``) and recorded in ``vector_indexes``;
  since step 9 it is built on the vectors' half-precision copies (``embedding::halfvec(dim)``);
  the table is hash-partitioned by the memory's agent (step 5), so each partition has its own graph;
* no epoch triggers: searches run in the database, so there is no cache to keep in step.

To change the schema, append a step to :data:`MIGRATIONS` (never edit a released one).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from engramdb.errors import NotAStoreError, StorageError
from engramdb.storage._migrations import check_not_newer, run_steps

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "LOCK_AUDIT",
    "LOCK_BACKGROUND",
    "LOCK_META_CLASS",
    "LOCK_MIGRATE",
    "LOCK_MOVER",
    "LOCK_VECTOR_INDEX",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "VECTOR_PARTITIONS",
    "PgMigration",
    "migrate",
]

#: Advisory lock keys ("engr" in ASCII, then a purpose number): one namespace for the whole store.
LOCK_MIGRATE: Final = 0x656E677200000001
LOCK_AUDIT: Final = 0x656E677200000002
LOCK_VECTOR_INDEX: Final = 0x656E677200000003
#: Held by the background vector writes (``PostgresBackend.background_turn``): one at a time per store.
LOCK_BACKGROUND: Final = 0x656E677200000004
#: Held by the mover of staged vectors (``_pg_staging``) while it folds a batch: one mover at a time per store.
LOCK_MOVER: Final = 0x656E677200000005
#: The first half of the two-integer advisory locks on meta keys (``lock_meta``; a key space apart from the above).
LOCK_META_CLASS: Final = 0x656E6772

#: Tables whose presence without ``engram_schema`` means the database belongs to something else.
_OUR_TABLES: Final = (
    "memories",
    "memory_tags",
    "vectors",
    "history",
    "shares",
    "audit",
    "meta",
    "vectors_staged",
    "memory_words",
    "memory_terms",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PgMigration:
    """One schema step: SQL statements (no parameters) taking the store to ``version``."""

    version: int
    description: str
    script: str


_V1 = """
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- rid orders memories created in the same microsecond (list is newest first) and keys iteration.
CREATE TABLE memories (
    rid           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    agent         text NOT NULL,
    kind          text NOT NULL,
    content       text NOT NULL,
    tags          text NOT NULL DEFAULT '[]',
    metadata      text NOT NULL DEFAULT '{}',
    created_at    text NOT NULL,
    updated_at    text NOT NULL,
    last_accessed text,
    access_count  bigint NOT NULL DEFAULT 0,
    confidence    double precision NOT NULL DEFAULT 0.5,
    successes     double precision NOT NULL DEFAULT 0,
    attempts      double precision NOT NULL DEFAULT 0,
    visibility    text NOT NULL DEFAULT 'private' CHECK (visibility IN ('private', 'shared', 'public')),
    redacted      text NOT NULL DEFAULT '[]',
    -- Tags are indexed with the content, as in the SQLite store's FTS table.
    tsv           tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content || ' ' || tags)) STORED
);
CREATE INDEX memories_agent_kind_created ON memories (agent, kind, created_at);
CREATE INDEX memories_agent_created ON memories (agent, created_at);
CREATE INDEX memories_created ON memories (created_at);
CREATE INDEX memories_public ON memories (created_at) WHERE visibility = 'public';
CREATE INDEX memories_tsv ON memories USING gin (tsv);

CREATE TABLE memory_tags (
    memory_id text NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    tag       text NOT NULL,
    PRIMARY KEY (memory_id, tag)
);
CREATE INDEX memory_tags_tag ON memory_tags (tag, memory_id);

CREATE TABLE vectors (
    memory_id text PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    model_id  text NOT NULL,
    dim       integer NOT NULL CHECK (dim > 0),
    embedding vector NOT NULL
);
CREATE INDEX vectors_model ON vectors (model_id, dim);

-- One HNSW index per (model, dimension), created on first write of that pair.
CREATE TABLE vector_indexes (
    model_id   text NOT NULL,
    dim        integer NOT NULL,
    index_name text NOT NULL UNIQUE,
    PRIMARY KEY (model_id, dim)
);

-- No foreign key: the history of a forgotten memory stays (scrubbed) with its tombstone.
CREATE TABLE history (
    seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id text NOT NULL,
    action    text NOT NULL,
    at        text NOT NULL,
    actor     text NOT NULL,
    before    text,
    after     text
);
CREATE INDEX history_memory ON history (memory_id, seq);

-- to_agent '*' shares with every agent.
CREATE TABLE shares (
    memory_id  text NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    from_agent text NOT NULL,
    to_agent   text NOT NULL,
    shared_at  text NOT NULL,
    PRIMARY KEY (memory_id, to_agent)
);
CREATE INDEX shares_to ON shares (to_agent, memory_id);
"""

# The audit trail: append-only and hash-chained (engramdb.auditchain). Appenders take an
# advisory lock, read the last hash and insert in one transaction, so concurrent processes build
# one unbroken chain. The triggers make edits through SQL fail loudly.
_V2_AUDIT = """
CREATE TABLE audit (
    seq       bigint PRIMARY KEY,
    at        text NOT NULL,
    action    text NOT NULL,
    agent     text,
    memory_id text,
    detail    text NOT NULL DEFAULT '{}',
    hash      text NOT NULL
);
CREATE INDEX audit_agent ON audit (agent, seq);
CREATE INDEX audit_memory ON audit (memory_id, seq);
CREATE FUNCTION engram_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only';
END
$$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION engram_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION engram_audit_append_only();
"""

# Scopes and time (issue 23), as in the SQLite store's step 3.
_V3_SCOPES = """
ALTER TABLE memories ADD COLUMN user_id text, ADD COLUMN session_id text, ADD COLUMN occurred_at text,
    ADD COLUMN valid_until text;
UPDATE memories SET occurred_at = created_at;
CREATE INDEX memories_agent_user ON memories (agent, user_id, created_at);
CREATE INDEX memories_session ON memories (session_id, created_at) WHERE session_id IS NOT NULL;
CREATE INDEX memories_past ON memories (agent, valid_until) WHERE valid_until IS NOT NULL;
"""

# The keyword channel's matches of one agent in one index scan: the agent is a key of the same GIN index as the words
# (btree_gin), so a search intersects the agent's postings with the words' inside the index instead of reading every
# word match of every agent (bench/RESULTS.md, issue 26). btree_gin is a trusted contrib extension (PostgreSQL 13+);
# where the server lacks it the step leaves the index out and searches use the word index alone, as before.
_V4_AGENT_WORDS = """
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS btree_gin;
    CREATE INDEX IF NOT EXISTS memories_agent_tsv ON memories USING gin (agent, tsv);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'engramdb: no memories_agent_tsv index (%)', SQLERRM;
END
$$;
"""

#: How many hash partitions of ``vectors`` (by agent) schema step 5 makes.
VECTOR_PARTITIONS: Final = 16

# Vectors partitioned by their memory's agent (hash), each partition with its own HNSW graph: an agent's search prunes
# to its partition's graph instead of reading ~10 index entries for each of its own in a graph of every agent's
# vectors (bench/RESULTS.md, issue 26). ``agent`` copies the memory's (which never changes). The HNSW indexes of
# ``vector_indexes`` are built again on the partitioned table (one per partition), then the statistics taken: searches
# choose between the index and an exact scan by the row estimate.
_V5_VECTORS_BY_AGENT = f"""
CREATE TABLE vectors_by_agent (
    memory_id text NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    agent     text NOT NULL,
    model_id  text NOT NULL,
    dim       integer NOT NULL CHECK (dim > 0),
    embedding vector NOT NULL,
    PRIMARY KEY (memory_id, agent)
) PARTITION BY HASH (agent);
DO $$
BEGIN
    FOR i IN 0..{VECTOR_PARTITIONS - 1} LOOP
        EXECUTE format('CREATE TABLE vectors_p%s PARTITION OF vectors_by_agent '
                       'FOR VALUES WITH (MODULUS {VECTOR_PARTITIONS}, REMAINDER %s)', i, i);
    END LOOP;
END
$$;
INSERT INTO vectors_by_agent (memory_id, agent, model_id, dim, embedding)
    SELECT v.memory_id, m.agent, v.model_id, v.dim, v.embedding FROM vectors v JOIN memories m ON m.id = v.memory_id;
DROP TABLE vectors;
ALTER TABLE vectors_by_agent RENAME TO vectors;
ALTER TABLE vectors RENAME CONSTRAINT vectors_by_agent_pkey TO vectors_pkey;
CREATE INDEX vectors_model ON vectors (model_id, dim);
CREATE INDEX vectors_agent ON vectors (agent, model_id, dim);
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT model_id, dim, index_name FROM vector_indexes LOOP
        EXECUTE format('CREATE INDEX %I ON vectors USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
                       'WHERE model_id = %L AND dim = %s', r.index_name, r.dim, r.model_id, r.dim);
    END LOOP;
END
$$;
ANALYZE vectors;
"""

# New vectors land in a small table without a vector index, searched exactly beside the HNSW graphs, and one mover
# folds them into ``vectors`` in large batches (``_pg_staging``): a write no longer waits for HNSW inserts, and the
# graphs get one inserter at a time (bench/RESULTS.md, issue 26, third round of writes). A memory's vector is in one of
# the two tables. Rows come and go fast: autovacuum visits the table after every 2,000 dead rows, not a fifth of it.
_V6_STAGED_VECTORS = """
CREATE TABLE vectors_staged (
    seq       bigint GENERATED ALWAYS AS IDENTITY,
    memory_id text PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    agent     text NOT NULL,
    model_id  text NOT NULL,
    dim       integer NOT NULL CHECK (dim > 0),
    embedding vector NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
        autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000);
-- Every vector write checks the model's dimension (``_memories.write_vectors``): without it, a scan of the table.
CREATE INDEX vectors_staged_model ON vectors_staged (model_id, dim);
"""

# A search reads the reader's own staged rows (by ``agent``) and the others' it may see: ``open`` (the memory is not
# private, kept in step by the writes that change visibility) spares it testing every other agent's staged row. (Step 6
# was in main for a few minutes without these: IF NOT EXISTS brings either form of it here.)
_V7_STAGED_BY_AGENT = """
ALTER TABLE vectors_staged ADD COLUMN IF NOT EXISTS open boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS vectors_staged_agent ON vectors_staged (agent);
CREATE INDEX IF NOT EXISTS vectors_staged_open ON vectors_staged (agent) WHERE open;
UPDATE vectors_staged s SET open = true FROM memories m WHERE m.id = s.memory_id AND m.visibility <> 'private';
-- Never a parallel scan: a batch's near-duplicate lookups are 25 small scans of it in one statement, and a worker
-- started for each cost more than the scans (bench/RESULTS.md, issue 26, third round of writes).
ALTER TABLE vectors_staged SET (parallel_workers = 0);
"""

# The keyword channel ranks the reader's matches from a narrow copy of their keyword columns: ``memory_words`` holds
# what a search of an agent's own rows reads (rid, agent, kind, user, validity, ``tsv``), so its matches are read from
# small pages instead of the wide ``memories`` heap and its TOAST (100k store: 823-916 against 1,192 buffers and 6.1
# against 8.5 ms p50 for the same answers; bench/RESULTS.md, issue 26, sixth round). Triggers keep it in step within
# each writing statement, whichever path writes (INSERT, COPY, UPDATE, DELETE): inserts and deletes once per statement
# through transition tables, updates per row and only when a copied column is assigned. Its index keyed by agent
# replaces ``memories_agent_tsv`` (one GIN maintained per write, as before); without btree_gin, a GIN on the words.
_V8_MEMORY_WORDS = """
CREATE TABLE memory_words (
    rid         bigint PRIMARY KEY,
    agent       text NOT NULL,
    kind        text NOT NULL,
    user_id     text,
    valid_until text,
    tsv         tsvector
);
INSERT INTO memory_words (rid, agent, kind, user_id, valid_until, tsv)
    SELECT rid, agent, kind, user_id, valid_until, tsv FROM memories;
CREATE FUNCTION engram_memory_words_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_words (rid, agent, kind, user_id, valid_until, tsv)
        SELECT n.rid, n.agent, n.kind, n.user_id, n.valid_until, n.tsv FROM added n;
    RETURN NULL;
END
$$;
CREATE FUNCTION engram_memory_words_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_words w USING removed o WHERE w.rid = o.rid;
    RETURN NULL;
END
$$;
CREATE FUNCTION engram_memory_words_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_words SET agent = NEW.agent, kind = NEW.kind, user_id = NEW.user_id, valid_until = NEW.valid_until,
        tsv = NEW.tsv WHERE rid = NEW.rid;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_words_added AFTER INSERT ON memories REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION engram_memory_words_added();
CREATE TRIGGER memory_words_removed AFTER DELETE ON memories REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION engram_memory_words_removed();
CREATE TRIGGER memory_words_changed AFTER UPDATE OF agent, kind, content, tags, user_id, valid_until ON memories
    FOR EACH ROW EXECUTE FUNCTION engram_memory_words_changed();
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS btree_gin;
    CREATE INDEX memory_words_agent_tsv ON memory_words USING gin (agent, tsv);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'engramdb: memory_words keyed by its words alone (%)', SQLERRM;
    CREATE INDEX memory_words_tsv ON memory_words USING gin (tsv);
END
$$;
DROP INDEX IF EXISTS memories_agent_tsv;
ANALYZE memory_words;
"""

# The HNSW graphs over half-precision copies of the vectors (pgvector's ``halfvec``): an entry half the size, so the
# graphs of a 1M store (2.37 GB in full precision) fit the server's shared buffers, and a search reads half the pages
# for the same walk (one 20k partition of the 100k store: 23.4 against 41.0 MB, recall@10 against an exact scan
# 0.995 against 0.993, 1.46 against 1.88 ms; bench/RESULTS.md, issue 26, sixth and seventh rounds). Only the graph's
# order is half precision: a search reports each row's full distance, read from ``embedding``. Each model's graph
# keeps its name (``vector_indexes``); the full-precision one is dropped in the same step.
_V9_HALF_GRAPHS = """
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT model_id, dim, index_name FROM vector_indexes LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', r.index_name);
        EXECUTE format('CREATE INDEX %I ON vectors USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) '
                       'WHERE model_id = %L AND dim = %s', r.index_name, r.dim, r.model_id, r.dim);
    END LOOP;
END
$$;
"""

# An over-budget keyword search ranks the newest matches of its rarest term among the reader's own rows (``ORDER BY rid
# DESC LIMIT``). Without an index in that order per agent, the planner walked ``memory_words``' primary key backwards
# through every agent's rows, testing each against the words: for a common word at 1.26M memories 70-74k rows and
# 280-490 ms for one statement, the searches' slowest (bench/RESULTS.md, issue 26, seventh round). By (agent, rid) the
# walk reads the reader's rows only.
_V10_WORDS_NEWEST = """
CREATE INDEX IF NOT EXISTS memory_words_agent_rid ON memory_words (agent, rid);
ANALYZE memory_words;
"""

# The keyword channel ranks by BM25 (FTS5's form, as the embedded store does) from postings: ``memory_terms`` holds
# one row per (memory, lexeme) with the lexeme's count in it (``tf``) and the memory's length (``dl``, its lexemes'
# positions), keyed by (agent, lexeme, rid) with both counts in the index, so a reader's matches of a term are
# ranked from an index-only range scan instead of reading and ranking each matched row's ``tsv`` (bench/RESULTS.md,
# issue 26, eighth round). Other agents'
# public and shared rows (few) are ranked from their ``tsv`` by ``engram_bm25``, the same formula, summed in the
# query's lexeme order as the postings' statement sums them (so equal rows score equal to the bit). The triggers of
# step 8 keep the postings in step in the writing statement; an update rewrites a memory's postings only when its
# words or its agent changed. Frequent autovacuum keeps the new postings' pages all-visible (index-only scans).
_V11_MEMORY_TERMS = """
CREATE FUNCTION engram_doc_length(doc tsvector) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(x.positions, 1), 1)), 0)::integer FROM unnest(doc) x
$$;
CREATE FUNCTION engram_bm25_part(idf double precision, tf integer, dl integer, mean_length double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT idf * (tf::double precision * 2.2::double precision)
        / (tf::double precision + 1.2::double precision
           * (0.25::double precision + 0.75::double precision * dl::double precision / mean_length))
$$;
CREATE FUNCTION engram_bm25(doc tsvector, lexemes text[], idf double precision[], mean_length double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(engram_bm25_part(q.idf, coalesce(array_length(x.positions, 1), 1), d.dl, mean_length)
                        ORDER BY q.n), 0)
    FROM (SELECT engram_doc_length(doc) AS dl) d, unnest(doc) x
        JOIN unnest(lexemes, idf) WITH ORDINALITY AS q (lexeme, idf, n) ON q.lexeme = x.lexeme
$$;
CREATE TABLE memory_terms (
    agent  text NOT NULL,
    lexeme text NOT NULL,
    rid    bigint NOT NULL,
    tf     integer NOT NULL,
    dl     integer NOT NULL
) WITH (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.02);
INSERT INTO memory_terms (agent, lexeme, rid, tf, dl)
    SELECT w.agent, x.lexeme, w.rid, coalesce(array_length(x.positions, 1), 1), w.dl
    FROM (SELECT rid, agent, tsv, engram_doc_length(tsv) AS dl FROM memory_words OFFSET 0) w, unnest(w.tsv) x;
ALTER TABLE memory_terms ADD CONSTRAINT memory_terms_pkey PRIMARY KEY (agent, lexeme, rid) INCLUDE (tf, dl);
CREATE OR REPLACE FUNCTION engram_memory_words_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_words (rid, agent, kind, user_id, valid_until, tsv)
        SELECT n.rid, n.agent, n.kind, n.user_id, n.valid_until, n.tsv FROM added n;
    INSERT INTO memory_terms (agent, lexeme, rid, tf, dl)
        SELECT n.agent, x.lexeme, n.rid, coalesce(array_length(x.positions, 1), 1), n.dl
        FROM (SELECT a.rid, a.agent, a.tsv, engram_doc_length(a.tsv) AS dl FROM added a OFFSET 0) n, unnest(n.tsv) x;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION engram_memory_words_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_words w USING removed o WHERE w.rid = o.rid;
    DELETE FROM memory_terms t USING removed o, unnest(o.tsv) x
        WHERE t.agent = o.agent AND t.lexeme = x.lexeme AND t.rid = o.rid;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION engram_memory_words_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_words SET agent = NEW.agent, kind = NEW.kind, user_id = NEW.user_id, valid_until = NEW.valid_until,
        tsv = NEW.tsv WHERE rid = NEW.rid;
    IF NEW.tsv IS DISTINCT FROM OLD.tsv OR NEW.agent IS DISTINCT FROM OLD.agent THEN
        DELETE FROM memory_terms t USING unnest(OLD.tsv) x
            WHERE t.agent = OLD.agent AND t.lexeme = x.lexeme AND t.rid = OLD.rid;
        INSERT INTO memory_terms (agent, lexeme, rid, tf, dl)
            SELECT NEW.agent, x.lexeme, NEW.rid, coalesce(array_length(x.positions, 1), 1), engram_doc_length(NEW.tsv)
            FROM unnest(NEW.tsv) x;
    END IF;
    RETURN NULL;
END
$$;
ANALYZE memory_terms;
"""

# No search reads ``memory_words`` since step 11 (the reader's own matches come from the postings, the others' from
# the GIN index of ``memories``), yet every insert still copied its row and GIN entries there: the triggers now keep
# the postings alone and the table goes (bench/RESULTS.md, issue 26, writes, eighth round). An update rewrites a
# memory's postings only when its words or its agent changed: the trigger's condition now says so, so the other
# updates of those columns (kind, user, validity) queue no trigger call at all.
_V12_NO_WORD_COPY = """
DROP TRIGGER memory_words_added ON memories;
DROP TRIGGER memory_words_removed ON memories;
DROP TRIGGER memory_words_changed ON memories;
DROP FUNCTION engram_memory_words_added();
DROP FUNCTION engram_memory_words_removed();
DROP FUNCTION engram_memory_words_changed();
DROP TABLE memory_words;
CREATE FUNCTION engram_memory_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_terms (agent, lexeme, rid, tf, dl)
        SELECT n.agent, x.lexeme, n.rid, coalesce(array_length(x.positions, 1), 1), n.dl
        FROM (SELECT a.rid, a.agent, a.tsv, engram_doc_length(a.tsv) AS dl FROM added a OFFSET 0) n, unnest(n.tsv) x;
    RETURN NULL;
END
$$;
CREATE FUNCTION engram_memory_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_terms t USING removed o, unnest(o.tsv) x
        WHERE t.agent = o.agent AND t.lexeme = x.lexeme AND t.rid = o.rid;
    RETURN NULL;
END
$$;
CREATE FUNCTION engram_memory_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_terms t USING unnest(OLD.tsv) x
        WHERE t.agent = OLD.agent AND t.lexeme = x.lexeme AND t.rid = OLD.rid;
    INSERT INTO memory_terms (agent, lexeme, rid, tf, dl)
        SELECT NEW.agent, x.lexeme, NEW.rid, coalesce(array_length(x.positions, 1), 1), engram_doc_length(NEW.tsv)
        FROM unnest(NEW.tsv) x;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_terms_added AFTER INSERT ON memories REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION engram_memory_terms_added();
CREATE TRIGGER memory_terms_removed AFTER DELETE ON memories REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION engram_memory_terms_removed();
CREATE TRIGGER memory_terms_changed AFTER UPDATE OF agent, content, tags ON memories
    FOR EACH ROW WHEN (NEW.tsv IS DISTINCT FROM OLD.tsv OR NEW.agent IS DISTINCT FROM OLD.agent)
    EXECUTE FUNCTION engram_memory_terms_changed();
"""

#: Every schema step, in order. Append only.
MIGRATIONS: Final[tuple[PgMigration, ...]] = (
    PgMigration(version=1, description="memories, keyword index, vectors, history, shares, meta", script=_V1),
    PgMigration(version=2, description="hash-chained audit trail", script=_V2_AUDIT),
    PgMigration(version=3, description="user and session scopes, event time, validity", script=_V3_SCOPES),
    PgMigration(version=4, description="keyword index keyed by agent (btree_gin)", script=_V4_AGENT_WORDS),
    PgMigration(version=5, description="vectors partitioned by agent, an HNSW graph each", script=_V5_VECTORS_BY_AGENT),
    PgMigration(version=6, description="new vectors staged for a mover", script=_V6_STAGED_VECTORS),
    PgMigration(version=7, description="staged vectors by agent, open ones apart", script=_V7_STAGED_BY_AGENT),
    PgMigration(version=8, description="the keyword columns in a narrow table", script=_V8_MEMORY_WORDS),
    PgMigration(version=9, description="HNSW graphs in half precision", script=_V9_HALF_GRAPHS),
    PgMigration(version=10, description="keyword copies by agent, newest first", script=_V10_WORDS_NEWEST),
    PgMigration(version=11, description="keyword postings with term and row lengths (BM25)", script=_V11_MEMORY_TERMS),
    PgMigration(version=12, description="the keyword postings without the narrow copy", script=_V12_NO_WORD_COPY),
)

#: The schema version this code writes and understands.
SCHEMA_VERSION: Final = MIGRATIONS[-1].version


def _version(conn: psycopg.Connection[tuple[object, ...]]) -> int | None:
    """The store's schema version; None for a database without engramdb tables; NotAStoreError for a foreign one."""
    exists = conn.execute("SELECT to_regclass('engram_schema') IS NOT NULL").fetchone()
    if exists is not None and exists[0]:
        row = conn.execute("SELECT version, app FROM engram_schema").fetchone()
        if row is None or row[1] != "engramdb":
            raise NotAStoreError("the database holds an engram_schema table that engramdb did not write")
        return int(str(row[0]))
    for table in _OUR_TABLES:
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
        if found is not None and found[0]:
            raise NotAStoreError(
                f"the database already has a {table!r} table but is not an engramdb store; "
                "use another database or schema"
            )
    return None


@contextmanager
def _step_transaction(conn: psycopg.Connection[tuple[object, ...]]) -> Iterator[int]:
    """One transaction under the migration lock, yielding the version read inside it (0: none yet)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_MIGRATE,))
        yield _version(conn) or 0


def _apply(conn: psycopg.Connection[tuple[object, ...]], step: PgMigration, version: int) -> None:
    conn.execute(step.script)
    if version == 0:
        conn.execute(
            "CREATE TABLE engram_schema (app text NOT NULL, version integer NOT NULL);"
            "INSERT INTO engram_schema (app, version) VALUES ('engramdb', 0)"
        )
    conn.execute("UPDATE engram_schema SET version = %s", (step.version,))


def migrate(conn: psycopg.Connection[tuple[object, ...]], *, location: str) -> int:
    """Create the ``vector`` extension if needed and bring the schema up to date; return the version.

    ``conn`` must be in autocommit mode. Raises SchemaVersionError for a newer store and
    NotAStoreError for a database holding someone else's tables of the same names.
    """
    import psycopg

    with conn.transaction():
        current = _version(conn)
    if current is not None:
        check_not_newer(current, SCHEMA_VERSION, location)
        if current == SCHEMA_VERSION:
            return current
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_MIGRATE,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StorageError(
            f"{location}: the pgvector extension is not enabled in this database and this user may not "
            "enable it; ask an administrator to run CREATE EXTENSION vector"
        ) from exc
    except psycopg.errors.FeatureNotSupported as exc:
        raise StorageError(f"{location}: the pgvector extension is not installed on the server ({exc})") from exc
    except psycopg.errors.UndefinedFile as exc:
        raise StorageError(f"{location}: the pgvector extension is not installed on the server ({exc})") from exc
    return run_steps(
        MIGRATIONS,
        version=current or 0,
        location=location,
        step_transaction=lambda: _step_transaction(conn),
        apply=lambda step, version: _apply(conn, step, version),
    )

"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temp dir, on a free loopback port.

Started once per test session (lazily, by the first test that needs it) and stopped at
the end. Trust authentication, ``fsync=off``: a test server, never a real one. The
server refuses to run as root, so as root it runs as the ``postgres`` user. Each test
gets its own fresh database (:meth:`PgServer.new_database`).

When the binaries, pgvector or psycopg are missing, :func:`unavailable` says why and
the postgres tests are skipped with that reason, except in CI (``CI=true``), where they
fail instead: a broken install must not pass silently.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hypothesis import strategies as st

import server_helpers
from engramdb.storage.base import Filter, Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import psycopg

    from engramdb.models import Memory

_PG_ROOTS = (Path("/usr/lib/postgresql"), Path("/usr/local/pgsql"))


def _bin_dir() -> Path | None:
    """The directory of ``initdb``/``pg_ctl``: Debian's newest versioned one, else $PATH."""
    for root in _PG_ROOTS:
        if root.is_dir():
            versions = sorted((p for p in root.iterdir() if (p / "bin" / "initdb").exists()), key=lambda p: p.name)
            if versions:
                return versions[-1] / "bin"
            if (root / "bin" / "initdb").exists():
                return root / "bin"
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _sharedir(bin_dir: Path) -> Path | None:
    pg_config = bin_dir / "pg_config"
    if not pg_config.exists():
        return None
    out = subprocess.run([str(pg_config), "--sharedir"], capture_output=True, text=True, check=False)
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def unavailable() -> str | None:
    """Why a PostgreSQL test server cannot run here, or None if it can."""
    for module in ("psycopg", "psycopg_pool", "pgvector"):
        if importlib.util.find_spec(module) is None:
            return f"python package {module!r} is missing (pip install 'engramdb[postgres]')"
    bin_dir = _bin_dir()
    if bin_dir is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found; run .ci/install-postgres.sh"
    share = _sharedir(bin_dir)
    if share is not None and not (share / "extension" / "vector.control").exists():
        return f"the pgvector extension is not installed in {share}/extension; run .ci/install-postgres.sh"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
    return None


def skip_or_fail(reason: str) -> NoReturn:
    """Skip with ``reason`` locally; fail in CI so a broken install cannot pass silently."""
    server_helpers.skip_or_fail(
        reason, required="postgres backend required in CI", unavailable="postgres backend unavailable"
    )


@dataclass
class PgServer:
    """A running test server."""

    bin_dir: Path
    root: Path
    port: int
    user: str | None  # the OS user the server runs as (None: the current one)
    superuser: str = "postgres"

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)

    @classmethod
    def start(cls) -> PgServer:
        reason = unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        bin_dir = _bin_dir()
        assert bin_dir is not None
        root = Path(tempfile.mkdtemp(prefix="engram-pg-"))
        user = "postgres" if os.geteuid() == 0 else None
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        server = cls(bin_dir=bin_dir, root=root, port=server_helpers.free_port(), user=user)
        init = server._run("initdb", "-D", str(server.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        options = (
            f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        started = server._run("pg_ctl", "-D", str(server.data), "-l", str(root / "log"), "-o", options, "-w", "start")
        if started.returncode != 0:
            log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {log[-2000:]}")
        return server

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


#: The session's server (see tests/storage/conftest.py).
SERVER: server_helpers.LazyServer[PgServer] = server_helpers.LazyServer(PgServer.start, on_failure=skip_or_fail)


def fold_staged(url: str, *, timeout: float = 60.0) -> None:
    """Fold every staged vector of the store at ``url`` into ``vectors`` (schema step 6), here or by a store's mover
    thread that holds the turn: returns once none is staged."""
    import time

    import psycopg

    from engramdb.storage._pg_staging import move_batch, staged_rows

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while staged_rows(conn):
            if move_batch(conn) is None:
                time.sleep(0.02)  # another mover's batch: it commits soon
            if time.monotonic() > deadline:
                raise AssertionError(f"vectors still staged after {timeout} s")


class Read:
    """Another session's statement at work on the server for ``seconds`` (a ``pg_sleep``), in a thread, until
    :meth:`end` cancels it. ``text`` begins the statement (a marker the store's own checks look for);
    ``after_write``: the sleep runs in a transaction that has written a row (a writer, not a read)."""

    def __init__(self, url: str, seconds: float, *, text: str = "", after_write: bool = False) -> None:
        import threading

        import psycopg

        self._conn = psycopg.connect(url, autocommit=not after_write)
        if after_write:
            self._conn.execute("UPDATE meta SET value = value WHERE key = (SELECT min(key) FROM meta)")
        self._thread = threading.Thread(target=self._sleep, args=(seconds, text))
        self._thread.start()

    def _sleep(self, seconds: float, text: str) -> None:
        import psycopg

        with contextlib.suppress(psycopg.errors.QueryCanceled):  # ended by end()
            self._conn.execute(f"{text}SELECT pg_sleep(%s)", (seconds,))

    def __enter__(self) -> Read:
        return self

    def end(self, timeout: float = 60.0) -> None:
        if not self._conn.closed:
            self._conn.cancel()
            self._thread.join(timeout)
            self._conn.close()

    def __exit__(self, *exc: object) -> None:
        self.end()


def schema_at(conn: psycopg.Connection[Any], step: int) -> None:
    """Bring the empty database of ``conn`` (autocommit) to schema ``step`` exactly, as that release left it."""
    from engramdb.storage import _pg_schema
    from engramdb.storage._migrations import run_steps

    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    run_steps(
        _pg_schema.MIGRATIONS[:step],
        version=0,
        location="old",
        step_transaction=lambda: _pg_schema._step_transaction(conn),
        apply=lambda step, version: _pg_schema._apply(conn, step, version),
    )


def old_store(
    url: str,
    *,
    step: int,
    memories: Sequence[Memory],
    vectors: npt.NDArray[np.float32],
    model: str,
    staged: bool = False,
) -> None:
    """A store at schema ``step`` holding ``memories`` and their ``vectors`` (of ``model``), written as that release
    wrote them: the vectors in ``vectors`` under the model's HNSW graph, or with ``staged`` (steps 6 and on) in
    ``vectors_staged``, waiting for the mover. ``vectors`` and ``vectors_staged`` carry the agent from step 5 on."""
    import hashlib

    import psycopg
    from pgvector.psycopg import register_vector

    table = "vectors_staged" if staged else "vectors"
    dim = int(vectors.shape[1])
    with psycopg.connect(url, autocommit=True) as conn:
        schema_at(conn, step)
        register_vector(conn)
        for m, v in zip(memories, vectors, strict=True):
            created = m.created_at.isoformat(timespec="microseconds")
            conn.execute(
                "INSERT INTO memories (id, agent, kind, content, created_at, updated_at, occurred_at, visibility) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (m.id, m.agent, m.kind, m.content, created, created, created, m.visibility),
            )
            if step >= 5:
                conn.execute(
                    f"INSERT INTO {table} (memory_id, agent, model_id, dim, embedding) VALUES (%s, %s, %s, %s, %s)",
                    (m.id, m.agent, model, dim, v),
                )
            else:
                conn.execute(
                    f"INSERT INTO {table} (memory_id, model_id, dim, embedding) VALUES (%s, %s, %s, %s)",
                    (m.id, model, dim, v),
                )
        if not staged:
            name = "vectors_hnsw_" + hashlib.sha256(f"{model}\x00{dim}".encode()).hexdigest()[:16]
            conn.execute(
                f"CREATE INDEX {name} ON vectors USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
                f"WHERE model_id = '{model}' AND dim = {dim}"
            )
            conn.execute(
                "INSERT INTO vector_indexes (model_id, dim, index_name) VALUES (%s, %s, %s)", (model, dim, name)
            )
        conn.execute("INSERT INTO meta (key, value) VALUES ('model_id', %s)", (model,))


@contextmanager
def graph_and_exact(
    url: str, memories: Sequence[Memory], *, seed: int, shares: Sequence[tuple[Sequence[str], str, str]]
) -> Iterator[tuple[Any, Any]]:
    """``memories`` stored with seeded vectors and ``shares`` ((ids, from agent, to agent), a day apart), the
    statistics analysed, then the store opened twice: searching its HNSW graphs, and scanning exactly."""
    import psycopg
    from storage_helpers import MODEL, NOW, unit_vectors

    from engramdb.storage.postgres import open_postgres

    with open_postgres(url) as store:
        store.memories.add(memories, unit_vectors(len(memories), seed=seed), model_id=MODEL, actor="t")
        for day, (ids, owner, reader) in enumerate(shares, start=1):
            store.shares.share(list(ids), from_agent=owner, to_agent=reader, at=NOW + timedelta(days=day))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    with open_postgres(url, exact_search_below=0) as index, open_postgres(url, exact_search_below=10**9) as exact:
        yield index, exact


#: Filters over the agents, kinds and users of the mixed stores (test_pg_search_plans, test_pg_carried_rows).
FILTERS = st.builds(
    Filter,
    agent=st.sampled_from(("agent-0", "agent-1", "agent-2", None)),
    kinds=st.sampled_from((None, ("knowledge",), ("conversation", "knowledge"))),
    include_shared=st.booleans(),
    users=st.sampled_from((None, (None,), (None, "user-1"))),
)


def count(url: str, sql: str) -> int:
    """The one number ``sql`` answers on the store at ``url`` (a drift check's count)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


#: Hypothesis' writes after a first batch (test_pg_memory_terms): (which memory, what).
EDITS = st.lists(st.tuples(st.integers(0, 23), st.sampled_from(("edit", "supersede", "forget", "kind"))), max_size=8)


def apply_edits(store: Store, ms: Sequence[Memory], edits: Sequence[tuple[int, str]], *, edit: Any) -> None:
    """Make ``edits`` (from :data:`EDITS`) to ``ms`` in ``store``, a day after NOW, then touch every memory left:
    each write path a derived table must follow. ``edit(n)``: the changes of the ``n``-th edit."""
    from storage_helpers import MODEL, NOW

    gone: set[str] = set()
    for n, (i, what) in enumerate(edits):
        target = ms[i % len(ms)]
        if target.id in gone:
            continue
        at = NOW + timedelta(days=1, seconds=n)
        if what == "forget":
            store.memories.delete(target.id, actor="t", at=at)
            gone.add(target.id)
            continue
        changes = {"edit": edit(n), "supersede": {"valid_until": at}, "kind": {"kind": "episode"}}[what]
        store.memories.update(target.id, changes, vector=None, model_id=MODEL, actor="t", at=at)
    store.memories.touch([m.id for m in ms if m.id not in gone], at=NOW + timedelta(days=2))


# The postings against each memory's own words: rows of either side without the other, or whose counts differ.
POSTINGS_DRIFT = (
    "SELECT count(*) FROM memory_terms t FULL JOIN (SELECT m.agent, x.lexeme, m.rid, "
    "coalesce(array_length(x.positions, 1), 1) AS tf, engram_doc_length(m.tsv) AS dl "
    "FROM memories m, unnest(m.tsv) x) d "
    "ON (d.agent, d.lexeme, d.rid) = (t.agent, t.lexeme, t.rid) "
    "WHERE t.rid IS NULL OR d.rid IS NULL OR (t.tf, t.dl) IS DISTINCT FROM (d.tf, d.dl)"
)


def written_on(store: Store, url: str, ms: Sequence[Memory]) -> None:
    """A migrated store keeps answering and writing: agent ``a1``'s "harbor" matches are the memories of ``ms``
    written before the migration (built as ``f"{WORDS[i % 6]} ... {i}"`` by agent ``a{i % 3}``, "harbor" fifth), a
    memory written after it is found beside them, and the postings stay in step with the words throughout."""
    from storage_helpers import MODEL, memory

    assert count(url, POSTINGS_DRIFT) == 0
    old = {c.id for c in store.search.keyword_candidates(["harbor"], Filter(agent="a1"), limit=50)}
    assert old == {m.id for i, m in enumerate(ms) if i % 6 == 4 and i % 3 == 1}
    new = memory("harbor written after the step", agent="a1")
    store.memories.add([new], None, model_id=MODEL, actor="t")
    found = store.search.keyword_candidates(["harbor"], Filter(agent="a1"), limit=50)
    assert {c.id for c in found} == old | {new.id}
    assert count(url, POSTINGS_DRIFT) == 0


def bm25_reference(store: Store, url: str, terms: list[str], flt: Filter, limit: int) -> list[tuple[str, float]]:
    """The top ``limit`` (id, score) by BM25 as FTS5 computes it, in Python over the visible rows' ``tsv``, with the
    store's own sample (document counts, rows, mean length) and stems."""
    import psycopg

    from engramdb.storage._pg_keywords import bm25_query
    from engramdb.storage._pg_sql import filter_sql
    from engramdb.storage.postgres import PgSearch

    search = store.search
    assert isinstance(search, PgSearch)
    with search._backend.reading() as conn:  # type: ignore[attr-defined]
        query = bm25_query(terms, search._terms.lexemes_of(conn, terms), sample=search.lexemes.last)
    if query is None:
        return []
    f = filter_sql(flt)
    words: dict[tuple[int, str], dict[str, int]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        sql = (
            "SELECT m.rid, m.id, x.lexeme, coalesce(array_length(x.positions, 1), 1) FROM memories m, unnest(m.tsv) x "
            f"WHERE {f.where.replace('?', '%s')}"
        )
        for rid, memory_id, lexeme, tf in conn.execute(sql, f.params).fetchall():
            words.setdefault((int(rid), str(memory_id)), {})[str(lexeme)] = int(tf)
    scored = []
    for (rid, memory_id), counts in words.items():
        if not any(x in counts for x in query.lexemes):
            continue
        dl = float(sum(counts.values()))
        mean = query.mean_length if query.mean_length is not None else dl
        score: float | None = None
        for lexeme, idf in zip(query.lexemes, query.idf, strict=True):
            if lexeme in counts:
                tf = float(counts[lexeme])
                part = idf * (tf * 2.2) / (tf + 1.2 * (0.25 + 0.75 * dl / mean))
                score = part if score is None else score + part
        assert score is not None
        scored.append((-score, rid, memory_id))
    return [(memory_id, -neg) for neg, _, memory_id in sorted(scored)[:limit]]

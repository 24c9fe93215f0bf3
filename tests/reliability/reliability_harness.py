"""Kill and concurrency harness shared by ``tests/reliability`` and ``bench/reliability.py``.

A *worker* is a child process that opens a store through the public API and repeats one kind
of write forever, appending each acknowledged write (after the call returned) to a ledger
file. The parent SIGKILLs it at a random moment, reopens the store and checks: every
acknowledged write is there, and :class:`engramdb.services.doctor.Doctor` finds the store healthy
(integrity, keyword index, vectors, audit chain, and every change with its audit entry,
which proves each write and its audit entry commit in one transaction).

Run as a script: ``python reliability_harness.py worker STORE KIND LEDGER WORKDIR`` or
``python reliability_harness.py writer STORE AGENT COUNT``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from engramdb import Engram
from engramdb.errors import NotFound
from engramdb.models import RetentionPolicy, RetentionRule
from engramdb.services.doctor import Doctor
from engramdb.storage.base import Filter

#: Every kind of write the kill test covers.
KINDS: Final = ("remember", "remember_many", "update", "forget", "share", "import", "cleanup")
_WORDS: Final = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
    "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
    "xray", "yankee", "zulu", "deploy", "cache", "index", "vector", "audit",
)  # fmt: skip
_POOL: Final = 600  # seeded memories for update / forget / share
_FILES: Final = 120  # knowledge files for import
_BATCH: Final = 4
_POLICY: Final = RetentionPolicy(rules={"knowledge": RetentionRule(max_count=6)})


class HashEmbedder:
    """A fast deterministic embedder (hashed words): no model to load in every child process."""

    model_id = "reliability-hash-64"
    dim = 64

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % self.dim] += 1.0
            out[row, row % self.dim if not text.split() else 0] += 1e-3
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def open_mem(store: str | Path) -> Engram:
    """The store through the public API, with the hash embedder and no retention schedule."""
    return Engram(str(store), embedder=HashEmbedder())


def sentence(rng: random.Random, *head: object) -> str:
    return " ".join([*map(str, head), *rng.choices(_WORDS, k=12), f"n{rng.getrandbits(48):x}"])


# -- seeding (parent) -----------------------------------------------------------------------------------
def prepare(store: Path, kind: str, workdir: Path, *, files: int = _FILES, pool: int = _POOL) -> None:
    """Seed what ``kind``'s worker needs (``pool`` memories, ``files`` knowledge files), before any kill."""
    rng = random.Random(kind)
    workdir.mkdir(parents=True, exist_ok=True)
    with open_mem(store) as mem:
        mem.remember("seed memory before any kill", agent="seed")
        if kind in ("update", "forget", "share"):
            made = mem.remember_many([{"content": sentence(rng, "pool", i), "agent": "w"} for i in range(pool)])
            (workdir / "pool.json").write_text(json.dumps([m.id for m in made]))
    if kind == "import":
        with open_mem(workdir / "source") as src:
            for i in range(files):
                src.remember_many(
                    [{"content": sentence(rng, "file", i, j), "agent": "src", "tags": [f"f{i}"]} for j in range(3)]
                )
                src.knowledge.export_file(workdir / f"k{i}.jsonl", agent="src", tag=f"f{i}")


# -- the worker (child) ---------------------------------------------------------------------------------
def _append(ledger: int, record: dict[str, Any]) -> None:
    os.write(ledger, (json.dumps(record) + "\n").encode())


def worker(store: str, kind: str, ledger_path: str, workdir: str) -> None:
    """Repeat ``kind`` writes until killed (or out of work), logging each acknowledged one."""
    rng = random.Random(os.getpid())
    ledger = os.open(ledger_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    done = _done(Path(ledger_path))
    pool = json.loads((Path(workdir) / "pool.json").read_text()) if kind in ("update", "forget", "share") else []
    with open_mem(store) as mem:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        # Update versions continue from the highest acknowledged one: a restarted worker that counted
        # from zero would write versions lower than those already acknowledged for the same ids.
        versions = [r["version"] for r in read_ledger(Path(ledger_path)) if "version" in r]
        n = max(versions, default=0) if kind == "update" else len(done)
        while True:
            n += 1
            if kind == "remember":
                m = mem.remember(sentence(rng, "one", n), agent="w")
                _append(ledger, {"ids": [m.id]})
            elif kind == "remember_many":
                made = mem.remember_many(
                    [{"content": sentence(rng, "many", n, j), "agent": "w"} for j in range(_BATCH)]
                )
                _append(ledger, {"ids": [m.id for m in made]})
            elif kind == "update":
                memory_id = pool[n % len(pool)]
                mem.update(memory_id, content=sentence(rng, f"v{n}"))
                _append(ledger, {"id": memory_id, "version": n})
            elif kind in ("forget", "share"):
                todo = [i for i in pool if i not in done]
                if not todo:
                    return
                memory_id = todo[0]
                if kind == "forget":
                    try:
                        mem.forget(memory_id)
                    except NotFound:  # forgotten by a worker killed before it could log it
                        done.add(memory_id)
                        continue
                else:
                    mem.sharing.share([memory_id], from_agent="w", to_agent="b")
                done.add(memory_id)
                _append(ledger, {"id": memory_id})
            elif kind == "import":
                todo = [i for i in range(len(list(Path(workdir).glob("k*.jsonl")))) if str(i) not in done]
                if not todo:
                    return
                path = Path(workdir) / f"k{todo[0]}.jsonl"
                mem.knowledge.import_file(path, agent="w")
                done.add(str(todo[0]))
                _append(ledger, {"id": str(todo[0]), "file": str(path)})
            elif kind == "cleanup":
                made = mem.remember_many([{"content": sentence(rng, "keep", n, j), "agent": "w"} for j in range(3)])
                _append(ledger, {"ids": [m.id for m in made]})
                report = mem.retention.cleanup(policy=_POLICY, agent="w")
                _append(ledger, {"forgotten": [e.memory_id for e in report.forgotten]})
            else:
                raise SystemExit(f"unknown kind {kind!r}")


def _done(ledger: Path) -> set[str]:
    """Ids (or file numbers) of forget/share/import writes acknowledged by earlier workers."""
    return {r["id"] for r in read_ledger(ledger) if "id" in r and "version" not in r}


def read_ledger(ledger: Path) -> list[dict[str, Any]]:
    """The acknowledged writes (a line cut short by a kill is ignored)."""
    if not ledger.exists():
        return []
    out = []
    for line in ledger.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


# -- one kill (parent) ----------------------------------------------------------------------------------
@dataclass
class KillResult:
    """What one kill-and-reopen cycle found."""

    acked: int
    lost: list[str] = field(default_factory=list)
    unhealthy: list[str] = field(default_factory=list)
    finished: bool = False  # the worker ran out of work before the kill

    @property
    def ok(self) -> bool:
        return not self.lost and not self.unhealthy


def kill_once(
    store: Path,
    kind: str,
    workdir: Path,
    *,
    rng: random.Random,
    max_delay: float = 0.6,
    after_ack: bool = False,
) -> KillResult:
    """Start a worker, SIGKILL it after a random delay once it is writing, then reopen and check.

    The delay counts from the worker's "ready", or with ``after_ack`` from its first acknowledged write of this
    run: a worker's first write pays for lazy imports and cold caches (0.3-0.5 s for an import at load 7, more
    under heavier load), so a delay from "ready" alone may kill every run before any write is acknowledged.
    """
    ledger = workdir / "ledger.jsonl"
    before = len(read_ledger(ledger))
    child = subprocess.Popen(
        [sys.executable, __file__, "worker", str(store), kind, str(ledger), str(workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    finished = False
    if line.strip() == b"ready":
        if after_ack:
            _wait_for_ack(child, ledger, before)
        time.sleep(rng.uniform(0.02, max_delay))
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        else:
            finished = True
    _, err = child.communicate(timeout=60)
    if child.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"worker {kind} failed ({child.returncode}): {err.decode(errors='replace')[-2000:]}")
    result = verify(store, kind, ledger)
    result.finished = finished or child.returncode == 0
    return result


def _wait_for_ack(child: subprocess.Popen[bytes], ledger: Path, before: int, *, timeout: float = 120.0) -> None:
    """Until the ledger holds more than ``before`` writes (or the worker ran out of work and exited)."""
    deadline = time.monotonic() + timeout
    while len(read_ledger(ledger)) <= before and child.poll() is None:
        if time.monotonic() > deadline:
            child.kill()
            raise RuntimeError(f"the worker acknowledged no write in {timeout:.0f} s")
        time.sleep(0.005)


def verify(store: Path, kind: str, ledger: Path) -> KillResult:
    """Reopen the store: every acknowledged write present, and the doctor finds it healthy."""
    records = read_ledger(ledger)
    lost: list[str] = []
    with open_mem(store) as mem:
        memories = mem.store.memories

        def present(memory_id: str) -> bool:
            return memories.get(memory_id) is not None

        def forgotten(memory_id: str) -> bool:
            return memories.get(memory_id) is None and any(c.action == "forget" for c in memories.history(memory_id))

        if kind in ("remember", "remember_many"):
            lost = [i for r in records for i in r["ids"] if not present(i)]
        elif kind == "update":
            latest: dict[str, int] = {}
            for r in records:
                latest[r["id"]] = max(latest.get(r["id"], 0), r["version"])
            for memory_id, version in latest.items():
                m = memories.get(memory_id)
                stored = int(m.content.split()[0][1:]) if m is not None and m.content.startswith("v") else -1
                if stored < version:
                    lost.append(f"{memory_id}: version {stored} < acknowledged {version}")
        elif kind == "forget":
            lost = [r["id"] for r in records if not forgotten(r["id"])]
        elif kind == "share":
            shared = {s.memory_id for s in mem.sharing.list(from_agent="w") if s.to_agent == "b"}
            lost = [r["id"] for r in records if r["id"] not in shared]
        elif kind == "import":
            for r in records:
                for line in Path(r["file"]).read_text().splitlines():
                    entry = json.loads(line)
                    memory_id = entry.get("memory", entry).get("id") if isinstance(entry, dict) else None
                    if (
                        isinstance(memory_id, str)
                        and entry.get("type", "memory") == "memory"
                        and not present(memory_id)
                    ):
                        lost.append(memory_id)
        elif kind == "cleanup":
            gone = {i for r in records for i in r.get("forgotten", ())}
            lost = [i for i in gone if present(i)]
            lost += [
                i for r in records for i in r.get("ids", ()) if i not in gone and not present(i) and not forgotten(i)
            ]
        report = Doctor(mem.store, mem.embedder, mem.settings).run()
        unhealthy = [f"{c.name}: {c.detail}" for c in report.failed]
        acked = sum(len(r.get("ids", ())) or 1 for r in records)
    return KillResult(acked=acked, lost=lost, unhealthy=unhealthy)


# -- concurrent writers ---------------------------------------------------------------------------------
def writer(store: str, agent: str, count: int) -> None:
    """Remember ``count`` memories one by one (and search between them); print the number of errors."""
    rng = random.Random(agent)
    errors = 0
    with open_mem(store) as mem:
        for n in range(count):
            try:
                mem.remember(sentence(rng, agent, n), agent=agent, force=True)
                if n % 5 == 0:
                    mem.search(sentence(rng, "query"), agent=agent, limit=5)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the point of the test
                errors += 1
                sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
    sys.stdout.write(f"{errors}\n")


def run_writers(store: Path, *, processes: int, count: int) -> tuple[int, int, float]:
    """``processes`` writers at once on one store; (errors, memories stored by them, seconds)."""
    with open_mem(store) as mem:
        mem.remember("store created before the writers start", agent="seed")
    started = time.perf_counter()
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "writer", str(store), f"writer{p}", str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in range(processes)
    ]
    errors = 0
    for child in children:
        out, err = child.communicate(timeout=300)
        if child.returncode != 0:
            raise RuntimeError(f"writer failed ({child.returncode}): {err.decode(errors='replace')[-2000:]}")
        errors += int(out.decode().strip() or "0")
    seconds = time.perf_counter() - started
    with open_mem(store) as mem:
        stored = sum(mem.store.memories.count(Filter(agent=f"writer{p}")) for p in range(processes))
    return errors, stored, seconds


def doctor_failures(store: Path) -> list[str]:
    """The failed checks of the store (empty: healthy)."""
    with open_mem(store) as mem:
        return [f"{c.name}: {c.detail}" for c in Doctor(mem.store, mem.embedder, mem.settings).run().failed]


def missing_ids(store: Path, ids: Sequence[str]) -> list[str]:
    """Which of ``ids`` are not in the store."""
    with open_mem(store) as mem:
        out = []
        for i in ids:
            try:
                mem.get(i)
            except NotFound:
                out.append(i)
        return out


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "worker":
        worker(*args)
    elif command == "writer":
        writer(args[0], args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown command {command!r}")


# -- a real full disk ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[bool]:
    """Mount a tmpfs of ``size`` on ``directory``; yields False (nothing mounted) without the privilege."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(directory)], check=False)


def fill_disk(directory: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb") as fh:
        while True:
            try:
                fh.write(chunk)
                fh.flush()
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return filler

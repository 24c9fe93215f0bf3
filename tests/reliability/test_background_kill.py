"""SIGKILL with vectors still queued (``vectors = "background"``): no acknowledged memory is lost.

A child process remembers N memories in background mode with its vector worker held back
(the real model behind a gate only the worker waits at), reports the acknowledged ids and is
SIGKILLed. The store then holds N memories and no vector for them; reopened, all N are there
and keyword-searchable at once, and after ``flush()`` every one has its vector and is found
by meaning. Run as a script, this file is the child: ``python test_background_kill.py STORE N``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.base import Embedder
from engramdb.storage import open_store

#: (what is remembered, a query that shares no word with it).
FACTS = (
    ("Melanie signed up for a pottery class on Thursdays", "ceramics course"),
    ("Caroline adopted a greyhound called Biscuit", "new dog"),
    ("John bought a secondhand sailboat last summer", "yacht purchase"),
    ("the team moved its standup to nine thirty", "daily meeting time changed"),
    ("Gina is training for the Berlin marathon", "long distance running race"),
)
N = 40


class HeldWorker:
    """The real model; the background vector worker's calls never return (it is killed first)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if threading.current_thread().name == "engramdb-vectors":
            threading.Event().wait()
        return self.inner.embed(texts)


def texts() -> list[str]:
    return [f"{FACTS[i % len(FACTS)][0]} (ticket qx{i:03d})" for i in range(N)]


def child(store: str) -> None:
    """Remember N memories, one call each, print each acknowledged id, then wait to be killed."""
    embedder = HeldWorker(make_embedder(load_settings({})))
    mem = Engram(store, embedder=embedder, vectors="background")
    for text in texts():
        memory = mem.remember(text, agent="talker", kind="conversation")
        sys.stdout.write(json.dumps({"id": memory.id}) + "\n")
        sys.stdout.flush()
    sys.stdout.write("done\n")
    sys.stdout.flush()
    threading.Event().wait()


def test_sigkill_with_queued_vectors_loses_nothing_and_the_vectors_follow_on_reopen(
    tmp_path: Path, embedder: Embedder
) -> None:
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, __file__, str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    acked: list[str] = []
    for line in proc.stdout:
        if line.strip() == "done":
            break
        acked.append(json.loads(line)["id"])
    os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    assert len(acked) == N

    plain = open_store(str(store), settings=load_settings({}))
    try:
        assert plain.vectors.count_stale(embedder.model_id) == N  # every vector was still queued
        with Engram(store, embedder=embedder) as mem:
            assert sorted(m.id for m in mem.list(agent="talker", limit=100)) == sorted(acked)
            # Keyword-searchable at once (the rebuild of the vectors runs in the background).
            # (Ranks mix in vectors already rebuilt for other memories: membership and a keyword match count.)
            for i in range(N):
                hits = {h.memory.id: h for h in mem.search(f"qx{i:03d}", agent="talker", limit=10)}
                assert hits[acked[i]].keyword_score is not None
            assert mem.flush() is True
            assert plain.vectors.count_stale(embedder.model_id) == 0
            for fact, query in FACTS:
                top = mem.search(query, agent="talker", limit=5)
                assert [h.memory.content.startswith(fact) for h in top] == [True] * 5, query
            assert mem.doctor().ok
    finally:
        plain.close()


if __name__ == "__main__":
    child(sys.argv[1])

"""Helpers for the storage tests: memories and seeded random unit vectors (no embedding model needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from engramdb._util import new_id
from engramdb.config import Settings
from engramdb.models import Memory
from engramdb.storage import open_store
from engramdb.storage.base import Store

NOW = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
DIM = 16
MODEL = "test-model"


def memory(
    content: str,
    *,
    agent: str = "alice",
    kind: str = "knowledge",
    tags: Sequence[str] = (),
    id: str | None = None,  # noqa: A002 - mirrors Memory.id
    at: datetime | None = None,
    **fields: Any,
) -> Memory:
    """A new memory with sensible defaults; ``at`` sets created_at and updated_at."""
    at = at or NOW
    return Memory(
        id=id or new_id(),
        agent=agent,
        kind=kind,
        content=content,
        tags=tuple(tags),
        created_at=at,
        updated_at=at,
        **fields,
    )


def unit_vectors(n: int, *, dim: int = DIM, seed: int = 0) -> npt.NDArray[np.float32]:
    """``n`` random unit vectors (seeded, so tests are repeatable)."""
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def add(store: Store, memories: Sequence[Memory], *, seed: int = 0, model_id: str = MODEL) -> npt.NDArray[np.float32]:
    """Add memories with random vectors; returns the vectors, row for row."""
    vecs = unit_vectors(len(memories), seed=seed)
    store.memories.add(memories, vecs, model_id=model_id, actor="test")
    return vecs


def later(seconds: float) -> datetime:
    """A time ``seconds`` after :data:`NOW`."""
    return NOW + timedelta(seconds=seconds)


def write_many(location: str, agent: str, count: int, batch: int, go: EventLike) -> None:
    """Process entry point: add ``count`` memories of ``agent`` in small transactions, with vectors.

    Opens the store, waits for ``go``, then writes. Memory ``i`` has id ``f"{agent}-{i}"``
    and the vector ``unit_vectors(count, seed=seed_of(agent))[i]``.
    """
    from engramdb.storage.sqlite import open_sqlite

    vecs = unit_vectors(count, seed=seed_of(agent))
    with open_sqlite(location) as store:
        if not go.wait(timeout=120):
            raise TimeoutError("never told to start")
        for start in range(0, count, batch):
            stop = min(count, start + batch)
            items = [memory(f"note {i} from {agent}", agent=agent, id=f"{agent}-{i}") for i in range(start, stop)]
            store.memories.add(items, vecs[start:stop], model_id=MODEL, actor=agent)


class EventLike(Protocol):
    """What the writer process needs of a multiprocessing Event."""

    def wait(self, timeout: float | None = None) -> bool: ...


def seed_of(agent: str) -> int:
    """A stable per-agent seed (str hash is salted per process)."""
    return sum(agent.encode()) + 1000


@dataclass
class StoreFactory:
    """Opens stores on one location (several at once, or again after closing)."""

    backend: str
    location: str
    settings: Settings
    opened: list[Store] = field(default_factory=list)

    def open(self) -> Store:
        """A new store instance on the location."""
        store = open_store(self.location, settings=self.settings)
        self.opened.append(store)
        return store

    def close_all(self) -> None:
        """Close every store this factory opened."""
        for store in self.opened:
            store.close()

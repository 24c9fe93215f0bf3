"""The facade's areas are built at first use, once per instance, whichever thread reads them first."""

from __future__ import annotations

import threading
from pathlib import Path

from engramdb import Engram
from engramdb._areas import Areas, built_once
from engramdb._lazy import numpy as lazy_numpy
from engramdb.embeddings.base import Embedder

AREAS = ("learning", "failures", "episodes", "code", "sharing", "knowledge", "audit", "retention", "routing", "keys")


def test_an_area_is_built_at_its_first_read_and_then_kept(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        assert not set(AREAS) & set(vars(mem))  # opening built none of them
        learning = mem.learning
        assert mem.learning is learning
        # The learning area was built with the failures area it uses: the same one the facade shows.
        assert "failures" in vars(mem)
        assert mem.failures is vars(mem)["failures"]
        mem.learning.record("flaky build", "retry", "success", agent="a")
        assert mem.learning.suggest("flaky build", agent="a").recommended == "retry"


def test_threads_reading_an_area_first_at_once_share_one(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        start = threading.Barrier(8)
        seen: list[tuple[object, ...]] = []

        def read() -> None:
            start.wait()
            seen.append(tuple(getattr(mem, area) for area in AREAS))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(seen) == 8
        for i, area in enumerate(AREAS):
            assert {id(areas[i]) for areas in seen} == {id(getattr(mem, area))}


def test_the_class_shows_each_area_as_a_documented_descriptor() -> None:
    for area in AREAS:
        member = getattr(Engram, area)
        assert isinstance(member, built_once)
        assert member.__doc__
    assert issubclass(Engram, Areas)


def test_the_deferred_numpy_is_numpy() -> None:
    import numpy

    assert lazy_numpy.float32 is numpy.float32
    assert lazy_numpy.linalg.norm is numpy.linalg.norm
    assert (lazy_numpy.arange(3) == numpy.arange(3)).all()

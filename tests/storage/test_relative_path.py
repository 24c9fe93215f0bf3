"""A store named by a relative path works as one named absolutely: the read-only side connections (the open's
stale-vector count, the keyword load, the tenants' prefill) open the database as a ``file:`` URI, which must be
absolute."""

from __future__ import annotations

from pathlib import Path

import pytest

from engramdb import Engram


def test_a_store_opened_by_a_relative_path_remembers_and_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Engram("agent-memory") as mem:
        stored = mem.remember("Rate limits on the billing API reset every minute", agent="alice")
    with Engram("agent-memory") as mem:  # reopened: the side connections run at open
        hits = mem.search("billing rate limit", agent="alice")
    assert [hit.memory.id for hit in hits][:1] == [stored.id]

"""The write pipeline redacts an import or merge plan itself: a caller that forgot to redact stores no secret."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from engramdb import Engram
from engramdb.knowledge import transfer
from engramdb.models import Memory

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "AKIAQ7XTOMBW4Z2LPRNF"


@pytest.fixture
def mem(tmp_path: Path):
    with Engram(tmp_path, embedder="static", vectors="sync") as m:
        yield m


def incoming(mem: Engram, content: str, **fields: object) -> transfer.Incoming:
    memory = Memory(
        id=f"m-{abs(hash(content)) % 10**8}",
        agent="alice",
        kind="knowledge",
        content=content,
        created_at=T0,
        updated_at=T0,
        **fields,  # type: ignore[arg-type]
    )
    # The vector of the raw text, as a careless caller would compute it.
    return transfer.Incoming(memory=memory, vector=mem.embedder.embed([content])[0], source=memory)


def test_an_added_memory_is_redacted_and_embedded_from_its_redacted_text(mem: Engram):
    item = incoming(mem, f"the deploy key is {KEY} for staging", metadata={"note": f"key {KEY}"})
    mem._pipeline.transfers.apply(transfer.Plan(add=[item]), actor="alice", at=T0, added_action="import", detail={})
    stored = mem.get(item.memory.id, agent="alice")
    assert KEY not in stored.content
    assert KEY not in str(stored.metadata)
    assert "aws_access_key" in stored.redacted
    vector = mem.store.vectors.get([stored.id], model_id=mem.embedder.model_id)[stored.id]
    assert np.allclose(np.asarray(vector).ravel(), mem.embedder.embed([stored.content])[0], atol=1e-5)


def test_a_clean_plan_is_stored_as_given(mem: Engram):
    item = incoming(mem, "retry with backoff fixes 429s")
    mem._pipeline.transfers.apply(transfer.Plan(add=[item]), actor="alice", at=T0, added_action="import", detail={})
    stored = mem.get(item.memory.id, agent="alice")
    assert stored.content == item.memory.content
    assert stored.redacted == ()


def test_a_patch_is_redacted_before_it_is_applied(mem: Engram):
    target = mem.remember("the staging deploy uses a shared key", agent="alice")
    patch = transfer.Patch(memory_id=target.id, changes={"metadata": {"merged": f"with {KEY}"}, "tags": ["deploy"]})
    mem._pipeline.transfers.apply(
        transfer.Plan(patches=[patch]), actor="alice", at=T0, added_action="import", detail={}
    )
    stored = mem.get(target.id, agent="alice")
    assert KEY not in str(stored.metadata)
    assert "aws_access_key" in stored.redacted
    assert "deploy" in stored.tags

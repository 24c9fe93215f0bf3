"""Deduplication on write: the pure decision and merge, and remember()/remember_many() with the real model."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb._util import new_id
from engramdb.embeddings.base import Embedder
from engramdb.knowledge.dedupe import (
    MAX_PROVENANCE,
    MERGE_COUNT_KEY,
    MERGED_FROM_KEY,
    compatible,
    find_duplicate,
    merge_changes,
    normalise,
)
from engramdb.models import NO_MERGE_KINDS, Memory

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def m(content: str, **fields: object) -> Memory:
    base: dict[str, object] = {"agent": "alice", "kind": "knowledge", "created_at": T0, "updated_at": T0}
    base.update(fields)
    return Memory(id=new_id(), content=content, **base)  # type: ignore[arg-type]


# -- pure ------------------------------------------------------------------------------------------


def test_normalise_ignores_case_punctuation_and_spacing() -> None:
    assert normalise("  Use  retries, with BACKOFF! ") == normalise("use retries with backoff")
    assert normalise("Ｆｕｌｌ width") == "full width"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The database port is 5432", "The database port is 5433"),
        ("Deploy uses Python 3.11", "Deploy uses Python 3.12"),
        ("Always run migrations before deploying", "Never run migrations before deploying"),
        ("Run migrations before deploying", "Do not run migrations before deploying"),
        ("Enable the cache for search", "Disable the cache for search"),
    ],
)
def test_similar_texts_that_disagree_are_not_compatible(a: str, b: str) -> None:
    assert not compatible(a, b)


def test_find_duplicate_rules() -> None:
    stored = m("Use retries with exponential backoff for the payments API")
    assert find_duplicate("use retries with exponential backoff for the payments API.", agent="alice",
                          kind="knowledge", candidates=[(stored, 0.5)], threshold=0.95)  # fmt: skip
    cands = [(stored, 0.97)]
    assert find_duplicate("Retry the payments API with exponential backoff", agent="alice", kind="knowledge",
                          candidates=cands, threshold=0.95) is not None  # fmt: skip
    assert find_duplicate("x", agent="bob", kind="knowledge", candidates=cands, threshold=0.95) is None
    assert find_duplicate("x", agent="alice", kind="preference", candidates=cands, threshold=0.95) is None
    assert find_duplicate("x", agent="alice", kind="knowledge", visibility="public", candidates=cands,
                          threshold=0.95) is None  # fmt: skip
    assert find_duplicate("Retry with backoff", agent="alice", kind="knowledge", candidates=[(stored, 0.9)],
                          threshold=0.95) is None  # fmt: skip
    shared = m(stored.content, shared_by="bob")
    assert find_duplicate(stored.content, agent="alice", kind="knowledge", candidates=[(shared, 1.0)],
                          threshold=0.95) is None  # fmt: skip
    for kind in NO_MERGE_KINDS:
        event = m("same words", kind=kind)
        assert find_duplicate("same words", agent="alice", kind=kind, candidates=[(event, 1.0)], threshold=0.5) is None


def test_the_most_similar_candidate_wins() -> None:
    a, b = m("alpha beta"), m("alpha beta gamma")
    dup = find_duplicate("alpha beta delta", agent="alice", kind="knowledge", candidates=[(a, 0.96), (b, 0.99)],
                         threshold=0.95)  # fmt: skip
    assert dup is not None
    assert dup.memory is b


def test_merge_keeps_max_confidence_unions_tags_and_records_provenance() -> None:
    old = m("Cache TTL is five minutes", tags=("cache",), metadata={"source": "wiki", "team": "core"}, confidence=0.4)
    new = m("cache ttl is five minutes.", tags=("ops", "cache"), metadata={"source": "chat", "ticket": 7},
            confidence=0.9, redacted=("password",))  # fmt: skip
    changes = merge_changes(old, new, similarity=0.991234, at=T0)
    assert changes["confidence"] == 0.9
    assert changes["tags"] == ("cache", "ops")
    assert changes["redacted"] == ("password",)
    meta = changes["metadata"]
    assert meta["source"] == "wiki"  # existing wins...
    assert meta["ticket"] == 7  # ...new keys are added
    assert meta[MERGE_COUNT_KEY] == 1
    assert meta[MERGED_FROM_KEY] == [
        {
            "at": T0.isoformat(),
            "agent": "alice",
            "similarity": 0.9912,
            "content": new.content,
            "metadata": {"source": "chat"},
        }
    ]
    assert "confidence" not in merge_changes(new, old, similarity=1.0, at=T0)


@given(st.integers(min_value=1, max_value=60))
def test_merge_count_grows_and_provenance_stays_bounded(n: int) -> None:
    current = m("same")
    for _ in range(n):
        changes = merge_changes(current, m("same"), similarity=1.0, at=T0)
        current = dataclasses.replace(current, **changes)
    assert current.metadata[MERGE_COUNT_KEY] == n
    assert len(current.metadata[MERGED_FROM_KEY]) == min(n, MAX_PROVENANCE)


# -- through the facade ------------------------------------------------------------------------------


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Engram:  # type: ignore[misc]
    with Engram(tmp_path / "store", embedder=embedder) as engram:
        yield engram  # type: ignore[misc]


def test_remembering_a_near_duplicate_merges_into_the_existing_memory(mem: Engram) -> None:
    first = mem.remember("Use retries with exponential backoff for the payments API", agent="alice",
                         tags=["api"], confidence=0.6)  # fmt: skip
    again = mem.remember("use retries with exponential backoff for the payments API.", agent="alice",
                         tags=["payments"], confidence=0.8, metadata={"seen_in": "incident-42"})  # fmt: skip
    assert again.id == first.id
    assert mem.count(agent="alice") == 1
    assert set(again.tags) == {"api", "payments"}
    assert again.confidence == 0.8
    assert again.metadata[MERGE_COUNT_KEY] == 1
    assert again.metadata["seen_in"] == "incident-42"
    assert [c.action for c in mem.history(first.id)] == ["create", "merge"]
    assert [e.action for e in mem.audit.log(memory_id=first.id)][:2] == ["merge", "create"]


def test_force_kinds_agents_and_contradictions_are_kept_apart(mem: Engram) -> None:
    text = "The staging database listens on port 5432"
    a = mem.remember(text, agent="alice")
    assert mem.remember(text, agent="alice", force=True).id != a.id
    assert mem.remember(text, agent="bob").id != a.id
    assert mem.remember(text, agent="alice", kind="preference").id != a.id
    assert mem.remember("The staging database listens on port 5433", agent="alice").id != a.id
    assert mem.remember(text, agent="alice", visibility="public").id != a.id
    for kind in sorted(NO_MERGE_KINDS):
        x = mem.remember("user said hello", agent="alice", kind=kind)
        y = mem.remember("user said hello", agent="alice", kind=kind)
        assert x.id != y.id


def test_duplicates_inside_one_batch_merge_too(mem: Engram) -> None:
    out = mem.remember_many(
        [
            {"content": "Prefer small pull requests", "agent": "alice", "tags": ["review"]},
            {"content": "prefer small pull requests!", "agent": "alice", "tags": ["style"]},
            {"content": "Something else entirely about queues", "agent": "alice"},
        ]
    )
    assert out[0].id == out[1].id != out[2].id
    assert out[0] == out[1]
    assert set(out[0].tags) == {"review", "style"}
    assert out[0].metadata[MERGE_COUNT_KEY] == 1
    assert mem.count(agent="alice") == 2


def test_dedupe_can_be_turned_off(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder, dedupe=False) as engram:
        a = engram.remember("same text", agent="alice")
        assert engram.remember("same text", agent="alice").id != a.id


def test_batch_neighbours_only_look_back_within_agent_kind_and_visibility() -> None:
    import numpy as np

    from engramdb.knowledge.dedupe import batch_neighbours

    now = datetime(2026, 1, 1, tzinfo=UTC)

    def m(i: int, content: str, agent: str = "a", kind: str = "knowledge") -> Memory:
        return Memory(id=str(i), agent=agent, kind=kind, content=content, created_at=now, updated_at=now)

    batch = [m(0, "x"), m(1, "y"), m(2, "x", agent="b"), m(3, "X!"), m(4, "z", kind="episode"), m(5, "w")]
    vectors = np.eye(6, dtype=np.float32)
    vectors[5] = vectors[1]  # row 5 is a near-duplicate of row 1 by meaning only
    found = batch_neighbours(batch, vectors, threshold=0.9)
    assert found[0] == []
    assert found[2] == []
    assert found[3] == [(0, 0.0)]  # identical normalised text, whatever the similarity
    assert found[4] == []  # events never merge
    assert found[5] == [(1, 1.0)]


def test_plan_batch_folds_in_batch_twins_and_merges_into_stored_ones() -> None:
    import numpy as np

    from engramdb.knowledge.dedupe import plan_batch

    stored = m("Deploys go out on Tuesdays")
    batch = [m("Deploys go out on Tuesdays."), m("The rota changes on Monday"), m("the rota changes on monday!")]
    batch.append(m("the rota changes on monday", kind="conversation"))  # an event: never checked
    plan = plan_batch(batch, np.eye(4, dtype=np.float32), stored={0: [(stored, 0.97)], 1: [], 2: []}, threshold=0.9)
    assert plan.merges == [(stored.id, batch[0], 0.97)]
    assert [x.id for x in plan.new] == [batch[1].id, batch[3].id]
    assert plan.rows == [1, 3]
    assert plan.targets == [stored.id, batch[1].id, batch[1].id, batch[3].id]
    assert plan.new[0].metadata[MERGE_COUNT_KEY] == 1  # row 2 folded into row 1 before it is stored


@given(st.lists(st.sampled_from(["a", "A!", "b", "c"]), max_size=8), st.data())
def test_plan_batch_places_every_row_once(texts: list[str], data: st.DataObject) -> None:
    import numpy as np

    from engramdb.knowledge.dedupe import plan_batch

    batch = [m(t) for t in texts]
    checked = data.draw(st.sets(st.sampled_from(range(len(batch)))) if batch else st.just(set()))
    vectors = np.eye(max(len(batch), 1), dtype=np.float32)[: len(batch)]
    plan = plan_batch(batch, vectors, stored={r: [] for r in checked}, threshold=0.9)
    by_id = {x.id: x for x in batch}
    assert len(plan.targets) == len(batch)
    assert plan.rows == sorted(plan.rows)
    assert [x.id for x in plan.new] == [batch[r].id for r in plan.rows]
    assert plan.merges == []  # nothing stored to merge into
    assert {r for r in range(len(batch)) if r not in checked} <= set(plan.rows)  # unchecked rows are always added
    assert set(plan.targets) == {x.id for x in plan.new}
    # A row folds only when checked, into an earlier row of the same normalised text.
    for row, target in enumerate(plan.targets):
        if target != batch[row].id:
            assert row in checked
            assert normalise(by_id[target].content) == normalise(texts[row])

"""One fact, one hit, but an outcome record's fact is in its metadata: records that did different things, or
fared differently, are never folded into one hit (seed 001's ``api-auth-timeout``); identical repeats are."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings.base import Embedder
from engramdb.models import Memory
from engramdb.retrieval.collapse import collapse

AT = datetime(2026, 11, 27, tzinfo=UTC)
ACTIONS = ["increase-timeout", "retry-with-exponential-backoff", "Retry-With-Exponential-Backoff", "fail-fast"]
OUTCOMES = ["success", "failure", "partial", "pending"]
CONTEXTS = ["api-auth-timeout", "API auth timeout!", "api-auth-timeout on the payments API"]


def _record(i: int, context: str, meta: dict[str, Any], kind: str = "decision") -> Memory:
    return Memory(id=f"m{i}", agent="a", kind=kind, content=context, metadata=meta, created_at=AT, updated_at=AT)  # type: ignore[arg-type]


def _label(text: object) -> object:
    return " ".join(text.casefold().split()) if isinstance(text, str) else text


@given(
    st.lists(st.tuples(st.sampled_from(CONTEXTS), st.sampled_from(ACTIONS), st.sampled_from(OUTCOMES)), max_size=14),
    st.integers(min_value=1, max_value=8),
)
def test_records_that_differ_in_action_or_outcome_never_fold(rows: list[tuple[str, str, str]], limit: int) -> None:
    ranked = [_record(i, c, {"action": a, "outcome": o}) for i, (c, a, o) in enumerate(rows)]
    by_id = {m.id: m for m in ranked}
    for kept, folded in collapse(ranked, lambda m: m, limit=limit):
        for other in (by_id[f] for f in folded):
            assert _label(other.metadata["action"]) == _label(kept.metadata["action"])
            assert other.metadata["outcome"] == kept.metadata["outcome"]


@given(
    st.sampled_from(CONTEXTS),
    st.sampled_from(ACTIONS),
    st.sampled_from(OUTCOMES),
    st.integers(min_value=1, max_value=12),
)
def test_identical_records_fold_into_one_hit_that_counts_them(context: str, action: str, outcome: str, n: int) -> None:
    ranked = [_record(i, context, {"action": action, "outcome": outcome, "success": 1.0}) for i in range(n)]
    [(first, folded)] = collapse(ranked, lambda m: m, limit=5)
    assert first.id == "m0"
    assert folded == [f"m{i}" for i in range(1, n)]


def test_failures_with_different_fixes_stay_apart_and_equal_ones_fold() -> None:
    error = "psycopg2.OperationalError: could not connect to server: Connection refused on db host port 5432 in CI"
    ranked = [
        _record(0, f"{error}\nFix: restart the pool", {"solution": "restart the pool"}, "failure"),
        _record(1, f"{error}\nFix: resize the pool", {"solution": "resize the pool"}, "failure"),
        _record(2, error, {"solution": None, "failed_solutions": ["bump the timeout"]}, "failure"),
        _record(3, error, {"solution": None, "failed_solutions": ["reboot the runner"]}, "failure"),
        _record(4, error, {"solution": None, "failed_solutions": ["Bump the  timeout"]}, "failure"),
        _record(5, f"{error}\nFix: restart the pool", {"solution": "restart the pool"}, "failure"),
    ]
    kept = collapse(ranked, lambda m: m, limit=10)
    assert [(m.id, folded) for m, folded in kept] == [("m0", ["m5"]), ("m1", []), ("m2", ["m4"]), ("m3", [])]


def test_memories_without_outcome_metadata_fold_as_before() -> None:
    ranked = [_record(0, "Retry OK", {}, "knowledge"), _record(1, "retry ok.", {"source": "chat"}, "knowledge")]
    assert [(m.id, f) for m, f in collapse(ranked, lambda m: m, limit=5)] == [("m0", ["m1"])]


def test_seed_001_search_shows_the_failed_and_the_working_action(tmp_path: Path, embedder: Embedder) -> None:
    """Seed 001 scenario 1 through Python: both decisions come back; five identical successes are one hit."""
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        failed = mem.learning.record("api-auth-timeout", "increase-timeout", "failure", agent="alice")
        worked = [
            mem.learning.record("api-auth-timeout", "retry-with-exponential-backoff", "success", agent="alice")
            for _ in range(5)
        ]
        hits = mem.search("api-auth-timeout", agent="alice")
    assert len(hits) == 2
    by_action = {h.memory.metadata["action"]: h for h in hits}
    assert by_action["increase-timeout"].memory.id == failed.id
    assert by_action["increase-timeout"].stands_for == 1
    success = by_action["retry-with-exponential-backoff"]
    assert success.memory.metadata["outcome"] == "success"
    assert success.stands_for == 5
    assert {success.memory.id, *success.duplicates} == {m.id for m in worked}

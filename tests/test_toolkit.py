"""engramdb.toolkit: what interfaces and integrations use beside an Engram, on real stores and the real model."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import Engram, toolkit
from engramdb.embeddings.base import Embedder
from engramdb.errors import NotFound, ValidationError
from engramdb.models import RedactionPolicy


def _store(path: Path, embedder: Embedder) -> None:
    with Engram(path, embedder=embedder) as mem:
        mem.remember_many([{"content": f"note {i} on the release checklist", "agent": "a"} for i in range(12)])


def test_examine_finds_damage_an_open_would_stop_at(tmp_path: Path, embedder: Embedder) -> None:
    store = tmp_path / "store"
    _store(store, embedder)
    assert toolkit.examine(store).ok
    raw = sqlite3.connect(store / "engram.db")
    raw.execute("DROP TRIGGER memories_fts_update")
    raw.execute("UPDATE memories SET content = 'edited behind the index' WHERE rid = 2")
    raw.commit()
    raw.close()
    report = toolkit.examine(str(store), quick=True)
    assert [c.name for c in report.failed] == ["keyword_index"]
    (store / "engram.db").write_bytes(b"")
    emptied = toolkit.examine(store)
    assert [c.name for c in emptied.failed] == ["open"]


def test_a_folder_without_a_store_is_not_examined_nor_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    assert not toolkit.store_exists(missing)
    with pytest.raises(NotFound, match="typo"):
        toolkit.examine(missing)
    with pytest.raises(NotFound):
        toolkit.require_store(str(missing))
    assert not missing.exists()
    assert toolkit.store_exists(":memory:")
    for bad in (b"/tmp/x", 3, None):
        with pytest.raises(ValidationError):
            toolkit.store_exists(bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        toolkit.examine(tmp_path, quick="yes")  # type: ignore[arg-type]


def test_store_exists_after_a_store_is_made(tmp_path: Path, embedder: Embedder) -> None:
    store = tmp_path / "store"
    _store(store, embedder)
    assert toolkit.store_exists(store)


def test_the_shipped_packs_are_listed_and_loaded_without_a_store() -> None:
    names = toolkit.available_packs()
    assert {"python", "git", "sql"} <= set(names)
    assert names == sorted(names)
    pack = toolkit.load_pack("python")
    assert pack.name == "python"
    assert pack.practices
    with pytest.raises(ValidationError, match="available"):
        toolkit.load_pack("cobol")


def test_redacted_is_what_the_store_keeps(tmp_path: Path, embedder: Embedder) -> None:
    token = "ghp_" + "k3Q9xZ7mP2wR8tY4vB6nL1cD5fG0hJ7sA2eU"
    text = f"password={token}, mail ana.lopez@acmecorp.io"
    with Engram(tmp_path / "store", embedder=embedder, redact_pii=True) as mem:
        kept = mem.remember(text, agent="a", force=True).content
        assert toolkit.redacted(text, policy=mem.redaction) == kept
    assert token not in kept
    assert "ana.lopez@acmecorp.io" not in kept
    plain = "nothing secret here"
    assert toolkit.redacted(plain, policy=RedactionPolicy()) == plain
    with pytest.raises(ValidationError):
        toolkit.redacted(3, policy=RedactionPolicy())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        toolkit.redacted(plain, policy={"secrets": True})  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    policy = RedactionPolicy(secrets=True, pii=True)
    once = toolkit.redacted(text, policy=policy)
    assert toolkit.redacted(once, policy=policy) == once


def test_learning_curves_follow_the_recorded_outcomes(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        for i in range(40):
            outcome = "success" if i >= 20 or i % 4 == 0 else "failure"
            mem.learning.record("ship the release", "checklist", outcome, agent="a", category="deploy")
        mem.learning.record("answer the ticket", "macro", "success", agent="a")
        records, trends = mem.learning.outcomes(agent="a"), mem.learning.trends(agent="a")
    curves = {t.category: (bucket, points) for t, bucket, points in toolkit.learning_curves(records, trends)}
    assert set(curves) == {"deploy", "general"}
    bucket, points = curves["deploy"]
    assert bucket in {"minute", "hour", "day", "week", "month"}
    assert sum(p.n for p in points) == 40
    assert sum(p.successes for p in points) == 25
    assert sum(p.n for p in curves["general"][1]) == 1
    assert toolkit.learning_curves([], []) == []
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValidationError):
            toolkit.learning_curves(records, trends, min_per_point=bad)  # type: ignore[arg-type]


def test_text_relevance_is_what_search_reports(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "store", embedder=embedder) as mem:
        saved = mem.remember("Login to Facebook", agent="a", kind="success")
        for query in ("Sign into FB", "Go to FB", "order pizza"):
            [hit] = [h for h in mem.search(query, agent="a", min_score=0.0) if h.memory.id == saved.id]
            q, t = embedder.embed([query, "Login to Facebook"])
            assert toolkit.text_relevance(query, "Login to Facebook", cosine=float(q @ t)) == pytest.approx(
                hit.relevance, abs=1e-4
            )


@pytest.mark.parametrize(
    ("query", "text", "cosine"),
    [(None, "x", 0.5), ("x", b"x", 0.5), ("x", "x", float("nan")), ("x", "x", "0.5"), ("x", "x", True)],
)
def test_text_relevance_refuses_bad_input_with_one_line(query: object, text: object, cosine: object) -> None:
    with pytest.raises(ValidationError, match="must be"):
        toolkit.text_relevance(query, text, cosine=cosine)  # type: ignore[arg-type]

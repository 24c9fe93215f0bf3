"""Distiller on a real store: groups, the distilled memory, re-runs, archiving, dry runs, the LLM path, bad input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.errors import ValidationError
from engramdb.services.distill import DISTILLED_TAG, Distiller, generalize, group_by_meaning, medoid, shared_terms

TIMEOUTS = (
    "Calls to the payments API time out under load; raising the HTTP client timeout to 30s fixed it.",
    "When the payments API times out, increase the client timeout to 60 seconds.",
    "Payment API requests were timing out until we raised the httpx timeout to 45s.",
    "The payments service is slow at peak hours: use a client timeout of at least 30 seconds.",
)
PYTEST = (
    "Tests are written with pytest, not unittest.",
    "The project uses pytest for all tests; do not add unittest.TestCase classes.",
    "Prefer pytest-style tests over unittest classes.",
)
OTHER = ("The frontend is built with Vite and React.", "Invoices are generated on the first of every month.")


def distiller_of(mem: Engram, **kwargs: Any) -> Distiller:
    """The distiller as the facade composes it."""
    return Distiller(mem._services, **kwargs)


@pytest.fixture
def stocked(mem: Engram) -> Engram:
    mem.remember_many([{"content": c} for c in (*TIMEOUTS, *PYTEST, *OTHER)], force=True)
    return mem


def test_one_distilled_memory_per_group(stocked: Engram) -> None:
    out = distiller_of(stocked).distill()
    assert len(out) == 2
    by_size = sorted(out, key=lambda m: -m.metadata["source_count"])
    timeouts, tests = by_size
    assert timeouts.kind == "knowledge"
    assert DISTILLED_TAG in timeouts.tags
    sources = {m.id: m.content for m in stocked.list(limit=100) if DISTILLED_TAG not in m.tags}
    assert sorted(sources[i] for i in timeouts.metadata["distilled_from"]) == sorted(TIMEOUTS)
    assert sorted(sources[i] for i in tests.metadata["distilled_from"]) == sorted(PYTEST)
    assert timeouts.metadata["source_count"] == 4
    assert timeouts.metadata["confidence_basis"] == "agreement"
    assert "timeout" in timeouts.metadata["shared_terms"]
    assert "payments" in timeouts.metadata["shared_terms"]
    assert "<n>" in timeouts.metadata["pattern"]  # 30s / 60 / 45s vary: masked
    assert 0.0 < timeouts.confidence <= 1.0
    assert stocked.get(timeouts.id).content == timeouts.content
    actions = [e.action for e in stocked.audit.log(limit=1000)]
    assert actions.count("distill") == 2


def test_rerunning_updates_instead_of_adding(stocked: Engram) -> None:
    d = distiller_of(stocked)
    first = {m.metadata["source_count"]: m.id for m in d.distill()}
    again = d.run()
    assert [g.action for g in again.groups] == ["unchanged", "unchanged"]
    stocked.remember("Raise the client timeout for the payments API calls, they time out at peak.", force=True)
    third = d.run()
    grown = next(g for g in third.groups if len(g.source_ids) == 5)
    assert grown.action == "update"
    assert grown.memory.id == first[4]
    assert len(stocked.list(tags=[DISTILLED_TAG])) == 2
    assert stocked.history(grown.memory.id)[-1].action == "distill"


def test_dry_run_writes_nothing(stocked: Engram) -> None:
    before = stocked.count()
    result = distiller_of(stocked).run(dry_run=True)
    assert result.dry_run
    assert len(result.groups) == 2
    assert all(g.action == "create" for g in result.groups)
    assert stocked.count() == before
    assert stocked.list(tags=[DISTILLED_TAG]) == []


def test_sources_stay_unless_archived(stocked: Engram) -> None:
    d = distiller_of(stocked)
    d.distill()
    assert stocked.list(tags=["archived"]) == []
    result = d.run(archive_sources=True)
    assert result.archived == 7
    archived = stocked.list(tags=["archived"])
    assert sorted(m.content for m in archived) == sorted((*TIMEOUTS, *PYTEST))
    assert all(m.visibility == "private" for m in archived)
    assert d.run(archive_sources=True).archived == 0  # already archived: nothing more


def test_only_the_agents_own_memories_of_the_kind(stocked: Engram) -> None:
    stocked.remember_many([{"content": c, "agent": "bob"} for c in TIMEOUTS], force=True)
    stocked.remember_many([{"content": c, "kind": "success"} for c in PYTEST], force=True)
    out = distiller_of(stocked).distill(agent="bob")
    assert len(out) == 1
    assert out[0].agent == "bob"
    success = distiller_of(stocked).run(kind="success")
    assert [g.kind for g in success.groups] == ["success"]
    assert all(stocked.get(i).agent == "default" for i in success.groups[0].source_ids)


def test_decisions_distil_to_the_best_action_with_its_outcomes(mem: Engram) -> None:
    for context, action, outcome in [
        ("integration tests fail randomly in CI", "quarantine the flaky test", "success"),
        ("flaky integration tests break the CI pipeline", "quarantine the flaky test", "success"),
        ("an integration test fails sometimes in CI", "rerun the job", "failure"),
        ("CI integration tests are flaky", "quarantine the flaky test", "success"),
    ]:
        mem.learning.record(context, action, outcome)
    [group] = distiller_of(mem).run(kind="decision").groups
    assert group.basis == "outcomes"
    assert group.memory.metadata["evidence"]["best_action"] == "quarantine the flaky test"
    assert group.confidence == pytest.approx(4 / 5)  # (3 + 1) / (3 + 2)


def test_failures_distil_to_the_fix_that_worked(mem: Engram) -> None:
    for host in ("db-7", "db-3", "db-9"):
        mem.failures.record(
            f"OperationalError: could not connect to server at {host}.prod.example.com:5432: Connection refused",
            context="running the nightly report",
            solution="check the VPN is up and retry",
        )
    [group] = distiller_of(mem).run(kind="failure").groups
    assert group.basis == "fixes"
    assert "check the VPN is up and retry" in group.pattern
    assert "<host>" in group.pattern
    assert "db-7" not in group.pattern
    assert not any(t.startswith(("sig:", "pattern:")) for t in group.memory.tags)


class _LLM:
    name = "fake:model"

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Any:
        self.prompts.append(messages[-1]["content"])
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_valid_llm_summary_is_used(stocked: Engram) -> None:
    llm = _LLM("Raise the client timeout of payments API calls; they time out under load.")
    result = distiller_of(stocked, llm=llm).run(dry_run=True)
    assert all(g.memory.metadata["method"] == "llm" for g in result.groups)
    assert result.groups[0].pattern == llm.answer
    assert "payments API" in llm.prompts[0]


@pytest.mark.parametrize("answer", ["", "ok", "x" * 5000, {"not": "text"}, RuntimeError("server down")])
def test_a_bad_llm_answer_falls_back_to_the_deterministic_pattern(stocked: Engram, answer: object) -> None:
    result = distiller_of(stocked, llm=_LLM(answer)).run(dry_run=True)
    assert len(result.groups) == 2
    assert all(g.memory.metadata["method"] == "deterministic" for g in result.groups)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"agent": ""}, "agent"),
        ({"kind": "nonsense"}, "unknown kind"),
        ({"min_group": 1}, "min_group"),
        ({"min_group": True}, "min_group"),
        ({"min_group": "3"}, "min_group"),
        ({"threshold": 0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"dry_run": "yes"}, "dry_run"),
        ({"archive_sources": 1}, "archive_sources"),
    ],
)
def test_bad_input_changes_nothing(stocked: Engram, kwargs: dict[str, Any], message: str) -> None:
    before = stocked.count()
    with pytest.raises(ValidationError, match=message):
        distiller_of(stocked).distill(**kwargs)
    assert stocked.count() == before
    assert stocked.list(tags=[DISTILLED_TAG]) == []


# -- pure steps -----------------------------------------------------------------------------------------------


def test_generalize_masks_only_what_varies() -> None:
    texts = [
        "Deploy to prod-7.example.com failed after 30s",
        "Deploy to prod-3.example.com failed after 45s",
        "Deploy to prod-9.example.com failed after 60s",
    ]
    assert generalize(texts, 0) == "Deploy to <host> failed after <n>"
    # a detail most sources share is part of what they say
    assert generalize([*texts[:2], "Deploy to prod-1.example.com failed after 30s"], 0).endswith("after 30s")
    same = ["Use Python 3.11 for the service", "The service needs Python 3.11", "Python 3.11 is required"]
    assert "3.11" in generalize(same, 0)


def test_shared_terms_are_the_words_most_sources_use() -> None:
    assert set(shared_terms(list(PYTEST))[:3]) == {"tests", "pytest", "unittest"}


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=2, max_value=8),
    st.floats(min_value=0.05, max_value=0.99),
    st.integers(min_value=0, max_value=2**31),
)
def test_groups_partition_the_rows_and_stay_within_the_threshold_of_their_founder(
    n: int, dim: int, threshold: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    groups = group_by_meaning(vectors, threshold)
    assert sorted(i for g in groups for i in g) == list(range(n))
    assert [len(g) for g in groups] == sorted((len(g) for g in groups), reverse=True)
    for g in groups:
        sims = vectors[g] @ vectors[g].T
        # some member (the founder) is within the threshold of every other member
        assert any(bool((row >= threshold - 1e-5).all()) for row in sims)
        center, cohesion = medoid(vectors[g])
        assert 0 <= center < len(g)
        assert 0.0 <= cohesion <= 1.0
    assert group_by_meaning(vectors, threshold) == groups  # deterministic

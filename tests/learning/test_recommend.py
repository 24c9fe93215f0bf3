"""Recommendations and choices: the pure rules, then end to end through Engram with the real model."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb import ConfigError, Engram, NotFound, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.learning.recommend import Neighbour, RecommendConfig, choose, evidence, option_posteriors, suggest
from engramdb.models import DecisionRecord

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CFG = RecommendConfig()


def rec(
    action: str,
    success: float,
    *,
    context: str = "auth token expired",
    minutes_ago: float = 0.0,
    alternatives: tuple[str, ...] = (),
    rid: str | None = None,
) -> DecisionRecord:
    return DecisionRecord(
        id=rid or f"{action}-{success}-{minutes_ago}-{context}",
        agent="a",
        context=context,
        action=action,
        success=success,
        at=NOW - timedelta(minutes=minutes_ago),
        alternatives=alternatives,
    )


def near(*records: DecisionRecord, cosine: float = 0.9) -> list[Neighbour]:
    return [Neighbour(r, cosine) for r in records]


def many(action: str, successes: int, failures: int, *, cosine: float = 0.9, start: int = 0) -> list[Neighbour]:
    out = [rec(action, 1.0, minutes_ago=start + i, rid=f"{action}-s{start + i}") for i in range(successes)]
    out += [rec(action, 0.0, minutes_ago=start + successes + i, rid=f"{action}-f{start + i}") for i in range(failures)]
    return near(*out, cosine=cosine)


# -- pure rules ---------------------------------------------------------------------------------------------


def test_identical_context_weighs_one_and_unrelated_nothing() -> None:
    ev = evidence(
        "Auth  token EXPIRED",
        [Neighbour(rec("a", 1.0), 0.2), Neighbour(rec("b", 1.0, context="other"), 0.1)],
        config=CFG,
    )
    assert [(e.action, e.relevance) for e in ev] == [("a", 1.0)]


def test_similarity_weights_follow_the_ramp_above_the_floor() -> None:
    nbrs = [Neighbour(rec("a", 1.0, context="x"), 0.75)]
    straight = RecommendConfig(similarity_floor=0.5, similarity_exponent=1.0)
    assert evidence("q", nbrs, config=straight)[0].relevance == pytest.approx(0.5)
    # The shipped exponent (0.4) lifts a context halfway up the ramp to about three quarters.
    shipped = RecommendConfig(similarity_floor=0.5)
    assert evidence("q", nbrs, config=shipped)[0].relevance == pytest.approx(0.5**0.4)


def test_alternatives_become_options_only_when_nothing_is_named() -> None:
    nbrs = near(rec("retry", 0.0, alternatives=("backoff", "abort")))
    names = [p.action for p in option_posteriors("q", nbrs, now=NOW, config=CFG)]
    assert names == ["retry", "backoff", "abort"]
    named = option_posteriors("q", nbrs, now=NOW, config=CFG, options=["abort", "new"])
    assert [p.action for p in named] == ["abort", "new"]
    assert all(p.attempts == 0 for p in named)


def test_no_evidence_no_recommendation() -> None:
    s = suggest("q", [], now=NOW, config=CFG, seed=0)
    assert s.recommended is None
    assert s.options == []
    assert s.confidence == 0.0


def test_thin_evidence_gives_a_tentative_recommendation_or_none() -> None:
    s = suggest("q", many("retry", 2, 0), now=NOW, config=CFG, seed=0)
    assert s.recommended == "retry"
    assert s.tentative
    # Less than one weighted outcome (a loosely similar context): nothing to go on.
    none = suggest("q", many("retry", 1, 0, cosine=0.35), now=NOW, config=CFG, seed=0)
    assert none.recommended is None
    assert "too little evidence" in none.reason
    assert none.options[0].action == "retry"


def test_evidence_that_does_not_separate_the_options_gives_no_recommendation() -> None:
    # Successes and failures interleaved: 6 successes after 4 failures (what ``many`` gives) is what a change of the
    # world looks like, and the change rule rightly trusts the newer outcomes then.
    def mixed(action: str, start: int) -> list[Neighbour]:
        pattern = (1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0)  # 6 successes, 4 failures
        return near(*(rec(action, x, minutes_ago=start + i) for i, x in enumerate(pattern)))

    nbrs = mixed("a", 0) + mixed("b", 100)
    s = suggest("q", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended is None
    assert "does not separate" in s.reason
    assert 0.3 < s.confidence < 0.7


def test_clear_evidence_recommends_the_best_with_high_confidence() -> None:
    nbrs = many("backoff", 9, 1) + many("retry", 1, 8, start=100)
    s = suggest("q", nbrs, now=NOW, config=CFG, seed=0)
    assert s.recommended == "backoff"
    assert s.confidence >= CFG.firm_confidence
    assert not s.tentative
    assert [o.action for o in s.options] == ["backoff", "retry"]
    top = s.options[0]
    assert top.low < top.success_rate < top.high
    assert top.successes <= top.attempts


def test_a_single_known_action_is_compared_with_an_untried_one() -> None:
    good = suggest("q", many("retry", 12, 0), now=NOW, config=CFG, seed=0)
    assert good.recommended == "retry"
    bad = suggest("q", many("retry", 0, 12), now=NOW, config=CFG, seed=0)
    assert bad.recommended is None
    assert bad.confidence < 0.2


def test_recent_outcomes_win_over_old_ones() -> None:
    old_good = [rec("a", 1.0, minutes_ago=1000 + i, rid=f"old{i}") for i in range(30)]
    new_bad = [rec("a", 0.0, minutes_ago=i, rid=f"new{i}") for i in range(20)]
    steady = [rec("b", 1.0 if i % 10 < 7 else 0.0, minutes_ago=500 + i, rid=f"b{i}") for i in range(20)]
    s = suggest("q", near(*old_good, *new_bad, *steady), now=NOW, config=CFG, seed=0)
    # Counted without discount, "a" would lead (30 of 50 against 14 of 20).
    assert s.options[0].action == "b"


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0, 1), st.floats(0, 1), st.integers(0, 10_000)),
        max_size=40,
    ),
    st.integers(0, 2**31),
)
@settings(max_examples=60, deadline=None)
def test_suggestions_are_ordered_honest_and_deterministic(rows: list[tuple[str, float, float, int]], seed: int) -> None:
    nbrs = [
        Neighbour(rec(a, s, minutes_ago=m, context=f"ctx {i}", rid=str(i)), cos)
        for i, (a, s, cos, m) in enumerate(rows)
    ]
    s1 = suggest("q", nbrs, now=NOW, config=CFG, seed=seed)
    s2 = suggest("q", nbrs, now=NOW, config=CFG, seed=seed)
    assert s1 == s2
    rates = [o.success_rate for o in s1.options]
    assert rates == sorted(rates, reverse=True)
    for o in s1.options:
        assert 0.0 <= o.low <= o.success_rate <= o.high <= 1.0
    assert 0.0 <= s1.confidence <= 1.0
    if s1.recommended is not None:
        assert s1.recommended == s1.options[0].action
        # The rule allows 1e-3 of slack: the age discount makes an outcome recorded a moment ago worth 0.99999...
        assert s1.options[0].attempts >= CFG.min_evidence - 1e-3
        assert s1.confidence >= CFG.min_confidence


@given(st.integers(0, 2**31))
@settings(max_examples=30, deadline=None)
def test_choose_is_deterministic_and_greedy_without_exploration(seed: int) -> None:
    nbrs = many("good", 7, 3) + many("bad", 3, 7, start=100)
    first = choose("q", ["good", "bad", "new"], nbrs, now=NOW, config=CFG, seed=seed, exploration=1.0)
    assert first == choose("q", ["good", "bad", "new"], nbrs, now=NOW, config=CFG, seed=seed, exploration=1.0)
    assert choose("q", ["good", "bad", "new"], nbrs, now=NOW, config=CFG, seed=seed, exploration=0.0) == "good"


def test_choose_explores_untried_options_in_proportion_to_doubt() -> None:
    nbrs = many("known", 6, 4)
    picks = Counter(
        choose("q", ["known", "untried"], nbrs, now=NOW, config=CFG, seed=s, exploration=1.0) for s in range(400)
    )
    assert 0.2 < picks["untried"] / 400 < 0.6
    timid = Counter(
        choose("q", ["known", "untried"], nbrs, now=NOW, config=CFG, seed=s, exploration=0.1) for s in range(400)
    )
    assert timid["untried"] < picks["untried"] / 2


# -- end to end ---------------------------------------------------------------------------------------------


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """The facade-level tests run on every backend (SQLite and PostgreSQL)."""
    return backend_mem


def test_record_writes_a_decision_memory(mem: Engram) -> None:
    m = mem.learning.record(
        "auth-failure",
        "retry-with-backoff",
        "success",
        agent="alice",
        alternatives=["abort", "retry-with-backoff"],
        duration=1.5,
        metadata={"ticket": 7},
    )
    assert m.kind == "decision"
    assert m.content == "auth-failure"
    assert m.agent == "alice"
    assert dict(m.metadata) == {
        "ticket": 7,
        "action": "retry-with-backoff",
        "outcome": "success",
        "success": 1.0,
        "reward": 1.0,
        "alternatives": ["abort"],
        "duration": 1.5,
    }
    assert mem.get(m.id, agent="alice").metadata["action"] == "retry-with-backoff"
    assert m.tags == ("action:retry-with-backoff",)
    assert [d.id for d in mem.list(agent="alice", tags=["action:retry-with-backoff"])] == [m.id]


@pytest.mark.parametrize(
    ("outcome", "label", "weight"),
    [("partial", "partial", 0.5), (False, "failure", 0.0), (0.5, "partial", 0.75), (-1, "failure", 0.0)],
)
def test_record_accepts_every_outcome_form(mem: Engram, outcome: str | bool | float, label: str, weight: float) -> None:
    m = mem.learning.record("ctx", "act", outcome)
    assert (m.metadata["outcome"], m.metadata["success"]) == (label, weight)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"outcome": "great"}, "unknown outcome"),
        ({"outcome": 2.0}, "within"),
        ({"action": " "}, "action"),
        ({"context": ""}, "context"),
        ({"duration": -1}, "duration"),
        ({"metadata": {"action": "x"}}, "reserved"),
        ({"alternatives": [""]}, "alternatives"),
    ],
)
def test_bad_records_are_rejected_and_nothing_is_written(mem: Engram, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"context": "ctx", "action": "act", "outcome": "success", **kwargs}
    with pytest.raises(ValidationError, match=message):
        mem.learning.record(**args)  # type: ignore[arg-type]
    assert mem.count(kind="decision") == 0


def test_suggest_learns_from_similar_contexts_in_other_words(mem: Engram) -> None:
    for i in range(6):
        mem.learning.record(
            "The payments API returned 401: access token expired", "refresh-credentials", "success", agent="alice"
        )
        mem.learning.record(
            "Calls to billing fail because the OAuth token is no longer valid",
            "restart-service",
            "failure",
            agent="alice",
        )
        mem.learning.record(
            f"Calls to billing fail because the OAuth token expired {i} minutes ago",
            "refresh-credentials",
            i % 3 != 0,
            agent="alice",
        )
    mem.learning.record("The disk on build-7 is full", "restart-service", "success", agent="alice")
    s = mem.learning.suggest(
        "Our bearer token for the orders service is stale and requests are unauthorized", agent="alice"
    )
    assert s.recommended == "refresh-credentials"
    assert s.options[0].action == "refresh-credentials"
    assert 0.0 < s.confidence <= 1.0
    # Another agent's store of experience is not alice's.
    assert mem.learning.suggest("access token expired", agent="bob").options == []


def test_suggest_counts_outcomes_shared_with_the_agent(mem: Engram) -> None:
    ids = [
        mem.learning.record("deploy failed: image not found", "rebuild-image", "success", agent="alice").id
        for _ in range(5)
    ]
    assert mem.learning.suggest("deploy failed: image not found", agent="bob").options == []
    mem.sharing.share(ids, from_agent="alice", to_agent="bob")
    s = mem.learning.suggest("deploy failed: image not found", agent="bob")
    assert s.recommended == "rebuild-image"


def test_suggest_with_options_and_limit(mem: Engram) -> None:
    for _ in range(4):
        mem.learning.record("cache miss storm", "warm-cache", "success")
    s = mem.learning.suggest("cache miss storm", options=["scale-out", "warm-cache", "warm-cache"], limit=1)
    assert [o.action for o in s.options] == ["warm-cache"]
    with pytest.raises(ValidationError):
        mem.learning.suggest("cache miss storm", options=[])
    with pytest.raises(ValidationError):
        mem.learning.suggest("cache miss storm", options="warm-cache")


def test_choose_converges_on_the_best_option_and_is_reproducible(tmp_path: Path, embedder: Embedder) -> None:
    truth = {"backoff": 0.9, "retry": 0.3, "abort": 0.1}

    def run(folder: str) -> list[str]:
        picks = []
        with Engram(tmp_path / folder, embedder=embedder, learning_seed=11) as m:
            draws = random.Random(3)
            for _ in range(40):
                action = m.learning.choose("the partner API rate-limits us", list(truth))
                picks.append(action)
                m.learning.record("the partner API rate-limits us", action, draws.random() < truth[action])
        return picks

    first = run("one")
    assert first == run("two")  # same seed, same data, same choices
    assert Counter(first[-15:])["backoff"] >= 11


def test_choose_settings_and_validation(mem: Engram) -> None:
    for _ in range(5):
        mem.learning.record("ctx", "good", "success")
        mem.learning.record("ctx", "bad", "failure")
    assert mem.learning.choose("ctx", ["bad", "good"], exploration=0.0) == "good"
    assert mem.learning.choose("ctx", ["only"]) == "only"
    with pytest.raises(ValidationError, match="exploration"):
        mem.learning.choose("ctx", ["a", "b"], exploration=2.0)
    with pytest.raises(ValidationError, match="options"):
        mem.learning.choose("ctx", [])
    with pytest.raises(ValidationError, match="seed"):
        mem.learning.choose("ctx", ["a", "b"], seed="x")  # type: ignore[arg-type]


def test_learning_settings_are_validated(tmp_path: Path, embedder: Embedder) -> None:
    with pytest.raises(ConfigError, match="exploration"):
        Engram(tmp_path / "s", embedder=embedder, exploration=1.5)
    with Engram(tmp_path / "s", embedder=embedder, learning_seed=7) as m:
        assert (m.settings.learning_seed, m.settings.exploration) == (7, 0.25)


def test_exploration_setting_turns_exploration_down(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder, exploration=0.0) as m:
        m.learning.record("ctx", "known", "success")
        m.learning.record("ctx", "known", "partial")
        picks = {m.learning.choose("ctx", ["known", "untried"], seed=s) for s in range(30)}
        assert picks == {"known"}  # mean 0.6 beats the prior's 0.5, every time


# -- feedback to memories ----------------------------------------------------------------------------------


def test_feedback_updates_success_rate_and_confidence_with_history(mem: Engram) -> None:
    m = mem.remember("Use exponential backoff on 429", agent="alice")
    assert m.success_rate is None
    (after,) = mem.learning.feedback([m.id], "success", agent="alice")
    assert (after.successes, after.attempts) == (1.0, 1.0)
    assert after.success_rate == pytest.approx(2 / 3)
    assert after.confidence == pytest.approx((2 * 0.5 + 1) / 3)
    (after,) = mem.learning.feedback([m.id], "failure", agent="alice")
    assert (after.successes, after.attempts) == (1.0, 2.0)
    assert after.confidence == pytest.approx((2 * 0.5 + 1) / 4)
    changes = mem.history(m.id)
    assert [c.action for c in changes][-2:] == ["feedback", "feedback"]
    assert changes[-1].actor == "alice"


def test_feedback_on_unknown_or_invisible_memories_changes_nothing(mem: Engram) -> None:
    mine = mem.remember("alice's note", agent="alice")
    bobs = mem.remember("bob's note", agent="bob")
    with pytest.raises(NotFound):
        mem.learning.feedback([mine.id, bobs.id], "success", agent="alice")
    with pytest.raises(NotFound):
        mem.learning.feedback(["nope"], "success", agent="alice")
    with pytest.raises(ValidationError):
        mem.learning.feedback([mine.id], 1.5, agent="alice")  # any text is now feedback in words: a reward too large
    with pytest.raises(ValidationError):
        mem.learning.feedback([mine.id], "  ", agent="alice")
    assert mem.get(mine.id).attempts == 0


def test_record_with_used_feeds_the_outcome_back(mem: Engram) -> None:
    tip = mem.remember("Refresh the token before retrying a 401", agent="alice")
    mem.learning.record("401 from billing", "refresh-token", "success", agent="alice", used=[tip.id])
    mem.learning.record("401 from orders", "refresh-token", 0.0, agent="alice", used=[tip.id])
    got = mem.get(tip.id)
    assert (got.successes, got.attempts) == (1.5, 2.0)
    with pytest.raises(NotFound):
        mem.learning.record("401", "x", "success", agent="alice", used=["missing"])
    assert mem.count(agent="alice", kind="decision") == 2


def test_search_ranks_memories_that_worked_above_those_that_did_not(tmp_path: Path, embedder: Embedder) -> None:
    with Engram(tmp_path / "s", embedder=embedder, dedupe=False) as m:
        a = m.remember("Retry the upload with exponential backoff", agent="alice")
        b = m.remember("Retry the upload with exponential backoff", agent="alice")
        for _ in range(5):
            m.learning.feedback([a.id], "failure", agent="alice")
            m.learning.feedback([b.id], "success", agent="alice")
        hits = m.search("how to retry an upload", agent="alice")
        # One fact, one hit: the two copies fold into one, shown by the copy that worked.
        assert hits[0].memory.id == b.id
        assert hits[0].duplicates == (a.id,)
        for _ in range(12):
            m.learning.feedback([a.id], "success", agent="alice")
            m.learning.feedback([b.id], "failure", agent="alice")
        hits = m.search("how to retry an upload", agent="alice")
        assert hits[0].memory.id == a.id
        assert hits[0].duplicates == (b.id,)


def _feedback_worker(store: str, memory_id: str, n: int, barrier: Any) -> None:
    with Engram(store) as mem:
        mem.embedder.embed(["warm up"])
        barrier.wait()  # both processes hammer the same memory at the same moment
        for _ in range(n):
            mem.learning.feedback([memory_id], "success", agent="alice")


def test_feedback_from_two_processes_loses_no_update(tmp_path: Path, embedder: Embedder) -> None:
    import multiprocessing

    store = str(tmp_path / "store")
    with Engram(store, embedder=embedder) as mem:
        tip = mem.remember("Refresh the token before retrying a 401", agent="alice")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    workers = [ctx.Process(target=_feedback_worker, args=(store, tip.id, 40, barrier)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]
    with Engram(store, embedder=embedder) as mem:
        after = mem.get(tip.id)
        assert after.attempts == 80.0
        assert after.successes == 80.0
        assert [c.action for c in mem.history(tip.id)].count("feedback") == 80

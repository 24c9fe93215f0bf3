"""Who said it: assistant turns weighed down unless the query asks about the assistant (pure functions),
and the weighting applied to a real store's candidates."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.retrieval.context import (
    ASSISTANT_WEIGHT,
    ROLE_KEY,
    asks_about_assistant,
    named_speaker,
    weigh_named_speakers,
    weigh_speakers,
)
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import Fused, fuse
from engramdb.retrieval.text import query_terms
from engramdb.storage.base import Filter

IDS = "abcdefgh"
relevances = st.floats(min_value=0, max_value=1, allow_nan=False)
fused_lists = st.lists(st.tuples(st.sampled_from(IDS), relevances), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Fused(i, r, None, None) for i, r in xs), key=lambda f: (-f.relevance, f.id))
)
role_maps = st.dictionaries(st.sampled_from(IDS), st.sampled_from(["user", "assistant", "Caroline", 3]), max_size=8)


@given(fused_lists, role_maps, st.floats(min_value=0, max_value=1))
def test_weighing_keeps_candidates_and_only_lowers_assistant_turns(fused, roles, weight):
    out = weigh_speakers(fused, roles, query="what did I buy", weight=weight)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    before = {f.id: f.relevance for f in fused}
    for f in out:
        expected = before[f.id] * weight if roles.get(f.id) == "assistant" else before[f.id]
        assert f.relevance == pytest.approx(expected)
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)


@given(fused_lists, role_maps)
def test_weight_one_or_a_question_about_the_assistant_changes_nothing(fused, roles):
    assert weigh_speakers(fused, roles, query="what did I buy", weight=1.0) == list(fused)
    assert weigh_speakers(fused, roles, query="Can you remind me what you told me about tea?") == list(fused)


def test_a_user_turn_overtakes_a_slightly_better_assistant_reply():
    fused = [Fused("reply", 0.8, None, None), Fused("fact", 0.6, None, None), Fused("other", 0.1, None, None)]
    out = weigh_speakers(fused, {"reply": "assistant", "fact": "user"}, query="Which book did I finish?")
    assert [f.id for f in out] == ["fact", "reply", "other"]
    assert out[1].relevance == pytest.approx(0.8 * ASSISTANT_WEIGHT)


def test_an_assistant_reply_that_is_the_only_strong_match_stays_first():
    fused = [Fused("reply", 0.9, None, None), Fused("fact", 0.3, None, None)]
    assert [f.id for f in weigh_speakers(fused, {"reply": "assistant"}, query="ratio of tea tree oil")] == [
        "reply",
        "fact",
    ]


def test_bad_weight_is_rejected():
    with pytest.raises(ValueError, match="weight"):
        weigh_speakers([], {}, query="q", weight=1.5)


@pytest.mark.parametrize(
    ("query", "about"),
    [
        ("I remember you told me to dilute tea tree oil. What was the ratio?", True),
        ("Can you remind me which chapter discusses vocal prayer?", True),
        ("I was going through our previous chat about the rotation sheet", True),
        ("What was Andy wearing in the script you wrote?", True),
        ("Can you suggest some activities for my commute?", False),
        ("Which book did I finish a week ago?", False),
        ("What do you think, should I buy a NAS now?", False),
    ],
)
def test_questions_about_the_assistant_are_recognised(query, about):
    assert asks_about_assistant(query) is about


# -- on a real store: roles recorded as ShortTermMemory.promote records them -------------------------------


def test_weighing_the_store_candidates_puts_the_users_fact_first(mem: Engram) -> None:
    turns = [
        ("user", "I just finished reading The Nightingale by Kristin Hannah, what should I read next?"),
        (
            "assistant",
            "Since you finished reading The Nightingale, here are books to read next: The Book Thief, "
            "All the Light We Cannot See, The Alice Network. Each is a novel you can finish reading in a week.",
        ),
        ("user", "I also planted tomatoes in the garden this spring."),
        ("assistant", "Tomatoes like sun and regular watering."),
    ]
    stored = mem.remember_many(
        [
            {"content": f"{role}: {text}", "agent": "a", "kind": "conversation", "metadata": {ROLE_KEY: role}}
            for role, text in turns
        ]
    )
    query = "Which book did I finish reading?"
    flt = Filter(agent="a")
    keyword = mem.store.search.keyword_candidates(query_terms(query), flt, limit=10)
    vector = mem.store.search.vector_candidates(mem.embedder.embed([query])[0], flt, limit=10)
    fused = fuse(keyword, vector)
    roles = {m.id: m.metadata.get(ROLE_KEY) for m in mem.store.memories.get_many([f.id for f in fused], flt).values()}
    weighed = weigh_speakers(fused, roles, query=query)
    # The long reply repeats the question's words and leads both channels' fusion; the user's own turn wins after.
    assert fused[0].id == stored[1].id
    assert weighed[0].id == stored[0].id
    # Only reordered: the same candidates, the user's turns at their own relevance.
    assert {f.id for f in weighed} == {f.id for f in fused}
    own = {f.id: f.relevance for f in fused}
    assert all(f.relevance == own[f.id] for f in weighed if roles[f.id] == "user")


@pytest.mark.skipif(
    "assistant_weight" not in inspect.signature(HybridSearcher).parameters,
    reason="HybridSearcher has no speaker weighting yet (the hybrid.py change is pending)",
)
def test_search_ranks_the_users_fact_above_the_assistants_reply(mem: Engram) -> None:
    turns = [
        ("user", "I just finished reading The Nightingale by Kristin Hannah, what should I read next?"),
        (
            "assistant",
            "Since you finished reading The Nightingale, here are books to read next: The Book Thief, "
            "All the Light We Cannot See, The Alice Network. Each is a novel you can finish reading in a week.",
        ),
        ("user", "I also planted tomatoes in the garden this spring."),
        ("assistant", "Tomatoes like sun and regular watering."),
    ]
    stored = mem.remember_many(
        [
            {"content": f"{role}: {text}", "agent": "a", "kind": "conversation", "metadata": {ROLE_KEY: role}}
            for role, text in turns
        ]
    )
    now = datetime.now(UTC)
    flt = Filter(agent="a")
    weighed = HybridSearcher(mem.store, mem.embedder)
    plain = HybridSearcher(mem.store, mem.embedder, assistant_weight=1.0)  # type: ignore[call-arg]
    try:
        about_me = "Which book did I finish reading?"
        assert plain.search(about_me, flt, limit=2, now=now, touch=False)[0].memory.id == stored[1].id
        assert weighed.search(about_me, flt, limit=2, now=now, touch=False)[0].memory.id == stored[0].id
        # Asked what the assistant said, the reply keeps its full weight.
        about_you = "Can you remind me which books you suggested I read next after The Nightingale?"
        a = weighed.search(about_you, flt, limit=4, now=now, touch=False)
        b = plain.search(about_you, flt, limit=4, now=now, touch=False)
        assert [(h.memory.id, h.score) for h in a] == [(h.memory.id, h.score) for h in b]
    finally:
        weighed.close()
        plain.close()


# -- a speaker the query names ------------------------------------------------------------------------------


@given(fused_lists, role_maps, st.floats(min_value=0, max_value=1))
def test_naming_a_speaker_keeps_candidates_and_only_lowers_the_others_turns(fused, roles, weight):
    out = weigh_named_speakers(fused, roles, query="What did caroline paint?", weight=weight)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    before = {f.id: f.relevance for f in fused}
    named = named_speaker("What did caroline paint?", {roles.get(f.id) for f in fused})
    for f in out:
        other = named is not None and isinstance(roles.get(f.id), str) and roles.get(f.id) != named
        assert f.relevance == pytest.approx(before[f.id] * weight if other else before[f.id])
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)


@given(fused_lists, role_maps)
def test_no_name_several_names_or_weight_one_change_nothing(fused, roles):
    assert weigh_named_speakers(fused, roles, query="what did I buy", weight=0.5) == list(fused)
    assert weigh_named_speakers(fused, roles, query="What did Caroline paint?", weight=1.0) == list(fused)
    pair = [Fused("x", 0.9, None, None), Fused("y", 0.8, None, None)]
    both = {"x": "Melanie", "y": "Caroline"}
    assert weigh_named_speakers(pair, both, query="Did Caroline and Melanie meet?", weight=0.5) == pair


def test_the_named_speakers_own_turn_overtakes_the_other_speakers_mention():
    fused = [Fused("mel", 0.7, None, None), Fused("caro", 0.6, None, None), Fused("note", 0.65, None, None)]
    roles = {"mel": "Melanie", "caro": "Caroline"}
    out = weigh_named_speakers(fused, roles, query="What did Caroline research?", weight=0.8)
    assert [f.id for f in out] == ["note", "caro", "mel"]
    assert out[2].relevance == pytest.approx(0.7 * 0.8)


def test_generic_roles_are_not_names():
    assert named_speaker("what did the user say?", {"user", "assistant"}) is None
    assert named_speaker("What did JON say?", {"Jon", "Gina"}) == "Jon"
    with pytest.raises(ValueError, match="weight"):
        weigh_named_speakers([], {}, query="q", weight=-0.1)


def test_search_with_a_named_speaker_prefers_that_speakers_turn(mem: Engram) -> None:
    turns = [
        ("Melanie", "Caroline painted a lake at sunset last week, and she showed me the painting!"),
        ("Caroline", "Thanks! The orange sky over the water took me all weekend."),
        ("Melanie", "My kids loved the museum trip."),
    ]
    stored = mem.remember_many(
        [
            {"content": f"{who}: {text}", "agent": "a", "kind": "conversation", "metadata": {ROLE_KEY: who}}
            for who, text in turns
        ]
    )
    now = datetime.now(UTC)
    flt = Filter(agent="a")
    query = "What did Caroline paint?"
    plain = HybridSearcher(mem.store, mem.embedder)
    named = HybridSearcher(mem.store, mem.embedder)
    named.other_speaker_weight = 0.1
    try:
        before = plain.search(query, flt, limit=3, now=now, touch=False)
        after = named.search(query, flt, limit=3, now=now, touch=False)
        # Melanie's mention holds the question's words; Caroline's own reply wins once the other speaker's
        # turns count at a tenth.
        assert before[0].memory.id == stored[0].id
        assert after[0].memory.id == stored[1].id
        assert {h.memory.id for h in after} == {h.memory.id for h in before}
    finally:
        plain.close()
        named.close()

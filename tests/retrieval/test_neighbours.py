"""Neighbour spreading and contextual keys (pure functions), and spreading inside a real search."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.models import Hit
from engramdb.retrieval.context import FOLLOWS_KEY, follows_links, spread_to_neighbours
from engramdb.retrieval.hybrid import HybridSearcher
from engramdb.retrieval.ranking import Fused
from engramdb.storage.base import Filter

IDS = "abcdefgh"
relevances = st.floats(min_value=0, max_value=1, allow_nan=False)
fused_lists = st.lists(st.tuples(st.sampled_from(IDS), relevances), max_size=8, unique_by=lambda t: t[0]).map(
    lambda xs: sorted((Fused(i, r, None, None) for i, r in xs), key=lambda f: (-f.relevance, f.id))
)
link_maps = st.dictionaries(st.sampled_from(IDS), st.sampled_from(IDS), max_size=8).map(
    lambda d: {k: v for k, v in d.items() if k != v}
)


@given(fused_lists, link_maps, st.floats(min_value=0, max_value=2))
def test_spreading_keeps_candidates_and_bounds(fused, links, weight):
    out = spread_to_neighbours(fused, links, {}, weight=weight)
    assert sorted(f.id for f in out) == sorted(f.id for f in fused)
    assert all(-1e-9 <= f.relevance <= 1 + 1e-9 for f in out)
    assert [f.relevance for f in out] == sorted((f.relevance for f in out), reverse=True)


@given(fused_lists, link_maps, st.floats(min_value=0, max_value=2))
def test_spreading_never_lowers_a_candidate_below_its_own_share(fused, links, weight):
    before = {f.id: f.relevance for f in fused}
    for f in spread_to_neighbours(fused, links, {}, weight=weight):
        assert f.relevance >= before[f.id] / (1 + weight) - 1e-9


@given(fused_lists, st.floats(min_value=0, max_value=2))
def test_without_links_the_order_is_unchanged(fused, weight):
    assert [f.id for f in spread_to_neighbours(fused, {}, {}, weight=weight)] == [f.id for f in fused]


@given(fused_lists, link_maps)
def test_zero_weight_is_the_identity(fused, links):
    assert spread_to_neighbours(fused, links, {}, weight=0.0) == list(fused)


def test_an_answer_turn_rises_with_its_question():
    # "What did you adopt?" matches the query best; the answer turn after it barely does, and an
    # unrelated turn sits between them. Linked, the answer overtakes the unrelated turn.
    fused = [Fused("question", 1.0, None, None), Fused("other", 0.4, None, None), Fused("answer", 0.3, None, None)]
    out = spread_to_neighbours(fused, {"answer": "question"}, {"answer": 40, "question": 60, "other": 50}, weight=0.5)
    assert [f.id for f in out] == ["question", "answer", "other"]


def test_a_long_turn_gets_less_from_its_neighbours():
    fused = [Fused("q", 1.0, None, None), Fused("short", 0.2, None, None), Fused("long", 0.2, None, None)]
    links = {"short": "q", "long": "q"}
    out = {f.id: f.relevance for f in spread_to_neighbours(fused, links, {"short": 50, "long": 2000}, short=200)}
    assert out["short"] > out["long"] > 0.2 / 1.5


def test_links_to_memories_no_channel_found_add_nothing():
    fused = [Fused("a", 0.9, None, None), Fused("b", 0.5, None, None)]
    out = spread_to_neighbours(fused, {"b": "missing", "a": "missing2"}, {}, weight=0.5)
    assert [(f.id, round(f.relevance, 6)) for f in out] == [("a", 0.6), ("b", round(0.5 / 1.5, 6))]


def test_follows_links_read_only_string_ids():
    metas = [("a", {FOLLOWS_KEY: "b"}), ("b", {}), ("c", {FOLLOWS_KEY: 3}), ("d", {FOLLOWS_KEY: "d"}), ("e", {"x": 1})]
    assert follows_links(metas) == {"a": "b"}


# -- in a real search: a real SQLite store and the real embedding model ---------------------------

DISTRACTORS = [
    "Caroline: The support group met on Tuesday and we talked about coming out.",
    "Melanie: I painted a sunrise over the lake last weekend.",
    "Caroline: My counselling course starts in September.",
    "Melanie: The kids loved the camping trip, we roasted marshmallows.",
    "Caroline: I went to a pride parade with friends in June.",
    "Melanie: Pottery class was fun, I made a blue bowl.",
    "Caroline: I am reading a book about adoption agencies.",
    "Melanie: We adopted a new routine of morning runs in May.",
]


def _rank_of(hits: list[Hit], memory_id: str) -> int:
    return next((i for i, h in enumerate(hits) if h.memory.id == memory_id), len(hits))


def test_linked_answer_turn_ranks_higher_in_a_real_search(mem: Engram) -> None:
    for text in DISTRACTORS:
        mem.remember(text, agent="a", kind="conversation")
    question = mem.remember("Caroline: Which pet did you adopt in May, Melanie?", agent="a", kind="conversation")
    answer = mem.remember(
        "Melanie: Oh, a greyhound called Pixel!", agent="a", kind="conversation", metadata={FOLLOWS_KEY: question.id}
    )
    now = datetime.now(UTC)
    flt = Filter(agent="a")
    query = "What pet did Melanie adopt in May?"
    plain = HybridSearcher(mem.store, mem.embedder, neighbour_weight=0.0)
    spread = HybridSearcher(mem.store, mem.embedder)
    try:
        without = plain.search(query, flt, limit=10, now=now, touch=False)
        with_links = spread.search(query, flt, limit=10, now=now, touch=False)
    finally:
        plain.close()
        spread.close()
    assert _rank_of(with_links, question.id) == 0
    assert _rank_of(with_links, answer.id) == 1
    assert _rank_of(without, answer.id) > 1
    # Spreading only reorders: the same memories are found.
    assert {h.memory.id for h in with_links} == {h.memory.id for h in without}


def test_without_links_spreading_changes_nothing_in_a_real_search(mem: Engram) -> None:
    for text in DISTRACTORS:
        mem.remember(text, agent="a", kind="conversation")
    now = datetime.now(UTC)
    flt = Filter(agent="a")
    plain = HybridSearcher(mem.store, mem.embedder, neighbour_weight=0.0)
    spread = HybridSearcher(mem.store, mem.embedder)
    try:
        for query in ("adoption", "What did Melanie paint?", "pride parade in June"):
            a = plain.search(query, flt, limit=5, now=now, touch=False)
            b = spread.search(query, flt, limit=5, now=now, touch=False)
            assert [(h.memory.id, h.score) for h in a] == [(h.memory.id, h.score) for h in b]
    finally:
        plain.close()
        spread.close()


def test_remember_many_links_each_turn_to_the_one_before_in_its_session(mem: Engram) -> None:
    turns = mem.remember_many(
        [
            {"content": "A: what did you adopt?", "kind": "conversation", "agent": "a", "metadata": {"session": 1}},
            {"content": "B: a greyhound!", "kind": "conversation", "agent": "a", "metadata": {"session": 1}},
            {"content": "A: new session", "kind": "conversation", "agent": "a", "metadata": {"session": 2}},
            {"content": "B: a fact", "kind": "knowledge", "agent": "a", "metadata": {"session": 2}},
            {"content": "B: mine", "kind": "conversation", "agent": "a", "metadata": {"session": 2, "follows": "x"}},
            {"content": "C: another agent", "kind": "conversation", "agent": "c", "metadata": {"session": 1}},
        ]
    )
    follows = [t.metadata.get(FOLLOWS_KEY) for t in turns]
    assert follows == [None, turns[0].id, None, None, "x", None]
    # The link is stored, not only returned.
    assert mem.get(turns[1].id, agent="a").metadata[FOLLOWS_KEY] == turns[0].id

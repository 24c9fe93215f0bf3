"""The storage contract: every backend passes these tests (see conftest.BACKENDS).

Vectors are seeded random unit vectors: the storage layer never needs the embedding model.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import DIM, MODEL, NOW, StoreFactory, add, later, memory, unit_vectors

from engramdb._util import new_id
from engramdb.errors import NotFound, StorageError, ValidationError
from engramdb.storage.base import (
    MODEL_META_KEY,
    AuditRepo,
    CandidateSource,
    Filter,
    MemoryRepo,
    MetaRepo,
    ShareRepo,
    Store,
    VectorRepo,
)


def ids_of(items: list[Any]) -> list[str]:
    return [getattr(x, "id", None) or x.memory.id for x in items]


def everyone() -> Filter:
    return Filter(agent=None)


# -- meta --------------------------------------------------------------------------------------


def test_meta_round_trip(store: Store) -> None:
    assert store.meta.get("colour") is None
    store.meta.set("colour", "blue")
    store.meta.set("colour", "green")
    assert store.meta.get("colour") == "green"


def test_store_bundles_every_role(store: Store) -> None:
    assert isinstance(store, Store)
    assert isinstance(store.location, str)
    assert isinstance(store.meta, MetaRepo)
    assert isinstance(store.memories, MemoryRepo)
    assert isinstance(store.search, CandidateSource)
    assert isinstance(store.vectors, VectorRepo)
    assert isinstance(store.shares, ShareRepo)
    assert isinstance(store.audit, AuditRepo)


# -- add and get -------------------------------------------------------------------------------


def test_add_then_get_round_trips_every_field(store: Store) -> None:
    m = memory(
        "the deploy failed because of a stale lockfile",
        agent="alice",
        kind="failure",
        tags=("deploy", "ci"),
        metadata={"repo": "api", "nested": {"n": [1, 2.5, None, True]}, "unicode": "naïve ☃"},
        last_accessed=later(5),
        access_count=3,
        confidence=0.8,
        successes=1.5,
        attempts=2.0,
        visibility="private",
        redacted=("email",),
    )
    add(store, [m])
    assert store.memories.get(m.id) == m
    assert store.memories.get(m.id, Filter(agent="alice")) == m


def test_get_missing_is_none_and_get_many_keeps_order(store: Store) -> None:
    ms = [memory(f"note {i}") for i in range(3)]
    add(store, ms)
    assert store.memories.get("nope") is None
    got = store.memories.get_many([ms[2].id, "nope", ms[0].id])
    assert list(got) == [ms[2].id, ms[0].id]
    assert store.memories.get_many([]) == {}


def test_add_writes_a_create_history_entry(store: Store) -> None:
    m = memory("first words", tags=("t",))
    store.memories.add([m], None, model_id=MODEL, actor="bob")
    [change] = store.memories.history(m.id)
    assert change.action == "create"
    assert change.actor == "bob"
    assert change.at == m.created_at
    assert change.after is not None
    assert change.after["content"] == "first words"
    assert change.after["tags"] == ["t"]


def test_add_is_all_or_nothing_when_an_id_exists(store: Store) -> None:
    first = memory("already here")
    add(store, [first])
    fresh = memory("brand new")
    with pytest.raises(ValidationError, match="already exists"):
        add(store, [fresh, memory("clash", id=first.id)], seed=1)
    assert store.memories.get(fresh.id) is None
    assert store.memories.history(fresh.id) == []
    assert store.memories.count(everyone()) == 1
    assert store.memories.get(first.id) == first
    assert store.vectors.count_stale(MODEL) == 0


def test_add_rejects_a_batch_with_a_duplicate_id(store: Store) -> None:
    m = memory("twice")
    with pytest.raises(ValidationError):
        add(store, [m, m])
    assert store.memories.count(everyone()) == 0


def test_add_rejects_mismatched_vectors_and_bad_fields(store: Store) -> None:
    ms = [memory("a"), memory("b")]
    with pytest.raises(ValidationError):
        store.memories.add(ms, unit_vectors(3), model_id=MODEL, actor="t")
    with pytest.raises(ValidationError):
        store.memories.add([memory("x", kind="nonsense")], None, model_id=MODEL, actor="t")
    with pytest.raises(ValidationError):
        store.memories.add([memory("x", metadata={"when": object()})], None, model_id=MODEL, actor="t")
    nan = unit_vectors(2)
    nan[0, 0] = np.nan
    with pytest.raises(ValidationError):
        store.memories.add(ms, nan, model_id=MODEL, actor="t")
    assert store.memories.count(everyone()) == 0


def test_add_nothing_is_a_no_op(store: Store) -> None:
    store.memories.add([], None, model_id=MODEL, actor="t")
    assert store.memories.count(everyone()) == 0


# -- list, count and filters -------------------------------------------------------------------


def test_list_is_newest_first_with_limit_and_offset(store: Store) -> None:
    ms = [memory(f"note {i}", at=later(i)) for i in range(5)]
    add(store, ms)
    flt = Filter(agent="alice")
    assert ids_of(store.memories.list(flt)) == [m.id for m in reversed(ms)]
    assert ids_of(store.memories.list(flt, limit=2, offset=1)) == [ms[3].id, ms[2].id]
    assert store.memories.list(flt, limit=0) == []
    assert store.memories.count(flt) == 5


def test_filters_by_kind_tags_and_ids(store: Store) -> None:
    a = memory("a", kind="decision", tags=("auth", "db"))
    b = memory("b", kind="failure", tags=("auth",))
    c = memory("c", kind="knowledge", tags=("db",))
    add(store, [a, b, c])

    def ids(**kw: Any) -> set[str]:
        flt = Filter(agent="alice", **kw)
        found = {m.id for m in store.memories.list(flt)}
        assert store.memories.count(flt) == len(found)
        return found

    assert ids(kinds=("decision", "failure")) == {a.id, b.id}
    assert ids(kinds=()) == set()
    assert ids(tags=("auth",)) == {a.id, b.id}
    assert ids(tags=("auth", "db")) == {a.id}
    assert ids(tags=("auth", "auth")) == {a.id, b.id}
    assert ids(tags=()) == {a.id, b.id, c.id}
    assert ids(tags=("nope",)) == set()
    assert ids(ids=(a.id, c.id, "missing")) == {a.id, c.id}
    assert ids(ids=()) == set()
    assert ids(kinds=("decision", "knowledge"), tags=("db",), ids=(c.id,)) == {c.id}


def test_agent_none_sees_every_agent(store: Store) -> None:
    add(store, [memory("a", agent="alice"), memory("b", agent="bob")])
    assert store.memories.count(everyone()) == 2
    assert {m.agent for m in store.memories.list(everyone())} == {"alice", "bob"}
    assert all(m.shared_by is None for m in store.memories.list(everyone()))


# -- visibility and sharing --------------------------------------------------------------------


def visible_ids(store: Store, agent: str, *, include_shared: bool = True) -> set[str]:
    """What ``agent`` sees through every read path; asserts the paths agree."""
    flt = Filter(agent=agent, include_shared=include_shared)
    listed = {m.id for m in store.memories.list(flt, limit=10_000)}
    assert store.memories.count(flt) == len(listed)
    everything = [m.id for m in store.memories.list(everyone(), limit=10_000)]
    assert set(store.memories.get_many(everything, flt)) == listed
    assert {i for i in everything if store.memories.get(i, flt) is not None} == listed
    keyword = {c.id for c in store.search.keyword_candidates(["shared", "word"], flt, limit=10_000)}
    assert keyword <= listed
    query = unit_vectors(1, seed=99)[0]
    vector = {c.id for c in store.search.vector_candidates(query, flt, limit=10_000)}
    assert vector <= listed
    return listed


def test_private_memories_of_others_are_invisible(store: Store) -> None:
    mine = memory("shared word alice", agent="alice")
    theirs = memory("shared word bob", agent="bob")
    add(store, [mine, theirs])
    assert visible_ids(store, "alice") == {mine.id}
    assert visible_ids(store, "bob") == {theirs.id}
    assert visible_ids(store, "carol") == set()
    assert store.memories.get(theirs.id, Filter(agent="alice")) is None


def test_public_memories_are_visible_to_everyone_with_shared_by(store: Store) -> None:
    pub = memory("shared word public", agent="bob", visibility="public")
    add(store, [pub])
    assert visible_ids(store, "alice") == {pub.id}
    assert visible_ids(store, "alice", include_shared=False) == set()
    seen = store.memories.get(pub.id, Filter(agent="alice"))
    assert seen is not None
    assert seen.shared_by == "bob"
    own = store.memories.get(pub.id, Filter(agent="bob"))
    assert own is not None
    assert own.shared_by is None


def test_share_with_one_agent_then_everyone_then_unshare(store: Store) -> None:
    m = memory("shared word bob", agent="bob")
    other = memory("shared word bob private", agent="bob")
    add(store, [m, other])
    assert store.shares.share([m.id], from_agent="bob", to_agent="alice", at=later(1)) == 1
    assert store.shares.share([m.id], from_agent="bob", to_agent="alice", at=later(2)) == 0

    assert visible_ids(store, "alice") == {m.id}
    assert visible_ids(store, "carol") == set()
    seen = store.memories.get(m.id, Filter(agent="alice"))
    assert seen is not None
    assert seen.shared_by == "bob"
    assert seen.visibility == "shared"

    assert store.shares.share([m.id], from_agent="bob", to_agent="*", at=later(3)) == 1
    assert visible_ids(store, "carol") == {m.id}

    assert store.shares.unshare([m.id], from_agent="bob", to_agent="alice", at=later(4)) == 1
    assert visible_ids(store, "alice") == {m.id}  # still shared with everyone
    assert store.shares.unshare([m.id], from_agent="bob", to_agent="*", at=later(5)) == 1
    assert visible_ids(store, "alice") == set()
    assert visible_ids(store, "carol") == set()
    back = store.memories.get(m.id)
    assert back is not None
    assert back.visibility == "private"
    assert [c.action for c in store.memories.history(m.id)] == ["create", "share", "share", "unshare", "unshare"]


def test_only_the_owner_can_share(store: Store) -> None:
    m = memory("shared word bob", agent="bob")
    add(store, [m])
    assert store.shares.share([m.id, "missing"], from_agent="alice", to_agent="carol", at=NOW) == 0
    assert visible_ids(store, "carol") == set()
    with pytest.raises(ValidationError):
        store.shares.share([m.id], from_agent="bob", to_agent="bob", at=NOW)


def test_unshare_everything_withdraws_direct_shares_too(store: Store) -> None:
    m = memory("shared word bob", agent="bob")
    add(store, [m])
    store.shares.share([m.id], from_agent="bob", to_agent="alice", at=NOW)
    store.shares.share([m.id], from_agent="bob", to_agent="dave", at=NOW)
    assert store.shares.unshare([m.id], from_agent="bob", to_agent="*", at=NOW) == 1
    assert visible_ids(store, "alice") == set()
    assert visible_ids(store, "dave") == set()


def test_making_a_memory_private_withdraws_its_shares(store: Store) -> None:
    m = memory("shared word bob", agent="bob")
    add(store, [m])
    store.shares.share([m.id], from_agent="bob", to_agent="alice", at=NOW)
    store.memories.update(m.id, {"visibility": "private"}, vector=None, model_id=MODEL, actor="bob", at=later(1))
    assert visible_ids(store, "alice") == set()
    store.memories.update(m.id, {"visibility": "shared"}, vector=None, model_id=MODEL, actor="bob", at=later(2))
    assert visible_ids(store, "alice") == set()  # consent is not restored by a visibility flag


_AGENTS = ("ann", "ben", "cat")
_memory_specs = st.lists(
    st.tuples(
        st.sampled_from(_AGENTS),
        st.sampled_from(("private", "shared", "public")),
        st.lists(st.sampled_from((*_AGENTS, "*")), max_size=2),
        st.sampled_from(("decision", "knowledge")),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=_memory_specs, reader=st.sampled_from(_AGENTS), include_shared=st.booleans())
def test_no_read_path_leaks_a_memory_the_reader_may_not_see(
    store: Store, specs: list[tuple[str, str, list[str], str]], reader: str, include_shared: bool
) -> None:
    # Every example uses fresh agent names, so examples sharing the store cannot see each other.
    run = new_id()[:8]
    expected: set[str] = set()
    memories = []
    for i, (owner, visibility, share_to, kind) in enumerate(specs):
        m = memory(f"shared word {i}", agent=f"{owner}-{run}", visibility=visibility, kind=kind)
        memories.append((m, share_to))
        targets = {f"{t}-{run}" if t != "*" else "*" for t in share_to}
        targets.discard(m.agent)
        allowed = m.agent == f"{reader}-{run}" or (
            include_shared and (visibility == "public" or f"{reader}-{run}" in targets or "*" in targets)
        )
        if allowed:
            expected.add(m.id)
    add(store, [m for m, _ in memories], seed=len(specs))
    try:
        for m, share_to in memories:
            for target in share_to:
                to = target if target == "*" else f"{target}-{run}"
                if to != m.agent:
                    store.shares.share([m.id], from_agent=m.agent, to_agent=to, at=NOW)
        assert visible_ids(store, f"{reader}-{run}", include_shared=include_shared) == expected
        for kind in ("decision", "knowledge"):
            flt = Filter(agent=f"{reader}-{run}", include_shared=include_shared, kinds=(kind,))
            want = {m.id for m, _ in memories if m.id in expected and m.kind == kind}
            assert {m.id for m in store.memories.list(flt)} == want
    finally:
        # Public memories are visible to every agent, so the next example must not meet these.
        for m, _ in memories:
            store.memories.delete(m.id, actor="test", at=NOW)


# -- update ------------------------------------------------------------------------------------


def test_update_changes_fields_and_records_only_what_changed(store: Store) -> None:
    m = memory("old text", tags=("a",), metadata={"k": 1}, confidence=0.5)
    add(store, [m])
    updated = store.memories.update(
        m.id,
        {"content": "new text", "tags": ["a", "b"], "confidence": 0.5, "metadata": {"k": 1}},
        vector=unit_vectors(1, seed=5)[0],
        model_id=MODEL,
        actor="alice",
        at=later(10),
    )
    assert updated.content == "new text"
    assert updated.tags == ("a", "b")
    assert updated.updated_at == later(10)
    assert updated.created_at == m.created_at
    assert store.memories.get(m.id) == updated
    change = store.memories.history(m.id)[-1]
    assert change.action == "update"
    assert change.actor == "alice"
    assert change.before == {"content": "old text", "tags": ["a"]}
    assert change.after == {"content": "new text", "tags": ["a", "b"]}
    assert {x.id for x in store.memories.list(Filter(agent="alice", tags=("b",)))} == {m.id}


def test_update_with_nothing_changed_writes_no_history(store: Store) -> None:
    m = memory("same", confidence=0.7)
    add(store, [m])
    same = store.memories.update(m.id, {"confidence": 0.7}, vector=None, model_id=MODEL, actor="a", at=later(1))
    assert same == m
    assert len(store.memories.history(m.id)) == 1


def test_update_custom_action_and_outcome_fields(store: Store) -> None:
    m = memory("retry with backoff")
    add(store, [m])
    updated = store.memories.update(
        m.id,
        {"successes": 2.5, "attempts": 3, "last_accessed": later(2), "access_count": 4},
        vector=None,
        model_id=MODEL,
        actor="alice",
        at=later(3),
        action="feedback",
    )
    assert (updated.successes, updated.attempts, updated.access_count) == (2.5, 3.0, 4)
    assert updated.last_accessed == later(2)
    assert updated.success_rate == pytest.approx(3.5 / 5)
    assert store.memories.history(m.id)[-1].action == "feedback"


def test_update_rejects_unknown_fields_and_missing_memories(store: Store) -> None:
    m = memory("x")
    add(store, [m])
    with pytest.raises(ValidationError):
        store.memories.update(m.id, {"agent": "mallory"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    with pytest.raises(ValidationError):
        store.memories.update(m.id, {"visibility": "secret"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    with pytest.raises(NotFound):
        store.memories.update("missing", {"content": "y"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    assert store.memories.get(m.id) == m


def test_update_content_moves_keyword_matches(store: Store) -> None:
    m = memory("the zeppelin landed")
    add(store, [m])
    flt = Filter(agent="alice")
    assert ids_of(store.search.keyword_candidates(["zeppelin"], flt, limit=5)) == [m.id]
    store.memories.update(m.id, {"content": "the submarine surfaced"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    assert store.search.keyword_candidates(["zeppelin"], flt, limit=5) == []
    assert ids_of(store.search.keyword_candidates(["submarine"], flt, limit=5)) == [m.id]


def test_update_content_without_vector_drops_the_stale_vector(store: Store) -> None:
    m = memory("about cats")
    vecs = add(store, [m])
    store.memories.update(m.id, {"content": "about dogs"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    assert store.search.vector_candidates(vecs[0], Filter(agent="alice"), limit=5) == []
    assert store.vectors.count_stale(MODEL) == 1
    assert list(store.vectors.iter_stale(MODEL)) == [[(m.id, "about dogs")]]


# -- delete (forget) ---------------------------------------------------------------------------


def test_delete_removes_everything_and_scrubs_history(store: Store) -> None:
    m = memory("the vault code is tangerine", agent="bob", tags=("vault",))
    keep = memory("unrelated tangerine", agent="bob")
    vecs = add(store, [m, keep])
    store.memories.update(m.id, {"tags": ["vault", "x"]}, vector=None, model_id=MODEL, actor="bob", at=later(1))
    store.shares.share([m.id], from_agent="bob", to_agent="*", at=later(2))
    store.memories.delete(m.id, actor="bob", at=later(3))

    assert store.memories.get(m.id) is None
    flt = Filter(agent="bob")
    assert ids_of(store.search.keyword_candidates(["vault", "tangerine"], flt, limit=5)) == [keep.id]
    assert m.id not in ids_of(store.search.vector_candidates(vecs[0], flt, limit=5))
    assert store.memories.list(Filter(agent="bob", tags=("vault",))) == []
    assert visible_ids(store, "alice") == set()
    assert store.vectors.count_stale("other-model") == 1

    history = store.memories.history(m.id)
    assert [c.action for c in history] == ["create", "update", "share", "forget"]
    assert all(c.before is None and c.after is None for c in history)
    assert history[-1].actor == "bob"
    assert history[-1].at == later(3)
    with pytest.raises(NotFound):
        store.memories.delete(m.id, actor="bob", at=later(4))


# -- touch -------------------------------------------------------------------------------------


def test_touch_counts_accesses_without_history(store: Store) -> None:
    a, b = memory("a"), memory("b")
    add(store, [a, b])
    store.memories.touch([a.id, a.id, "missing"], at=later(1))
    store.memories.touch([a.id, b.id], at=later(2))
    store.memories.touch([], at=later(3))
    got = store.memories.get_many([a.id, b.id])
    assert (got[a.id].access_count, got[a.id].last_accessed) == (2, later(2))
    assert (got[b.id].access_count, got[b.id].last_accessed) == (1, later(2))
    assert got[a.id].updated_at == a.updated_at
    assert len(store.memories.history(a.id)) == 1


# -- keyword candidates ------------------------------------------------------------------------


def test_keyword_candidates_rank_by_bm25(store: Store) -> None:
    strong = memory("postgres postgres connection pool exhausted under postgres load")
    weak = memory("the postgres docs mention pools and many other unrelated things at length")
    none = memory("redis cache eviction")
    add(store, [weak, strong, none])
    found = store.search.keyword_candidates(["postgres"], Filter(agent="alice"), limit=10)
    assert ids_of(found) == [strong.id, weak.id]
    assert found[0].score > found[1].score
    assert ids_of(store.search.keyword_candidates(["postgres"], Filter(agent="alice"), limit=1)) == [strong.id]


def test_keyword_candidates_match_any_term_stems_and_tags(store: Store) -> None:
    a = memory("running the migrations", tags=("database",))
    b = memory("cache warmup")
    add(store, [a, b])
    flt = Filter(agent="alice")
    assert set(ids_of(store.search.keyword_candidates(["run", "cache"], flt, limit=10))) == {a.id, b.id}
    assert ids_of(store.search.keyword_candidates(["database"], flt, limit=10)) == [a.id]
    assert store.search.keyword_candidates([], flt, limit=10) == []
    assert store.search.keyword_candidates(["", "  "], flt, limit=10) == []
    assert store.search.keyword_candidates(["cache"], flt, limit=0) == []


@pytest.mark.parametrize(
    "term", ['say "hi"', "NOT", "OR", "AND", "NEAR", "content:x", "a*", "(", ")", "^", '"', "-", "don't", "ünïcode"]
)
def test_keyword_terms_are_literals(store: Store, term: str) -> None:
    add(store, [memory("plain text about NOT much")])
    store.search.keyword_candidates([term, "plain"], Filter(agent="alice"), limit=5)


def test_keyword_candidates_respect_kind_and_tag_filters(store: Store) -> None:
    a = memory("deploy rollback", kind="decision", tags=("ops",))
    b = memory("deploy rollback", kind="failure")
    add(store, [a, b])
    assert ids_of(store.search.keyword_candidates(["deploy"], Filter(agent="alice", kinds=("failure",)), limit=5)) == [
        b.id
    ]
    assert ids_of(store.search.keyword_candidates(["deploy"], Filter(agent="alice", tags=("ops",)), limit=5)) == [a.id]


# -- vector candidates -------------------------------------------------------------------------


def test_vector_candidates_exact_cosine_best_first(store: Store) -> None:
    ms = [memory(f"m{i}") for i in range(20)]
    vecs = add(store, ms)
    query = vecs[7]
    found = store.search.vector_candidates(query, Filter(agent="alice"), limit=5)
    assert found[0].id == ms[7].id
    assert found[0].score == pytest.approx(1.0, abs=1e-5)
    expected = np.argsort(-(vecs @ query))[:5]
    assert ids_of(found) == [ms[i].id for i in expected]
    assert [c.score for c in found] == pytest.approx(list((vecs @ query)[expected]), abs=1e-5)
    assert len(store.search.vector_candidates(query, Filter(agent="alice"), limit=100)) == 20
    assert store.search.vector_candidates(query, Filter(agent="alice"), limit=0) == []


def test_vector_candidates_apply_every_filter(store: Store) -> None:
    a = memory("a", kind="decision", tags=("x", "y"))
    b = memory("b", kind="failure", tags=("x",))
    c = memory("c", agent="bob")
    vecs = add(store, [a, b, c])

    def ids(**kw: Any) -> set[str]:
        return set(ids_of(store.search.vector_candidates(vecs[0], Filter(**kw), limit=10)))

    assert ids(agent="alice") == {a.id, b.id}
    assert ids(agent=None) == {a.id, b.id, c.id}
    assert ids(agent="alice", kinds=("failure",)) == {b.id}
    assert ids(agent="alice", kinds=("unknown",)) == set()
    assert ids(agent="alice", tags=("x", "y")) == {a.id}
    assert ids(agent="alice", tags=("x",), ids=(b.id, c.id)) == {b.id}
    assert ids(agent="carol") == set()


def test_vector_candidates_only_search_the_current_model(store: Store) -> None:
    a, b = memory("a"), memory("b")
    vecs = add(store, [a])
    assert store.meta.get(MODEL_META_KEY) == MODEL  # set by the first vectors written
    store.memories.add([b], unit_vectors(1, seed=3), model_id="other-model", actor="t")
    found = store.search.vector_candidates(unit_vectors(1, seed=3)[0], Filter(agent="alice"), limit=10)
    assert ids_of(found) == [a.id]
    assert store.vectors.count_stale(MODEL) == 1
    # Switching the store's model (what a re-embed does at the end) switches what is searched.
    store.vectors.set([a.id], vecs[:1], model_id="other-model")
    store.meta.set(MODEL_META_KEY, "other-model")
    assert set(ids_of(store.search.vector_candidates(vecs[0], Filter(agent="alice"), limit=10))) == {a.id, b.id}


def test_vector_query_must_match_the_dimension(store: Store) -> None:
    add(store, [memory("a")])
    with pytest.raises(ValidationError):
        store.search.vector_candidates(unit_vectors(1, dim=DIM + 1)[0], Filter(agent="alice"), limit=5)
    with pytest.raises(ValidationError):
        store.memories.add([memory("b")], unit_vectors(1, dim=DIM + 1), model_id=MODEL, actor="t")


def test_percent_signs_in_agent_and_model_names_are_plain_text(store: Store) -> None:
    """Names reach PostgreSQL's statements written inline (for its plans): a ``%`` must stay text, not a placeholder."""
    ms = [memory(f"note {i}", agent="100%_a") for i in range(3)]
    vecs = add(store, ms, model_id="model-%s-%")
    store.meta.set(MODEL_META_KEY, "model-%s-%")
    flt = Filter(agent="100%_a")
    assert ids_of(store.search.vector_candidates(vecs[1], flt, limit=1)) == [ms[1].id]
    near = store.search.vector_candidates_many([(vecs[0], flt), (vecs[2], flt)], limit=1, near=0.95)
    assert [ids_of(c) for c in near] == [[ms[0].id], [ms[2].id]]
    assert store.search.vector_candidates(vecs[1], Filter(agent="100%"), limit=5) == []


def test_a_model_keeps_one_dimension_unless_every_other_row_is_replaced(store: Store) -> None:
    ms = [memory(f"m{i}") for i in range(3)]
    add(store, ms)
    with pytest.raises(ValidationError, match="dimension"):  # two of three replaced: the third keeps DIM
        store.vectors.set([ms[0].id, ms[1].id], unit_vectors(2, dim=DIM + 1), model_id=MODEL)
    assert store.vectors.count_stale(MODEL) == 0  # nothing changed
    assert {len(v) for v in store.vectors.get([m.id for m in ms], model_id=MODEL).values()} == {DIM}
    store.vectors.set([m.id for m in ms], unit_vectors(3, dim=DIM + 1), model_id=MODEL)  # all of them: allowed
    assert {len(v) for v in store.vectors.get([m.id for m in ms], model_id=MODEL).values()} == {DIM + 1}
    assert store.vectors.count_stale(MODEL) == 0
    with pytest.raises(ValidationError, match="dimension"):
        store.memories.add([memory("new")], unit_vectors(1), model_id=MODEL, actor="t")
    store.memories.delete(ms[0].id, actor="t", at=NOW)
    assert store.vectors.count_stale(MODEL) == 0
    assert store.vectors.count_stale("other-model") == 2


def test_vector_cache_stays_in_step_with_writes(store: Store) -> None:
    ms = [memory(f"m{i}") for i in range(10)]
    vecs = add(store, ms)
    flt = Filter(agent="alice")
    assert ids_of(store.search.vector_candidates(vecs[3], flt, limit=1)) == [ms[3].id]  # cache loaded

    extra = memory("extra")
    extra_vec = add(store, [extra], seed=42)[0]
    assert ids_of(store.search.vector_candidates(extra_vec, flt, limit=1)) == [extra.id]

    moved = unit_vectors(1, seed=77)[0]
    store.memories.update(ms[3].id, {"content": "moved"}, vector=moved, model_id=MODEL, actor="a", at=NOW)
    assert ids_of(store.search.vector_candidates(moved, flt, limit=1)) == [ms[3].id]
    assert ms[3].id not in ids_of(store.search.vector_candidates(vecs[3], flt, limit=1))

    store.memories.update(ms[4].id, {"kind": "decision"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    found = store.search.vector_candidates(vecs[4], Filter(agent="alice", kinds=("decision",)), limit=5)
    assert ids_of(found) == [ms[4].id]

    store.memories.update(ms[5].id, {"visibility": "public"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    assert ids_of(store.search.vector_candidates(vecs[5], Filter(agent="bob"), limit=5)) == [ms[5].id]

    store.shares.share([ms[6].id], from_agent="alice", to_agent="bob", at=NOW)
    assert set(ids_of(store.search.vector_candidates(vecs[6], Filter(agent="bob"), limit=5))) == {ms[5].id, ms[6].id}

    store.memories.delete(ms[0].id, actor="a", at=NOW)
    assert ms[0].id not in ids_of(store.search.vector_candidates(vecs[0], flt, limit=20))
    assert len(store.search.vector_candidates(vecs[0], flt, limit=20)) == 10

    new_vecs = unit_vectors(2, seed=500)
    store.vectors.set([ms[1].id, ms[2].id], new_vecs, model_id=MODEL)
    assert ids_of(store.search.vector_candidates(new_vecs[1], flt, limit=1)) == [ms[2].id]


def test_vector_cache_sees_writes_of_another_instance(store_factory: StoreFactory) -> None:
    first, second = store_factory.open(), store_factory.open()
    ms = [memory(f"m{i}") for i in range(5)]
    vecs = add(first, ms)
    flt = Filter(agent="alice")
    assert ids_of(first.search.vector_candidates(vecs[0], flt, limit=1)) == [ms[0].id]

    extra = memory("from the other instance")
    extra_vec = add(second, [extra], seed=9)[0]
    assert ids_of(first.search.vector_candidates(extra_vec, flt, limit=1)) == [extra.id]

    second.memories.delete(ms[0].id, actor="a", at=NOW)
    assert ms[0].id not in ids_of(first.search.vector_candidates(vecs[0], flt, limit=10))

    moved = unit_vectors(1, seed=123)[0]
    second.memories.update(ms[1].id, {"content": "moved"}, vector=moved, model_id=MODEL, actor="a", at=NOW)
    assert ids_of(first.search.vector_candidates(moved, flt, limit=1)) == [ms[1].id]

    second.memories.update(ms[2].id, {"kind": "failure"}, vector=None, model_id=MODEL, actor="a", at=NOW)
    assert ids_of(first.search.vector_candidates(vecs[2], Filter(agent="alice", kinds=("failure",)), limit=5)) == [
        ms[2].id
    ]

    second.shares.share([ms[3].id], from_agent="alice", to_agent="bob", at=NOW)
    assert ids_of(first.search.vector_candidates(vecs[3], Filter(agent="bob"), limit=5)) == [ms[3].id]
    second.shares.unshare([ms[3].id], from_agent="alice", to_agent="bob", at=NOW)
    assert first.search.vector_candidates(vecs[3], Filter(agent="bob"), limit=5) == []


def assert_top_k(found: list[Any], reference: dict[str, float], k: int) -> None:
    """``found`` is a correct top-``k`` of ``reference`` (id -> cosine), up to float noise in ties."""
    assert len(found) == min(k, len(reference))
    scores = [c.score for c in found]
    assert scores == sorted(scores, reverse=True)
    for c in found:
        assert c.score == pytest.approx(reference[c.id], abs=1e-5)
    rest = [s for i, s in reference.items() if i not in {c.id for c in found}]
    if found and rest:
        assert min(scores) >= max(rest) - 1e-5


_cache_ops = st.lists(
    st.tuples(
        st.sampled_from(("add", "revector", "delete", "kind", "search")),
        st.integers(0, 10_000),
        st.booleans(),  # through a second instance (another connection) instead
    ),
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_cache_ops)
def test_vector_search_matches_brute_force_through_any_writes(
    store_factory: StoreFactory, ops: list[tuple[str, int, bool]]
) -> None:
    stores = store_factory.opened[:2]
    while len(stores) < 2:
        stores.append(store_factory.open())
    agent = f"agent-{new_id()[:8]}"  # examples share the stores; each has its own agent
    live: dict[str, tuple[np.ndarray, str]] = {}  # id -> (vector, kind)
    for step, (op, arg, second) in enumerate(ops):
        store = stores[int(second)]
        ids = sorted(live)
        if op == "add":
            ms = [memory(f"n{step}.{j}", agent=agent, kind=("decision", "failure")[j % 2]) for j in range(1 + arg % 3)]
            vecs = add(store, ms, seed=arg)
            live.update({m.id: (vecs[j], m.kind) for j, m in enumerate(ms)})
        elif op == "revector" and ids:
            target, vec = ids[arg % len(ids)], unit_vectors(1, seed=arg + 1)[0]
            store.memories.update(target, {"content": f"v{step}"}, vector=vec, model_id=MODEL, actor="t", at=NOW)
            live[target] = (vec, live[target][1])
        elif op == "delete" and ids:
            target = ids[arg % len(ids)]
            store.memories.delete(target, actor="t", at=NOW)
            del live[target]
        elif op == "kind" and ids:
            target = ids[arg % len(ids)]
            kind = "failure" if live[target][1] == "decision" else "decision"
            store.memories.update(target, {"kind": kind}, vector=None, model_id=MODEL, actor="t", at=NOW)
            live[target] = (live[target][0], kind)
        query = unit_vectors(1, seed=arg + 7)[0]
        for kinds in (None, ("decision",)):
            reference = {i: float(v @ query) for i, (v, kind) in live.items() if kinds is None or kind in kinds}
            flt = Filter(agent=agent, kinds=kinds)
            assert_top_k(stores[0].search.vector_candidates(query, flt, limit=4), reference, 4)
            assert_top_k(stores[1].search.vector_candidates(query, flt, limit=4), reference, 4)


# -- embedding maintenance ---------------------------------------------------------------------


def test_reembed_flow_with_missing_vectors(store: Store) -> None:
    with_vec = [memory(f"v{i}") for i in range(3)]
    add(store, with_vec)
    without = [memory(f"n{i}") for i in range(5)]
    store.memories.add(without, None, model_id=MODEL, actor="t")
    assert store.vectors.count_stale(MODEL) == 5
    assert store.vectors.count_stale("new-model") == 8

    done = 0
    for batch in store.vectors.iter_stale("new-model", batch=3):
        assert 1 <= len(batch) <= 3
        ids = [i for i, _ in batch]
        store.vectors.set(ids, unit_vectors(len(ids), seed=done), model_id="new-model")
        done += len(ids)
    assert done == 8
    assert store.vectors.count_stale("new-model") == 0
    assert list(store.vectors.iter_stale("new-model")) == []


def test_set_vectors_is_all_or_nothing(store: Store) -> None:
    m = memory("a")
    store.memories.add([m], None, model_id=MODEL, actor="t")
    with pytest.raises(NotFound):
        store.vectors.set([m.id, "missing"], unit_vectors(2), model_id=MODEL)
    assert store.vectors.count_stale(MODEL) == 1
    with pytest.raises(ValidationError):
        store.vectors.set([m.id], unit_vectors(2), model_id=MODEL)


# -- lifecycle ---------------------------------------------------------------------------------


def test_reopen_finds_everything(store_factory: StoreFactory) -> None:
    first = store_factory.open()
    m = memory("persistent fact", tags=("keep",), metadata={"a": 1})
    gone = memory("to forget")
    vecs = add(first, [m, gone])
    first.meta.set("colour", "blue")
    first.memories.update(m.id, {"confidence": 0.9}, vector=None, model_id=MODEL, actor="a", at=later(1))
    first.shares.share([m.id], from_agent="alice", to_agent="bob", at=later(2))
    first.memories.delete(gone.id, actor="a", at=later(3))
    first.close()

    again = store_factory.open()
    got = again.memories.get(m.id)
    assert got is not None
    assert got.confidence == 0.9
    assert got.tags == ("keep",)
    assert again.meta.get("colour") == "blue"
    assert [c.action for c in again.memories.history(m.id)] == ["create", "update", "share"]
    assert [c.action for c in again.memories.history(gone.id)] == ["create", "forget"]
    assert ids_of(again.search.vector_candidates(vecs[0], Filter(agent="alice"), limit=1)) == [m.id]
    assert ids_of(again.search.keyword_candidates(["persistent"], Filter(agent="bob"), limit=1)) == [m.id]
    assert again.memories.get(m.id, Filter(agent="bob")) is not None


def test_closed_store_refuses_calls(store: Store) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(StorageError):
        store.memories.count(everyone())
    with pytest.raises(StorageError):
        store.memories.add([memory("x")], None, model_id=MODEL, actor="t")


def test_one_instance_is_safe_across_threads(store: Store) -> None:
    def work(n: int) -> None:
        for i in range(20):
            m = memory(f"thread {n} note {i}", agent=f"agent{n}")
            vec = unit_vectors(1, seed=n * 100 + i)
            store.memories.add([m], vec, model_id=MODEL, actor="t")
            assert store.search.vector_candidates(vec[0], Filter(agent=f"agent{n}"), limit=1)[0].id == m.id
            store.memories.touch([m.id], at=NOW)
            store.search.keyword_candidates(["note"], Filter(agent=f"agent{n}"), limit=5)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(work, n) for n in range(4)]:
            future.result()  # re-raises anything a thread raised
    assert store.memories.count(everyone()) == 80
    assert all(m.access_count == 1 for m in store.memories.list(everyone(), limit=100))


# -- audit trail ---------------------------------------------------------------------------------


def _record(action: str, n: int, *, agent: str | None = "alice", memory_id: str | None = None) -> Any:
    from engramdb.models.audit import AuditRecord

    return AuditRecord(action=action, agent=agent, memory_id=memory_id, at=later(n), detail={"n": n})


def test_audit_append_numbers_chains_and_keeps_a_head(store: Store) -> None:
    from engramdb.auditchain import entry_hash, verify
    from engramdb.models.audit import GENESIS

    assert store.audit.head() is None
    assert store.audit.events() == []
    first = store.audit.append([_record("create", 1, memory_id="m1"), _record("get", 2, agent=None)])
    second = store.audit.append([_record("forget", 3, memory_id="m1")])
    assert [e.seq for e in first + second] == [1, 2, 3]
    assert first[0].hash == entry_hash(GENESIS, 1, first[0])
    assert second[0].hash == entry_hash(first[1].hash, 3, second[0])
    assert store.audit.head() == (3, second[0].hash)
    stored = store.audit.events(limit=None)
    assert stored == [*first, *second]  # read back exactly as appended (times, detail, hashes)
    assert verify(stored, head=store.audit.head()).ok
    assert store.audit.append([]) == []


def test_audit_events_filter_and_order(store: Store) -> None:
    store.audit.append(
        [
            _record("create", 1, memory_id="m1"),
            _record("search", 2, agent="bob"),
            _record("update", 3, memory_id="m1"),
            _record("create", 4, agent="bob", memory_id="m2"),
        ]
    )
    assert [e.seq for e in store.audit.events(agent="bob")] == [2, 4]
    assert [e.seq for e in store.audit.events(memory_id="m1")] == [1, 3]
    assert [e.seq for e in store.audit.events(action="create")] == [1, 4]
    assert [e.seq for e in store.audit.events(newest_first=True, limit=2)] == [4, 3]
    assert [e.seq for e in store.audit.events(after_seq=2)] == [3, 4]


def test_audit_detail_must_be_json(store: Store) -> None:
    from engramdb.models.audit import AuditRecord

    with pytest.raises(ValidationError):
        store.audit.append([AuditRecord(action="x", agent="a", at=NOW, detail={"bad": object()})])
    assert store.audit.head() is None  # nothing half-written


def test_audit_appends_from_threads_keep_one_chain(store: Store) -> None:
    from engramdb.auditchain import verify

    def work(n: int) -> None:
        for i in range(15):
            store.audit.append([_record("get", i, agent=f"agent{n}")])

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(work, n) for n in range(4)]:
            future.result()
    events = store.audit.events(limit=None)
    assert [e.seq for e in events] == list(range(1, 61))
    assert verify(events, head=store.audit.head()).ok


def test_internal_audit_head_cannot_be_set_through_meta(store: Store) -> None:
    store.audit.append([_record("create", 1)])
    with pytest.raises(ValidationError):
        store.meta.set("audit_head", "1:" + "0" * 64)


# -- sharing provenance, listing, and knowledge transfer -----------------------------------------------------


def test_a_share_tells_the_reader_who_shared_and_when(store: Store) -> None:
    m = memory("shared word with time", agent="bob")
    add(store, [m])
    store.shares.share([m.id], from_agent="bob", to_agent="*", at=later(5))
    store.shares.share([m.id], from_agent="bob", to_agent="alice", at=later(9))
    for read in (
        lambda: store.memories.get(m.id, Filter(agent="alice")),
        lambda: store.memories.list(Filter(agent="alice"))[0],
        lambda: store.memories.get_many([m.id], Filter(agent="alice"))[m.id],
    ):
        seen = read()
        assert seen is not None
        assert (seen.shared_by, seen.shared_at) == ("bob", later(9))  # the direct share wins
    carol = store.memories.get(m.id, Filter(agent="carol"))
    assert carol is not None
    assert (carol.shared_by, carol.shared_at) == ("bob", later(5))
    own = store.memories.get(m.id, Filter(agent="bob"))
    assert own is not None
    assert (own.shared_by, own.shared_at) == (None, None)
    pub = memory("public word", agent="bob", visibility="public")
    add(store, [pub], seed=1)
    seen = store.memories.get(pub.id, Filter(agent="alice"))
    assert seen is not None
    assert (seen.shared_by, seen.shared_at) == ("bob", None)  # public, never explicitly shared


def test_list_shares_filters_by_owner_recipient_and_memory(store: Store) -> None:
    a, b = memory("one", agent="bob"), memory("two", agent="bob")
    c = memory("three", agent="carol")
    add(store, [a, b, c])
    store.shares.share([a.id], from_agent="bob", to_agent="alice", at=later(1))
    store.shares.share([b.id], from_agent="bob", to_agent="*", at=later(2))
    store.shares.share([c.id], from_agent="carol", to_agent="alice", at=later(3))
    every = store.shares.list()
    assert [(s.memory_id, s.from_agent, s.to_agent, s.shared_at) for s in every] == [
        (a.id, "bob", "alice", later(1)),
        (b.id, "bob", "*", later(2)),
        (c.id, "carol", "alice", later(3)),
    ]
    assert [s.memory_id for s in store.shares.list(from_agent="bob")] == [a.id, b.id]
    assert [s.memory_id for s in store.shares.list(to_agent="alice")] == [a.id, c.id]
    assert [s.memory_id for s in store.shares.list(to_agent="*")] == [b.id]
    assert [s.memory_id for s in store.shares.list(memory_ids=[c.id, "missing"])] == [c.id]
    store.shares.unshare([a.id], from_agent="bob", to_agent="*", at=later(4))
    assert [s.memory_id for s in store.shares.list(from_agent="bob")] == [b.id]


def test_atomic_groups_writes_all_or_nothing(store: Store) -> None:
    kept, lost = memory("kept word"), memory("lost word")
    add(store, [kept])

    def writes_then_fails() -> None:
        with store.atomic():
            add(store, [lost], seed=1)
            store.memories.update(
                kept.id, {"content": "changed word"}, vector=None, model_id=MODEL, actor="t", at=later(1)
            )
            store.shares.share([kept.id], from_agent="alice", to_agent="bob", at=later(2))
            with store.atomic():  # nested: joins the outer transaction
                store.memories.touch([kept.id], at=later(3))
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        writes_then_fails()
    assert store.memories.get(lost.id) is None
    back = store.memories.get(kept.id)
    assert back is not None
    assert (back.content, back.visibility, back.access_count) == ("kept word", "private", 0)
    assert [c.action for c in store.memories.history(kept.id)] == ["create"]
    assert store.shares.list() == []
    assert ids_of(store.search.vector_candidates(unit_vectors(2, seed=1)[0], everyone(), limit=5)) == [kept.id]
    with store.atomic():
        add(store, [lost], seed=1)
        store.shares.share([lost.id], from_agent="alice", to_agent="bob", at=later(4))
    assert visible_ids(store, "bob") == {lost.id}
    assert set(ids_of(store.search.vector_candidates(unit_vectors(2, seed=1)[0], everyone(), limit=5))) == {
        kept.id,
        lost.id,
    }


def test_get_vectors_returns_the_stored_vectors_of_one_model(store: Store) -> None:
    ms = [memory("a"), memory("b"), memory("c")]
    vecs = add(store, ms)
    got = store.vectors.get([ms[0].id, ms[2].id, "missing"], model_id=MODEL)
    assert set(got) == {ms[0].id, ms[2].id}
    assert np.allclose(got[ms[2].id], vecs[2])
    assert got[ms[0].id].dtype == np.float32
    assert store.vectors.get([ms[0].id], model_id="another-model") == {}
    assert store.vectors.get([], model_id=MODEL) == {}


def test_import_history_replaces_a_memorys_history(store: Store) -> None:
    from engramdb.models import Change

    m = memory("imported word")
    add(store, [m])
    entries = [
        Change(seq=7, memory_id=m.id, action="create", at=later(-100), actor="origin", before=None, after={"x": 1}),
        Change(seq=9, memory_id=m.id, action="update", at=later(-50), actor="origin", before={"x": 1}, after={"x": 2}),
        Change(seq=0, memory_id=m.id, action="import", at=later(1), actor="importer"),
    ]
    with store.atomic():
        store.memories.import_history(entries)
    got = store.memories.history(m.id)
    assert [(c.action, c.at, c.actor, c.before, c.after) for c in got] == [
        (c.action, c.at, c.actor, c.before, c.after) for c in entries
    ]
    assert [c.seq for c in got] == sorted(c.seq for c in got)
    with pytest.raises(NotFound):
        store.memories.import_history([Change(seq=1, memory_id="missing", action="create", at=NOW, actor="x")])
    assert len(store.memories.history(m.id)) == 3
    store.memories.import_history([])


def test_import_history_keeps_the_tombstone_of_a_forgotten_memory_with_that_id(store: Store) -> None:
    from engramdb.models import Change

    m = memory("first life")
    add(store, [m])
    store.memories.delete(m.id, actor="alice", at=later(1))
    again = memory("second life", id=m.id)
    add(store, [again], seed=1)
    store.memories.import_history([Change(seq=0, memory_id=m.id, action="create", at=later(-10), actor="origin")])
    assert [c.action for c in store.memories.history(m.id)] == ["create", "forget", "create"]
    assert store.memories.history(m.id)[-1].actor == "origin"


def test_keyword_candidates_find_a_small_agents_matches_behind_a_crowd(store: Store) -> None:
    # Another agent's 120 memories all outrank bob's for the term; the filter must still reach bob's.
    crowd = [memory("ferret ferret ferret ferret", agent="alice") for _ in range(120)]
    mine = [memory(f"one ferret among many other words number {i}", agent="bob") for i in range(3)]
    add(store, [*crowd, *mine])
    found = store.search.keyword_candidates(["ferret"], Filter(agent="bob"), limit=2)
    assert len(found) == 2
    assert set(ids_of(found)) <= {m.id for m in mine}
    everything = store.search.keyword_candidates(["ferret"], Filter(agent="alice"), limit=5)
    assert set(ids_of(everything)) <= {m.id for m in crowd}
    assert len(everything) == 5


# -- a forget and its audit entry commit together ------------------------------------------------


def test_delete_and_audit_inside_atomic_roll_back_together(store: Store) -> None:
    m = memory("forget me within a transaction")
    vecs = add(store, [m])
    store.audit.append([_record("create", 0, memory_id=m.id)])
    head = store.audit.head()

    def forget_then_fail() -> None:
        with store.atomic():
            store.memories.delete(m.id, actor="alice", at=later(1))
            store.audit.append([_record("forget", 1, memory_id=m.id)])
            assert store.memories.get(m.id) is None  # the block sees its own writes
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        forget_then_fail()
    assert store.memories.get(m.id) == m
    assert [c.action for c in store.memories.history(m.id)] == ["create"]
    assert store.memories.history(m.id)[0].after is not None  # not scrubbed
    assert [e.action for e in store.audit.events()] == ["create"]
    assert store.audit.head() == head
    assert ids_of(store.search.keyword_candidates(["forget"], everyone(), limit=5)) == [m.id]
    assert ids_of(store.search.vector_candidates(vecs[0], everyone(), limit=5)) == [m.id]


def test_delete_and_audit_inside_atomic_commit_together(store: Store) -> None:
    from engramdb.auditchain import verify

    m, other = memory("forget me within a transaction"), memory("keep this one")
    vecs = add(store, [m, other])
    with store.atomic():
        store.memories.delete(m.id, actor="alice", at=later(1))
        [event] = store.audit.append([_record("forget", 1, memory_id=m.id)])
    assert store.memories.get(m.id) is None
    assert [c.action for c in store.memories.history(m.id)] == ["create", "forget"]
    assert all(c.before is None and c.after is None for c in store.memories.history(m.id))
    assert store.audit.events() == [event]
    assert store.audit.head() == (event.seq, event.hash)
    assert verify(store.audit.events(limit=None), head=store.audit.head()).ok
    assert store.search.keyword_candidates(["forget"], everyone(), limit=5) == []
    assert ids_of(store.search.vector_candidates(vecs[0], everyone(), limit=5)) == [other.id]
    with pytest.raises(NotFound):
        store.memories.delete(m.id, actor="alice", at=later(2))


def test_concurrent_read_modify_write_updates_lose_nothing(store_factory: StoreFactory) -> None:
    # Feedback-style: read a counter, add one, write it back, inside one atomic() block, from two
    # store instances (two connections) at once. Reads inside a write lock their rows and update
    # locks its row (SELECT ... FOR UPDATE on PostgreSQL; SQLite's write lock), so no increment is lost.
    first, second = store_factory.open(), store_factory.open()
    m = memory("a counter", successes=0.0)
    add(first, [m])

    def bump(store: Store, n: int) -> None:
        for i in range(n):
            with store.atomic():
                current = store.memories.get(m.id)
                assert current is not None
                store.memories.update(
                    m.id, {"successes": current.successes + 1}, vector=None, model_id=MODEL, actor="t", at=later(i)
                )

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(bump, first, 10), pool.submit(bump, second, 10)]
        for f in futures:
            f.result()
    final = first.memories.get(m.id)
    assert final is not None
    assert final.successes == 20.0


@pytest.mark.parametrize("seeded", [False, True], ids=["new-key", "existing-key"])
def test_concurrent_meta_read_modify_write_loses_nothing(store_factory: StoreFactory, seeded: bool) -> None:
    # As ApiKeys.create does: read a meta value inside atomic(), append, set it back, from several store
    # instances (several connections) at once. meta.get inside atomic() locks the key until the commit
    # (FOR UPDATE plus a per-key advisory lock on PostgreSQL, for a key with no row yet; SQLite's write
    # lock), so no append is lost, including when every writer starts on a key that does not exist yet.
    stores = [store_factory.open() for _ in range(4)]
    if seeded:
        stores[0].meta.set("entries", "")
    barrier = threading.Barrier(len(stores))

    def append(store: Store, who: int, n: int) -> None:
        barrier.wait()
        for i in range(n):
            with store.atomic():
                current = store.meta.get("entries")
                items = [x for x in (current or "").split(",") if x]
                store.meta.set("entries", ",".join([*items, f"{who}.{i}"]))

    with ThreadPoolExecutor(max_workers=len(stores)) as pool:
        futures = [pool.submit(append, s, who, 8) for who, s in enumerate(stores)]
        for f in futures:
            f.result()
    final = stores[0].meta.get("entries")
    assert final is not None
    assert sorted(final.split(",")) == sorted(f"{who}.{i}" for who in range(len(stores)) for i in range(8))


def test_meta_get_outside_atomic_does_not_block_on_a_locked_key(store_factory: StoreFactory) -> None:
    # A plain read is not a read-modify-write: it never waits for a writer's atomic() block.
    first, second = store_factory.open(), store_factory.open()
    first.meta.set("colour", "blue")
    with first.atomic():
        assert first.meta.get("colour") == "blue"
        first.meta.set("colour", "green")
        assert second.meta.get("colour") == "blue"
    assert second.meta.get("colour") == "green"

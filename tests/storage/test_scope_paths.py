"""The fast paths a scoped read takes on SQLite answer exactly as the plain filter does.

A user's or a thread's rows are gathered through the (agent, user) index (``_scope_rids``) for the vector
cache and for the keyword index's ranking; these tests compare them with the filter applied row by row in
SQL (the answer of record), over random stores: same ids, same order, same scores.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import NOW, add, memory, unit_vectors

from engramdb.storage._sqlite_sql import filter_sql
from engramdb.storage.base import Filter
from engramdb.storage.sqlite import open_sqlite

WORDS = ("lake", "guitar", "pottery", "camping", "school", "garden")
row = st.tuples(
    st.sampled_from(("alice", "bob")),
    st.sampled_from((None, "u1", "u2")),
    st.sampled_from((None, "s1", "s2")),
    st.sampled_from(("private", "public")),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)
filters = st.builds(
    Filter,
    agent=st.sampled_from(("alice", "bob")),
    users=st.sampled_from((None, (None, "u1"), ("u2",), (None,))),
    sessions=st.sampled_from((None, ("s1",))),
    include_shared=st.booleans(),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(row, min_size=1, max_size=40), flt=filters)
def test_scoped_reads_match_the_plain_filter(tmp_path_factory: pytest.TempPathFactory, rows, flt) -> None:  # type: ignore[no-untyped-def]
    with open_sqlite(tmp_path_factory.mktemp("s") / "store") as store:
        items = [
            dataclasses.replace(memory(" ".join(words), agent=agent), user=user, session=session, visibility=visibility)
            for agent, user, session, visibility, words in rows
        ]
        add(store, items)
        for n, m in enumerate(items):  # some rows shared with the other agent, some with everyone
            if n % 3 == 0:
                to = "*" if n % 2 else ("bob" if m.agent == "alice" else "alice")
                store.shares.share([m.id], from_agent=m.agent, to_agent=to, at=NOW)
        store.search.keyword_index.min_memories = 0
        f = filter_sql(flt)
        with store.search._reading() as conn:  # type: ignore[attr-defined]
            expected = {r[0] for r in conn.execute(f"SELECT m.rid FROM memories m WHERE {f.where}", f.params)}
            found = store.search._scope_rids(conn, flt)  # type: ignore[attr-defined]
        assert sorted(found.tolist()) == sorted(expected)
        visible = {m.id for m in store.memories.list(flt, limit=1000)}
        query = unit_vectors(1, seed=99)[0]
        hits = store.search.vector_candidates(query, flt, limit=100)
        assert {c.id for c in hits} == visible
        fast = store.search.keyword_candidates(["lake", "guitar"], flt, limit=100)
        assert store.search.keyword_index.wait(timeout=30)
        fast = store.search.keyword_candidates(["lake", "guitar"], flt, limit=100)
        index, minimum = store.search.keyword_index, store.search.keyword_index.min_memories
        index.min_memories = None
        plain = store.search.keyword_candidates(["lake", "guitar"], flt, limit=100)
        index.min_memories = minimum
        assert [c.id for c in fast] == [c.id for c in plain]
        np.testing.assert_allclose([c.score for c in fast], [c.score for c in plain], rtol=1e-12)
        assert {c.id for c in fast} <= visible


def test_as_of_reads_see_superseded_values_through_both_channels(tmp_path: Path) -> None:
    with open_sqlite(tmp_path / "store") as store:
        old = dataclasses.replace(
            memory("lake house in Lisbon"), user="u1", occurred_at=NOW, valid_until=NOW + timedelta(days=5)
        )
        new = dataclasses.replace(memory("lake house in Berlin"), user="u1", occurred_at=NOW + timedelta(days=5))
        add(store, [old, new])
        query = unit_vectors(1, seed=3)[0]
        now = Filter(agent="alice", users=(None, "u1"))
        then = Filter(agent="alice", users=(None, "u1"), as_of=NOW + timedelta(days=1))
        assert [c.id for c in store.search.vector_candidates(query, now, limit=10)] == [new.id]
        assert [c.id for c in store.search.vector_candidates(query, then, limit=10)] == [old.id]
        assert [c.id for c in store.search.keyword_candidates(["lake"], now, limit=10)] == [new.id]
        assert [c.id for c in store.search.keyword_candidates(["lake"], then, limit=10)] == [old.id]

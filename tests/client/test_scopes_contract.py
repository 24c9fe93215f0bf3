"""User and session scopes, the same on every backend: embedded SQLite, PostgreSQL and the remote client.

Hypothesis writes memories and records outcomes of random users and threads (some the agent's own) and
reads them back as every user and thread: that user's and the agent's own, never another user's, only
that thread's when one is named; without a user, all of them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

USERS = ("u1", "u2")
CONTEXT = "the checkout page times out under load"
WORDS = ("alpha", "bravo", "charlie")
#: (user, session, word) of one memory.
Scoped = tuple[str | None, str | None, str]

rows = st.lists(
    st.tuples(st.sampled_from((None, *USERS)), st.sampled_from(("cache", "scale-out")), st.booleans()),
    min_size=1,
    max_size=5,
)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
def test_each_users_learning_stays_theirs(api: Any, agent: str, data: list[tuple[str | None, str, bool]]) -> None:
    scoped = f"{agent}-{abs(hash(tuple(data))) % 10**8}"  # a fresh agent per example on the shared server
    ids: dict[str, str | None] = {}
    for n, (user, action, worked) in enumerate(data):
        m = api.learning.record(f"{CONTEXT} #{n}", action, worked, agent=scoped, user=user, category="checkout")
        assert m.user == user
        ids[m.id] = user
    for user in (None, *USERS):
        expected = {i for i, u in ids.items() if user is None or u in (None, user)}
        records = api.learning.outcomes(agent=scoped, user=user)
        assert {r.id for r in records} == expected
        assert all(user is None or r.user in (None, user) for r in records)
        s = api.learning.suggest(CONTEXT, agent=scoped, user=user, limit=10)
        assert {o.action for o in s.options} <= {a for (u, a, _) in data if user is None or u in (None, user)}
        assert api.learning.report(agent=scoped, user=user).decisions == len(expected)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.tuples(st.sampled_from((None, *USERS)), st.sampled_from((None, "s1", "s2")), st.sampled_from(WORDS)),
        min_size=1,
        max_size=6,
    )
)
def test_no_user_sees_another_users_memory(api: Any, agent: str, data: list[Scoped]) -> None:
    scoped = f"{agent}-{abs(hash(tuple(data))) % 10**8}"
    api.remember_many(
        [
            {"content": f"{word} note {n}", "agent": scoped, "user": user, "session": session, "kind": "episode"}
            for n, (user, session, word) in enumerate(data)
        ]
    )
    api.flush()
    for user in USERS:
        for session in (None, "s1", "s2"):
            listed = api.list(agent=scoped, user=user, session=session)
            hits = api.search(WORDS[0], agent=scoped, user=user, session=session, limit=50)
            for m in [h.memory for h in hits] + listed:
                assert m.user in (None, user)
                assert session is None or m.session == session
            expected = sum(1 for u, s, _ in data if u in (None, user) and (session is None or s == session))
            assert api.count(agent=scoped, user=user, session=session) == len(listed) == expected

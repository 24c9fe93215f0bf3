"""User and session scopes, event time and facts over time (issue 23), on both backends with the real model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import SERVER

from engramdb import Engram
from engramdb.errors import NotFound, ValidationError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_remember_keeps_user_session_and_event_time(backend_mem: Engram) -> None:
    m = backend_mem.remember("Ana prefers tea", agent="bot", user="ana", session="s1", at="2026-03-01T12:00:00Z")
    assert (m.user, m.session, m.occurred_at, m.valid_until) == ("ana", "s1", T0, None)
    got = backend_mem.get(m.id)
    assert (got.user, got.session, got.occurred_at) == ("ana", "s1", T0)
    d = got.to_dict()
    assert (d["user"], d["session"], d["occurred_at"]) == ("ana", "s1", T0.isoformat())
    plain = backend_mem.remember("the office opens at nine", agent="bot")
    assert plain.user is None
    assert plain.session is None
    assert plain.occurred_at == plain.created_at


def test_a_user_sees_own_and_agent_memories_never_another_users(backend_mem: Engram) -> None:
    mem = backend_mem
    mem.remember("Ana's favourite drink is green tea", agent="bot", user="ana", kind="preference")
    mem.remember("Ben's favourite drink is black coffee", agent="bot", user="ben", kind="preference")
    mem.remember("The cafe serves drinks until six", agent="bot")
    mem.flush()
    hits = mem.search("favourite drink", agent="bot", user="ana")
    assert {h.memory.user for h in hits} == {"ana", None}
    assert all("Ben" not in h.memory.content for h in hits)
    assert {m.user for m in mem.list(agent="bot", user="ben")} == {"ben", None}
    assert mem.count(agent="bot", user="ana") == 2
    assert mem.count(agent="bot") == 3  # no user given: the agent's whole memory


def test_session_narrows_to_its_thread(backend_mem: Engram) -> None:
    mem = backend_mem
    a = mem.remember("we talked about the trip to Lisbon", agent="bot", user="ana", session="t1", kind="conversation")
    mem.remember("we talked about the trip to Porto", agent="bot", user="ana", session="t2", kind="conversation")
    mem.flush()
    hits = mem.search("trip", agent="bot", user="ana", session="t1")
    assert [h.memory.id for h in hits] == [a.id]
    assert [m.id for m in mem.list(agent="bot", session="t1")] == [a.id]


def test_get_forget_clear_respect_the_user(backend_mem: Engram) -> None:
    mem = backend_mem
    ana = mem.remember("Ana's address is 1 Main St", agent="bot", user="ana")
    ben = mem.remember("Ben's address is 2 High St", agent="bot", user="ben")
    own = mem.remember("deliveries come on Mondays", agent="bot")
    with pytest.raises(NotFound):
        mem.get(ben.id, agent="bot", user="ana")
    with pytest.raises(NotFound):
        mem.forget(ben.id, agent="bot", user="ana")
    assert mem.get(own.id, agent="bot", user="ana").id == own.id
    assert mem.clear(agent="bot", user="ana", confirm="bot") == 1
    with pytest.raises(NotFound):
        mem.get(ana.id)
    assert {m.id for m in mem.list(agent="bot")} == {ben.id, own.id}


def test_a_changed_fact_keeps_its_past(backend_mem: Engram) -> None:
    mem = backend_mem
    first = mem.remember("Ana lives in Lisbon", agent="bot", user="ana", key="home", at=T0)
    later = T0 + timedelta(days=60)
    second = mem.remember("Ana lives in Berlin", agent="bot", user="ana", key="home", at=later)
    assert second.id == first.id
    assert second.occurred_at == later
    mem.flush()
    now_hits = mem.search("where does Ana live", agent="bot", user="ana")
    assert [h.memory.content for h in now_hits] == ["Ana lives in Berlin"]
    then = mem.search("where does Ana live", agent="bot", user="ana", as_of=T0 + timedelta(days=10))
    assert [h.memory.content for h in then] == ["Ana lives in Lisbon"]
    assert then[0].memory.valid_until == later
    assert mem.recall_key("home", agent="bot", user="ana").content == "Ana lives in Berlin"
    assert mem.recall_key("home", agent="bot", user="ana", as_of="2026-03-05").content == "Ana lives in Lisbon"
    with pytest.raises(NotFound):
        mem.recall_key("home", agent="bot", user="ana", as_of="2026-02-01")  # before anything was said
    assert [c.action for c in mem.history(first.id)] == ["create", "supersede"]
    assert len(mem.list(agent="bot")) == 1  # the past value is left out of current reads
    past = mem.get(then[0].memory.id)  # but it can be read by id
    assert past.content == "Ana lives in Lisbon"


def test_an_older_value_told_later_goes_into_the_past(backend_mem: Engram) -> None:
    mem = backend_mem
    mem.remember("Ana works at Acme", agent="bot", user="ana", key="job", at=T0)
    mem.remember("Ana works at Initech", agent="bot", user="ana", key="job", at=T0 + timedelta(days=100))
    mem.remember("Ana works at Globex", agent="bot", user="ana", key="job", at=T0 + timedelta(days=50))
    assert mem.recall_key("job", agent="bot", user="ana").content == "Ana works at Initech"
    at = mem.recall_key
    assert at("job", agent="bot", user="ana", as_of=T0 + timedelta(days=10)).content == "Ana works at Acme"
    assert at("job", agent="bot", user="ana", as_of=T0 + timedelta(days=60)).content == "Ana works at Globex"
    assert at("job", agent="bot", user="ana", as_of=T0 + timedelta(days=101)).content == "Ana works at Initech"


def test_users_keep_their_own_value_of_a_key(backend_mem: Engram) -> None:
    mem = backend_mem
    mem.remember("Ana's editor is vim", agent="bot", user="ana", key="editor")
    mem.remember("Ben's editor is emacs", agent="bot", user="ben", key="editor")
    assert mem.recall_key("editor", agent="bot", user="ana").content == "Ana's editor is vim"
    assert mem.recall_key("editor", agent="bot", user="ben").content == "Ben's editor is emacs"
    with pytest.raises(NotFound):
        mem.recall_key("editor", agent="bot")  # the agent's own key is a third slot


def test_near_duplicates_never_merge_across_users(backend_mem: Engram) -> None:
    mem = backend_mem
    a = mem.remember("likes hiking in the mountains", agent="bot", user="ana")
    b = mem.remember("likes hiking in the mountains", agent="bot", user="ben")
    assert a.id != b.id
    assert b.user == "ben"
    again = mem.remember("likes hiking in the mountains", agent="bot", user="ana")
    assert again.id == a.id


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("at", datetime(2026, 3, 1, 12, 0)),  # noqa: DTZ001 (naive on purpose)
        ("at", "yesterday-ish"),
        ("at", 12),
        ("user", ""),
        ("user", " ana"),
        ("session", 3),
    ],
)
def test_bad_scopes_and_times_are_rejected(mem: Engram, field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        mem.remember("something", agent="bot", **{field: value})  # type: ignore[arg-type]
    assert mem.count(agent="bot") == 0
    with pytest.raises(ValidationError):
        mem.remember_many([{"content": "x", field: value}])


def test_search_rejects_a_bad_as_of(mem: Engram) -> None:
    with pytest.raises(ValidationError, match="as_of"):
        mem.search("x", as_of="not a date")
    with pytest.raises(ValidationError, match="as_of"):
        mem.search("x", as_of=datetime(2026, 1, 1))  # noqa: DTZ001 (naive on purpose)


def test_remember_many_takes_scopes(mem: Engram) -> None:
    out = mem.remember_many(
        [
            {"content": "turn one", "kind": "conversation", "user": "ana", "session": "s", "at": "2026-03-01"},
            {"content": "turn two", "kind": "conversation", "user": "ana", "session": "s", "at": T0},
        ]
    )
    assert [(m.user, m.session) for m in out] == [("ana", "s"), ("ana", "s")]
    assert out[0].occurred_at == datetime(2026, 3, 1, tzinfo=UTC)
    assert out[1].occurred_at == T0


USERS = ("u1", "u2", "u3")
WORDS = ("alpha", "bravo", "charlie", "delta", "echo")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.tuples(st.sampled_from((None, *USERS)), st.sampled_from((None, "s1", "s2")), st.sampled_from(WORDS)),
        min_size=1,
        max_size=12,
    ),
    query=st.sampled_from(WORDS),
)
def test_no_user_ever_sees_another_users_memory(
    backend: str, data: list[tuple[str | None, str | None, str]], query: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    location = SERVER.get().new_database() if backend == "postgres" else str(tmp_path_factory.mktemp("iso") / "s")
    with Engram(location, embedder="static", vectors="sync") as mem:
        mem.remember_many(
            [
                {"content": f"{word} note {n}", "agent": "bot", "user": user, "session": session, "kind": "episode"}
                for n, (user, session, word) in enumerate(data)
            ]
        )
        for user in USERS:
            for session in (None, "s1", "s2"):
                hits = mem.search(query, agent="bot", user=user, session=session, limit=50)
                listed = mem.list(agent="bot", user=user, session=session)
                for m in [h.memory for h in hits] + listed:
                    assert m.user in (None, user)
                    assert session is None or m.session == session
                count = mem.count(agent="bot", user=user, session=session)
                expected = sum(1 for u, s, _ in data if u in (None, user) and (session is None or s == session))
                assert count == len(listed) == expected


def test_export_of_one_user_is_lossless_and_imports_with_scopes(mem: Engram, tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    mem.remember("Ana lives in Lisbon", agent="bot", user="ana", session="s1", key="home", at=T0)
    mem.remember("Ana lives in Berlin", agent="bot", user="ana", session="s2", key="home", at=T0 + timedelta(days=9))
    mem.remember("Ben lives in Oslo", agent="bot", user="ben", key="home")
    mem.remember("the bot speaks English", agent="bot")
    path = tmp_path / "ana.jsonl"
    assert mem.knowledge.export_file(path, agent="bot", user="ana") == 2  # the current value and the past one
    assert "Oslo" not in path.read_text()
    assert "English" not in path.read_text()
    with Engram(tmp_path / "other", embedder=embedder) as other:
        assert other.knowledge.import_file(path, agent="bot") == 2
        assert other.recall_key("home", agent="bot", user="ana").content == "Ana lives in Berlin"
        past = other.recall_key("home", agent="bot", user="ana", as_of=T0 + timedelta(days=1))
        assert (past.content, past.session, past.occurred_at) == ("Ana lives in Lisbon", "s1", T0)
        assert past.valid_until == T0 + timedelta(days=9)


def test_retention_can_be_limited_to_one_user(mem: Engram) -> None:
    from engramdb.models import RetentionPolicy, RetentionRule

    mem.remember("Ana said hello", agent="bot", user="ana", kind="conversation")
    mem.remember("Ben said hello", agent="bot", user="ben", kind="conversation")
    mem.remember("the agent's own note", agent="bot", kind="conversation")
    policy = RetentionPolicy(default=RetentionRule(max_count=0))
    report = mem.retention.cleanup(agent="bot", user="ana", policy=policy)
    assert len(report.expired) == 1
    assert sorted(m.user or "" for m in mem.list(agent="bot")) == ["", "ben"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(
        st.tuples(st.sampled_from(("A", "B", "C", "D")), st.integers(0, 20)),
        min_size=1,
        max_size=7,
        unique_by=lambda w: w[1],
    ),
    probes=st.lists(st.integers(-1, 22), min_size=1, max_size=5),
)
def test_as_of_answers_with_the_value_true_then(
    writes: list[tuple[str, int]], probes: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Model: a timeline of changes. A value told for a time after the last change is a change, unless it
    repeats the current value (then nothing changes); one told for an earlier time goes into the past."""

    def day(n: int) -> datetime:
        return T0 + timedelta(days=n)

    timeline: list[tuple[int, str]] = []
    for value, at in writes:
        if not timeline or at > timeline[-1][0]:
            if not timeline or timeline[-1][1] != value:
                timeline.append((at, value))
        else:
            timeline.append((at, value))
            timeline.sort()

    def model(t: int) -> str | None:
        said = [value for at, value in timeline if at <= t]
        return said[-1] if said else None

    with Engram(tmp_path_factory.mktemp("facts") / "s", embedder="static", vectors="sync") as mem:
        for value, at in writes:
            mem.remember(f"value {value}", agent="bot", user="ana", key="k", at=day(at))
        current = mem.recall_key("k", agent="bot", user="ana")
        assert current.content == f"value {timeline[-1][1]}", writes
        for t in probes:
            expected = model(t)
            when = day(t) + timedelta(hours=1)
            if expected is None:
                with pytest.raises(NotFound):
                    mem.recall_key("k", agent="bot", user="ana", as_of=when)
            else:
                got = mem.recall_key("k", agent="bot", user="ana", as_of=when)
                assert got.content == f"value {expected}", (writes, t)
        assert len(mem.list(agent="bot", user="ana")) == 1  # one current value

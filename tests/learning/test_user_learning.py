"""Learning per user on request (issue 23): ``user=`` on the learning calls, on both backends with real stores.

Without ``user`` the agent learns from the outcomes of all its users (what it did before users existed);
with ``user=U`` a call reads U's outcomes and the agent's own (recorded with no user), never another
user's: a hard filter like the memories' scopes. Hypothesis writes outcomes of random users and reads
them back through every learning call.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import SERVER

from engramdb import Engram
from engramdb.errors import NotFound, ValidationError

USERS = ("u1", "u2", "u3")
ACTIONS = ("retry", "rollback", "restart")
CONTEXT = "the nightly deploy failed with a timeout"
#: (user, action, outcome): None an outcome of the agent's own, outcome None a pending decision.
Row = tuple[str | None, str, bool | None]

rows = st.lists(
    st.tuples(st.sampled_from((None, *USERS)), st.sampled_from(ACTIONS), st.sampled_from((True, False, None))),
    min_size=1,
    max_size=10,
)


def _record(mem: Engram, agent: str, data: list[Row], *, with_users: bool = True) -> list[str]:
    ids = []
    for n, (user, action, outcome) in enumerate(data):
        m = mem.learning.record(
            f"{CONTEXT} (run {n})",
            action,
            outcome,
            agent=agent,
            category="deploy",
            user=user if with_users else None,
        )
        ids.append(m.id)
    return ids


def _visible(data: list[Row], ids: list[str], user: str | None, *, pending: bool = False) -> set[str]:
    return {
        i
        for i, (u, _, outcome) in zip(ids, data, strict=True)
        if (user is None or u in (None, user)) and ((outcome is None) == pending)
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
def test_a_users_learning_never_leaks_into_anothers(
    backend: str, data: list[Row], tmp_path_factory: pytest.TempPathFactory
) -> None:
    location = SERVER.get().new_database() if backend == "postgres" else str(tmp_path_factory.mktemp("ul") / "s")
    with Engram(location, embedder="static", vectors="sync") as mem:
        agent = f"a{uuid.uuid4().hex[:8]}"
        ids = _record(mem, agent, data)
        for user in (None, *USERS):
            done = _visible(data, ids, user)
            outcomes = mem.learning.outcomes(agent=agent, user=user)
            assert {r.id for r in outcomes} == done
            assert all(user is None or r.user in (None, user) for r in outcomes)
            assert {m.id for m in mem.learning.pending(agent=agent, user=user)} == _visible(
                data, ids, user, pending=True
            )
            s = mem.learning.suggest(CONTEXT, agent=agent, user=user, limit=50)
            seen = {a for i, (_, a, _) in zip(ids, data, strict=True) if i in done}
            assert {o.action for o in s.options} <= seen
            assert sum(o.attempts for o in s.options) <= len(done) + 1e-9
            if not done:
                assert s.recommended is None
            report = mem.learning.report(agent=agent, user=user)
            assert report.decisions == len(done)
            assert sum(t.executions for t in mem.learning.trends(agent=agent, user=user)) == len(done)
            for found in mem.learning.approaches(agent=agent, user=user, min_attempts=1):
                assert found.action in seen
            # A decision of another user cannot be resolved in this user's name.
            if user is not None:
                for i, (u, _, outcome) in zip(ids, data, strict=True):
                    if outcome is None and u not in (None, user):
                        with pytest.raises(NotFound):
                            mem.learning.resolve(i, "success", agent=agent, user=user)


def test_without_user_the_agent_learns_as_before(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same outcomes recorded with and without users give the same agent-wide answers."""
    data: list[Row] = [
        ("u1", "retry", True),
        ("u2", "retry", True),
        (None, "rollback", False),
        ("u3", "retry", False),
        ("u1", "restart", True),
        (None, "retry", True),
    ]
    with Engram(tmp_path_factory.mktemp("same") / "s", embedder="static", vectors="sync") as mem:
        _record(mem, "plain", data, with_users=False)
        _record(mem, "multi", data)

        def shape(agent: str) -> tuple[object, ...]:
            s = mem.learning.suggest(CONTEXT, agent=agent)
            options = [(o.action, round(o.successes, 6), round(o.attempts, 6)) for o in s.options]
            report = mem.learning.report(agent=agent)
            return s.recommended, round(s.confidence, 6), options, report.decisions, report.successes

        assert shape("plain") == shape("multi")
        assert mem.learning.choose(CONTEXT, ACTIONS, agent="plain", seed=3) == mem.learning.choose(
            CONTEXT, ACTIONS, agent="multi", seed=3
        )


def test_one_users_outcomes_decide_that_users_suggestion(mem: Engram) -> None:
    """u1's record says retry, u2's rollback: each user gets their own, the agent sees both."""
    for n in range(4):
        mem.learning.record(f"{CONTEXT} #{n}", "retry", "success", agent="bot", user="u1", alternatives=["rollback"])
        mem.learning.record(f"{CONTEXT} #{n}", "retry", "failure", agent="bot", user="u2", alternatives=["rollback"])
        mem.learning.record(f"{CONTEXT} #{n}", "rollback", "success", agent="bot", user="u2")
    mem.flush()
    u1 = mem.learning.suggest(CONTEXT, agent="bot", user="u1")
    u2 = mem.learning.suggest(CONTEXT, agent="bot", user="u2")
    assert u1.options[0].action == "retry"
    assert u2.options[0].action == "rollback"
    assert {o.action: o.attempts for o in u1.options}.get("rollback", 0) == 0  # an alternative, never tried by u1
    both = mem.learning.outcomes(agent="bot")
    assert {r.user for r in both} == {"u1", "u2"}
    assert both[0].to_dict()["user"] in ("u1", "u2")
    assert mem.learning.executions(CONTEXT, agent="bot", user="u1", successful=None) == []  # records, not runs
    run = mem.learning.record_execution(CONTEXT, approach="retry", outcome="success", agent="bot", user="u1")
    assert run.user == "u1"
    assert [e.record.id for e in mem.learning.executions(CONTEXT, agent="bot", user="u1")] == [run.id]
    assert mem.learning.executions(CONTEXT, agent="bot", user="u2") == []


def test_resolve_and_feedback_stay_within_the_user(mem: Engram) -> None:
    note = mem.remember("retry the deploy after the cache warms up", agent="bot", user="u1")
    other = mem.remember("u2 keeps the old deploy script", agent="bot", user="u2")
    pending = mem.learning.record(CONTEXT, "retry", None, agent="bot", user="u1", used=[note.id])
    with pytest.raises(NotFound, match="user 'u2'"):
        mem.learning.resolve(pending.id, "success", agent="bot", user="u2")
    with pytest.raises(NotFound):
        mem.learning.feedback([other.id], "success", agent="bot", user="u1")
    with pytest.raises(NotFound):
        mem.learning.record(CONTEXT, "retry", "success", agent="bot", user="u1", used=[other.id])
    assert mem.get(other.id).attempts == 0
    done = mem.learning.resolve(pending.id, "success", agent="bot", user="u1")
    assert done.metadata["outcome"] == "success"
    assert mem.get(note.id).attempts == 1  # the used memory got the outcome as feedback
    assert mem.learning.pending(agent="bot") == []


@pytest.mark.parametrize("user", ["", " padded", 5, "a" * 500, "tab\there"])
def test_a_bad_user_is_refused_and_nothing_is_recorded(mem: Engram, user: object) -> None:
    with pytest.raises(ValidationError):
        mem.learning.record(CONTEXT, "retry", "success", agent="bot", user=user)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        mem.learning.suggest(CONTEXT, agent="bot", user=user)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        mem.learning.outcomes(agent="bot", user=user)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        mem.learning.record_execution(CONTEXT, approach="a", outcome="success", agent="bot", user=user)  # type: ignore[arg-type]
    assert mem.count(agent="bot") == 0


def test_feedback_without_ids_never_reaches_another_users_memory(mem: Engram) -> None:
    theirs = mem.remember("the release notes live in the team wiki", agent="bot", user="u2")
    mem.flush()
    assert [h.memory.id for h in mem.search("where are the release notes", agent="bot")] == [theirs.id]
    with pytest.raises(NotFound, match="user 'u1'"):
        mem.learning.feedback(outcome="success", agent="bot", user="u1")
    assert mem.get(theirs.id).attempts == 0
    assert [m.id for m in mem.learning.feedback(outcome="success", agent="bot", user="u2")] == [theirs.id]


def test_stats_and_adaptive_take_the_user(mem: Engram) -> None:
    mem.remember("u1 likes the blue theme", agent="bot", user="u1", kind="preference")
    mem.remember("u2 likes the red theme", agent="bot", user="u2", kind="preference")
    mem.learning.record(CONTEXT, "retry", "success", agent="bot", user="u2")
    with mem.learning.adaptive(CONTEXT, ["retry", "rollback"], agent="bot", user="u1") as run:
        assert run.approach in ("retry", "rollback")
    assert mem.learning.outcomes(agent="bot", user="u1")[0].user == "u1"
    mine = mem.learning.stats(agent="bot", user="u1")
    assert (mine.memories["preference"], mine.memories["decision"], mine.decisions) == (1, 1, 1)
    everyone = mem.learning.stats(agent="bot")
    assert (everyone.memories["preference"], everyone.decisions) == (2, 2)
    with pytest.raises(ValidationError):
        mem.learning.adaptive(CONTEXT, ["retry"], agent="bot", user=" padded")


@pytest.mark.parametrize("name", ["\ud800", "nul\x00here"])
def test_option_and_episode_names_must_be_valid_text(mem: Engram, name: str) -> None:
    """Found by the REST fuzz: an option with a lone surrogate came back in the answer, which JSON cannot carry."""
    with pytest.raises(ValidationError, match="option"):
        mem.learning.suggest(CONTEXT, agent="bot", options=["retry", name])
    with pytest.raises(ValidationError, match="option"):
        mem.learning.choose(CONTEXT, ["retry", name], agent="bot")
    with pytest.raises(ValidationError, match="episode"):
        mem.learning.record(CONTEXT, "retry", "success", agent="bot", episode=name)
    assert mem.count(agent="bot") == 0

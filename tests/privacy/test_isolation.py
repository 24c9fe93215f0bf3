"""Agent isolation: the agent scope is a hard filter on every read path, and these tests try to get around it.

Alice's private memories hold a marker word no other memory contains; every read
path, driven as bob (or mallory), must neither return them nor reveal they exist.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import Engram, NotFound, ValidationError
from engramdb.embeddings.base import Embedder
from engramdb.models import Memory


@pytest.fixture
def mem(backend_mem: Engram) -> Engram:
    """Every facade-level test here runs on each backend (SQLite and PostgreSQL)."""
    return backend_mem


MARKER = "zebracorn"

ALICE = [
    ("failure", f"{MARKER} deploy failed: connection refused on db-7.internal:5432, fixed by starting postgres"),
    ("decision", f"{MARKER} chose blue-green deployment for the payments service"),
    ("knowledge", f"{MARKER} the staging password rotation happens every Sunday at 02:00"),
    ("preference", f"{MARKER} alice prefers terse answers"),
]


@pytest.fixture
def world(mem: Engram) -> dict[str, list[Memory]]:
    """Alice's private memories (marked), bob's own memories (unmarked), carol with nothing."""
    alice = mem.remember_many([{"content": c, "agent": "alice", "kind": k, "tags": ["ops", k]} for k, c in ALICE])
    bob = mem.remember_many(
        [
            {
                "content": "deploy failed: connection refused on db-2.internal:5432",
                "agent": "bob",
                "kind": "failure",
                "tags": ["ops"],
            },
            {"content": "bob uses rolling deployments", "agent": "bob", "kind": "decision", "tags": ["ops"]},
        ]
    )
    return {"alice": alice, "bob": bob}


def leaked(memories: Iterator[Memory] | list[Memory], victim: str = "alice") -> list[str]:
    return [m.id for m in memories if m.agent == victim or MARKER in m.content]


# -- every core read path ---------------------------------------------------------------------------------

Reader = Callable[[Engram, str, dict[str, list[Memory]]], list[Memory]]


def _search_exact(mem: Engram, agent: str, world: dict[str, list[Memory]]) -> list[Memory]:
    out: list[Memory] = []
    for m in world["alice"]:  # the strongest query there is: the victim's exact text
        out += [h.memory for h in mem.search(m.content, agent=agent, limit=50)]
    return out


def _search_filtered(mem: Engram, agent: str, world: dict[str, list[Memory]]) -> list[Memory]:
    # Filters narrow the agent's scope; they never widen it.
    hits = mem.search(MARKER, agent=agent, kind=["failure", "decision", "knowledge"], tags=["ops"], limit=50)
    return [h.memory for h in hits]


def _list_all(mem: Engram, agent: str, world: dict[str, list[Memory]]) -> list[Memory]:
    return mem.list(agent=agent, limit=1000) + mem.list(agent=agent, tags=["ops"], kind="failure")


def _get_each(mem: Engram, agent: str, world: dict[str, list[Memory]]) -> list[Memory]:
    out = []
    for m in world["alice"]:
        with contextlib.suppress(NotFound):
            out.append(mem.get(m.id, agent=agent))
    return out


def _export(mem: Engram, agent: str, world: dict[str, list[Memory]]) -> list[Memory]:
    buf = io.BytesIO()
    mem.knowledge.export_file(buf, agent=agent)
    from engramdb.knowledge.files import loads_bundle

    return [e.memory for e in loads_bundle(buf.getvalue()).entries]


def _export_tag(mem: Engram, agent: str, world: dict[str, list[Memory]]) -> list[Memory]:
    buf = io.BytesIO()
    mem.knowledge.export_file(buf, agent=agent, tag="ops", with_history=True)
    text = buf.getvalue().decode()
    assert MARKER not in text or agent == "alice"
    from engramdb.knowledge.files import loads_bundle

    return [e.memory for e in loads_bundle(buf.getvalue()).entries]


CORE_READERS: dict[str, Reader] = {
    "search-exact-text": _search_exact,
    "search-with-filters": _search_filtered,
    "list": _list_all,
    "get-by-id": _get_each,
    "export": _export,
    "export-tag-with-history": _export_tag,
}


@pytest.mark.parametrize("reader", list(CORE_READERS), ids=str)
@pytest.mark.parametrize("agent", ["bob", "carol", "Alice", "alice ", "%", "_"])
def test_no_read_path_returns_another_agents_private_memory(
    mem: Engram, world: dict[str, list[Memory]], reader: str, agent: str
):
    try:
        seen = CORE_READERS[reader](mem, agent, world)
    except ValidationError:
        assert agent != agent.strip()  # a malformed name is refused, which leaks nothing either
        return
    assert leaked(seen) == []


def test_the_owner_sees_everything_through_the_same_paths(mem: Engram, world: dict[str, list[Memory]]):
    ids = {m.id for m in world["alice"]}
    for name, reader in CORE_READERS.items():
        if name.startswith("search-with"):
            continue  # the preference carries no filtered kind
        assert ids <= {m.id for m in reader(mem, "alice", world)}, name


def test_count_does_not_reveal_other_agents_memories(mem: Engram, world: dict[str, list[Memory]]):
    assert mem.count(agent="carol") == 0
    assert mem.count(agent="bob") == len(world["bob"])
    assert mem.count(agent="alice", kind="failure") == 1


def test_not_found_is_the_same_answer_for_missing_and_foreign_ids(mem: Engram, world: dict[str, list[Memory]]):
    victim = world["alice"][0].id
    with pytest.raises(NotFound) as foreign:
        mem.get(victim, agent="bob")
    with pytest.raises(NotFound) as missing:
        mem.get("0" * 32, agent="bob")
    assert str(foreign.value).replace(victim, "X") == str(missing.value).replace("0" * 32, "X")


@pytest.mark.parametrize(
    "attempt",
    [
        lambda mem, i: mem.update(i, agent="bob", content="overwritten by bob"),
        lambda mem, i: mem.update(i, agent="bob", visibility="public"),
        lambda mem, i: mem.forget(i, agent="bob"),
        lambda mem, i: mem.history(i, agent="bob"),
        lambda mem, i: mem.sharing.share([i], from_agent="bob", to_agent="bob2"),
        lambda mem, i: mem.sharing.share([i], from_agent="bob", to_agent="*"),
        lambda mem, i: mem.sharing.unshare([i], from_agent="bob"),
    ],
    ids=["update-content", "update-visibility", "forget", "history", "share-onwards", "publish", "unshare"],
)
def test_another_agents_memory_cannot_be_changed_or_given_away(
    mem: Engram, world: dict[str, list[Memory]], attempt: Callable[[Engram, str], Any]
):
    victim = world["alice"][0]
    with pytest.raises(NotFound):
        attempt(mem, victim.id)
    after = mem.get(victim.id)
    assert after.content == victim.content
    assert after.visibility == "private"
    assert leaked(mem.list(agent="bob")) == []


def test_a_recipient_cannot_reshare_or_change_what_was_shared_with_it(mem: Engram, world: dict[str, list[Memory]]):
    shared = world["alice"][0]
    assert mem.sharing.share([shared.id], from_agent="alice", to_agent="bob") == 1
    assert mem.get(shared.id, agent="bob").shared_by == "alice"
    with pytest.raises(NotFound):
        mem.sharing.share([shared.id], from_agent="bob", to_agent="carol")
    with pytest.raises(NotFound):
        mem.update(shared.id, agent="bob", content="bob's version")
    with pytest.raises(NotFound):
        mem.forget(shared.id, agent="bob")
    assert leaked(mem.list(agent="carol")) == []
    # Bob's export holds bob's own knowledge only: what alice shared stays alice's to give.
    assert leaked(_export(mem, "bob", world)) == []


def test_the_reserved_everyone_name_cannot_be_used_to_read(mem: Engram, world: dict[str, list[Memory]]):
    for call in (
        lambda: mem.search(MARKER, agent="*"),
        lambda: mem.list(agent="*"),
        lambda: mem.get(world["alice"][0].id, agent="*"),
        lambda: mem.count(agent="*"),
        lambda: mem.knowledge.export_file(io.BytesIO(), agent="*"),
    ):
        with pytest.raises(ValidationError):
            call()


def test_isolation_survives_reopening_the_store(tmp_path: Path, embedder: Embedder):
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        secret = mem.remember(f"{MARKER} private note", agent="alice")
    with Engram(tmp_path / "s", embedder=embedder) as mem:
        assert mem.search(f"{MARKER} private note", agent="bob") == []
        with pytest.raises(NotFound):
            mem.get(secret.id, agent="bob")


# -- a model of visibility, checked against the store under random share/unshare/visibility sequences ---------

AGENTS = ("alice", "bob", "carol")
ops = st.lists(
    st.tuples(
        st.sampled_from(["share", "unshare", "public", "private"]),
        st.integers(0, 5),
        st.sampled_from([*AGENTS, "*"]),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_visibility_always_matches_the_consent_model(embedder: Embedder, sequence: list[tuple[str, int, str]]):
    with Engram(":memory:", embedder=embedder, dedupe=False) as mem:
        owners = ["alice", "alice", "alice", "bob", "bob", "carol"]
        ms = mem.remember_many([{"content": f"note number {i} of {o}", "agent": o} for i, o in enumerate(owners)])
        shares: set[tuple[int, str]] = set()  # (memory index, recipient)
        public: set[int] = set()
        for op, i, who in sequence:
            owner = owners[i]
            if op in ("share", "unshare") and who == owner:
                with pytest.raises(ValidationError):
                    getattr(mem.sharing, op)([ms[i].id], from_agent=owner, to_agent=who)
                continue
            if op == "share":
                mem.sharing.share([ms[i].id], from_agent=owner, to_agent=who)
                shares.add((i, who))
            elif op == "unshare":
                mem.sharing.unshare([ms[i].id], from_agent=owner, to_agent=who)
                shares = {(j, r) for j, r in shares if j != i or (who != "*" and r != who)}
            else:
                mem.update(ms[i].id, agent=owner, visibility="public" if op == "public" else "private")
                public = public | {i} if op == "public" else public - {i}
                if op == "private":
                    # Private means the owner alone: making a memory private withdraws its shares.
                    shares = {(j, r) for j, r in shares if j != i}
        for reader in (*AGENTS, "dave"):
            expected = {
                ms[i].id
                for i, o in enumerate(owners)
                if o == reader or i in public or (i, reader) in shares or (i, "*") in shares
            }
            assert {m.id for m in mem.list(agent=reader)} == expected, reader
            assert mem.count(agent=reader) == len(expected)
            for i, m in enumerate(ms):
                visible = m.id in expected
                try:
                    got = mem.get(m.id, agent=reader)
                except NotFound:
                    assert not visible
                    continue
                assert visible
                if owners[i] != reader:
                    assert got.shared_by is not None
                    assert got.shared_by == owners[i]


def test_json_of_a_shared_memory_names_who_shared_it(mem: Engram, world: dict[str, list[Memory]]):
    m = world["alice"][1]
    mem.sharing.share([m.id], from_agent="alice", to_agent="bob")
    data = json.loads(json.dumps(mem.get(m.id, agent="bob").to_dict()))
    assert data["shared_by"] == "alice"
    assert data["agent"] == "alice"


# -- the learning read paths (outcomes, suggestions, executions) --------------------------------------------

CONTEXT = f"{MARKER} payments API returns 429 under load"


@pytest.fixture
def learned(mem: Engram) -> list[Memory]:
    """Alice's private evidence: backoff works, raising the timeout does not."""
    out = []
    for _ in range(4):
        out.append(
            mem.learning.record(
                CONTEXT,
                "retry-with-backoff",
                "success",
                agent="alice",
                alternatives=["raise-timeout"],
                category="payments",
                tags=["api"],
            )
        )
        out.append(
            mem.learning.record(CONTEXT, "raise-timeout", "failure", agent="alice", category="payments", tags=["api"])
        )
    out.append(
        mem.learning.record_execution(
            f"{MARKER} nightly invoice batch", approach="chunked", outcome="success", agent="alice", category="payments"
        )
    )
    return out


def learning_views(mem: Engram, agent: str) -> dict[str, Any]:
    """Everything the learning API tells ``agent`` about alice's context."""
    suggestion = mem.learning.suggest(CONTEXT, agent=agent)
    return {
        "options": sorted((o.action, o.attempts) for o in suggestion.options),
        "recommended": suggestion.recommended,
        "outcomes": [m.id for m in mem.learning.outcomes(agent=agent)],
        "similar": [str(s) for s in mem.learning.executions(f"{MARKER} nightly invoice batch", agent=agent)],
        "trends": repr(mem.learning.trends(agent=agent)),
        "patterns": repr(mem.learning.approaches(agent=agent)),
    }


def test_learning_paths_do_not_use_another_agents_private_outcomes(mem: Engram, learned: list[Memory]):
    views = learning_views(mem, "bob")
    assert views["options"] == []
    assert views["recommended"] is None
    assert views["outcomes"] == []
    assert views["similar"] == []
    assert MARKER not in views["trends"] + views["patterns"]
    assert "retry-with-backoff" not in views["trends"] + views["patterns"]
    # The owner does learn from them.
    mine = mem.learning.suggest(CONTEXT, agent="alice")
    assert mine.recommended == "retry-with-backoff"


def test_choose_is_a_function_of_what_the_agent_may_see(mem: Engram, learned: list[Memory], embedder: Embedder):
    options = ["raise-timeout", "retry-with-backoff", "give-up"]
    with Engram(":memory:", embedder=embedder) as empty:
        expected = [empty.learning.choose(CONTEXT, options, agent="bob", seed=s) for s in range(12)]
    assert [mem.learning.choose(CONTEXT, options, agent="bob", seed=s) for s in range(12)] == expected


def test_shared_outcomes_teach_the_recipient_until_revoked(mem: Engram, learned: list[Memory]):
    assert mem.sharing.share(from_agent="alice", to_agent="bob", tag="api") == 8
    suggestion = mem.learning.suggest(CONTEXT, agent="bob")
    assert suggestion.recommended == "retry-with-backoff"
    assert {m.shared_by for m in mem.learning.outcomes(agent="bob")} == {"alice"}
    assert mem.sharing.unshare(from_agent="alice", to_agent="bob", tag="api") == 8
    assert learning_views(mem, "bob")["options"] == []
    assert mem.learning.outcomes(agent="bob") == []


def test_a_used_memory_must_be_visible_to_the_agent_recording(mem: Engram, learned: list[Memory]):
    victim = mem.remember(f"{MARKER} alice's runbook", agent="alice")
    for call in (
        lambda: mem.learning.record("some context", "act", "success", agent="bob", used=[victim.id]),
        lambda: mem.learning.feedback([victim.id], "failure", agent="bob"),
        lambda: mem.learning.record_execution("a task", approach="x", outcome="success", agent="bob", used=[victim.id]),
    ):
        with pytest.raises(NotFound):
            call()
    assert mem.get(victim.id).attempts == 0
    assert mem.learning.outcomes(agent="bob") == []


# -- the failure read paths (solutions, patterns, pre-action checks) -----------------------------------------

ERRORS = [
    f"ConnectionError: {MARKER} refused on vault-{n}.internal:8200 while reading secret/payments" for n in (1, 2, 3)
]


@pytest.fixture
def failures(mem: Engram) -> list[Memory]:
    return [
        mem.failures.record(e, agent="alice", solution=f"{MARKER} unseal the vault first", context="deploy")
        for e in ERRORS
    ]


def test_failure_paths_do_not_use_another_agents_private_failures(mem: Engram, failures: list[Memory]):
    assert mem.failures.solutions(ERRORS[0], agent="bob") == []
    assert mem.failures.patterns(agent="bob") == []
    assert mem.failures.preflight(f"read secret/payments from vault-9 {MARKER}", agent="bob") == []
    with pytest.raises(NotFound):
        mem.failures.pattern(mem.failures.patterns(agent="alice")[0].id, agent="bob")
    # Bob's own occurrence of the same failure starts bob's own pattern: alice's history does not join it.
    mine = mem.failures.record(ERRORS[1], agent="bob")
    assert [p.occurrences for p in mem.failures.patterns(agent="bob")] == [1]
    assert "unseal" not in repr(mem.failures.patterns(agent="bob"))  # alice's fix stays hers
    assert mem.failures.solutions(ERRORS[1], agent="bob") == []
    assert mine.agent == "bob"
    # The owner learns from all three.
    assert mem.failures.patterns(agent="alice")[0].occurrences == 3
    assert mem.failures.solutions(ERRORS[0], agent="alice")[0].solution.endswith("unseal the vault first")


def test_a_shared_failure_pattern_teaches_the_recipient_until_revoked(mem: Engram, failures: list[Memory]):
    mem.failures.record("KeyError: 'tenant_id'", agent="alice")  # another pattern, not shared
    pattern = next(p for p in mem.failures.patterns(agent="alice") if p.occurrences == 3)
    assert mem.sharing.share(from_agent="alice", to_agent="bob", pattern=pattern.id) == 3
    seen = mem.failures.patterns(agent="bob")
    assert [(p.id, p.occurrences) for p in seen] == [(pattern.id, 3)]
    assert mem.failures.solutions(ERRORS[2], agent="bob")[0].successes == 3
    assert mem.sharing.unshare(from_agent="alice", to_agent="bob", pattern=pattern.id[:8]) == 3
    assert mem.failures.patterns(agent="bob") == []
    assert mem.failures.solutions(ERRORS[2], agent="bob") == []


def test_a_pattern_is_shared_by_its_owner_only(mem: Engram, failures: list[Memory]):
    pattern = mem.failures.patterns(agent="alice")[0]
    with pytest.raises(NotFound):
        mem.sharing.share(from_agent="bob", to_agent="carol", pattern=pattern.id)
    # Once alice shares it with bob, bob sees the pattern but owns none of it: nothing of alice's to pass on.
    mem.sharing.share(from_agent="alice", to_agent="bob", pattern=pattern.id)
    assert mem.sharing.share(from_agent="bob", to_agent="carol", pattern=pattern.id) == 0
    assert mem.failures.patterns(agent="carol") == []
    with pytest.raises(NotFound):
        mem.sharing.share(from_agent="alice", to_agent="bob", pattern="no-such-pattern")


# -- episodes, code patterns, reports --------------------------------------------------------------------------

CODE = f'''
def fetch_with_retry_{MARKER}(url, attempts=3):
    """Fetch a URL, retrying on connection errors."""
    for i in range(attempts):
        try:
            return get(url)
        except ConnectionError:
            sleep(2 ** i)
    raise RuntimeError("gave up")
'''


def test_episodes_code_patterns_and_reports_stay_with_their_agent(mem: Engram, learned: list[Memory]):
    def failing_episode() -> None:
        with mem.episodes.begin(f"{MARKER} rotate the payment keys", agent="alice") as ep:
            ep.event("step", {"n": 1})
            raise RuntimeError("key vault unreachable")

    with pytest.raises(RuntimeError):
        failing_episode()
    mem.code.remember(CODE, agent="alice")
    assert mem.episodes.list(f"{MARKER} rotate the payment keys", agent="bob") == []
    assert MARKER not in repr(mem.episodes.analyze(agent="bob"))
    assert mem.code.suggest("fetch a url with retries", agent="bob") == []
    report = mem.learning.report(agent="bob")
    assert MARKER not in report.to_json() + report.to_markdown()
    assert "retry-with-backoff" not in report.to_json()
    # The owner sees its own.
    assert mem.episodes.list(f"{MARKER} rotate the payment keys", agent="alice")
    assert mem.code.suggest("fetch a url with retries", agent="alice")
    assert "retry-with-backoff" in mem.learning.report(agent="alice").to_json()

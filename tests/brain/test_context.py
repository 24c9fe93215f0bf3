"""ContextBuilder on a real store: sections from each service, the budget invariant, bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.embeddings import count_tokens
from engramdb.errors import ValidationError
from engramdb.models import Context, ContextItem, ContextSection
from engramdb.models.brain import fit_sections
from engramdb.services.context import ContextBuilder


def builder_of(mem: Engram) -> ContextBuilder:
    """The builder as the facade composes it."""
    return ContextBuilder(mem._services, learning=mem.learning, failures=mem.failures, sessions=mem._sessions.find)


@pytest.fixture
def stocked(mem: Engram) -> Engram:
    mem.remember("The user prefers pytest over unittest for Python tests", kind="preference")
    mem.remember("Production deploys run through GitHub Actions on every merge to main")
    mem.remember("The frontend is built with Vite and React")
    for action, outcome in [("blue-green deploy", "success"), ("blue-green deploy", "success"),
                            ("in-place restart", "failure"), ("blue-green deploy", "success")]:  # fmt: skip
        mem.learning.record("deploy the web service to production", action, outcome)
    for host in ("db-7", "db-3"):
        mem.failures.record(
            f"ConnectionError: cannot reach {host}.prod.example.com:5432 after 30s",
            context="connecting to the production database",
            solution="check the VPN and retry",
        )
    return mem


def test_sections_come_from_every_source(stocked: Engram) -> None:
    session = stocked.session()
    session.add("We are about to deploy the web service")
    ctx = builder_of(stocked).build("deploy the web service to production", token_budget=800)
    names = [s.name for s in ctx.sections]
    assert names[0] == "approach"
    assert {"approach", "preferences", "memories", "session"} <= set(names)
    assert ctx.approach is not None
    assert ctx.approach.recommended == "blue-green deploy"
    assert ctx.approach.success_rate is not None
    assert ctx.approach.success_rate > 0.5
    assert [a.action for a in ctx.approach.alternatives] == ["in-place restart"]
    text = ctx.render()
    assert "## Recommended approach" in text
    assert "blue-green deploy" in text
    assert "pytest" in text
    assert "GitHub Actions" in text
    assert "We are about to deploy" in text
    assert count_tokens(text) <= 800
    data = json.loads(json.dumps(ctx.to_dict()))
    assert data["prompt"] == text
    assert data["prompt_tokens"] <= 800
    assert data["approach"]["recommended"] == "blue-green deploy"


def test_warnings_and_fixes_for_a_task_like_a_past_failure(stocked: Engram) -> None:
    ctx = builder_of(stocked).build("connect to the production database db-9.prod.example.com")
    warnings, fixes = ctx.section("warnings"), ctx.section("fixes")
    assert warnings is not None
    assert "ConnectionError" in warnings.items[0].text
    assert fixes is not None
    assert fixes.items[0].text.startswith("check the VPN and retry")
    rendered = ctx.render()
    assert rendered.index("## Warnings") < rendered.index("## Known fixes")


def test_other_agents_memories_stay_out(stocked: Engram) -> None:
    stocked.remember("Deploy secrets of bob: the web service deploy key is in vault", agent="bob")
    ctx = builder_of(stocked).build("deploy the web service to production")
    assert "bob" not in ctx.render()


def test_archived_sources_are_left_out(mem: Engram) -> None:
    mem.remember("Run alembic upgrade head before deploying", tags=["archived"])
    mem.remember("Apply migrations with alembic upgrade head, then deploy")
    ctx = builder_of(mem).build("how do I apply alembic migrations")
    memories = ctx.section("memories")
    assert memories is not None
    assert [i.text for i in memories.items] == ["Apply migrations with alembic upgrade head, then deploy"]


def test_an_empty_store_gives_an_empty_context(mem: Engram) -> None:
    ctx = builder_of(mem).build("anything at all")
    assert ctx.empty
    assert ctx.render() == ""
    assert ctx.approach is None


def test_a_small_budget_keeps_the_most_useful_first(stocked: Engram) -> None:
    for i in range(10):
        stocked.remember(f"Deployment note {i}: the web service deploy needs the release checklist item {i} done")
    b = builder_of(stocked)
    big = b.build("deploy the web service to production", token_budget=2000).render()
    small = b.build("deploy the web service to production", token_budget=40).render()
    assert count_tokens(small) <= 40 < count_tokens(big)
    assert small.startswith("## Recommended approach")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": ""}, "task must not be empty"),
        ({"task": "   "}, "task must not be empty"),
        ({"task": 3}, "task must be a string"),
        ({"task": "x", "token_budget": 5}, "token_budget must be an integer within"),
        ({"task": "x", "token_budget": 10**9}, "token_budget must be an integer within"),
        ({"task": "x", "token_budget": True}, "token_budget must be an integer within"),
        ({"task": "x", "token_budget": 100.0}, "token_budget must be an integer within"),
        ({"task": "x", "agent": ""}, "agent must be a non-empty name"),
        ({"task": "x", "agent": "*"}, "reserved"),
    ],
)
def test_bad_input_is_refused_before_anything_is_read(stocked: Engram, kwargs: dict[str, object], message: str) -> None:
    before = [(m.id, m.access_count) for m in stocked.list(limit=100)]
    audit_before = len(stocked.audit.log(limit=1000))
    task = kwargs.pop("task")
    with pytest.raises(ValidationError, match=message):
        builder_of(stocked).build(task, **kwargs)  # type: ignore[arg-type]
    assert [(m.id, m.access_count) for m in stocked.list(limit=100)] == before
    assert len(stocked.audit.log(limit=1000)) == audit_before + 1  # only the list above was audited


# -- the budget invariant -------------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=0, max_size=300)
_sections = st.lists(
    st.builds(
        lambda name, texts, chrono: ContextSection(
            name=name, title=name.title(), items=tuple(ContextItem(text=t) for t in texts), chronological=chrono
        ),
        st.sampled_from(["approach", "warnings", "fixes", "preferences", "memories", "session"]),
        st.lists(_text, max_size=8),
        st.booleans(),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections=_sections, budget=st.integers(min_value=0, max_value=600))
def test_a_rendered_context_never_exceeds_its_budget(sections: list[ContextSection], budget: int) -> None:
    text = fit_sections(sections, budget, count_tokens)
    assert count_tokens(text) <= budget
    ctx = Context(task="t", agent="a", token_budget=max(budget, 1), sections=tuple(sections), count_tokens=count_tokens)
    assert count_tokens(ctx.render(budget)) <= budget


@settings(max_examples=100, deadline=None)
@given(sections=_sections, budget=st.integers(min_value=0, max_value=400))
def test_the_budget_holds_for_a_tokenizer_that_does_not_add_up(sections: list[ContextSection], budget: int) -> None:
    def odd(text: str) -> int:  # charges per line and per newline: line costs do not sum to the whole
        return len(text.split()) + 3 * text.count("\n")

    assert odd(fit_sections(sections, budget, odd)) <= budget


def test_items_that_do_not_fit_whole_are_cut_at_a_word() -> None:
    long = " ".join(f"word{i}" for i in range(400))
    sections = (ContextSection(name="memories", title="Relevant memories", items=(ContextItem(text=long),)),)
    text = fit_sections(sections, 60, count_tokens)
    assert text.startswith("## Relevant memories\n- word0 word1")
    assert text.endswith("…")
    assert count_tokens(text) <= 60


def test_render_rejects_a_bad_budget() -> None:
    ctx = Context(task="t", agent="a", token_budget=100)
    with pytest.raises(ValidationError):
        ctx.render(-1)
